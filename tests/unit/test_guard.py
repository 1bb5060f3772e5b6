"""The pin guard (app/quiet/guard.py): a change made behind coremap's back is reported within two ticks with
what was set -> what was found, between which two looks, and who (irqbalance, a cpuset change, or that
it cannot be told); coremap's own write under way or cut short is never reported; with re-apply
on it is written back, rate-limited; a pinned process's new threads get the pin (all 50 within two
ticks), each journalled, and undo gives them back; a Java thread pinned by name: a new thread of that
name is pinned, one that only shares its 15-byte comm is not.

On a writable copy of a real machine (sno) for IRQs and masks, and live on this VM (root) for real
IRQs, threads, a cpuset and a JVM. Everything moved is put back in `finally` blocks."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.cli.main import main
from app.quiet.guard import CANNOT_TELL, CHUNK, REAPPLY_LIMIT, Guard, event_line
from app.pinning.journal import Journal
from app.parse.cpulist import parse_cpulist
from app.quiet.isolate import LocalQuiet
from app.sysroot import SysRoot
from tests.live import live_test, restore_quiet
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree

ROOT = Path(__file__).resolve().parents[2]
live = live_test


def _write_from_another_process(path: Path, text: str) -> None:
    """A test process that rewrites a mask behind coremap's back (not this one)."""
    subprocess.run([sys.executable, "-c", f"open({str(path)!r}, 'w').write({text!r})"], check=True)


@pytest.fixture
def tree(tmp_path) -> SysRoot:
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu", "proc/interrupts"),
                 leave_out=(CPU_CACHES,))
    wq = dst / "sys" / "devices" / "virtual" / "workqueue"
    wq.mkdir(parents=True)
    (wq / "cpumask").write_text("fff\n")
    return SysRoot(writable_test_tree(dst))


