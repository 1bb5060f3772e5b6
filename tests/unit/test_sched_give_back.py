"""A thread's scheduling set while a CPU is quiet goes back with the give-back, live on this VM as root:
`coremap isolate -c 1`, a child pinned onto CPU 1 and set to SCHED_FIFO 80, then ONE `coremap include
-c 1` leaves it SCHED_OTHER 0 where it was, with nothing left to undo or restore (app/quiet/pins_back.py).
Every check reads the kernel (sched_getscheduler, /proc), not coremap's output."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from app.cli.main import main
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sysroot import SysRoot
from tests.live import live_test, restore_quiet

CPUSET = Path("/sys/fs/cgroup/cpuset")
needs_v1 = pytest.mark.skipif(not (CPUSET / "cpuset.cpus").exists(), reason="cgroup v1's cpuset is not mounted here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a real-time policy needs root (CAP_SYS_NICE)")


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    svc = AffinityService(SysRoot("/"), Journal(tmp_path / "state" / "journal.jsonl"))
    yield svc
    restore_quiet(svc)
    svc.journal.close()


def _sched(pid: int) -> tuple[int, int]:
    return os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority


@needs_v1
@needs_root
@live_test
def test_the_give_back_puts_the_policy_set_while_quiet_back(state, capsys):
    child = subprocess.Popen(["sleep", "300"])
    try:
        pid = child.pid
        allowed = sorted(os.sched_getaffinity(pid))
        assert main(["isolate", "--cpus", "1"]) == 0
        assert main(["pin", "--tid", str(pid), "--cpus", "1"]) == 0
        assert main(["sched", "--tid", str(pid), "--policy", "fifo", "--priority", "80"]) == 0
        assert _sched(pid) == (os.SCHED_FIFO, 80)
        capsys.readouterr()
        assert main(["include", "--cpus", "1", "--dry-run"]) == 0
        dry = capsys.readouterr().out
        assert f"thread {pid} (sleep) scheduling: fifo 80 -> other" in dry, dry
        assert _sched(pid) == (os.SCHED_FIFO, 80)                    # a dry run writes nothing
        assert main(["include", "--cpus", "1"]) == 0
        assert _sched(pid) == (os.SCHED_OTHER, 0)
        assert sorted(os.sched_getaffinity(pid)) == allowed
        ledger = state.ledger()
        assert ledger.unrestored == () and ledger.pinned == {}
        # The give-back undid the sched batch: it is off the undo stack, as the pin's batch is.
        sched = {b for b, es in ledger.batches.items() if es[0].kind == "sched" and es[0].origin == "cli"}
        assert len(sched) == 1 and not sched & set(ledger.undo), (sched, ledger.undo)
    finally:
        child.kill()
        child.wait()
