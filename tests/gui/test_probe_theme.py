"""Every probe plot follows the desktop's palette, dark included, and a report's picture of a probe
stays on paper whatever the desktop looks like (issue 23: the probe plots hard-coded a white
background and black axes).

Oracles: the palette the test sets (Base, Text, PlaceholderText), widgets/theme.py PAPER, and the
pixels of the drawn plot."""
from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QColor, QImage, QPalette

from widgets.probe.axes import EmptyHint, ProbePlot
from widgets.probe.histogram_plot import HistogramPlot
from widgets.probe.tabs import _PLOTS
from widgets.theme import PAPER

BASE, TEXT, MUTED = QColor(25, 25, 28), QColor(235, 235, 235), QColor(150, 150, 150)


def _dark(palette: QPalette) -> QPalette:
    dark = QPalette(palette)
    dark.setColor(QPalette.ColorRole.Base, BASE)
    dark.setColor(QPalette.ColorRole.Text, TEXT)
    dark.setColor(QPalette.ColorRole.PlaceholderText, MUTED)
    dark.setColor(QPalette.ColorRole.Window, QColor(40, 40, 44))
    dark.setColor(QPalette.ColorRole.WindowText, TEXT)
    return dark


def _plots(widget) -> list[ProbePlot]:
    return ([widget] if isinstance(widget, ProbePlot) else []) + widget.findChildren(ProbePlot)


def _axes(plot: ProbePlot) -> list[pg.AxisItem]:
    return [i for i in plot.scene().items() if isinstance(i, pg.AxisItem) and i.isVisible()]


# Figures is a table (the palette's own colours), not a plot
@pytest.mark.parametrize("path,build", [(key, build) for key, _title, build in _PLOTS if key != "figures"])
def test_every_probe_tab_follows_a_switch_to_a_dark_theme(qtbot, path, build):
    tab = build(None)
    qtbot.addWidget(tab)
    plots = _plots(tab)
    assert plots, f"{path} draws with no ProbePlot"
    other = [w for w in tab.findChildren(pg.PlotWidget) if not isinstance(w, ProbePlot)]
    assert not other, f"{path} has a plot that does not follow the palette"
    light = plots[0].backgroundBrush().color()
    tab.setPalette(_dark(tab.palette()))                  # what a switch to a dark theme sends
    for plot in plots:
        assert plot.backgroundBrush().color() == BASE != light
        for axis in _axes(plot):
            assert axis.textPen().color() == TEXT and axis.pen().color() == TEXT
        title = plot.getPlotItem().titleLabel
        if title.text:
            assert QColor(title.opts["color"]) == TEXT
        legend = plot.__dict__.get("legend")
        if legend is not None:
            assert QColor(legend.opts["labelTextColor"]) == TEXT
        for hint in plot.findChildren(EmptyHint):
            assert f"color: {TEXT.name()}" in hint.styleSheet() and "rgba(25, 25, 28" in hint.styleSheet()


def test_a_dark_histogram_is_drawn_dark_with_its_run_visible(qtbot):
    plot = HistogramPlot()
    qtbot.addWidget(plot)
    plot.setPalette(_dark(plot.palette()))
    plot.resize(600, 300)
    plot.show()
    curve = plot.set_run("a", "run a", [[1000, 2000, 50], [2000, 4000, 20], [4000, 8000, 5]], 3.6e12)
    qtbot.waitExposed(plot)
    img = plot.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    px = [img.pixelColor(x, y) for y in range(0, img.height(), 5) for x in range(0, img.width(), 5)]
    dark = sum(c.lightnessF() < 0.2 for c in px) / len(px)
    assert dark > 0.7, f"only {dark:.0%} of the plot is dark"
    # the run's line is drawn in its series colour, which shows on the dark background
    line = curve.opts["pen"].color()
    assert any(abs(c.red() - line.red()) + abs(c.green() - line.green()) + abs(c.blue() - line.blue()) < 30
               for c in px), "the run's line is not in the picture"


def test_a_report_picture_stays_on_paper_under_a_dark_desktop(qtbot):
    from PySide6.QtWidgets import QApplication

    from widgets.pictures import render_result_plot
    app = QApplication.instance()
    before = app.palette()
    app.setPalette(_dark(before))
    try:
        result = {"probe": "scaling", "mode": "threads",
                  "widths": [{"width": 1, "throughput": 1e6, "pinned": True, "flagged": False},
                             {"width": 2, "throughput": 1.9e6, "pinned": True, "flagged": False}]}
        img = QImage.fromData(render_result_plot(result, fmt="png"))
    finally:
        app.setPalette(before)
    px = [img.pixelColor(x, y) for y in range(0, img.height(), 5) for x in range(0, img.width(), 5)]
    white = sum(c == PAPER.background for c in px) / len(px)
    assert white > 0.6, f"only {white:.0%} of the report's picture is paper"
