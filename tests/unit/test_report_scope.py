"""A report holds this job's pins, not the journal's whole history (issue 28: `coremap report` repeated
22 rows, 13 of them "gone" lines of earlier restores): the pins in effect and every batch since the
oldest Make quiet in effect, or since a time given. On a copy of sno (12 CPUs) whose journal holds an
earlier job: an IRQ pinned and restored, another pinned and undone."""
from __future__ import annotations

import os
import time

import pytest

from app.parse.cpulist import parse_cpulist
from app.pinning.journal import Journal
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.quiet.isolate import LocalQuiet
from app.store.report import build_report_html, report_from_root
from app.store.report_pins import pin_scope
from app.sysroot import SysRoot
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree


@pytest.fixture
def service(tmp_path):
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu", "proc/interrupts"),
                 leave_out=(CPU_CACHES,))
    j = Journal(tmp_path / "journal.jsonl")
    yield AffinityService(SysRoot(writable_test_tree(dst)), j)
    j.close()


def _irqs(root: SysRoot, n: int) -> list[int]:
    """n IRQs that may go anywhere (their mask is every CPU), as sno's NICs' are."""
    out = [int(i) for i in sorted(os.listdir(root.proc("irq")), key=lambda s: (len(s), s)) if i.isdigit()
           and parse_cpulist(root.irq_dir(i, "smp_affinity_list").read_text()) == tuple(range(12))]
    assert len(out) >= n
    return out[:n]


def _pin(service, irq: int, cpu: int) -> None:
    [r] = service.apply(PinRequest((PinTarget("irq", irq),), (cpu,)))
    assert r.ok, r.message


def _earlier_job(service) -> list[int]:
    """An earlier job's history: IRQ a pinned and restored, IRQ b pinned and undone."""
    a, b, c, d = _irqs(service.root, 4)
    _pin(service, a, 2)
    service.restore_all()
    _pin(service, b, 3)
    service.undo()
    return [a, b, c, d]


def _targets(rows) -> set:
    return {(r["kind"], r["target_id"]) for r in rows if r["origin"] not in ("isolate", "include")}


def test_a_report_holds_the_pins_since_the_quiet_in_effect_not_the_earlier_job(service):
    a, b, c, d = _earlier_job(service)
    old = len(service.journal.entries())
    _pin(service, d, 4)                    # a pin still in effect, made before this job's Make quiet
    time.sleep(0.01)
    LocalQuiet(service).apply(LocalQuiet(service).preview("isolate", "1"))
    quiet = service.ledger().quiet_events
    _pin(service, c, 1)                    # this job's pin onto the quiet CPU
    scope = pin_scope(service.ledger())
    assert _targets(scope.rows) == {("irq", c), ("irq", d)}
    assert {r["origin"] for r in scope.rows} >= {"isolate"}
    assert len(scope.rows) == len(service.journal.entries()) - old
    (isolate,) = quiet.values()
    assert f"since Make quiet of CPU 1 (#{isolate.id})" in scope.sentence
    assert f"{old} earlier journal rows left out" in scope.sentence and scope.sentence.endswith(
        f"Now CPU 1 quiet, Make quiet #{isolate.id} at {time.strftime('%Y-%m-%d', time.localtime(isolate.time))}"
        f" {time.strftime('%H:%M:%S', time.localtime(isolate.time))}.")
    r = report_from_root(service.root, journal=scope.rows, pins_scope=scope.sentence, live_wait=0)
    assert [p.target for p in r.pins] == [f"IRQ {d}", "Make quiet CPU 1 (#%d)" % isolate.id, f"IRQ {c}"]
    html = build_report_html(r)
    assert f"IRQ {a}" not in html and f"IRQ {b}" not in html and "earlier journal rows left out" in html


def test_with_no_quiet_cpu_a_report_holds_the_pins_in_effect(service):
    a, b, c, d = _earlier_job(service)
    _pin(service, c, 5)
    LocalQuiet(service).apply(LocalQuiet(service).preview("isolate", "1"))
    LocalQuiet(service).apply(LocalQuiet(service).preview("include", "1"))      # the job given back
    scope = pin_scope(service.ledger())
    assert _targets(scope.rows) == {("irq", c)}
    assert scope.sentence.startswith("Pins in effect; ") and scope.sentence.endswith("Now no CPU is quiet.")
    # a window holds what was made since it opened too: the Make quiet and Give back of this job
    opened = pin_scope(service.ledger(), opened=service.ledger().quiet_events[min(service.ledger().quiet_events)].time)
    assert {r["origin"] for r in opened.rows} >= {"isolate", "include"} and "since this window opened" in opened.sentence


def test_since_chooses_the_start(service):
    a, b, c, d = _earlier_job(service)
    every = len(service.journal.entries())
    time.sleep(0.01)
    start = time.time()
    _pin(service, c, 5)
    since = pin_scope(service.ledger(), since=start)
    assert _targets(since.rows) == {("irq", c)} and since.sentence.startswith("Pins made since ")
    whole = pin_scope(service.ledger(), since=0)
    assert len(whole.rows) == every + 1 and "left out" not in whole.sentence
    assert {("irq", a), ("irq", b)} <= _targets(whole.rows)
