"""The pin worker (widgets/pinning/worker.py): a batch runs off the UI thread, the UI thread applies each
result while the batch is still running, Cancel stops it between two writes (what was written stays
journalled and undoable, what was not is left alone), a newer preview supersedes an older one, and a
job's error is a line on the result bar, not a dead worker.

On a writable copy of "sno" (openshift-nto), whose IRQ writes are slowed in the test so that a batch
takes long enough to be watched and cancelled."""
from __future__ import annotations

import os
import threading
import time

import pytest

from app.errors import CoremapError
from app.parse.cpulist import parse_cpulist
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.pinning.targets import PinTarget
from app.pinning.writers import IrqWriter
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.machines import copy_machine, writable_test_tree
from widgets.application import build_window

SLOW_WRITE_S = 0.02


@pytest.fixture
def sno(qtbot, tmp_path, monkeypatch):
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    root = SysRoot(writable_test_tree(dst))
    sampler = Sampler(root)
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    qtbot.waitExposed(w)
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(root, journal)
    show_pins(w, service)
    assert w.set_state(sampler.tick())
    real = IrqWriter.write

    def slow(writer, target, cpus):
        time.sleep(SLOW_WRITE_S)
        real(writer, target, cpus)
    monkeypatch.setattr(IrqWriter, "write", slow)
    yield w, service, root
    w.pin_controller.worker.stop()
    journal.close()


def _irqs(root) -> dict[int, tuple[int, ...]]:
    return {int(n): parse_cpulist(root.irq_dir(n, "smp_affinity_list").read_text())
            for n in os.listdir(root.proc("irq")) if n.isdigit()}


def _pairs(root, cpus=(0,)):
    return [(PinTarget("irq", n), cpus) for n in sorted(_irqs(root))[:40]]


def test_a_batch_runs_off_the_ui_thread_and_shows_each_result_as_it_comes(sno, qtbot):
    w, service, root = sno
    ctl = w.pin_controller
    pairs = _pairs(root)
    workers, shown = set(), []

    def batch(s, progress):
        workers.add(threading.get_ident())
        return s.apply_each(pairs, origin="test", progress=progress)
    with qtbot.waitSignal(ctl.results_shown, timeout=30000) as done:
        ctl.run("move IRQs", batch)
        # The UI thread is free while the batch runs: it draws the result line's progress as results come.
        qtbot.waitUntil(lambda: shown.append(ctl.result_line.text()) or "of 40…" in shown[-1], timeout=10000)
        assert ctl.worker.busy and ctl.cancel_action.isEnabled() and not ctl.undo_action.isEnabled()
    assert threading.get_ident() not in workers
    results = done.args[0]
    assert [r.code for r in results] == ["ok"] * 40
    mid = [t for t in shown if "of 40…" in t]
    assert mid and not mid[0].startswith("move IRQs: 40 of 40")         # seen before the batch ended
    assert all(_irqs(root)[t.id] == (0,) for t, _ in pairs)
    assert ctl.undo_action.isEnabled() and not ctl.cancel_action.isEnabled()


def test_cancel_stops_between_two_writes_and_what_was_written_stays_undoable(sno, qtbot):
    w, service, root = sno
    ctl = w.pin_controller
    before = _irqs(root)
    pairs = _pairs(root)
    got = []

    def on_result(r, done, total):
        got.append(done)
        if done == 3:
            ctl.result_line.cancel_button.click()           # the user's Cancel, in the UI thread
    ctl.worker.submit("move IRQs", lambda p: service.apply_each(pairs, origin="test", progress=p),
                      on_done=got.append, on_result=on_result)
    qtbot.waitUntil(lambda: not ctl.worker.busy, timeout=30000)    # the UI thread runs meanwhile
    results = got[-1]
    written = [r for r in results if r.changed]
    cancelled = [r for r in results if r.code == "cancelled"]
    assert len(written) >= 3 and cancelled and len(written) + len(cancelled) == len(pairs)
    assert len(written) < len(pairs) // 2               # it stopped soon after Cancel, not at the end
    after = _irqs(root)
    assert all(after[r.target.id] == (0,) for r in written)
    assert all(after[r.target.id] == before[r.target.id] for r in cancelled)
    assert len(service.journal.entries()) == len(written)     # the unwritten were never journalled
    undone = service.undo()
    assert len(undone) == len(written) and _irqs(root) == before


def test_a_newer_preview_supersedes_the_older_and_a_failing_job_says_why(sno, qtbot):
    w, service, root = sno
    ctl = w.pin_controller
    gate, seen = threading.Event(), []
    ctl.worker.submit("first", lambda p: gate.wait(10) and "old", key="k", on_done=seen.append)
    ctl.worker.submit("second", lambda p: "new", key="k", on_done=seen.append)
    gate.set()
    settle(ctl)
    assert seen == ["new"]

    def broken(_p):
        raise CoremapError("the journal cannot be written")
    ctl.run("pin", lambda s, p: broken(p))
    settle(ctl)
    assert ctl.result_line.text() == "pin: the journal cannot be written"
    ctl.worker.submit("after", lambda p: "still works", on_done=seen.append)
    settle(ctl)
    assert seen == ["new", "still works"] and not ctl.worker.busy
