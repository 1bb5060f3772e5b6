"""File → Compare with… (issue 30, "Diff"): driven from the menu bar and the file chooser with the mouse
and keyboard, the window's machine compared with a capture in the Compare dock, the grid marking the
CPUs whose IRQs differ; what cannot be compared said on the status line, the window left as it was."""
from __future__ import annotations

import os
import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QFileDialog, QLineEdit

from app.store.diff import diff_roots
from app.sysroot import SysRoot
from tests.machines import extract
from app.sources.live import host_of_root
from widgets.application import build_window

# The menu bar and the file chooser pop up: what the offscreen platform says of that is expected.
pytestmark = pytest.mark.qt_log_ignore(
    r"^This plugin does not support (raise\(\)|grabbing the keyboard|propagateSizeHints\(\))")


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    w = build_window(host_of_root(SysRoot(extract("worker2.internal"))))
    thread = w.sampler_thread
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    with qtbot.waitSignal(w.state_applied, timeout=20000):
        thread.start()
    yield w
    w.close()


def _choose(qtbot, w, action_key: str, path: str) -> None:
    """Open File, click the action, type `path` into the chooser and press Enter."""
    bar = w.menuBar()
    file_action = bar.actions()[0]
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(file_action).center())
    menu = file_action.menu()
    qtbot.waitUntil(menu.isVisible, timeout=5000)
    action = w.compare_controller.actions[action_key]
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: w.findChild(QFileDialog, "compare-file-dialog") is not None
                    and w.findChild(QFileDialog, "compare-file-dialog").isVisible(), timeout=5000)
    dialog = w.findChild(QFileDialog, "compare-file-dialog")
    edit = dialog.findChild(QLineEdit, "fileNameEdit")
    edit.setFocus()
    # Set whole, then Enter: typed a key at a time, the chooser's completer pops up over the line and
    # takes the keys that follow (offscreen, no window manager to give them back).
    edit.setText(path)
    QTest.keyClick(edit, Qt.Key.Key_Return)


def test_compare_with_a_capture_folder_fills_the_dock_and_marks_the_grid(qtbot, window):
    w = window
    other = extract("worker1.internal")
    with qtbot.waitSignal(w.compare_controller.diff_shown, timeout=30000) as shown:
        _choose(qtbot, w, "compare_folder", str(other))
    d = shown.args[0]
    assert w.compare_controller.dock.isVisible()
    groups = w.compare_controller.view.group_lines()
    cmd = next(lines for head, lines in groups.items() if head.startswith("Command line:"))
    assert "isolcpus: absent -> managed_irq,0-4,11-79" in cmd        # A is worker2, B worker1
    # The grid marks the CPUs the comparison found, and says how on each.
    expected = diff_roots(SysRoot(extract("worker2.internal")), "a", SysRoot(other), "b").cpus
    view = w.topology_view
    assert view.compared_cpus == tuple(sorted(c for c in expected if c in view.cells())) == tuple(range(32))
    assert "compared: IRQ placement differs" in view.tooltip_for(0)
    assert str(other.name) in w.statusBar().currentMessage() and "CPUs marked on the grid: 0-31" in \
        w.statusBar().currentMessage()
    assert d.b == other.name
    assert w.legend.compared and ("diff", "IRQs differ (compared)") in w.legend._keys()
    # Cleared with its button: no marks, the dock hidden.
    qtbot.mouseClick(w.compare_controller.view.clear_button, Qt.MouseButton.LeftButton)
    assert view.compared_cpus == () and not w.compare_controller.dock.isVisible() and not w.legend.compared


def test_what_cannot_be_compared_is_said_on_the_status_line(qtbot, window, tmp_path):
    w = window
    notes = tmp_path / "notes.txt"
    notes.write_text("not a capture\n")
    _choose(qtbot, w, "compare", str(notes))
    qtbot.waitUntil(lambda: "not a folder, a tarball or a session" in w.statusBar().currentMessage(), timeout=10000)
    assert str(notes) in w.statusBar().currentMessage()
    assert not w.compare_controller.dock.isVisible() and w.topology_view.compared_cpus == ()


def test_a_capture_shown_compares_with_this_machine(qtbot, window):
    w = window
    bar = w.menuBar()
    file_action = bar.actions()[0]
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(file_action).center())
    menu = file_action.menu()
    qtbot.waitUntil(menu.isVisible, timeout=5000)
    action = w.compare_controller.actions["compare_live"]
    assert action.isEnabled()                   # the window shows a capture, not this machine
    with qtbot.waitSignal(w.compare_controller.diff_shown, timeout=30000) as shown:
        QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    d = shown.args[0]
    assert d.b.endswith("(this machine)")
    topo = {c.what: c for c in next(g for g in d.groups if g.name == "Topology").changes}
    cpus = [c for c in os.listdir("/sys/devices/system/cpu") if re.fullmatch(r"cpu[0-9]+", c)]
    assert (topo["CPUs"].a, topo["CPUs"].b) == ("32", str(len(cpus)))
