"""Quiet that holds, live on this VM as root (cgroup v1's cpuset is mounted here): after `coremap
isolate --cpus 1`, a process that asks for every CPU does not get CPU 1, nor does one started later,
nor coremap's own threads; the kernel's knobs are set; a thread pinned onto CPU 1 runs there alone of
its process; `coremap include` gives back every CPU to what was born meanwhile, keeps a mask a user set
with taskset, and reports exited targets as gone with exit status 0; nothing is left behind. Every
check reads /proc and /sys, not coremap's output. Then the cgroup v2 and systemd layouts, which this VM
does not have, on fixture trees: the method chosen and the steps planned."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from pathlib import Path

import pytest

from app.cli.main import main
from app.machine.cgroups import read_cpuset_layout
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sysroot import SysRoot
from tests.jvms import COMM, HANDLER, MarketData, needs_jdk
from tests.live import cpulist, live_test, restore_quiet

CPUSET = Path("/sys/fs/cgroup/cpuset")
KNOBS = {"timer_migration": Path("/proc/sys/kernel/timer_migration"), "stat_interval": Path("/proc/sys/vm/stat_interval"),
         "watchdog": Path("/proc/sys/kernel/watchdog_cpumask")}
SLEEPER = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(120)"
needs_v1 = pytest.mark.skipif(not (CPUSET / "cpuset.cpus").exists(), reason="cgroup v1's cpuset is not mounted here")


def _allowed(pid: int, tid: int | None = None) -> frozenset[int]:
    p = Path(f"/proc/{pid}") / (f"task/{tid}" if tid else "") / "status"
    line = next(ln for ln in p.read_text().splitlines() if ln.startswith("Cpus_allowed_list"))
    return cpulist(line.split(":", 1)[1])


def _cpuset(pid: int, tid: int | None = None) -> str:
    return (Path(f"/proc/{pid}") / (f"task/{tid}" if tid else "") / "cpuset").read_text().strip()


def _spawn(*pre: str) -> subprocess.Popen:
    p = subprocess.Popen([*pre, sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    return p


def _knobs() -> dict[str, str]:
    return {k: p.read_text().strip() for k, p in KNOBS.items() if p.exists()}


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    svc = AffinityService(SysRoot("/"), Journal(tmp_path / "state" / "journal.jsonl"))
    yield svc
    restore_quiet(svc)
    svc.journal.close()


@needs_v1
@live_test
def test_the_shield_holds_and_the_give_back_gives_back(state, capsys):
    knobs0 = _knobs()
    before = _spawn()                       # a process from before the isolate
    later = user = None
    try:
        assert main(["isolate", "--cpus", "1"]) == 0
        assert "(cpuset shield)" in capsys.readouterr().out
        assert (CPUSET / "coremap-system").is_dir()
        assert cpulist((CPUSET / "coremap-system" / "cpuset.cpus").read_text()) == {0}
        # A process that asks for every CPU does not get CPU 1: not one from before, not one started now.
        later = _spawn()
        for p in (before, later):
            os.sched_setaffinity(p.pid, {0, 1})
            assert _allowed(p.pid) == {0} and _cpuset(p.pid) == "/coremap-system"
        # coremap's own threads, this test process's included, and one it starts after the isolate.
        me = os.getpid()
        assert all(_allowed(me, int(t)) == {0} for t in os.listdir(f"/proc/{me}/task"))
        assert _knobs().get("timer_migration") in (None, "0") and _knobs().get("stat_interval") in (None, "10")
        assert _knobs().get("watchdog") in (None, "0")
        # A mask a user sets while quiet (taskset -c 0): it must stay after the give-back.
        user = _spawn("taskset", "-c", "0")
        # The job: one thread of a process pinned onto the quiet CPU runs there, its siblings do not.
        th = subprocess.Popen([sys.executable, "-c", "import threading, time, os\n"
                               "for _ in range(3): threading.Thread(target=time.sleep, args=(120,), daemon=True).start()\n"
                               "print(os.getpid(), flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
        th.stdout.readline()
        tid = sorted(int(t) for t in os.listdir(f"/proc/{th.pid}/task"))[1]
        assert main(["pin", "--tid", str(tid), "--cpus", "1"]) == 0
        assert _allowed(th.pid, tid) == {1} and _cpuset(th.pid, tid) == "/coremap-pinned"
        assert all(_allowed(th.pid, int(t)) == {0} for t in os.listdir(f"/proc/{th.pid}/task") if int(t) != tid)
        th.kill()
        th.wait()                           # it exits before the give-back: reported as gone, not failed
        capsys.readouterr()
        assert main(["include", "--cpus", "1"]) == 0
        out = capsys.readouterr().out
        assert not (CPUSET / "coremap-system").exists() and not (CPUSET / "coremap-pinned").exists()
        assert _allowed(later.pid) == {0, 1} and _cpuset(later.pid) == "/"     # born while quiet: all CPUs back
        assert _allowed(before.pid) == {0, 1}
        assert _allowed(user.pid) == {0}, "taskset -c 0 set while quiet must stay"
        assert _knobs() == knobs0
        assert "include CPU 1" in out
        # Restore after the give-back has nothing of the quiet time left to undo: a process born while
        # quiet is not put back into a shield that is gone, and a mask the user set stays.
        assert main(["restore"]) == 0
        out = capsys.readouterr().out
        assert f"process {later.pid}" not in out and f"process {user.pid}" not in out, out
        assert _allowed(later.pid) == {0, 1} and _cpuset(later.pid) == "/"
        assert _allowed(user.pid) == {0} and _allowed(before.pid) == {0, 1}
        assert not (CPUSET / "coremap-system").exists()
    finally:
        for p in (before, later, user):
            if p is not None:
                p.kill()
                p.wait()


@needs_v1
@live_test
def test_an_exited_target_is_gone_not_failed(state, capsys):
    p = _spawn()
    assert main(["isolate", "--cpus", "1"]) == 0
    p.kill()
    p.wait()
    capsys.readouterr()
    assert main(["undo"]) == 0                      # its cpuset move has nothing to undo: gone, exit 0
    out = capsys.readouterr().out
    assert f"process {p.pid} (python) cpuset has exited" in out
    assert not (CPUSET / "coremap-system").exists()


@needs_v1
@live_test
@needs_jdk
def test_a_java_thread_pinned_onto_a_quiet_cpu_is_named_by_its_full_name_in_every_step(state, capsys):
    """The job users name first: the handler thread, dropped by its Java name onto the quiet CPU, is
    moved out of the shield and pinned; both steps, and the journal a report is made from, name it
    `market-data-feed-handler-0`, not the kernel's cut `market-data-fee`."""
    jvm = MarketData()
    try:
        assert main(["isolate", "--cpus", "1"]) == 0
        capsys.readouterr()
        assert main(["pin", "--java", HANDLER, "--pid", str(jvm.pid), "--cpus", "1"]) == 0
        out = capsys.readouterr().out
        tid = jvm.tid(HANDLER)
        assert f"thread {tid} ({HANDLER}) cpuset: /coremap-system -> /coremap-pinned" in out, out
        assert f"thread {tid} ({HANDLER}): " in out and COMM + ")" not in out, out
        assert _allowed(jvm.pid, tid) == {1} and _cpuset(jvm.pid, tid) == "/coremap-pinned"
        labels = {e.kind: e.label for e in state.journal.entries() if e.target_id == tid}
        assert labels == {"cgroupthread": HANDLER, "thread": HANDLER}
        assert main(["include", "--cpus", "1"]) == 0
    finally:
        jvm.stop()


