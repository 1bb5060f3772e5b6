"""Colours that follow the desktop's palette, light or dark: plot backgrounds and axes, the colours of
series drawn over them, notice bars and alert text (issue 23: plots hard-coded a white or black
background and bars a light yellow, unreadable under a dark theme).

Widgets ask here with their own palette (`QWidget.palette()`, which is the application's unless a
style sheet changed it) and ask again on QEvent.PaletteChange, which Qt sends to every widget when the
desktop switches theme. Pictures for reports are drawn on PAPER: a report is a document printed or
read on white, whatever the desktop looked like when it was written.

pyqtgraph is not imported here: a plot is styled through its own methods, so asking for a colour
costs no start-up time (issue 12).
"""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QWidget

# Series over a plot: Tableau 10, hues apart from one another and readable on white and on a dark
# grey alike (Okabe-Ito's black and yellow each vanish on one of them). Order: most distinct first.
SERIES = ("#4E79A7", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7",
          "#9C755F", "#BAB0AC")


@dataclass(frozen=True)
class PlotColors:
    background: QColor        # the plot's area
    foreground: QColor        # axes, ticks, titles, labels
    muted: QColor             # a hint, a secondary label
    grid_alpha: float         # pyqtgraph's grid opacity: a dark background needs more to show the lines

    @property
    def dark(self) -> bool:
        return self.background.lightnessF() < 0.5


# Reports and the pictures `coremap screenshot` writes for them (widgets/pictures.py).
PAPER = PlotColors(QColor(255, 255, 255), QColor(29, 36, 48), QColor(90, 101, 115), 0.25)


def _palette(widget: QWidget | None) -> QPalette:
    return widget.palette() if widget is not None else QApplication.palette()


def is_dark(widget: QWidget | None = None) -> bool:
    """Whether the palette is a dark theme (light text on a dark window)."""
    p = _palette(widget)
    return p.color(QPalette.ColorRole.Window).lightnessF() < p.color(QPalette.ColorRole.WindowText).lightnessF()


def plot_colors(widget: QWidget | None = None) -> PlotColors:
    """A plot's colours from `widget`'s palette: the Base of views (what a table's cells sit on), its
    Text, and the placeholder text's grey."""
    p = _palette(widget)
    background = p.color(QPalette.ColorRole.Base)
    dark = background.lightnessF() < 0.5
    return PlotColors(background, p.color(QPalette.ColorRole.Text), p.color(QPalette.ColorRole.PlaceholderText),
                      0.35 if dark else 0.2)


def style_plot(plot, colors: PlotColors) -> None:
    """Give a pyqtgraph PlotWidget `colors`: its background, every axis line, tick and title (an axis
    title's colour follows its text pen), and the plot's title. Call again on a palette change."""
    plot.setBackground(colors.background)
    item = plot.getPlotItem()
    for name in ("left", "bottom", "right", "top"):
        axis = item.getAxis(name)
        axis.setPen(colors.foreground)
        axis.setTextPen(colors.foreground)
    title = item.titleLabel
    if title.text:
        title.setText(title.text, color=colors.foreground.name())


def series_color(i: int) -> QColor:
    """The i-th series' colour (threads in a plot, runs over one another); repeats after ten."""
    return QColor(SERIES[i % len(SERIES)])


def _blend(a: QColor, b: QColor, t: float) -> QColor:
    return QColor(*(round(x + (y - x) * t) for x, y in zip(a.getRgb()[:3], b.getRgb()[:3])))


def notice_style(widget: QWidget, name: str) -> str:
    """A style sheet for a notice bar (the unclean-exit bar, the session bar): the window's colour
    tinted amber, enough to stand out and never so far that the palette's text colour becomes
    unreadable on it, as a fixed light yellow was under a dark theme. From the application's palette,
    not the widget's: the style sheet set here changes the widget's own."""
    p = QApplication.palette(widget)
    window = p.color(QPalette.ColorRole.Window)
    bg = _blend(window, QColor(255, 193, 7), 0.28 if window.lightnessF() < 0.5 else 0.22)
    fg = p.color(QPalette.ColorRole.WindowText)
    return f"#{name} {{ background: {bg.name()}; }} #{name} QLabel {{ color: {fg.name()}; }}"


def apply_notice_style(widget: QWidget, name: str) -> None:
    """Give `widget` (object name `name`) notice_style, when it changed: a style sheet set in answer
    to a palette change must not set one again, or the two would call each other."""
    sheet = notice_style(widget, name)
    if widget.styleSheet() != sheet:
        widget.setStyleSheet(sheet)


# Words that say how something went (a pin's result line, the journal's failed rows, a fleet host that
# did not answer), each (on a light window, on a dark one): the dark theme's are lighter, so the word
# stays readable where the light theme's dark green or red would vanish.
STATUS = {"ok": ("#1b5e20", "#81c784"), "fail": ("#b00020", "#ff6b6b"), "warn": ("#a04a00", "#ffb74d"),
          "stale": ("#8a6d00", "#e0c060")}


def status_color(kind: str, widget: QWidget | None = None) -> QColor:
    """The colour of a word that says `kind` ("ok", "fail", "warn", "stale") on `widget`'s palette."""
    light, dark = STATUS[kind]
    return QColor(dark if is_dark(widget) else light)


def status_style(kind: str, widget: QWidget | None = None, extra: str = "") -> str:
    """A label's style sheet in status_color(kind)."""
    return f"color: {status_color(kind, widget).name()};{(' ' + extra) if extra else ''}"


def alert_color(widget: QWidget | None = None) -> QColor:
    """Red for a word that warns ("STALE"), light enough to read on a dark window."""
    return status_color("fail", widget)
