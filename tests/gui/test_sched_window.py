"""Set scheduling… from the thread tree's context menu, driven by events, on a real child process: the
dialog's line is the pin flow's dry run, "Set" writes through the one pin flow (journalled), the tree's
Policy column shows it, and Edit → Undo puts SCHED_OTHER back. The kind filter keeps the usual targets
of a priority change (ksoftirqd here, which every Linux has) and nothing else."""
from __future__ import annotations

import os

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication

from app.parse.task_stat import parse_task_stat
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.processes import started
from widgets.application import build_window
from widgets.tables.thread_cells import COL_POLICY
from widgets.tables.threads import KIND_ROLE

# A menu popping up asks the platform to raise it and grab the keyboard, which the offscreen one cannot.
pytestmark = pytest.mark.qt_log_ignore(r"^This plugin does not support (raise\(\)|grabbing the keyboard)")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a real-time policy needs root (CAP_SYS_NICE)")


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def child():
    p = started(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


class _Forwarder:
    """The window's sampler thread as far as a batch's end uses it: which processes to read afresh."""

    def __init__(self, sampler):
        self.sampler = sampler

    def forget_threads(self, pids=None):
        self.sampler.forget_threads(pids)

    def sample_now(self):
        pass

    def track(self, tids, pids):
        pass


def _window(qtbot):
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    sampler = Sampler(SysRoot("/"))
    assert w.set_state(sampler.tick())
    return w, sampler


def _stat(pid: int):
    with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
        return parse_task_stat(f.read())


def _context_menu_action(qtbot, view, text: str):
    """Right-click the selected row (a context-menu event at its place, as the window system sends one)
    and click `text` in the menu that pops up."""
    idx = view.selectionModel().selectedRows(0)[0]
    pos = view.visualRect(idx).center()
    QApplication.sendEvent(view.viewport(), QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos,
                                                              view.viewport().mapToGlobal(pos)))
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is not None, timeout=2000)
    menu = QApplication.activePopupWidget()
    [act] = [a for a in menu.actions() if a.text() == text]
    assert act.isEnabled()
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(act).center())


@ROOT_ONLY
@pytest.mark.usefixtures("live_machine")
def test_set_scheduling_from_the_context_menu_and_undo(qtbot, tmp_path, child):
    w, sampler = _window(qtbot)
    journal = Journal(tmp_path / "journal.jsonl")
    show_pins(w, AffinityService(SysRoot("/"), journal))
    real, w.sampler_thread = w.sampler_thread, _Forwarder(sampler)  # a sleeping process's read is reused unless forgotten
    try:
        _set_fifo_80_and_undo(qtbot, w, sampler, child, journal)
    finally:
        w.sampler_thread = real


