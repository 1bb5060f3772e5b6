"""What the journal adds up to around a give-back (issue 28), from real journal files on tmp: a pin made
onto a quiet CPU that the include wrote back leaves the undo stack (nothing guards or keeps it any
more); after the give-back restore has nothing left of the quiet time, but a pin kept through it stays
for restore; a restore leaves out a move back into a coremap cpuset that is gone; the isolate's own
move of a process into /coremap-system (value 1) is no pin onto CPU 1."""
from __future__ import annotations

from app.pinning.journal import Journal
from app.pinning.ledger import ledger_of, restorable
from app.pinning.targets import PinTarget

ROOT = "/"


class _Job:
    """A journal written as coremap writes it: a quiet event, then the writes of its batch."""

    def __init__(self, tmp_path):
        self.j = Journal(tmp_path / "j.jsonl")

    def batch(self, origin: str, writes, quiet: tuple[str, tuple[int, ...]] | None = None) -> int:
        b = self.j.quiet(quiet[0], quiet[1], ROOT, planned=len(writes)) if quiet else None
        for kind, target, before, req in writes:
            i = self.j.record(kind=kind, target_id=target, pid=target, before=before, requested=req, starttime=7,
                              origin=origin, batch=b, root=ROOT)
            self.j.mark(i, "done", after=req, code="ok")
            b = b if b is not None else i
        return b

    def ledger(self):
        self.j.refresh()
        return ledger_of(self.j.entries(), self.j.quiet_events(), ROOT)


def _isolate_pin(job: _Job) -> tuple[int, int]:
    iso = job.batch("isolate", [("cpuset", 1, (), (0,)), ("cgroup", 50, (0,), (1,)), ("irq", 24, (0, 1), (0,))],
                    quiet=("isolate", (1,)))
    pin = job.batch("drop", [("cpuset", 2, (), (0, 1)), ("cgroupthread", 51, (1,), (2,)), ("thread", 51, (0, 1), (1,))])
    return iso, pin


def test_a_give_back_of_the_pin_takes_it_off_the_undo_stack_and_leaves_nothing_to_restore(tmp_path):
    job = _Job(tmp_path)
    iso, pin = _isolate_pin(job)
    before = job.ledger()
    assert before.undo == (iso, pin) and ("thread", None, 51) in before.pinned and before.quiet_cpus == (1,)
    inc = job.batch("include", [("cgroupthread", 51, (2,), (0,)), ("thread", 51, (1,), (0, 1)),
                                ("cgroup", 50, (1,), (0,)), ("irq", 24, (0,), (0, 1)),
                                ("cpuset", 2, (0, 1), ()), ("cpuset", 1, (0,), ())], quiet=("include", (1,)))
    after = job.ledger()
    assert after.undo == (iso, inc) and after.pinned == {} and after.quiet_cpus == ()
    assert after.unrestored == ()


def test_a_pin_kept_through_the_give_back_stays_for_restore(tmp_path):
    job = _Job(tmp_path)
    iso, pin = _isolate_pin(job)
    # --keep-pins: the thread leaves /coremap-pinned (journalled), its mask stays on CPU 1
    inc = job.batch("include", [("cgroupthread", 51, (2,), (0,)), ("cgroup", 50, (1,), (0,)),
                                ("irq", 24, (0,), (0, 1)), ("cpuset", 2, (0, 1), ()), ("cpuset", 1, (0,), ())],
                    quiet=("include", (1,)))
    after = job.ledger()
    assert after.undo == (iso, pin, inc) and ("thread", None, 51) in after.pinned
    assert [(e.kind, e.target_id, e.before) for e in after.unrestored] == [("thread", 51, (0, 1))]


def test_what_an_isolate_began_ends_with_the_give_back_of_all_its_cpus(tmp_path):
    job = _Job(tmp_path)
    job.batch("isolate", [("cgroup", 60, (0,), (1,)), ("cgroup", 61, (0,), (1,))], quiet=("isolate", (1, 2)))
    job.batch("include", [("cgroup", 60, (1,), (1,))], quiet=("include", (1,)))     # CPU 2 still quiet
    assert {e.target_id for e in job.ledger().unrestored} == {60, 61}
    job.batch("include", [("cgroup", 60, (1,), (0,))], quiet=("include", (2,)))     # 61 exited meanwhile
    assert job.ledger().unrestored == ()


def test_restore_leaves_out_a_move_into_a_cpuset_that_is_gone(tmp_path):
    job = _Job(tmp_path)
    _isolate_pin(job)
    entries = job.ledger().unrestored
    keep, notes = restorable(entries, lambda index: index != 1)     # /coremap-system is gone
    assert ("cgroupthread", 51) not in {(e.kind, e.target_id) for e in keep}
    assert ("thread", 51) in {(e.kind, e.target_id) for e in keep}
    assert notes == ["thread 51 cpuset: its cpuset from before is gone (the shield came down); left where it is"]
    keep, notes = restorable(entries, lambda index: True)
    assert len(keep) == len(entries) and notes == []


def test_the_isolates_own_move_of_a_process_is_no_pin_onto_a_quiet_cpu(tmp_path):
    job = _Job(tmp_path)
    _isolate_pin(job)
    ledger = job.ledger()
    assert ledger.quiet_warning(PinTarget("cgroup", 50), (1,)) == ""
    assert "moved off quiet CPU 1" in ledger.quiet_warning(PinTarget("irq", 24), (1,))


def test_one_move_of_a_group_is_named_in_the_singular():
    from app.quiet.preview import GROUPS, group_title
    assert group_title("cpuset", "isolate", 1) == "cpuset" and group_title("cpuset", "isolate", 2) == "cpusets"
    assert group_title("process", "include", 1) == "process out of the shield, back to every CPU"
    assert group_title("pin", "include", 1) == "pin made while quiet"
    for group, _ in GROUPS:
        for action in ("isolate", "include"):
            one, many = group_title(group, action, 1), group_title(group, action, 2)
            assert group == "irqbalance" or one != many, (group, action)
