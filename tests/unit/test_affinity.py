"""AffinityService on this machine's own threads (pinned for real, then restored), on IRQs of a
temporary copy of a real captured machine (openshift-nto "sno"), on one real IRQ as root, and across a
SIGKILL: the next start restores what the killed process pinned."""
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.pinning.service import AffinityService, BatchResults, PinRequest, PinTarget
from app.pinning.writers import IrqWriter, delivery_lags
from app.machine.irqbalance import parse_banirq, read_irqbalance
from app.pinning.journal import Journal
from app.machine.threads import TaskGone, read_task
from app.machine.topology import read_online_cpus
from app.parse.cpulist import format_cpulist
from app.sysroot import SysRoot
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree

ROOT = Path(__file__).resolve().parents[2]
CPUS = tuple(sorted(os.sched_getaffinity(0)))
needs_two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="pinning needs at least 2 CPUs to move between")


def _aff(tid):
    return tuple(sorted(os.sched_getaffinity(tid)))


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    yield j
    j.close()


@pytest.fixture
def live(live_machine, journal):
    return AffinityService(SysRoot("/"), journal)


@pytest.fixture
def parked_thread():
    """A real thread of this test process, waiting; its native_id is a tid to pin."""
    ev = threading.Event()
    th = threading.Thread(target=ev.wait, name="pin-me")
    th.start()
    yield th
    ev.set()
    th.join()


def _take_offline(root: SysRoot, cpu: int) -> None:
    """Mark `cpu` offline in a test tree, as the kernel shows it (cpu/online, cpuN/online)."""
    online = [c for c in read_online_cpus(root) if c != cpu]
    root.cpu_dir("online").write_text(format_cpulist(online) + "\n")
    root.cpu_dir(f"cpu{cpu}", "online").write_text("0\n")


@pytest.fixture
def sno(tmp_path):
    """A writable copy of the sno machine's proc/irq and cpu folders."""
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu", "proc/interrupts"),
                 leave_out=(CPU_CACHES,))
    return SysRoot(writable_test_tree(dst))


# -- threads of this process --------------------------------------------------------------------
@needs_two_cpus
def test_pin_own_thread_then_undo_redo_restore(live, journal, parked_thread):
    tid = parked_thread.native_id
    original = _aff(tid)
    one = (CPUS[-1],)
    try:
        [r] = live.apply(PinRequest((PinTarget("thread", tid),), one))
        assert (r.ok, r.code, r.before, r.after) == (True, "ok", original, one)
        assert _aff(tid) == one
        comm = Path(f"/proc/{os.getpid()}/task/{tid}/comm").read_text().strip()
        assert r.target.pid == os.getpid() and r.target.label == comm
        assert r.line() == f"thread {tid} ({comm}): {_fmt(original)} -> {_fmt(one)} ok"
        e = journal.get(r.journal_id)
        assert (e.state, e.before, e.requested, e.after) == ("done", original, one, one)

        [u] = live.undo()
        assert u.ok and _aff(tid) == original
        assert live.undo() == BatchResults()                   # one pin, one undo
        [rd] = live.redo()
        assert rd.ok and _aff(tid) == one
        assert live.redo() == BatchResults()
        [u2] = live.undo()
        assert u2.ok and _aff(tid) == original
        [rd2] = live.redo()
        assert _aff(tid) == one

        restored = live.restore_all()
        assert [x.code for x in restored] == ["ok"] and _aff(tid) == original
        assert live.ledger().unrestored == ()
        assert live.undo() == BatchResults() and live.redo() == BatchResults()   # restore closes the history
    finally:
        os.sched_setaffinity(tid, original)


def _fmt(cpus):
    from app.parse.cpulist import format_cpulist
    return format_cpulist(cpus)