def _set_fifo_80_and_undo(qtbot, w, sampler, child, journal):
    table = w.thread_table
    assert table.select_thread(child, child)
    _context_menu_action(qtbot, table.view, "Set scheduling…")
    d = w.pin_controller.scheduling.dialog
    assert d is not None and d.isVisible()
    assert d.target_label.text() == f"Scheduling of thread {child}:"
    assert d.policy_combo.currentText() == "SCHED_OTHER" and not d.priority_spin.isEnabled()
    d.policy_combo.setFocus()
    for _ in range(3):                                      # other, batch, idle, fifo
        qtbot.keyClick(d.policy_combo, Qt.Key.Key_Down)
    assert d.policy_combo.currentText() == "SCHED_FIFO" and d.priority_spin.isEnabled()
    qtbot.keyClick(d.priority_spin, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)     # select all
    qtbot.keyClicks(d.priority_spin, "80")
    assert d.value() == (os.SCHED_FIFO, 80)
    assert d.preview_label.text() == f"thread {child} (sleep) scheduling: other -> fifo 80 would be written"
    assert d.ok_button.isEnabled() and _stat(child).policy == os.SCHED_OTHER      # previewed, not written
    qtbot.mouseClick(d.ok_button, Qt.MouseButton.LeftButton)
    settle(w)
    s = _stat(child)
    assert (s.policy, s.rt_priority) == (os.SCHED_FIFO, 80)
    line = w.pin_controller.result_line.text()
    assert line.endswith("scheduling: other -> fifo 80 ok") and line.count("scheduling") == 1, line
    [e] = journal.entries()
    assert (e.kind, e.target_id, e.before, e.requested, e.origin, e.state) == (
        "sched", child, (0, 0), (1, 80), "window", "done")
    top = w.pin_controller.journal_widget.row_texts()[0]                     # the Pins dock, newest first
    assert top[2:4] == (f"thread {child} (sleep) scheduling", "other -> fifo 80"), top
    assert w.set_state(sampler.tick())
    cell = table.model.thread_index(child, child, COL_POLICY)
    assert cell.data() == "fifo 80" and "RT priority 80" in cell.data(Qt.ItemDataRole.ToolTipRole)
    assert w.pin_controller.undo_action.isEnabled()
    w.pin_controller.undo_action.trigger()
    settle(w)
    s = _stat(child)
    assert (s.policy, s.rt_priority) == (os.SCHED_OTHER, 0)
    assert os.sched_getscheduler(child) == os.SCHED_OTHER and os.sched_getparam(child).sched_priority == 0
    journal.close()


@pytest.mark.usefixtures("live_machine")
def test_the_dialog_says_why_not_in_its_line_and_set_stays_off(qtbot, tmp_path):
    """The CPU's stopper thread (migration/0) refuses any policy: the dry run says so before a click."""
    stopper = next((int(p) for p in os.listdir("/proc") if p.isdigit() and _comm(p) == "migration/0"), None)
    if stopper is None:
        pytest.skip("no migration/0 kernel thread: a kernel without a stopper per CPU (uniprocessor)")
    w, _ = _window(qtbot)
    show_pins(w, AffinityService(SysRoot("/"), Journal(tmp_path / "journal.jsonl")))
    assert w.thread_table.select_thread(stopper, stopper)
    _context_menu_action(qtbot, w.thread_table.view, "Set scheduling…")
    d = w.pin_controller.scheduling.dialog
    d.policy_combo.setFocus()
    qtbot.keyClick(d.policy_combo, Qt.Key.Key_End)                         # SCHED_RR
    assert d.policy_combo.currentText() == "SCHED_RR"
    assert not d.ok_button.isEnabled()
    assert d.preview_label.text() == (f"kernel thread {stopper} (migration/0) is its CPU's stopper, which refuses any "
                                      "policy change; leave it as it is")
    d.close()


def _comm(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


@pytest.mark.usefixtures("live_machine")
def test_the_kind_filter_keeps_the_softirq_daemons_only(qtbot):
    w, _ = _window(qtbot)
    table = w.thread_table
    everything = set(table.shown_threads())
    table.kind_combo.setFocus()
    qtbot.keyClicks(table.kind_combo, "Softirq")                          # the combo's keyboard search
    assert table.kind_combo.currentData() == "softirq"
    shown = table.shown_threads()
    comms = {tid: _comm(str(tid)) for tid in shown}
    assert shown and all(c.startswith("ksoftirqd/") for c in comms.values()), comms
    assert len(shown) < len(everything)
    assert all(table.model.thread_index(t, t).data(KIND_ROLE) == "softirq" for t in shown)
    assert table.count_label.text().startswith(f"{len(shown):,} of ")
    # With a name too, both must hold: nothing is called "sleep" among the softirq daemons.
    qtbot.keyClicks(table.filter_edit, "sleep")
    assert table.shown_threads() == []
    assert table.count_label.text().startswith("No thread or process matches “sleep” among the softirq daemons")
    table.set_kind(None)
    table.filter_edit.clear()
    assert set(table.shown_threads()) == everything
