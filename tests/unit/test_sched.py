"""`coremap sched` and the sched writer (app/pinning/sched.py) on real child processes: a policy and RT
priority set through the one pin flow, journalled, read back, and put back by undo, redo and restore;
every refusal named in one line before anything is journalled."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import pytest

from app.cli.main import main
from app.pinning.journal import Journal
from app.pinning.sched import SchedWriter, sched_refusal, sched_target, sched_value
from app.pinning.service import AffinityService
from app.pinning.targets import PinTarget
from app.sysroot import SysRoot
from tests.jvms import HANDLER, OTHER_HANDLER, MarketData, needs_jdk
from tests.processes import started

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a real-time policy needs root (CAP_SYS_NICE)")


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def child():
    """A sleeping child process of this test, killed at the end (nothing else is changed)."""
    p = started(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


def _sched(pid: int) -> tuple[int, int]:
    return os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority


def _journal(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["journal", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["entries"]


def test_values_the_kernel_takes_and_those_it_does_not():
    assert sched_value("fifo", 80) == (os.SCHED_FIFO, 80)
    assert sched_value("rr", None) == (os.SCHED_RR, 1)          # chrt's lowest RT priority
    assert sched_value("batch", None) == (os.SCHED_BATCH, 0)
    with pytest.raises(ValueError, match="SCHED_DEADLINE takes a runtime"):
        sched_value("deadline", None)
    assert sched_refusal((os.SCHED_FIFO, 80)) is None and sched_refusal((os.SCHED_IDLE, 0)) is None
    assert "out of range for fifo: give 1-99" in sched_refusal((os.SCHED_FIFO, 0))
    assert "out of range for rr" in sched_refusal((os.SCHED_RR, 100))
    assert "other has no RT priority" in sched_refusal((os.SCHED_OTHER, 5))
    assert "SCHED_DEADLINE" in sched_refusal((6, 0))
    assert "policy 4 is not one of" in sched_refusal((4, 0))


@ROOT_ONLY
@pytest.mark.usefixtures("live_machine")
def test_cli_sets_fifo_80_and_undo_and_restore_put_other_0_back(child, capsys):
    """The issue's done-when: `sched` sets SCHED_FIFO 80 on a live thread and puts it back."""
    assert main(["sched", "--tid", str(child), "--policy", "fifo", "--priority", "80", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"thread {child} (sleep) scheduling: other -> fifo 80 would be written"
    assert _sched(child) == (os.SCHED_OTHER, 0)                   # a dry run writes nothing
    assert main(["sched", "--tid", str(child), "--policy", "fifo", "--priority", "80"]) == 0
    assert capsys.readouterr().out == f"thread {child} (sleep) scheduling: other -> fifo 80 ok\n"
    assert _sched(child) == (os.SCHED_FIFO, 80)
    # `coremap threads` shows it as chrt does: POLICY fifo, PRIO 80 (ps -o cls,rtprio: FF 80).
    assert main(["threads", "--pid", str(child)]) == 0
    head, row = capsys.readouterr().out.splitlines()
    cells = dict(zip(head.split(), row.split()))
    assert (cells["POLICY"], cells["PRIO"]) == ("fifo", "80")
    assert main(["threads", "--pid", str(child), "--json"]) == 0
    [t] = json.loads(capsys.readouterr().out)["threads"]
    assert (t["policy"], t["policy_name"], t["rt_priority"]) == (os.SCHED_FIFO, "fifo", 80)
    entries = _journal(capsys)
    assert [(e["kind"], e["target_id"], e["before"], e["requested"], e["after"], e["state"]) for e in entries] == [
        ("sched", child, [0, 0], [1, 80], [1, 80], "done")]
    assert main(["undo"]) == 0
    assert capsys.readouterr().out == f"thread {child} (sleep) scheduling: fifo 80 -> other ok\n"
    assert _sched(child) == (os.SCHED_OTHER, 0)
    assert main(["redo"]) == 0 and _sched(child) == (os.SCHED_FIFO, 80)
    assert main(["sched", "--pid", str(child), "--policy", "rr", "--priority", "5"]) == 0
    assert _sched(child) == (os.SCHED_RR, 5)
    capsys.readouterr()
    assert main(["restore"]) == 0                                  # back to the first `before`
    assert capsys.readouterr().out == f"thread {child} (sleep) scheduling: rr 5 -> other ok\n"
    assert _sched(child) == (os.SCHED_OTHER, 0)
    assert main(["restore"]) == 0 and capsys.readouterr().out.startswith("nothing to restore")


@pytest.mark.usefixtures("live_machine")
def test_bad_input_is_one_line_and_journals_nothing(child, capsys):
    for argv, says in (
            (["--policy", "rr", "--priority", "0"], "RT priority 0 is out of range for rr: give 1-99"),
            (["--policy", "batch", "--priority", "3"], "batch has no RT priority"),
            (["--policy", "deadline"], "SCHED_DEADLINE takes a runtime, deadline and period")):
        assert main(["sched", "--tid", str(child), *argv]) == 2
        out = capsys.readouterr()
        assert says in out.out + out.err and len((out.out + out.err).strip().splitlines()) == 1
    assert main(["sched", "--tid", str(child), "--pid", str(child), "--policy", "other"]) == 2
    assert "give exactly one of --tid T, --pid P or --java NAME --pid P" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["sched", "--tid", str(child), "--policy", "rr", "--priority", "100"])
    assert e.value.code == 2
    assert _sched(child) == (os.SCHED_OTHER, 0)
    assert _journal(capsys) == []


@pytest.mark.usefixtures("live_machine")
def test_a_cpus_stopper_thread_is_refused_before_the_journal(capsys):
    """migration/N, the CPU's stopper: __sched_setscheduler says EINVAL ("changing the policy of the stop
    threads is a very bad idea"); the dry run and the flow say so first, and nothing is journalled."""
    stopper = next((int(p) for p in os.listdir("/proc") if p.isdigit()
                    and _comm(p) == "migration/0"), None)
    if stopper is None:
        pytest.skip("no migration/0 kernel thread: a kernel without a stopper per CPU (uniprocessor)")
    before = _sched(stopper)
    assert main(["sched", "--tid", str(stopper), "--policy", "rr", "--priority", "5"]) == 1
    assert capsys.readouterr().out == (f"thread {stopper} (migration/0) scheduling: kernel thread {stopper} "
                                       "(migration/0) is its CPU's stopper, which refuses any policy change; "
                                       "leave it as it is\n")
    assert _sched(stopper) == before and _journal(capsys) == []


def _comm(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


@ROOT_ONLY
@pytest.mark.usefixtures("live_machine")
def test_rt_runtime_zero_and_rlimit_rtprio_are_named(child, tmp_path):
    """The two refusals a real machine gives an RT policy, read from where the kernel reads them: a
    sysctl tree whose sched_rt_runtime_us is 0, and a non-root user's RLIMIT_RTPRIO (a child that
    drops to nobody with a limit of at most 10 asks for 20, and is told why by the kernel's EPERM)."""
    tree = tmp_path / "tree"
    (tree / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tree / "proc" / "sys" / "kernel" / "sched_rt_runtime_us").write_text("0\n")
    (tree / "sys").mkdir()
    writer = SchedWriter(SysRoot(tree, check=False))
    why = writer._rt_refusal(child, child, 50)
    assert why.startswith("kernel.sched_rt_runtime_us is 0, so real-time tasks get no CPU time")
    # A container's root may lack CAP_SYS_RESOURCE and find the hard limit at 0: lower is all it can do.
    limit = min(10, resource.getrlimit(resource.RLIMIT_RTPRIO)[1])
    where = tempfile.mkdtemp()
    os.chown(where, 65534, 65534)   # the journal of a process that runs as nobody: its own folder
    # Everything is imported before the drop to nobody, who may not read this Python's own folder.
    code = ("import os, resource, subprocess\n"
            "from app.pinning.service import AffinityService\n"
            "from app.pinning.journal import Journal\n"
            "from app.pinning.targets import PinTarget\n"
            "from app.sysroot import SysRoot\n"
            f"resource.setrlimit(resource.RLIMIT_RTPRIO, ({limit}, {limit}))\n"
            "p = subprocess.Popen(['sleep', '30'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,\n"
            "                     preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))\n"
            "try:\n"
            "    os.setgid(65534); os.setuid(65534)\n"
            f"    s = AffinityService(SysRoot('/'), Journal({where + '/j.jsonl'!r}))\n"
            "    print(s.schedule([PinTarget('thread', p.pid, p.pid)], (1, 20))[0].line())\n"
            "    print(s.schedule([PinTarget('thread', p.pid, p.pid)], (3, 0))[0].line())\n"
            "finally:\n"
            "    p.kill()\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                             cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    finally:
        shutil.rmtree(where)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.endswith(f"RLIMIT_RTPRIO is {limit} for this user, so it may set RT priorities up to {limit} only; "
                          "raise it (rtprio in /etc/security/limits.conf) or run coremap as root"), first
    assert second.endswith("scheduling: other -> batch ok"), second       # a time-shared policy needs no limit


def test_a_capture_refuses_scheduling(tmp_path):
    from tests.machines import extract
    svc = AffinityService(SysRoot(extract("sno")), Journal(str(tmp_path / "j.jsonl"), readonly=True))
    from app.pinning.service import CaptureReadOnly
    with pytest.raises(CaptureReadOnly):
        svc.plan_schedule([PinTarget("thread", 1, 1)], (1, 80))
    assert sched_target(5).describe() == "thread 5 scheduling"


@needs_jdk
@ROOT_ONLY
@pytest.mark.usefixtures("live_machine")
def test_a_java_thread_by_its_full_name(capsys):
    """`sched --java NAME --pid P`: the real JVM's "market-data-feed-handler-0" (comm "market-data-fee",
    which its sibling shares), found by its full name, set to rr 10 and named so in the line and the
    journal; the sibling is left alone; undo puts it back."""
    m = MarketData()
    try:
        tid, other = m.tid(HANDLER), m.tid(OTHER_HANDLER)
        assert main(["sched", "--java", HANDLER, "--pid", str(m.pid), "--policy", "rr", "--priority", "10"]) == 0
        assert capsys.readouterr().out == f"thread {tid} ({HANDLER}) scheduling: other -> rr 10 ok\n"
        assert _sched(tid) == (os.SCHED_RR, 10) and _sched(other) == (os.SCHED_OTHER, 0)
        assert [e["label"] for e in _journal(capsys)] == [HANDLER]
        assert main(["undo"]) == 0 and _sched(tid) == (os.SCHED_OTHER, 0)
    finally:
        m.stop()


@ROOT_ONLY
@pytest.mark.usefixtures("live_machine")
def test_the_guard_reports_a_policy_changed_by_someone_else_and_reapplies_it(child, tmp_path):
    """A scheduling change is a pin like the others: chrt -p 0 on the FIFO 80 child is reported, and
    with re-apply written back; a child that exited is nothing to guard."""
    from app.quiet.guard import Guard
    svc = AffinityService(SysRoot("/"), Journal(str(tmp_path / "j.jsonl")))
    [r] = svc.schedule([PinTarget("thread", child, child)], (os.SCHED_FIFO, 80))
    assert r.code == "ok"
    guard = Guard(svc, budget_s=10.0)
    assert guard.tick().events == []
    os.sched_setscheduler(child, os.SCHED_OTHER, os.sched_param(0))       # someone else's chrt -o -p 0
    [ev] = guard.tick().events
    assert (ev.kind, ev.target_id, ev.expected, ev.found, ev.action) == ("sched", child, (1, 80), (0, 0), "reported")
    svc.journal.set_policy(r.journal_id, True)
    [ev] = guard.tick().events
    assert ev.action == "reapplied" and _sched(child) == (os.SCHED_FIFO, 80)
    svc.journal.close()


@pytest.mark.usefixtures("live_machine")
def test_the_guard_leaves_alone_a_thread_that_reused_the_id(child, tmp_path):
    """The journal's FIFO 80 was of a thread that exited; the id now names this child (another start
    time): the guard neither reports nor writes it."""
    svc = AffinityService(SysRoot("/"), Journal(str(tmp_path / "j.jsonl")))
    jid = svc.journal.record(kind="sched", target_id=child, requested=(1, 80), before=(0, 0), pid=child,
                             label="sleep", root=svc.root_key, origin="pin", batch=None, starttime=1, netdev=None)
    svc.journal.mark(jid, "done", (1, 80), None, code="ok", message="")
    svc.journal.set_policy(jid, True)
    from app.quiet.guard import Guard
    guard = Guard(svc, budget_s=10.0)
    assert guard.tick().events == [] and guard.tick().events == []
    assert _sched(child) == (os.SCHED_OTHER, 0)
    svc.journal.close()
