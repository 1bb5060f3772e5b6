"""Notice bars and the words that say how something went follow the desktop's palette (issue 23: a
fixed light yellow bar and dark green or red words vanish, or glare, under a dark theme).

Oracles: the palette the test sets, and WCAG's contrast ratio of a word's colour on the window it is
drawn on (4.5:1 is the guideline's for text; 3:1 is asked here of coloured words)."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from widgets.autosave import CrashRecoveryBar
from widgets.pinning.feedback import PinResultLine, RestoreBar
from widgets.quiet.cut_short import CutShortBar
from widgets.session_bar import SessionBar
from widgets.theme import STATUS, status_color

DARK_WINDOW, LIGHT_WINDOW = QColor(45, 45, 48), QColor(239, 239, 239)


def _luminance(c: QColor) -> float:
    def lin(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF())


def contrast(a: QColor, b: QColor) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _palette(window: QColor, text: QColor) -> QPalette:
    p = QPalette(QApplication.palette())
    for role in (QPalette.ColorRole.Window, QPalette.ColorRole.Base):
        p.setColor(role, window)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text):
        p.setColor(role, text)
    return p


@pytest.fixture
def dark(qapp):
    before = QApplication.palette()
    QApplication.setPalette(_palette(DARK_WINDOW, QColor(230, 230, 230)))
    yield
    QApplication.setPalette(before)


@pytest.mark.parametrize("kind", sorted(STATUS))
def test_every_status_word_reads_on_a_light_and_a_dark_window(qapp, kind):
    before = QApplication.palette()
    try:
        for window, text in ((LIGHT_WINDOW, QColor(20, 20, 20)), (DARK_WINDOW, QColor(230, 230, 230))):
            QApplication.setPalette(_palette(window, text))
            assert contrast(status_color(kind), window) >= 3.0, (kind, window.name())
    finally:
        QApplication.setPalette(before)


def test_the_result_line_says_failure_in_a_red_the_dark_window_shows(qtbot, dark):
    line = PinResultLine()
    qtbot.addWidget(line)
    line.show_message("IRQ 24: denied", ok=False)
    colour = QColor(line.label.styleSheet().split("color:")[1].split(";")[0].strip())
    assert colour == status_color("fail") and contrast(colour, DARK_WINDOW) >= 3.0


@pytest.mark.parametrize("make", [RestoreBar, CutShortBar, SessionBar,
                                  lambda: CrashRecoveryBar(Path("/tmp/x.coremap"))])
def test_notice_bars_take_the_palettes_window_and_follow_a_switch(qtbot, qapp, make):
    before = QApplication.palette()
    try:
        QApplication.setPalette(_palette(LIGHT_WINDOW, QColor(20, 20, 20)))
        bar = make()
        qtbot.addWidget(bar)
        light = bar.styleSheet()
        QApplication.setPalette(_palette(DARK_WINDOW, QColor(230, 230, 230)))   # a switch of theme
        qapp.processEvents()
        dark = bar.styleSheet()
        assert light != dark and "#e6e6e6" in dark              # the palette's text on the tinted window
        bg = QColor(dark.split("background:")[1].split(";")[0].strip())
        assert bg.lightnessF() < 0.5 and contrast(bg, QColor(230, 230, 230)) >= 4.5
    finally:
        QApplication.setPalette(before)
