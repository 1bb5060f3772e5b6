"""The gestures a desktop user tries first (issue 28, item 7): a right-click on the grid's CPUs opens
their context menu and never clears the selection, each item doing what its menu elsewhere does;
quitting with unsaved probe runs keeps them in a session and says where; the thread tree shows what
coremap's own batch did at the next tick; Find counts the rows the tree shows.

Real QTest mouse and key events on the real window: on a writable copy of "sno" (openshift-nto, 12
CPUs) for the menu, on this machine for the rest."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.format import format_cpus
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sampling.sampler import Sampler
from app.store.session import open_session
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.live import live_test, restore_quiet
from tests.machines import copy_machine, writable_test_tree
from app.sources.live import host_of_root
from widgets.application import build_window
from widgets.tables.thread_cells import COL_ALLOWED

# A menu popping up asks the platform to raise it and grab the keyboard, which the offscreen one cannot.
pytestmark = pytest.mark.qt_log_ignore(r"^This plugin does not support (raise\(\)|grabbing the keyboard)")


def _cell_point(view, cpu: int) -> QPoint:
    return view.mapFromScene(view.cell_item(cpu).sceneBoundingRect().center())


def _right_click(view, cpu: int | None, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    at = _cell_point(view, cpu) if cpu is not None else QPoint(2, 2)
    QTest.mouseClick(view.viewport(), Qt.MouseButton.RightButton, modifier, at)


def _click(view, cpu: int, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, modifier, _cell_point(view, cpu))


def _choose(qtbot, menu, action) -> None:
    """Click `action` in the open `menu`, as a user does."""
    qtbot.waitUntil(menu.isVisible, timeout=2000)
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     menu.actionGeometry(action).center())


@pytest.fixture
def sno(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    root = SysRoot(writable_test_tree(dst))
    sampler = Sampler(root)
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    assert w.set_state(sampler.tick())
    journal = Journal(tmp_path / "journal.jsonl")
    show_pins(w, AffinityService(root, journal))
    assert w.set_state(sampler.tick())
    yield w
    journal.close()


def test_right_click_opens_the_cpu_menu_and_keeps_the_selection(sno, qtbot):
    w = sno
    view, menu = w.topology_view, w.cpu_menu
    _right_click(view, 1)
    assert view.selected_cpus() == [1]                   # an unselected CPU: selected, with no left-click first
    qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
    texts = [a.text() for a in menu.menu.actions() if not a.isSeparator()]
    assert texts == ["Make quiet…", "Give back…", "Pin the selected thread here", "Run a probe here",
                     "Copy the CPU list"]
    a = menu.actions
    # CPU 1 is not quiet, and no thread is selected in the tree: those items are disabled, and the
    # status line says why.
    assert a["quiet"].isEnabled() and not a["give_back"].isEnabled() and not a["pin"].isEnabled()
    assert w.statusBar().currentMessage() == ("Give back…: CPU 1 is not quiet; Pin the selected thread here: "
                                              "select a thread or process in the Threads table first")
    _choose(qtbot, menu.menu, a["copy"])
    assert QGuiApplication.clipboard().text() == "1"
    assert not menu.menu.isVisible()
    # The reasons go with the menu: left on the status line they hid what the chosen item did.
    assert w.statusBar().currentMessage() == "copied 1 to the clipboard"
    _right_click(view, 1)
    qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
    assert "CPU 1 is not quiet" in w.statusBar().currentMessage()
    menu.menu.hide()
    assert w.statusBar().currentMessage() == ""

    # A selection of several CPUs: a right-click on one of them keeps them all, Ctrl+right-click on
    # another adds it, a right-click on the margin or an offline spot changes nothing.
    _click(view, 4, Qt.KeyboardModifier.ControlModifier)
    assert view.selected_cpus() == [1, 4]
    _right_click(view, 4)
    qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
    assert view.selected_cpus() == [1, 4] and menu.cpus == (1, 4)
    _choose(qtbot, menu.menu, a["copy"])
    assert QGuiApplication.clipboard().text() == "1,4"
    _right_click(view, 5, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
    assert view.selected_cpus() == [1, 4, 5]
    menu.menu.hide()
    _right_click(view, None)            # the margin: the menu of the selection, left as it was
    qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
    assert view.selected_cpus() == [1, 4, 5] and menu.cpus == (1, 4, 5)
    menu.menu.hide()
    # A CPU outside the selection: it alone is selected, as a file manager does.
    _right_click(view, 7)
    qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
    assert view.selected_cpus() == [7]
    menu.menu.hide()


def test_make_quiet_and_give_back_from_the_menu_preview_the_right_clicked_cpu(sno, qtbot):
    w = sno
    view, menu = w.topology_view, w.cpu_menu
    assert view.selected_cpus() == []
    _right_click(view, 2)
    with qtbot.waitSignal(w.quiet_controller.preview_shown, timeout=60000) as shown:
        _choose(qtbot, menu.menu, menu.actions["quiet"])
    dialog = shown.args[0]
    assert dialog.preview.action == "isolate" and tuple(dialog.preview.cpus) == (2,)
    assert view.selected_cpus() == [2]
    dialog.accept()
    settle(w)
    assert view.quiet_cpus == (2,)
    # Quiet now: the menu offers Give back… and says why not Make quiet…; Give back previews CPU 2.
    view.select_cpus([])
    _right_click(view, 2)
    qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
    assert not menu.actions["quiet"].isEnabled() and menu.actions["give_back"].isEnabled()
    assert w.statusBar().currentMessage().startswith("Make quiet…: CPU 2 is quiet already")
    with qtbot.waitSignal(w.quiet_controller.preview_shown, timeout=60000) as shown:
        _choose(qtbot, menu.menu, menu.actions["give_back"])
    dialog = shown.args[0]
    assert dialog.preview.action == "include" and tuple(dialog.preview.cpus) == (2,)
    dialog.accept()
    settle(w)
    assert view.quiet_cpus == ()


def test_run_a_probe_here_sets_the_probe_panel(sno, qtbot):
    w = sno
    view, menu = w.topology_view, w.cpu_menu
    _click(view, 3)
    _click(view, 5, Qt.KeyboardModifier.ControlModifier)
    _right_click(view, 5)
    _choose(qtbot, menu.menu, menu.actions["probe"])
    assert w.probe_panel.cpus() == (3, 5)
    assert w.probe_dock.isVisible()
    # (A capture cannot be probed from here: the panel's Run is disabled, so the focus stays put.)
    assert not w.probe_panel.run_button.isEnabled()
    assert view.selected_cpus() == [3, 5]


# -- on this machine -----------------------------------------------------------------------------------------
@pytest.fixture
def live_window(qtbot, tmp_path, monkeypatch):
    """The window as `coremap` builds it, sampling this machine every `interval` seconds."""
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))
    made = []

    def make(interval: float = 1.0):
        w = build_window(host_of_root(SysRoot("/"), interval=interval), interval=interval)
        thread = w.sampler_thread
        qtbot.addWidget(w)
        w.resize(1600, 1000)
        w.show()
        qtbot.waitExposed(w)
        with qtbot.waitSignal(w.state_applied, timeout=20000):
            thread.start()
        made.append(w)
        return w
    yield make
    for w in made:
        if w.sampler_thread is not None:
            w.sampler_thread.stop()


def _sleeper(name: str) -> subprocess.Popen:
    """A sleeping process whose command line is `name 300` (its comm stays "sleep")."""
    return subprocess.Popen([name, "300"], executable=shutil.which("sleep"))


def _shown_threads(view) -> int:
    """Thread rows the tree shows: the rows under each expanded process; a process shown without its
    threads stands for its one thread."""
    model, n = view.model(), 0
    for r in range(model.rowCount()):
        process = model.index(r, 0)
        children = model.rowCount(process)
        n += children if children and view.isExpanded(process) else 0 if children else 1
    return n


def test_find_counts_the_threads_the_tree_shows_as_it_changes(qtbot, live_window):
    """The bar said "2 threads" while the tree showed one: the other had exited since the search (the
    program that typed the name held it in its command line)."""
    word = f"coremap-find-{os.getpid()}"
    typist, kept = _sleeper(f"{word}-typist"), _sleeper(f"{word}-kept")
    try:
        w = live_window(0.5)
        qtbot.waitUntil(lambda: {typist.pid, kept.pid} <= set(w.thread_table.model.pids()), timeout=20000)
        w.activateWindow()
        QTest.keyClick(w, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
        bar = w.search_bar
        qtbot.waitUntil(bar.isVisible, timeout=2000)
        QTest.keyClicks(bar.field, word)
        view = w.thread_table.view
        qtbot.waitUntil(lambda: "2 threads" in bar.count_label.text(), timeout=5000)
        assert _shown_threads(view) == 2 and w.thread_table.count_label.text().startswith("2 of ")
        typist.kill()
        typist.wait()
        qtbot.waitUntil(lambda: typist.pid not in w.thread_table.model.pids(), timeout=10000)
        qtbot.waitUntil(lambda: "1 thread " in bar.count_label.text() + " ", timeout=2000)
        assert _shown_threads(view) == 1 and bar.field.text() == word
        assert w.thread_table.count_label.text().startswith("1 of ")     # the tree's own line agrees
    finally:
        for p in (typist, kept):
            p.kill()
            p.wait()


@pytest.mark.usefixtures("live_machine")
def test_quitting_with_an_unsaved_run_saves_it_and_says_where(qtbot, live_window, tmp_path, monkeypatch, capfd):
    w = live_window()
    panel = w.probe_panel
    panel.set_cpus([0])
    panel.form.seconds_spin.setValue(0.3)
    assert panel.run(), panel.status_text
    qtbot.waitUntil(lambda: not panel.busy, timeout=30000)
    (run,) = [r for r in panel.runs if r.finished]
    w.activateWindow()
    # A reports folder that cannot be made: the first Ctrl+Q is refused, saying why and what to do.
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "a-file" / "reports"))
    QTest.keyClick(w, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert w.isVisible()
    line = w.statusBar().currentMessage()
    assert line.startswith("1 unsaved probe run could not be saved on quit") and "quit again" in line, line
    # The folder is there now: the next Ctrl+Q saves the run as a session, says where, and closes.
    reports = tmp_path / "reports"
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(reports))
    with qtbot.waitSignal(w.closing, timeout=30000):
        QTest.keyClick(w, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert not w.isVisible()
    (saved,) = reports.glob("*.coremap")
    err = capfd.readouterr().err
    assert f"coremap: 1 unsaved probe run saved to {saved}" in err
    assert w.statusBar().currentMessage().startswith(f"1 unsaved probe run saved to {saved}")
    from probes.results import check_result
    session = open_session(saved, check_result)
    try:
        assert [(p.result["probe"], p.result["cpu"], p.result["iterations"]) for p in session.probes] == \
            [("jitter", 0, run.summary["iterations"])]
    finally:
        session.close()


def test_quitting_with_every_run_saved_writes_nothing(qtbot, live_window, tmp_path):
    w = live_window()
    w.session_controller.save_session_to_reports()        # nothing to keep: no run at all
    with qtbot.waitSignal(w.closing, timeout=10000):
        w.help_menu.actions["quit"].trigger()
    assert len(list((tmp_path / "reports").glob("*.coremap"))) == 1


def _allowed_shown(w, pid: int) -> str | None:
    return w.thread_table.model.thread_index(pid, pid, COL_ALLOWED).data()


@live_test
def test_the_tree_shows_what_make_quiet_and_give_back_moved_at_the_next_tick(qtbot, live_window, tmp_path):
    """A sleeping process's affinity is read again only every 15-30 s (app/machine/threads.py), and
    the isolate's moves into /coremap-system were not among those the window asked to read at once:
    the tree showed the old "0-1" for ~20 s after Make quiet (issue 28)."""
    sleeper = _sleeper("coremap-quiet-me")
    interval = 3.0
    w = live_window(interval)
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(SysRoot("/"), journal)
    show_pins(w, service)
    try:
        qtbot.waitUntil(lambda: _allowed_shown(w, sleeper.pid) == "0-1", timeout=20000)
        for action, want in (("isolate", "0"), ("include", "0-1")):
            w.topology_view.select_cpus([1])
            with qtbot.waitSignal(w.quiet_controller.preview_shown, timeout=60000) as shown:
                getattr(w.quiet_controller, f"open_{action}")()
            with qtbot.waitSignal(w.pin_controller.results_shown, timeout=60000):
                shown.args[0].accept()
            done = time.monotonic()
            assert format_cpus(os.sched_getaffinity(sleeper.pid)) == want
            qtbot.waitUntil(lambda: _allowed_shown(w, sleeper.pid) == want, timeout=interval * 1000)
            # At once, not at the next tick of the interval, let alone the next check of the sleeper.
            assert time.monotonic() - done < interval / 2, (action, time.monotonic() - done)
    finally:
        restore_quiet(service)
        journal.close()
        sleeper.kill()
        sleeper.wait()


@live_test
def test_pin_the_selected_thread_here_from_the_menu(qtbot, live_window, tmp_path):
    """Select a thread's row with the mouse, right-click CPU 1, Pin the selected thread here: the
    thread's mask in /proc is CPU 1, and the tree says so at the next tick."""
    sleeper = _sleeper("coremap-pin-me")
    w = live_window(3.0)
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(SysRoot("/"), journal)
    show_pins(w, service)
    try:
        table = w.thread_table
        qtbot.waitUntil(lambda: table.model.thread_index(sleeper.pid, sleeper.pid).isValid(), timeout=20000)
        table.set_filter("coremap-pin-me")
        index = table.proxy.mapFromSource(table.model.thread_index(sleeper.pid, sleeper.pid))
        table.view.scrollTo(index)
        QTest.mouseClick(table.view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         table.view.visualRect(index).center())
        assert table.selected() == ([], [sleeper.pid]) or table.selected() == ([sleeper.pid], [])
        view, menu = w.topology_view, w.cpu_menu
        _right_click(view, 1)
        qtbot.waitUntil(menu.menu.isVisible, timeout=2000)
        assert menu.actions["pin"].isEnabled(), w.statusBar().currentMessage()
        with qtbot.waitSignal(w.pin_controller.results_shown, timeout=30000):
            _choose(qtbot, menu.menu, menu.actions["pin"])
        done = time.monotonic()
        assert os.sched_getaffinity(sleeper.pid) == {1}
        qtbot.waitUntil(lambda: _allowed_shown(w, sleeper.pid) == "1", timeout=3000)
        assert time.monotonic() - done < 1.5
    finally:
        restore_quiet(service)
        journal.close()
        sleeper.kill()
        sleeper.wait()
