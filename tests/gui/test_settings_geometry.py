"""A window geometry in settings.ini that no screen can show (a hand edit, another machine's monitors, a
hostile file) opens the window on the screen at a usable size (issue 32: saved geometry was left to Qt's
clamp, untested). The geometry is saved the way coremap saves it, from a window set to that rectangle."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QApplication

from app.sysroot import SysRoot
from tests.machines import extract
from app.sources.live import host_of_root
from widgets.application import build_window
from widgets.settings import WindowSettings


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def make():
        w = build_window(host_of_root(SysRoot(extract("sno"))))
        qtbot.addWidget(w)
        return w
    return make


@pytest.mark.parametrize("rect", [QRect(100, 100, 50_000, 40_000), QRect(-90_000, -90_000, 900, 700),
                                  QRect(30_000, 30_000, 900, 700), QRect(10, 10, 24, 12)],
                         ids=["huge", "far-up-left", "far-down-right", "tiny"])
def test_a_geometry_no_screen_shows_opens_on_the_screen_at_a_usable_size(qtbot, window, rect):
    w = window()
    w.setGeometry(rect)                  # never shown: a 50,000 px window is not drawn here
    WindowSettings().save(w)
    w.close()
    w2 = window()
    done = WindowSettings().restore(w2)
    if "geometry" not in done:           # dropped, and said
        assert "does not fit this screen" in w2.statusBar().currentMessage()
    w2.show()
    qtbot.waitExposed(w2)
    screen = QApplication.primaryScreen().availableGeometry()
    g = w2.frameGeometry()
    assert screen.contains(g.center()), (g, screen)
    assert g.width() <= screen.width() + 16 and g.height() <= screen.height() + 16, (g, screen)
    hint = w2.minimumSizeHint()          # what the docks and tables need; half the screen at least is usable
    assert w2.width() >= min(hint.width(), screen.width() // 2), (w2.size(), hint)
    assert w2.height() >= min(hint.height(), screen.height() // 2), (w2.size(), hint)
    assert ("geometry" in done) == (rect.width() > 100)        # the tiny one is dropped; Qt moves the others
