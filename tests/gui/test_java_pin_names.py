"""A Java thread pinned from the window is named by its full Java name (issue 28, item 2): the drag
from the thread tree carries the name the sampler read, so the journal's label, the result line, the
Pins dock and `coremap report` say "market-data-feed-handler-0", never the kernel's "market-data-fee"
alone; and the pin is journalled with the follow rule `coremap pin --java` journals (the guard pins a
new thread of that name in the same JVM). The CPU panel and the residency plot name it so too.

A real JVM (tests/jvms.py MarketData: two threads whose 26-byte names share the comm "market-data-fee";
each tid read by the thread itself), the real window offscreen fed by its own Sampler, the row chosen
with a mouse click, the drag's own MIME data dropped with QDragEnter/Move/Drop events, and Pin to… typed
with the keyboard. The pins are undone with Edit → Undo and checked in /proc.
"""
from __future__ import annotations

import os
import re

import pytest
from PySide6.QtCore import Qt

from app.cli.main import main
from app.parse.cpulist import format_cpulist
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sampling.sampler import Sampler
from app.store.folders import journal_path
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.gui.test_pin_dialog import _ctrl_p, _type
from tests.gui.test_pinning import _drag_drop
from tests.jvms import COMM, HANDLER, MarketData, needs_jdk, wait_until
from widgets.application import build_window
from widgets.cpu_details import cpu_threads
from widgets.pinning.drag import pin_drag
from widgets.tables.thread_cells import COL_NAME

pytestmark = [pytest.mark.qt_log_level_fail("WARNING"), needs_jdk]
CPUS = tuple(sorted(os.sched_getaffinity(0)))


def _alone(text: str) -> list[str]:
    """Where the cut name stands in `text` other than as the start of a full name."""
    return re.findall(re.escape(COMM) + r"(?!d-handler)", text)


def _aff(tid: int) -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(tid)))


@pytest.fixture
def jvm(live_machine):
    m = MarketData()
    before = _aff(m.tid(HANDLER))
    yield m
    try:
        if m.alive() and _aff(m.tid(HANDLER)) != before:
            os.sched_setaffinity(m.tid(HANDLER), before)
    finally:
        m.stop()


@pytest.fixture
def window(qtbot, tmp_path, jvm, monkeypatch):
    """The window fed by its own Sampler until the JVM's full names are in its state, pinning through a
    service whose journal is the test's own (the one `coremap report` reads, in this test's folder)."""
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    sampler = Sampler(SysRoot("/"))

    def named():
        state = sampler.tick()
        w.set_state(state)
        return state.thread_names.full_name(jvm.pid, jvm.tid(HANDLER), COMM)
    wait_until(named, 30, "the JVM's full names in the window's state")
    w.topology_view.zoom_fit()
    journal = Journal(journal_path())
    service = AffinityService(SysRoot("/"), journal)
    show_pins(w, service)
    yield w, service
    journal.close()


def _click_thread(qtbot, table, pid: int, tid: int) -> None:
    """Select the thread's row as a user does: a left click on its name."""
    table.set_filter(HANDLER)
    idx = table.proxy.mapFromSource(table.model.thread_index(pid, tid))
    assert idx.isValid()
    table.view.expand(idx.parent())
    table.view.scrollTo(idx)
    qtbot.mouseClick(table.view.viewport(), Qt.MouseButton.LeftButton, pos=table.view.visualRect(idx).center())
    assert [i.data() for i in table.view.selectionModel().selectedRows(0)] == [f"{HANDLER} ({COMM})"]


