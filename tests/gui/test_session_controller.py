"""File menu of the window: screenshots and reports into the reports folder, sessions saved and
reopened with the same figures, a corrupt session refused on the status line with nothing changed;
autosave per window, a crashed window's offered once (never a running one's), and back to live."""
import json
import zipfile
from pathlib import Path

import pytest

from app.sysroot import SysRoot
from tests.machines import extract
from app.sources.live import host_of_root
from widgets.application import build_window


@pytest.fixture
def reports(tmp_path, monkeypatch):
    d = tmp_path / "reports"
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(d))
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    return d


def _window(qtbot, root, crash_recovery=False):
    w = build_window(host_of_root(SysRoot(root)), crash_recovery=crash_recovery)
    thread = w.sampler_thread
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    with qtbot.waitSignal(w.state_applied, timeout=20000):
        thread.start()
    return w


def test_menu_shortcuts(qtbot, reports):
    w = _window(qtbot, extract("sno"))
    acts = w.session_controller.actions
    assert acts["save_session"].shortcut().toString() == "Ctrl+S"
    assert acts["open_session"].shortcut().toString() == "Ctrl+O"
    assert acts["screenshot_window"].shortcut().toString() == "Ctrl+Shift+S"
    assert acts["report_html"].shortcut().toString() == "Ctrl+E"
    assert w.menuBar().actions()[0].text() == "&File"
    w.close()


def test_screenshots_go_to_the_reports_folder_with_host_and_time(qtbot, reports):
    w = _window(qtbot, extract("sno"))
    sc = w.session_controller
    png = sc.screenshot("window", "png")
    svg = sc.screenshot("grid", "svg")
    again = sc.screenshot("window", "png")
    assert png.parent == reports and png.read_bytes().startswith(b"\x89PNG")
    assert "sno" in png.name and png.name.endswith("-window.png")
    assert again != png                      # a second shot in the same minute does not overwrite
    assert b"<svg" in svg.read_bytes()[:400]
    assert str(again) in w.statusBar().currentMessage()
    assert set(sc.screenshots) == {png.name, svg.name, again.name}
    w.close()


def test_save_and_reopen_session_shows_the_same_machine(qtbot, reports):
    w = _window(qtbot, extract("sno"))
    sc = w.session_controller
    sc.notes = "NIC queues on CPU 3"
    before = w.state.topology
    path = sc.save_session_to_reports()
    assert path.suffix == ".coremap" and zipfile.is_zipfile(path)
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["format"] == 1 and any(n.startswith("machine/") for n in manifest["contents"])
    w.close()

    w2 = _window(qtbot, extract("worker2.internal"))
    with qtbot.waitSignal(w2.state_applied, timeout=20000):
        s = w2.session_controller.open_session(path)
    assert s.notes == "NIC queues on CPU 3"
    after = w2.state.topology
    assert after.online == before.online and len(after.cores) == len(before.cores)
    assert not w2.state.live
    assert "read-only" in w2.statusBar().currentMessage()
    w2.close()


def test_corrupt_session_is_refused_on_the_status_line_and_changes_nothing(qtbot, reports, tmp_path):
    w = _window(qtbot, extract("sno"))
    bad = tmp_path / "bad.coremap"
    bad.write_bytes(b"PK\x03\x04 this is not a whole zip")
    shown = w.state
    w.session_controller._open_guarded(str(bad))
    assert str(bad) in w.statusBar().currentMessage()
    assert w.state is shown and w.sampler_thread.sampler.root.root == Path(extract("sno"))
    w.close()


