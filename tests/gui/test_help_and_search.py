"""The Help menu (shortcuts read from the menus, the README, About), File → Quit, and Edit → Find
searching the grid, the IRQ table and the thread tree at once (issue 23); a long note's tooltip wraps,
and the IRQ table's columns fit its dock on a first start."""
from __future__ import annotations

import os

import pytest
from PySide6 import QtGui
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel

from app.format import format_cpus
from app.sysroot import SysRoot
from tests.machines import extract
from app.sources.live import host_of_root
from widgets.application import build_window
from widgets.main_window import wrapped_tooltip


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))

    def make(root):
        w = build_window(host_of_root(SysRoot(root)))
        thread = w.sampler_thread
        qtbot.addWidget(w)
        w.resize(1600, 1000)
        w.show()
        with qtbot.waitSignal(w.state_applied, timeout=20000):
            thread.start()
        return w
    return make


def test_help_menu_lists_every_shortcut_of_the_menus(qtbot, window):
    w = window(extract("sno"))
    menus = [a.text() for a in w.menuBar().actions()]
    assert menus[0] == "&File" and menus[-1] == "&Help"
    h = w.help_menu
    assert h.actions["quit"].shortcut().toString() == "Ctrl+Q"
    assert h.actions["find"].shortcut().toString() == "Ctrl+F"
    assert w.menuBar().actions()[0].menu().actions()[-1] is h.actions["quit"]      # last in File
    h.actions["shortcuts"].trigger()
    text = h.windows["shortcuts"].browser.toPlainText()
    for key, item in (("Ctrl+S", "File → Save Session"), ("Ctrl+Q", "File → Quit"), ("Ctrl+F", "Edit → Find…"),
                      ("Ctrl+L", "File → Back to Live"), ("Ctrl+E", "File → Export Report as HTML")):
        assert f"{key}\n{item}" in text or f"{key}\t{item}" in text, (key, item, text[:400])
    assert not h.windows["shortcuts"].isModal()
    h.actions["readme"].trigger()
    readme = h.windows["readme"].browser.toPlainText()
    assert readme.startswith("coremap") and "Quiet CPUs" in readme
    h.actions["about"].trigger()
    about = h.windows["about"].browser.toPlainText()
    assert "MIT" in about and "settings.ini" in about and os.environ["COREMAP_STATE_DIR"] in about
    h.actions["shortcuts"].trigger()                      # opened again: the same window, raised
    assert len(h.windows) == 3


def test_quit_closes_the_window(qtbot, window):
    w = window(extract("sno"))
    with qtbot.waitSignal(w.closing, timeout=5000):
        w.help_menu.actions["quit"].trigger()
    assert not w.isVisible()


def test_find_filters_both_tables_and_selects_the_cpus_of_the_matches(qtbot, window):
    w = window(extract("worker1.internal"))
    bar = w.search_bar
    w.help_menu.actions["find"].trigger()
    assert bar.isVisible() and bar.field.hasFocus() or bar.isVisible()
    bar.field.setText("eno3 TxRx-3")
    n_irqs, n_threads, cpus = bar.search_now()
    # IRQ 154 is igb eno3 TxRx-3 in this capture; the grid selects the CPUs it may or does land on.
    assert n_irqs == 1 and w.irq_table.proxy.rowCount() == 1 and n_threads == 0
    assert w.irq_table.proxy.index(0, 0).data() == "154"
    assert w.irq_table.filter_edit.text() == "eno3 TxRx-3" and w.thread_table.filter_edit.text() == "eno3 TxRx-3"
    info = w.state.irqs.info["154"]
    assert set(info.effective) | set(info.requested) <= set(cpus)
    assert w.topology_view.selected_cpus() == cpus
    assert bar.count_label.text() == f"1 IRQ · 0 threads · on CPUs {format_cpus(cpus)}"
    bar.field.setText("cpu:5")
    _, _, cpus = bar.search_now()
    assert 5 in cpus and all(5 in (w.irq_table.proxy.index(r, 0).data(Qt.ItemDataRole.UserRole + 2)[1])
                             for r in range(w.irq_table.proxy.rowCount()))
    bar.field.setText("no-such-device-anywhere")
    bar.search_now()
    assert bar.count_label.text() == "nothing matches" and w.topology_view.selected_cpus() == []
    qtbot.keyClick(bar.field, Qt.Key.Key_Escape)
    assert not bar.isVisible()
    assert w.irq_table.filter_edit.text() == "" and w.thread_table.filter_edit.text() == ""


def test_find_reaches_the_threads_on_the_live_machine(qtbot, window):
    w = window("/")
    qtbot.waitUntil(lambda: w.state.sample.tasks is not None and bool(w.thread_table.model.pids()), timeout=20000)
    me = os.getpid()
    bar = w.search_bar
    bar.open()
    bar.field.setText(str(me))
    _, n_threads, cpus = bar.search_now()
    assert n_threads >= 1 and me in w.thread_table.model.pids()
    assert w.state.sample.tasks.tasks[me].last_cpu in cpus or w.state.sample.tasks.tasks[me].last_cpu is None
    # A filter the user typed into a table since is left alone when the bar closes.
    w.thread_table.set_filter("python")
    bar.close_search()
    assert w.thread_table.filter_edit.text() == "python" and w.irq_table.filter_edit.text() == ""


def test_a_long_note_tooltip_is_rich_text_which_qt_wraps(qtbot):
    """Qt word-wraps a tooltip only when it is rich text (QTipLabel: setWordWrap(mightBeRichText)); a
    plain note was one line as wide as its text, past the screen's edge. (Shown for real, an offscreen
    tooltip warns that the platform cannot raise it, so its label is measured as QTipLabel lays it out.)"""
    note = "19 IRQs: their affinities are read every 17 s <and> " + "this note goes on and on " * 20
    tip = wrapped_tooltip([note, "a second note"])
    assert QtGui.Qt.mightBeRichText(tip) and not QtGui.Qt.mightBeRichText(note)
    screen = QApplication.primaryScreen().availableGeometry()
    for text, wraps in ((tip, True), (note, False)):
        label = QLabel(text)
        label.setWordWrap(QtGui.Qt.mightBeRichText(text))
        qtbot.addWidget(label)
        assert (label.sizeHint().width() < screen.width() / 2) == wraps
    label = QLabel(tip)
    assert "&lt;and&gt;" in tip and "<and>" in label.text().replace("&lt;", "<").replace("&gt;", ">")


def test_the_irq_node_column_fits_the_dock_on_a_first_start(qtbot, window):
    w = window(extract("master.internal"))
    view = w.irq_table.view
    header = view.horizontalHeader()
    last = header.count() - 1
    assert header.model().headerData(last, Qt.Orientation.Horizontal) == "Node"

    def fits() -> bool:
        return header.sectionViewportPosition(last) + header.sectionSizeHint(last) <= view.viewport().width()
    qtbot.waitUntil(fits, timeout=5000)
    # Narrowed to make room: the device column, and no further than its floor.
    assert header.sectionSize(1) >= 14 * view.fontMetrics().horizontalAdvance("0")
