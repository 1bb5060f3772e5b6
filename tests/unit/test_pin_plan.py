"""The pin flow's dry run (app/pinning/dry_run.py, PinFlow.plan, AffinityService.plan): the one answer to
"can this go there" that a drop, the Pin to… dialog and `coremap pin --dry-run` ask (issue 28). It reads
what `apply` would write, writes and journals nothing, and a later step sees what the batch's earlier
steps would have changed (a thread moved into /coremap-pinned may then run on the quiet CPUs)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from app.cli.main import main
from app.pinning.cgroups import PINNED
from app.pinning.dry_run import Plan, PlannedStep
from app.pinning.journal import Journal
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.pinning.writers import Foresight, Step, ThreadWriter
from app.machine.cgroups import read_cpuset_layout
from app.sysroot import SysRoot
from tests.machines import copy_machine, extract, writable_test_tree

MANAGED = 33                # an IRQ of sno that the tree's debugfs marks managed
CPUS = tuple(sorted(os.sched_getaffinity(0)))


@pytest.fixture
def tree(tmp_path) -> SysRoot:
    """A writable copy of sno whose debugfs says IRQ 33 is managed (GENERIC_IRQ_DEBUGFS)."""
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    dbg = dst / "sys" / "kernel" / "debug" / "irq" / "irqs"
    dbg.mkdir(parents=True)
    (dbg / str(MANAGED)).write_text("handler:  handle_edge_irq\ndstate:   0x37400200\n            IRQD_AFFINITY_MANAGED\n")
    return SysRoot(writable_test_tree(dst))


@pytest.fixture
def journal(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    yield j
    j.close()


def _irq(root: SysRoot, n: int) -> str:
    return root.irq_dir(n, "smp_affinity_list").read_text().strip()


def test_a_plan_writes_nothing_and_says_what_apply_then_does(tree, journal):
    svc = AffinityService(tree, journal)
    req = PinRequest((PinTarget("irq", 24),), (0, 1))
    plan = svc.plan(req)
    assert [s.code for s in plan] == ["ok"] and plan.goes and svc.preflight(req) == []
    assert plan[0].line() == f"{plan[0].target.describe()}: 1 -> 0-1 would be written"
    assert _irq(tree, 24) == "1" and journal.entries() == []          # a dry run: nothing written or journalled
    [r] = svc.apply(req)
    assert r.code == "ok" and _irq(tree, 24) == "0-1"
    # Once there, the plan says so, not "0-1 -> 0-1 would be written" (seen in Set scheduling…'s line).
    assert svc.plan(req)[0].line() == f"{plan[0].target.describe()}: 0-1 already; nothing changes"


def test_a_managed_irq_is_refused_alike_by_the_plan_and_the_pin(tree, journal):
    svc = AffinityService(tree, journal)
    before = _irq(tree, MANAGED)
    req = PinRequest((PinTarget("irq", MANAGED),), (0,))
    plan = svc.plan(req)
    assert not plan.goes and [s.code for s in plan] == ["managed"]
    [r] = svc.apply(req)
    # The flow asks the writer's foresight before it writes: the same code and words, nothing written
    # (a test tree's file would take any text; the kernel answers EIO).
    assert (r.code, r.journal_id) == ("managed", None) and svc.preflight(req) == [r.message]
    assert "managed" in r.message and _irq(tree, MANAGED) == before and journal.entries() == []


def test_bad_cpus_and_unknown_targets_are_invalid_in_the_plan(tree, journal):
    svc = AffinityService(tree, journal)
    plan = svc.plan(PinRequest((PinTarget("irq", 24), PinTarget("irq", 25)), (12,)))   # sno has CPUs 0-11
    assert plan.invalid and not plan.goes and [s.code for s in plan] == ["invalid", "invalid"]
    assert plan.reasons() == [plan[0].message]                          # one reason, not one per target
    unknown = svc.plan(PinRequest((PinTarget("irq", 999),), (1,)))
    assert unknown.reasons() == ["IRQ 999 does not exist on this machine; see `coremap irqs`"]


def test_every_target_gone_is_a_reason_and_some_gone_is_not():
    t = PinTarget("thread", 5)
    gone = PlannedStep(t, "gone", "thread 5 has exited; refresh the list", None, (1,))
    ok = PlannedStep(PinTarget("thread", 6), "ok", "", (0, 1), (1,))
    assert Plan([gone]).reasons() == ["thread 5 has exited; refresh the list"] and not Plan([gone]).goes
    assert Plan([gone, ok]).goes and Plan([gone, ok]).reasons() == []
    assert not Plan([]).goes and Plan([]).reasons() == ["nothing to pin"]


def test_a_pin_of_a_capture_is_refused_in_the_plan_as_in_apply(journal):
    svc = AffinityService(SysRoot(extract("sno")), journal)
    assert "a capture cannot be pinned" in svc.preflight(PinRequest((PinTarget("irq", 24),), (0,)))[0]


def test_the_cli_dry_run_prints_the_plan_and_writes_nothing(tree, capsys):
    assert main(["pin", "--irq", "24", "-c", "0-1", "--root", str(tree.root), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "IRQ 24" in out and "1 -> 0-1 would be written" in out and "nothing was written" in out
    assert _irq(tree, 24) == "1"
    assert main(["pin", "--irq", str(MANAGED), "-c", "0", "--root", str(tree.root), "--dry-run"]) == 1
    assert "cannot be moved: the kernel manages its affinity" in capsys.readouterr().out
    assert main(["pin", "--irq", "24", "-c", "12", "--root", str(tree.root), "--dry-run"]) == 2
    assert _irq(tree, 24) == "1"


# -- what an earlier step changes, read by a later one (live reads, nothing written) ----------------------
def _own_thread():
    ev = threading.Event()
    th = threading.Thread(target=ev.wait, daemon=True)
    th.start()
    return th, ev


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")
@pytest.mark.usefixtures("live_machine")     # reads its own thread's cpuset: no Make quiet may stand meanwhile
def test_a_thread_sees_the_cpuset_an_earlier_step_moves_it_into():
    root = SysRoot("/")
    th, ev = _own_thread()
    try:
        writer = ThreadWriter(root)
        me = PinTarget("thread", th.native_id, os.getpid())
        sight = Foresight()
        assert writer.foresee(me, (CPUS[1],), sight) is None
        sight.place(os.getpid(), None, (CPUS[0],), "/coremap-system")          # the whole process, shielded
        shut = writer.foresee(me, (CPUS[1],), sight)
        assert shut.code == "cpuset" and f"may run only on CPUs {CPUS[0]} of its cpuset /coremap-system" in shut.message
        assert writer.foresee(me, CPUS[:2], sight).code == "trimmed"
        sight.place(os.getpid(), th.native_id, None, "/coremap-pinned")        # this thread alone, out of it
        assert writer.foresee(me, (CPUS[1],), sight) is None
    finally:
        ev.set()
        th.join()


@pytest.mark.skipif(len(CPUS) < 2 or not read_cpuset_layout(SysRoot("/")).usable or os.geteuid() != 0,
                    reason="needs two CPUs, root and a cpuset hierarchy coremap can use")
@pytest.mark.usefixtures("live_machine")
def test_the_flow_carries_a_planned_cpuset_forward_without_making_it(tmp_path):
    root = SysRoot("/")
    layout = read_cpuset_layout(root)
    pinned_dir = Path("/sys", *layout.mount, "coremap-pinned")
    if pinned_dir.exists():
        pytest.skip("a Make quiet stands on this machine (coremap-pinned exists)")
    th, ev = _own_thread()
    j = Journal(tmp_path / "journal.jsonl")
    try:
        svc = AffinityService(root, j)
        flow = svc._flow
        member = (PinTarget("cgroupthread", th.native_id, os.getpid()) if layout.kind == "v1"
                  else PinTarget("cgroup", os.getpid()))
        me = PinTarget("thread", th.native_id, os.getpid())
        narrow = flow.plan([Step(PinTarget("cpuset", PINNED), (CPUS[0],)), Step(member, (PINNED,)),
                            Step(me, (CPUS[1],))], CPUS)
        assert [s.code for s in narrow] == ["ok", "ok", "cpuset"], [s.line() for s in narrow]
        assert "of its cpuset /coremap-pinned" in narrow[2].message
        wide = flow.plan([Step(PinTarget("cpuset", PINNED), CPUS), Step(member, (PINNED,)), Step(me, (CPUS[1],))], CPUS)
        assert [s.code for s in wide] == ["ok", "ok", "ok"] and wide.goes
        assert not pinned_dir.exists() and j.entries() == []             # planned, never made
    finally:
        j.close()
        ev.set()
        th.join()