def test_reports_html_and_pdf(qtbot, reports):
    # sno, not master.internal: each export reads the machine again, and master's 1,874 IRQ folders took
    # 2 s of it twice; the report of master itself is test_report_render's.
    w = _window(qtbot, extract("sno"))
    html = w.session_controller.export_report("html")
    text = html.read_text()
    assert text.startswith("<!DOCTYPE html>") or "<html" in text[:200]
    assert "Xeon" in text and "data:image/png;base64," in text
    pdf = w.session_controller.export_report("pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    w.close()


def _die(window) -> None:
    """What SIGKILL does to a window, as far as its autosave goes: the kernel drops its lock, nothing
    of its clean exit runs (the window object is left alone, never closed)."""
    import os
    slot = window.session_controller.autosaver.slot
    os.close(slot._fd)
    slot._fd = None


def test_a_crashed_window_is_offered_once_and_a_running_one_never(qtbot, reports):
    w = _window(qtbot, extract("sno"))
    sc = w.session_controller
    sc.autosaver.autosave_now()
    sc.autosaver.wait(20)
    mine = sc.autosaver.slot.path
    assert mine.is_file()
    # A second window while the first runs: its autosave is not a crash (issue 23).
    w2 = build_window(None, crash_recovery=True)
    qtbot.addWidget(w2)
    assert w2.session_controller.crash_bar is None
    w2.close()
    # The first window dies: the next window offers its autosave...
    _die(w)
    w3 = build_window(None, crash_recovery=True)
    qtbot.addWidget(w3)
    bar = w3.session_controller.crash_bar
    assert bar is not None and bar.path.name == mine.name and str(bar.path) in bar.label.text()
    assert "did not close cleanly" in bar.label.text()
    w3.close()
    # ...once: the windows after it, which close cleanly, offer nothing.
    for _ in range(2):
        w4 = build_window(None, crash_recovery=True)
        qtbot.addWidget(w4)
        assert w4.session_controller.crash_bar is None
        w4.close()
    assert not list((reports.parent / "state" / "instances").glob("*.coremap"))


def test_reopen_it_then_back_to_live(qtbot, reports):
    """The crash bar's "Reopen it" shows the autosave read-only, with a bar and File → Back to Live
    that return to the live machine (issue 23: there was no way back)."""
    w = _window(qtbot, "/")
    sc = w.session_controller
    sc.autosaver.autosave_now()
    qtbot.waitUntil(sc.autosaver.slot.path.is_file, timeout=30000)
    sc.autosaver.wait(20)
    _die(w)
    w2 = _window(qtbot, "/", crash_recovery=True)
    sc2 = w2.session_controller
    assert sc2.crash_bar is not None and not sc2.session_bar.isVisible()
    assert not sc2.actions["back_to_live"].isEnabled()
    with qtbot.waitSignal(w2.state_applied, timeout=20000):
        sc2.crash_bar.open_button.click()
    assert not w2.state.live and sc2.session_bar.isVisible()
    assert str(sc2.crash_bar.path) in sc2.session_bar.label.text()
    assert sc2.session_bar.back_button.text() == "Back to live" and sc2.actions["back_to_live"].isEnabled()
    assert sc2.actions["back_to_live"].shortcut().toString() == "Ctrl+L"
    with qtbot.waitSignal(w2.state_applied, timeout=20000):
        sc2.session_bar.back_button.click()
    qtbot.waitUntil(lambda: w2.state is not None and w2.state.live, timeout=20000)
    assert not sc2.session_bar.isVisible() and not sc2.actions["back_to_live"].isEnabled()
    assert w2.windowTitle().endswith("(live) — coremap")
    w2.close()


def test_back_from_a_session_to_the_capture_shown_before(qtbot, reports):
    w = _window(qtbot, extract("sno"))
    path = w.session_controller.save_session_to_reports()
    w2 = _window(qtbot, extract("worker2.internal"))
    sc = w2.session_controller
    with qtbot.waitSignal(w2.state_applied, timeout=20000):
        sc.open_session(path)
    assert sc.session_bar.back_button.text() == f"Back to {extract('worker2.internal')}"
    with qtbot.waitSignal(w2.state_applied, timeout=20000):
        sc.actions["back_to_live"].trigger()
    assert w2.sampler_thread.sampler.root.root == Path(extract("worker2.internal"))
    assert w2.state.topology.hostname == "worker2.internal" or len(w2.state.topology.online) == 32
    w.close()
    w2.close()


def test_the_first_autosave_of_the_live_machine_does_not_stop_the_window(qtbot, reports, monkeypatch):
    """Its snapshot (0.6 s here, seconds over ssh) is taken in the autosave thread; the autosave is
    written when it is ready, and later ones reuse it."""
    import threading

    import app.store.session
    from app.store.session import open_session
    taken = []
    release = threading.Event()
    real = app.store.session.session_from_root

    def slow_snapshot(root, **kw):
        release.wait(30)                # held until the test saw the UI thread go on
        taken.append(root)
        return real(root, **kw)
    monkeypatch.setattr(app.store.session, "session_from_root", slow_snapshot)    # the LocalHost's capture
    w = _window(qtbot, "/")
    sc = w.session_controller
    sc.autosaver.autosave_now()
    # The UI thread went on while the snapshot was still held: it handles an event posted now. Had the
    # snapshot been taken in the UI thread, the call above would have returned only after it.
    from PySide6.QtCore import QTimer
    handled = []
    QTimer.singleShot(0, lambda: handled.append(True))
    qtbot.waitUntil(lambda: handled == [True], timeout=30000)
    assert taken == [] and not sc.autosaver.slot.path.exists()
    release.set()
    # The snapshot thread ends before the UI thread handles its signal: handled while the thread is
    # still returning, the autosave finds it alive and waits for the next timer tick (a race of the
    # product's, reported; joining here keeps this test about the UI thread going on).
    for t in threading.enumerate():
        if t.name == "coremap-autosave":
            t.join(30)
    qtbot.waitUntil(sc.autosaver.slot.path.is_file, timeout=30000)
    sc.autosaver.wait(20)
    s = open_session(sc.autosaver.slot.path)
    try:
        assert s.host and (s.root.root / "proc" / "interrupts").is_file()
    finally:
        s.close()
    sc.autosaver.autosave_now()                      # the next one reuses the snapshot
    sc.autosaver.wait(20)
    assert len(taken) == 1
    w.close()