def _named_everywhere(w, service, tid: int, before, want, origin: str) -> None:
    line = w.pin_controller.result_line.text()
    assert line == f"thread {tid} ({HANDLER}): {format_cpulist(before)} -> {format_cpulist(want)} ok"
    e = service.journal.entries()[-1]
    assert (e.target_id, e.label, e.origin, e.state) == (tid, HANDLER, origin, "done")
    dock = w.pin_controller.journal_widget
    top = dock.row_texts()[0]
    assert top[2] == f"thread {tid} ({HANDLER})"
    # shown whole: its end ("-0") is what tells it from its comm twin
    assert dock.tree.columnWidth(2) >= dock.tree.fontMetrics().horizontalAdvance(top[2])
    assert dock.model.index(0, 2).data(Qt.ItemDataRole.ToolTipRole) == top[2]
    rows = "\n".join(" ".join(r) for r in dock.row_texts())
    assert not _alone(line) and not _alone(rows), (line, rows)


@pytest.mark.skipif(len(CPUS) < 2, reason="pinning needs 2 CPUs to move between")
def test_a_java_thread_dropped_from_the_tree_is_journalled_and_shown_by_its_full_name(window, jvm, qtbot, tmp_path):
    w, service = window
    tid, one = jvm.tid(HANDLER), CPUS[-1]
    before = _aff(tid)
    table = w.thread_table
    _click_thread(qtbot, table, jvm.pid, tid)
    drag = pin_drag(table.view, COL_NAME)           # what the view's startDrag hands to QDrag
    req = _drag_drop(qtbot, w.topology_view, w.topology_view.cell_item(one), drag.mimeData(), w)
    assert [(t.id, t.pid, t.label) for t in req.targets] == [(tid, jvm.pid, HANDLER)]
    assert req.java_name == HANDLER
    assert _aff(tid) == (one,)
    _named_everywhere(w, service, tid, before, (one,), "drop")
    # Pinned by its Java name, as `coremap pin --java` pins: the guard follows the name in that JVM.
    [rule] = service.journal.follow_rules()
    assert (rule.pid, rule.name, rule.cpus) == (jvm.pid, HANDLER, (one,))
    # The report's "Pins made" reads the journal's label.
    out = tmp_path / "report.html"
    assert main(["report", "--out", str(out), "--since", "0"]) == 0
    html = out.read_text()
    assert f"thread {tid} ({HANDLER})" in html and not _alone(html)
    w.pin_controller.undo_action.trigger()
    settle(w)
    assert _aff(tid) == before
    assert w.pin_controller.result_line.text() == f"undo: thread {tid} ({HANDLER}): {one} -> {format_cpulist(before)} ok"


def test_the_cpu_panel_and_the_residency_plot_name_it_by_its_full_name(window, jvm, qtbot):
    w, _ = window
    tid = jvm.tid(HANDLER)
    _click_thread(qtbot, w.thread_table, jvm.pid, tid)
    task = w.state.sample.tasks.tasks[tid]
    [landing] = [x for x in cpu_threads(w.state, task.last_cpu) if x.key == str(tid)]
    assert landing.label == HANDLER
    plot = w.residency_plot
    drawn = plot.label(tid)             # drawn once its trail has a sample; till then the hint names it
    assert drawn == f"{HANDLER} ({tid})" if drawn is not None else f"{HANDLER} ({tid})" in plot.hint.text(), \
        plot.hint.text()


@pytest.mark.skipif(len(CPUS) < 2, reason="pinning needs 2 CPUs to move between")
def test_pin_to_from_the_keyboard_names_the_java_thread_the_same_way(window, jvm, qtbot):
    w, service = window
    tid, one = jvm.tid(HANDLER), CPUS[0]
    before = _aff(tid)
    table = w.thread_table
    _click_thread(qtbot, table, jvm.pid, tid)
    _ctrl_p(qtbot, w, table.view)
    d = w.pin_controller.sources.dialog
    assert d is not None and d.isVisible()
    _type(qtbot, d, str(one))
    qtbot.mouseClick(d.ok_button, Qt.MouseButton.LeftButton)
    settle(w)
    assert _aff(tid) == (one,)
    _named_everywhere(w, service, tid, before, (one,), "dialog")
    w.pin_controller.undo_action.trigger()
    settle(w)
    assert _aff(tid) == before