def test_exited_thread_is_gone_and_journalled_failed(live, journal):
    th = threading.Thread(target=lambda: None)
    th.start()
    tid = th.native_id
    th.join()
    mine = _aff(0)
    [r] = live.apply(PinRequest((PinTarget("thread", tid, os.getpid()),), (CPUS[0],)))
    assert (r.ok, r.code) == (False, "gone")
    assert str(tid) in r.message and "exited" in r.message
    [e] = journal.entries()
    assert (e.state, e.code, e.target_id) == ("failed", "gone", tid)
    assert _aff(0) == mine                        # nothing else changed
    assert live.ledger().unrestored == () and live.undo() == BatchResults()


@needs_two_cpus
def test_process_is_each_of_its_threads(live):
    child = subprocess.Popen([sys.executable, "-c",
                              "import threading,time; threading.Thread(target=time.sleep,args=(60,)).start(); "
                              "print('up', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "up"
        tids = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
        results = live.apply(PinRequest((PinTarget("process", child.pid),), (CPUS[-1],)))
        assert sorted(r.target.id for r in results) == tids and len(tids) >= 2
        assert all(r.ok for r in results)
        assert all(_aff(t) == (CPUS[-1],) for t in tids)
        live.undo()
        assert all(_aff(t) == CPUS for t in tids)
    finally:
        child.kill()
        child.wait()


def test_a_cpu_the_machine_lacks_is_refused_before_journalling(live, journal, parked_thread):
    # Issue 10: "no such CPU", not "offline", and nothing journalled (a refusal changes nothing).
    tid = parked_thread.native_id
    before = _aff(tid)
    beyond = max(CPUS) + 1000
    req = PinRequest((PinTarget("thread", tid),), (beyond,))
    assert any("does not exist" in s for s in live.preflight(req))
    [r] = live.apply(req)
    assert r.code == "invalid" and f"CPU {beyond} does not exist on this machine" in r.message
    assert r.journal_id is None and journal.entries() == []
    assert _aff(tid) == before
    [r] = live.apply(PinRequest((PinTarget("thread", tid),), tuple(range(0, 65536))))
    assert r.code == "invalid" and len(r.message) < 300 and journal.entries() == []


def _no_setaffinity_kthread():
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                t = read_task(SysRoot("/"), int(name), int(name), detail="fast")
            except TaskGone:            # exited between listing and reading: try the next
                continue
            if t.no_setaffinity:
                return t
    return None


def test_kernel_thread_refuses(live):
    t = _no_setaffinity_kthread()
    if t is None:
        pytest.skip("no kernel thread with PF_NO_SETAFFINITY here")
    before = _aff(t.tid)
    req = PinRequest((PinTarget("thread", t.tid),), (CPUS[0],))
    reasons = live.preflight(req)
    [r] = live.apply(req)
    assert r.code == "kthread" and f"kernel thread {t.tid} ({t.comm}) refuses affinity changes" in r.message
    assert reasons == [r.message]           # the drag's reason is the pin's own (one rule, the flow's)
    assert _aff(t.tid) == before


CPUSET_V1 = Path("/sys/fs/cgroup/cpuset")


@needs_two_cpus
def test_cpuset_refusal_names_the_cpusets_cpus(live):
    if os.geteuid() != 0 or not (CPUSET_V1 / "cpuset.cpus").exists():
        pytest.skip("needs root and a cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset")
    cg = CPUSET_V1 / f"coremap-test-{os.getpid()}"
    cg.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (cg / "cpuset.cpus").write_text(str(CPUS[0]))
        (cg / "cpuset.mems").write_text((CPUSET_V1 / "cpuset.mems").read_text().strip().split(",")[0].split("-")[0])
        (cg / "tasks").write_text(str(sleeper.pid))
        req = PinRequest((PinTarget("thread", sleeper.pid),), (CPUS[-1],))
        assert any(f"may run only on CPUs {CPUS[0]}" in s for s in live.preflight(req))
        [r] = live.apply(req)
        assert r.code == "cpuset"
        assert f"CPUs {CPUS[0]} of its cpuset /{cg.name}" in r.message
    finally:
        sleeper.kill()
        sleeper.wait()
        cg.rmdir()


# -- IRQs on a copy of a captured machine ---------------------------------------------------------
def _irq(root, n, name="smp_affinity_list"):
    return root.irq_dir(n, name).read_text().strip()


def test_irq_pin_on_fixture_copy(sno, journal):
    svc = AffinityService(sno, journal)
    assert _irq(sno, 24) == "1" and _irq(sno, 24, "effective_affinity_list") == "1"
    [r] = svc.apply(PinRequest((PinTarget("irq", 24),), (0, 1)))
    assert (r.code, r.before, r.after, r.effective) == ("ok", (1,), (0, 1), (1,))
    assert _irq(sno, 24) == "0-1"
    e = journal.get(r.journal_id)
    assert (e.kind, e.target_id, e.before, e.requested, e.state, e.root) == (
        "irq", 24, (1,), (0, 1), "done", str(sno.root.resolve()))
    assert r.line() == "IRQ 24: 1 -> 0-1 ok (effective 1)"
    [u] = svc.undo()
    assert u.ok and _irq(sno, 24) == "1"
    [rd] = svc.redo()
    assert _irq(sno, 24) == "0-1"
    svc.restore_all()
    assert _irq(sno, 24) == "1"


def test_irq_moving_only_where_the_kernel_moves_delivery(sno, journal):
    # Live, a mask that reads back as written while delivery stays on CPU 7 is "moving": the pin took
    # and delivery follows at the next interrupt. A capture's (test tree's) effective_affinity_list is
    # a file nobody updates, so there it is never "moving" (issue 10).
    assert delivery_lags((0, 1), (7,), live=True)
    assert not delivery_lags((0, 1), (1,), live=True) and not delivery_lags((0, 1), None, live=True)
    assert not delivery_lags((0, 1), (7,), live=False)
    sno.irq_dir(24, "effective_affinity_list").write_text("7\n")
    [r] = AffinityService(sno, journal).apply(PinRequest((PinTarget("irq", 24),), (0, 1)))
    assert (r.ok, r.code, r.after, r.effective) == (True, "ok", (0, 1), (7,))
    assert journal.get(r.journal_id).state == "done"


def test_irq_trimmed_when_mask_reads_back_different(sno, journal, monkeypatch):
    # A kernel that trims the written mask (e.g. to the CPUs its chip can reach) reads back less.
    svc = AffinityService(sno, journal)
    real = IrqWriter.read
    calls = []

    def trimmed(writer, target):
        calls.append(target.id)
        return real(writer, target) if len(calls) == 1 else (0,)
    monkeypatch.setattr(IrqWriter, "read", trimmed)
    [r] = svc.apply(PinRequest((PinTarget("irq", 24),), (0, 1)))
    assert (r.ok, r.code, r.after) == (False, "trimmed", (0,))
    assert "trimmed" in r.message


def test_irq_bad_requests_write_nothing(sno, journal):
    svc = AffinityService(sno, journal)
    before = {n: _irq(sno, n) for n in (24, 25)}
    [none] = svc.apply(PinRequest((PinTarget("irq", 24),), (12,)))     # sno has CPUs 0-11
    assert none.code == "invalid" and "CPU 12 does not exist on this machine" in none.message
    _take_offline(sno, 11)
    [off] = svc.apply(PinRequest((PinTarget("irq", 24),), (11,)))
    assert off.code == "offline" and "CPU 11 is offline" in off.message and "0-10" in off.message
    [unknown] = svc.apply(PinRequest((PinTarget("irq", 999),), (1,)))
    assert unknown.code == "invalid" and "IRQ 999 does not exist" in unknown.message
    [empty] = svc.apply(PinRequest((PinTarget("irq", 25),), ()))
    assert empty.code == "invalid" and empty.journal_id is None
    assert {n: _irq(sno, n) for n in (24, 25)} == before
    assert journal.entries() == []          # refused before any write: nothing journalled
    assert svc.preflight(PinRequest((PinTarget("irq", 999),), (1,))) == [
        "IRQ 999 does not exist on this machine; see `coremap irqs`"]


@pytest.mark.usefixtures("live_machine")
@pytest.mark.usefixtures("live_machine")
def test_threads_are_not_pinned_through_a_capture(sno, journal, parked_thread):
    before = _aff(parked_thread.native_id)
    [r] = AffinityService(sno, journal).apply(PinRequest((PinTarget("thread", parked_thread.native_id),), (0,)))
    assert r.code == "invalid" and "live machine" in r.message
    assert _aff(parked_thread.native_id) == before


def test_irqbalance_warning(sno, journal):
    proc = sno.proc("4242")
    proc.mkdir()
    (proc / "comm").write_text("irqbalance\n")
    (proc / "cmdline").write_text("/usr/sbin/irqbalance\0--foreground\0--banirq=25\0")
    (proc / "environ").write_text("PATH=/usr/bin\0IRQBALANCE_BANNED_CPULIST=0-1\0")
    run = sno.root / "run" / "irqbalance"
    run.mkdir(parents=True)
    (run / "irqbalance4242.sock").write_text("")
    st = read_irqbalance(sno)
    assert (st.running, st.pid, st.banned_cpus, st.banned_irqs) == (True, 4242, (0, 1), (25,))
    r24, r25 = AffinityService(sno, journal).apply(
        PinRequest((PinTarget("irq", 24), PinTarget("irq", 25)), (1, 2)))
    assert r24.warning == "irqbalance (pid 4242) may move IRQ 24 back; ban it with --banirq=24 or stop irqbalance"
    assert r25.warning == ""


def test_irqbalance_absent_on_a_capture_and_banirq_forms(sno):
    assert read_irqbalance(sno).running is False
    assert parse_banirq(["irqbalance", "--banirq=3", "-i", "4", "-i5", "--banirq", "6", "--oneshot"]) == (3, 4, 5, 6)


def test_irqbalance_live_matches_process_list():
    import psutil
    running = any(p.info["name"] == "irqbalance" for p in psutil.process_iter(["name"]))
    assert read_irqbalance(SysRoot("/")).running == running


# -- one real IRQ --------------------------------------------------------------------------------
@needs_two_cpus
def test_live_irq_moved_and_restored(live, journal):
    if os.geteuid() != 0:
        pytest.skip("moving a real IRQ needs root")
    proc_irq = Path("/proc/irq")
    tried = []
    for name in sorted((n for n in os.listdir(proc_irq) if n.isdigit()), key=int):
        original = (proc_irq / name / "smp_affinity_list").read_text().strip()
        if original != _fmt(CPUS):
            continue
        irq = int(name)
        try:
            [r] = live.apply(PinRequest((PinTarget("irq", irq),), (CPUS[-1],)))
            tried.append((irq, r.code))
            if r.code in ("managed", "denied"):
                continue
            assert r.code in ("ok", "moving"), r.message
            assert r.before == CPUS and r.after == (CPUS[-1],)
            assert (proc_irq / name / "smp_affinity_list").read_text().strip() == str(CPUS[-1])
            [back] = live.restore_all()
            assert back.target.id == irq and back.after == CPUS
            assert (proc_irq / name / "smp_affinity_list").read_text().strip() == original
            return
        finally:
            if (proc_irq / name / "smp_affinity_list").read_text().strip() != original:
                (proc_irq / name / "smp_affinity_list").write_text(original)
    pytest.skip(f"no movable IRQ spread over all CPUs here (tried {tried})")


# -- crash: kill -9 after pinning, restore at the next start -------------------------------------
CHILD = r"""
import os, signal, sys
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.pinning.journal import Journal
from app.machine.threads import TaskGone, read_task
from app.sysroot import SysRoot
journal = Journal(sys.argv[1])
victim, cpu, mode = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if mode == "done":
    [r] = AffinityService(SysRoot("/"), journal).apply(PinRequest((PinTarget("process", victim),), (cpu,)))
    assert r.ok, r.message
else:
    # Killed between the journal line and its mark: journal, write, die.
    t = read_task(SysRoot("/"), victim, victim, detail="fast")
    journal.record(kind="thread", target_id=victim, pid=victim, before=tuple(sorted(os.sched_getaffinity(victim))),
                   requested=(cpu,), starttime=t.starttime)
    os.sched_setaffinity(victim, {cpu})
os.kill(os.getpid(), signal.SIGKILL)
"""


@needs_two_cpus
@pytest.mark.usefixtures("live_machine")
@pytest.mark.parametrize("mode", ["done", "pending"])
def test_sigkill_then_next_start_restores(tmp_path, mode):
    jpath = tmp_path / "journal.jsonl"
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        original = _aff(sleeper.pid)
        r = subprocess.run([sys.executable, "-c", CHILD, str(jpath), str(sleeper.pid), str(CPUS[-1]), mode],
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
        assert r.returncode == -signal.SIGKILL, r.stderr
        assert _aff(sleeper.pid) == (CPUS[-1],)           # the pin outlived the pinner
        with Journal(jpath) as j:
            svc = AffinityService(SysRoot("/"), j)
            [pending] = svc.pending_restore()
            assert (pending.target_id, pending.before, pending.requested) == (sleeper.pid, original, (CPUS[-1],))
            assert pending.state == ("done" if mode == "done" else "pending")
            [res] = svc.restore_all()
            assert res.ok and _aff(sleeper.pid) == original
            assert svc.pending_restore() == []
    finally:
        sleeper.kill()
        sleeper.wait()


def test_pending_restore_skips_a_thread_that_exited(tmp_path):
    jpath = tmp_path / "journal.jsonl"
    sleeper = subprocess.Popen(["sleep", "60"])
    with Journal(jpath) as j:
        t = read_task(SysRoot("/"), sleeper.pid, sleeper.pid, detail="fast")
        j.record(kind="thread", target_id=sleeper.pid, pid=sleeper.pid, before=CPUS, requested=(CPUS[0],),
                 starttime=t.starttime)
    sleeper.kill()
    sleeper.wait()
    with Journal(jpath) as j:
        svc = AffinityService(SysRoot("/"), j)
        assert svc.pending_restore() == []
        [r] = svc.restore_all()
        assert r.code == "gone"
        assert svc.ledger().unrestored == ()



def test_pending_restore_leaves_quiet_cpus_to_give_back(tmp_path):
    """What a Make quiet moved is no leftover to offer at start: quiet CPUs are meant to stay quiet (the
    grid badges them, Give back gives them back); a pin an earlier session made is."""
    jpath = tmp_path / "journal.jsonl"
    quieted, pinned = subprocess.Popen(["sleep", "60"]), subprocess.Popen(["sleep", "60"])
    try:
        with Journal(jpath) as j:
            for p, origin in ((quieted, "isolate"), (pinned, "cli")):
                t = read_task(SysRoot("/"), p.pid, p.pid, detail="fast")
                i = j.record(kind="thread", target_id=p.pid, pid=p.pid, before=CPUS, requested=(CPUS[0],),
                             starttime=t.starttime, origin=origin)
                j.mark(i, "done", after=(CPUS[0],), code="ok")
        with Journal(jpath) as j:
            svc = AffinityService(SysRoot("/"), j)
            assert {e.target_id for e in svc.ledger().unrestored} == {quieted.pid, pinned.pid}
            assert [e.target_id for e in svc.pending_restore()] == [pinned.pid]
    finally:
        for p in (quieted, pinned):
            p.kill()
            p.wait()