# -- the layouts this VM does not have -----------------------------------------------------------------
def _tree(tmp_path, files: dict[str, str]) -> SysRoot:
    for rel, text in {"proc/stat": "cpu  1 0 0 0 0 0 0 0 0 0\n", **files}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return SysRoot(tmp_path)


def test_cgroup_v2_and_systemd_layouts_are_told_apart(tmp_path):
    v2 = _tree(tmp_path / "v2", {"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
                                 "sys/fs/cgroup/cpuset.cpus.effective": "0-7\n", "proc/1/comm": "init\n"})
    assert (read_cpuset_layout(v2).kind, read_cpuset_layout(v2).cpus) == ("v2", tuple(range(8)))
    sd = _tree(tmp_path / "sd", {"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n",
                                 "sys/fs/cgroup/cpuset.cpus.effective": "0-3\n", "proc/1/comm": "systemd\n"})
    assert read_cpuset_layout(sd).kind == "systemd"
    none = _tree(tmp_path / "none", {"sys/fs/cgroup/cgroup.controllers": "cpu io memory\n"})
    layout = read_cpuset_layout(none)
    assert layout.kind == "none" and not layout.usable and "no cpuset" in layout.why
    v1 = _tree(tmp_path / "v1", {"sys/fs/cgroup/cpuset/cpuset.cpus": "0-1\n", "sys/fs/cgroup/cpuset/cpuset.mems": "0\n"})
    assert (read_cpuset_layout(v1).kind, read_cpuset_layout(v1).mount) == ("v1", ("fs", "cgroup", "cpuset"))


def test_the_systemd_method_plans_allowed_cpus_for_its_slices(tmp_path, monkeypatch):
    """systemctl is asked for each slice's AllowedCPUs and told the housekeeping CPUs; the one coremap
    runs here (a fake systemctl answering from files) records what it was told."""
    from app.pinning.cgroups import SliceWriter
    from app.pinning.targets import PinTarget
    calls = []

    def run(args, **_):
        calls.append(args[1:])
        out = "" if args[1] == "show" else ""
        return subprocess.CompletedProcess(args, 0, out, "")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/systemctl" if name == "systemctl" else None)
    w = SliceWriter(SysRoot("/"), run=run)
    assert w.read(PinTarget("slice", 0)) == ()                       # unset: every CPU
    w.write(PinTarget("slice", 1), (0, 2, 3))
    assert calls[-1] == ["set-property", "--runtime", "user.slice", "AllowedCPUs=0,2-3"]
    assert calls[0] == ["show", "--value", "-p", "AllowedCPUs", "system.slice"]





@needs_v1
def test_an_undone_move_never_takes_a_process_that_reused_the_id():
    """An undo or redo of a cpuset move carries the journalled start time: a process that is not the one
    moved (its id reused) is left where it is. Reads only."""
    from app.machine.threads import read_task
    from app.pinning.cgroups import MemberWriter
    from app.pinning.targets import PinTarget
    from app.pinning.writers import UNKNOWN_START, Step
    root = SysRoot("/")
    me = os.getpid()
    real = read_task(root, me, me, detail="fast").starttime
    w = MemberWriter(root)
    assert "id was reused; left alone" in w.prepare(Step(PinTarget("cgroup", me), (0,), expect_starttime=real + 1)).gone
    assert "no start time" in w.prepare(Step(PinTarget("cgroup", me), (0,), expect_starttime=UNKNOWN_START)).gone
    same = w.prepare(Step(PinTarget("cgroup", me), (0,), expect_starttime=real))
    assert not same.gone and same.before is not None and same.starttime == real