@pytest.fixture
def service(tree, tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    yield AffinityService(tree, j)
    j.close()


def _spread_irq(root: SysRoot) -> int:
    """An IRQ of the tree spread over every CPU."""
    return next(int(n) for n in sorted(os.listdir(root.proc("irq")), key=lambda n: (len(n), n)) if n.isdigit()
                and parse_cpulist(root.irq_dir(n, "smp_affinity_list").read_text()) == tuple(range(12)))


def _irqbalance_in(root: SysRoot, pid: int = 4242) -> None:
    """irqbalance as the tree's process list shows it (app/machine/irqbalance.py finds it by comm)."""
    d = root.proc(pid)
    d.mkdir(parents=True)
    (d / "comm").write_text("irqbalance\n")
    (d / "cmdline").write_text("/usr/sbin/irqbalance\0--foreground\0")


# -- on a copy of a real machine -----------------------------------------------------------------------
def test_coremaps_own_write_under_way_or_cut_short_is_not_someone_elses(tree, service):
    """A give-back (or any batch) in another process journals each write before making it: the guard
    sees the new mask before the mark, and must not report it; a crash leaves the record unmarked, and
    the mask it wrote is still coremap's own."""
    irq = _spread_irq(tree)
    path = tree.irq_dir(irq, "smp_affinity_list")
    [r] = service.apply(PinRequest((PinTarget("irq", irq),), (5,)))
    guard = Guard(service)
    assert guard.tick().events == []
    other = Journal(service.journal.path)           # another coremap: the window's include, a CLI
    other.record(kind="irq", target_id=irq, before=(5,), requested=tuple(range(12)), root=service.root_key,
                 origin="include")               # journalled, written, never marked (it was killed)
    _write_from_another_process(path, "0-11")
    assert guard.tick().events == []
    _write_from_another_process(path, "3")          # a value no write of coremap's made
    [ev] = guard.tick().events
    assert ev.found == (3,) and ev.who == CANNOT_TELL
    other.close()


def test_a_change_is_placed_between_two_looks(tree, service):
    irq = _spread_irq(tree)
    path = tree.irq_dir(irq, "smp_affinity_list")
    service.apply(PinRequest((PinTarget("irq", irq),), (5,)))
    now = [1000.0]
    guard = Guard(service, clock=lambda: now[0])
    guard.tick()
    now[0] = 1002.5
    _write_from_another_process(path, "0-11")
    [ev] = guard.tick().events
    assert (ev.since, ev.time) == (1000.0, 1002.5)
    assert " between " in event_line(ev) and ", by someone coremap cannot tell" in event_line(ev)


def test_a_rewritten_irq_is_reported_once_then_reapplied_when_asked(tree, service):
    irq = _spread_irq(tree)
    path = tree.irq_dir(irq, "smp_affinity_list")
    [r] = service.apply(PinRequest((PinTarget("irq", irq),), (5,)))
    assert r.ok and path.read_text().strip() == "5"
    guard = Guard(service)
    assert guard.tick().events == [] and guard.guarded == 1
    _write_from_another_process(path, "0-11")
    [ev] = guard.tick().events
    assert (ev.kind, ev.target_id, ev.expected, ev.found, ev.action) == ("irq", irq, (5,), tuple(range(12)), "reported")
    assert ev.who == CANNOT_TELL and ev.batch == r.journal_id
    assert event_line(ev).startswith(f"IRQ {irq}") and "5 -> 0-11" in event_line(ev)
    assert guard.tick().events == []                          # once per change
    assert path.read_text().strip() == "0-11"                 # report only: nothing written
    service.journal.set_policy(r.journal_id, True)
    _write_from_another_process(path, "0-3")
    [ev] = guard.tick().events
    assert (ev.action, ev.found, ev.count) == ("reapplied", (0, 1, 2, 3), 1)
    assert path.read_text().strip() == "5"
    # The re-apply is not an undo step: undo puts back what the pin found.
    assert bool(service.ledger().undo) and [u.after for u in service.undo()] == [tuple(range(12))]
    _write_from_another_process(path, "7")
    assert guard.tick().events == []                          # undone: nothing of ours to guard
    with Journal(service.journal.path) as again:              # the reports are journal lines, read back
        assert [g.action for g in again.guard_events()] == ["reported", "reapplied"]


def test_irqbalance_is_named_and_the_fight_is_rate_limited_with_the_fix(tree, service):
    _irqbalance_in(tree)
    LocalQuiet(service).apply(LocalQuiet(service).preview("isolate", "2-3"))
    moved = next(e for e in service.journal.entries() if e.kind == "irq" and e.state == "done")
    path = tree.irq_dir(moved.target_id, "smp_affinity_list")
    batch = service.ledger().undo[-1]
    service.journal.set_policy(batch, True)
    guard = Guard(service)
    guard.tick()
    actions = []
    for i in range(REAPPLY_LIMIT + 1):
        _write_from_another_process(path, "0-11" if i % 2 == 0 else "1-11")
        actions += [(e.action, e.who, e.message) for e in guard.tick().events]
    assert [a for a, _, _ in actions] == ["reapplied"] * REAPPLY_LIMIT + ["limited"]
    assert guard.tick().events == []                          # the same change: said once
    assert all(who == "irqbalance (pid 4242)" for _, who, _ in actions)
    limited = actions[-1][2]
    assert "IRQBALANCE_BANNED_CPULIST=2-3" in limited and str(tree.root) in limited


def test_a_mask_change_and_a_pin_by_another_coremap(tree, service, tmp_path):
    irq = _spread_irq(tree)
    LocalQuiet(service).apply(LocalQuiet(service).preview("isolate", "4"))
    guard = Guard(service)
    guard.tick()
    other = AffinityService(tree, Journal(service.journal.path))      # `coremap pin` in a terminal
    [r] = other.apply(PinRequest((PinTarget("irq", irq),), (4,)))
    assert r.ok and guard.tick().events == []                           # coremap's own pin, not a change
    _write_from_another_process(tree.workqueue_cpumask(), "fff")
    [ev] = guard.tick().events
    assert (ev.kind, ev.found) == ("workqueue", tuple(range(12)))
    other.journal.close()


def test_bad_policy_arguments_and_a_one_tick_daemon(tree, service, capsys, monkeypatch):
    irq = _spread_irq(tree)
    [r] = service.apply(PinRequest((PinTarget("irq", irq),), (6,)))
    monkeypatch.setenv("COREMAP_STATE_DIR", str(Path(service.journal.path).parent))
    assert main(["guard", "--root", str(tree.root), "--policy", "x=reapply", "--ticks", "1"]) == 2
    assert "write BATCH=reapply" in capsys.readouterr().err
    _write_from_another_process(tree.irq_dir(irq, "smp_affinity_list"), "0-11")
    assert main(["guard", "--root", str(tree.root), "--policy", f"{r.journal_id}=reapply", "--ticks", "1",
                 "--json"]) == 0
    said = capsys.readouterr()
    err, out = said.err.splitlines(), said.out.splitlines()
    # with --json, stdout is JSON lines alone: what it says on starting goes to stderr
    assert err[0] == f"batch #{r.journal_id}: re-apply when changed" and "guarding 1 targets" in err[1]
    import json
    ev = json.loads(out[0])
    assert (ev["schema_version"], ev["type"], ev["action"], ev["found"]) == (2, "guard", "reapplied", list(range(12)))
    assert tree.irq_dir(irq, "smp_affinity_list").read_text().strip() == "6"


# -- live ----------------------------------------------------------------------------------------------
@pytest.fixture
def live_service(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    svc = AffinityService(SysRoot("/"), j)
    yield svc
    restore_quiet(svc)
    j.close()


def _movable_live_irq(svc) -> int | None:
    for n in sorted((n for n in os.listdir("/proc/irq") if n.isdigit()), key=int):
        if Path(f"/proc/irq/{n}/smp_affinity_list").read_text().strip() == "0-1":
            [r] = svc.apply(PinRequest((PinTarget("irq", int(n)),), (0,)))
            if r.ok:
                return int(n)
    return None


@live
def test_live_irq_rewritten_by_a_test_process_is_reported_within_two_ticks_and_restored(live_service):
    svc = live_service
    irq = _movable_live_irq(svc)
    if irq is None:
        pytest.skip("no IRQ here takes a new mask")
    path = Path(f"/proc/irq/{irq}/smp_affinity_list")
    try:
        guard = Guard(svc)
        assert guard.tick().events == []
        _write_from_another_process(path, "0-1")
        events = guard.tick().events or guard.tick().events
        [ev] = events
        assert (ev.target_id, ev.expected, ev.found, ev.action) == (irq, (0,), (0, 1), "reported")
        batch = svc.ledger().undo[-1]
        svc.journal.set_policy(batch, True)
        _write_from_another_process(path, "0-1")
        events = guard.tick().events or guard.tick().events
        assert [e.action for e in events] == ["reapplied"]
        assert path.read_text().strip() == "0"
    finally:
        svc.restore_all()
        if path.read_text().strip() != "0-1":
            path.write_text("0-1")


CHILD = r"""
import os, sys, threading, time
n = int(sys.argv[1]); mode = sys.argv[2]
ready = threading.Barrier(n + 1)
stop = threading.Event()
def work():
    if mode == "reset":
        os.sched_setaffinity(0, {0, 1})      # a runtime that sets its workers' affinity itself
    ready.wait()
    stop.wait()
print("up", flush=True)
sys.stdin.readline()
threads = [threading.Thread(target=work) for _ in range(n)]
for t in threads: t.start()
ready.wait()
print(" ".join(str(t.native_id) for t in threads), flush=True)
sys.stdin.readline()
"""


@live
@pytest.mark.parametrize("mode", ["reset", "inherit"])
def test_live_50_new_threads_of_a_pinned_process_are_pinned_within_two_ticks(live_service, mode):
    svc = live_service
    child = subprocess.Popen([sys.executable, "-c", CHILD, "50", mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "up"
        original = tuple(sorted(os.sched_getaffinity(child.pid)))
        results = svc.apply(PinRequest((PinTarget("process", child.pid),), (1,)))
        assert results and all(r.ok for r in results)
        guard = Guard(svc)
        guard.tick()
        child.stdin.write("go\n")
        child.stdin.flush()
        tids = [int(t) for t in child.stdout.readline().split()]
        assert len(tids) == 50
        pinned = guard.tick().followed
        if len(pinned) < 50:
            pinned += guard.tick().followed
        assert sorted(r.target.id for r in pinned) == sorted(tids) and all(r.ok for r in pinned)
        assert all(os.sched_getaffinity(t) == {1} for t in tids)
        follow = [e for e in svc.journal.entries() if e.origin == "follow"]
        assert sorted(e.target_id for e in follow) == sorted(tids)
        assert {e.batch for e in follow} == {results[0].journal_id} and {e.before for e in follow} == {original}
        svc.undo()                                             # the pin and its followers, one batch
        assert all(tuple(sorted(os.sched_getaffinity(t))) == original for t in tids)
    finally:
        child.kill()
        child.wait()


@live
def test_live_a_budget_spreads_the_comparisons_and_still_finds_a_change(live_service):
    svc = live_service
    child = subprocess.Popen([sys.executable, "-c", CHILD, "300", "inherit"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()
        child.stdin.write("go\n")
        child.stdin.flush()
        tids = [int(t) for t in child.stdout.readline().split()]
        svc.apply(PinRequest((PinTarget("process", child.pid),), (1,)))
        guard = Guard(svc, budget_s=0.0)           # the least a tick does: CHUNK comparisons
        tick = guard.tick()
        assert tick.threads >= 300 and tick.checked == CHUNK and tick.cycle_ticks == -(-tick.threads // CHUNK)
        subprocess.run(["taskset", "-p", "-c", "0-1", str(tids[-1])], check=True, capture_output=True)
        found = []
        for _ in range(tick.cycle_ticks + 1):
            found += guard.tick().events
        assert [(e.target_id, e.found) for e in found] == [(tids[-1], (0, 1))]
    finally:
        child.kill()
        child.wait()


@live
def test_live_own_threads_are_left_alone(live_service):
    import threading
    ev = threading.Event()
    th = threading.Thread(target=ev.wait)
    th.start()
    try:
        [r] = live_service.apply(PinRequest((PinTarget("thread", th.native_id),), (1,)))
        assert r.ok
        guard = Guard(live_service)
        os.sched_setaffinity(th.native_id, {0})        # probes/own_affinity.py does this on purpose
        assert guard.tick().events == [] and guard.guarded == 0
    finally:
        ev.set()
        th.join()


CPUSET = Path("/sys/fs/cgroup/cpuset")


@live
@pytest.mark.skipif(not (CPUSET / "cpuset.cpus").exists(), reason="needs the cgroup v1 cpuset hierarchy")
def test_live_a_cpuset_change_is_named(live_service):
    svc = live_service
    sleeper = subprocess.Popen(["sleep", "60"])
    group = CPUSET / f"coremap-test-{os.getpid()}"
    try:
        [r] = svc.apply(PinRequest((PinTarget("process", sleeper.pid),), (1,)))
        assert r.ok
        guard = Guard(svc)
        guard.tick()
        group.mkdir()
        (group / "cpuset.mems").write_text((CPUSET / "cpuset.mems").read_text())
        (group / "cpuset.cpus").write_text("0")
        (group / "tasks").write_text(str(sleeper.pid))
        [ev] = guard.tick().events
        assert (ev.expected, ev.found) == ((1,), (0,))
        assert ev.who == f"a cpuset change (cpuset /{group.name} now allows CPU 0)"
    finally:
        sleeper.kill()
        sleeper.wait()
        if group.exists():
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:        # EBUSY until the killed sleeper has left the group
                    time.sleep(0.05)


JAVA_SRC = Path(__file__).resolve().parent / "java" / "Respawn.java"
NAME = "market-data-feed-handler"
needs_jdk = pytest.mark.skipif(not (shutil.which("javac") and shutil.which("java") and shutil.which("jcmd")),
                               reason="needs a JDK: javac, java and jcmd")


@live
@needs_jdk
def test_live_a_java_thread_pinned_by_name_gets_its_namesakes_not_its_comm_twins(live_service, tmp_path, capsys,
                                                                                 monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(Path(live_service.journal.path).parent))
    subprocess.run(["javac", "-d", str(tmp_path), str(JAVA_SRC)], check=True, capture_output=True, timeout=120)
    jvm = subprocess.Popen(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", str(tmp_path), "Respawn"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def start(name: str) -> None:
        jvm.stdin.write(name + "\n")
        jvm.stdin.flush()
        assert jvm.stdout.readline().strip() == f"started {name}"

    def tids_named(comm: str) -> list[int]:
        d = Path(f"/proc/{jvm.pid}/task")
        return sorted(int(t) for t in os.listdir(d) if (d / t / "comm").read_text().strip() == comm)

    try:
        assert jvm.stdout.readline().strip() == "ready"
        start(NAME)
        assert main(["pin", "--java", NAME, "--pid", str(jvm.pid), "--cpus", "1"]) == 0
        [first] = tids_named(NAME[:15])
        assert os.sched_getaffinity(first) == {1}
        live_service.journal.refresh()                     # the CLI's lines, from another journal object
        [rule] = live_service.journal.follow_rules()
        assert (rule.pid, rule.name, rule.cpus) == (jvm.pid, NAME, (1,))
        guard = Guard(live_service)
        guard.tick()
        start(NAME)                           # the handler restarted under the same name
        start(NAME + "-2")                    # shares the 15-byte comm "market-data-fee", another thread
        pinned = guard.tick().followed or guard.tick().followed
        same = tids_named(NAME[:15])
        assert len(same) == 3
        [new] = [r.target.id for r in pinned]
        assert new not in (first,) and os.sched_getaffinity(new) == {1}
        # journalled by the Java name it was found by, as the pin itself was (issue 28)
        assert [r.target.label for r in pinned] == [NAME]
        assert [e.label for e in live_service.journal.entries() if e.target_id == new] == [NAME]
        twin = [t for t in same if t not in (first, new)]
        assert twin and os.sched_getaffinity(twin[0]) == {0, 1}
    finally:
        jvm.kill()
        jvm.wait()
