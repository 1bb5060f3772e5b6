"""The probe plots' frame: ProbePlot, a plot in the desktop's colours that follows a switch of theme
and is drawn on paper for a report (issue 23: the probe plots hard-coded a white background and
black axes); a unit on every axis title; ticks at whole decades for the log axes (labelled in words
by app/format.py: '10 µs', '1M'); and what an empty plot says (issue 12: an empty plot showed
pyqtgraph's bare log ticks 2…9 and no hint).

Colours come from widgets/theme.py only: the background, axes, titles, legend text and the empty
hint from `plot_colors` (or PAPER), the runs' lines from `series_color`. A plot's own items that are
drawn in the foreground colour (an error bar, a label on the plot) are restyled in `restyled`."""
from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QWidget

from widgets.theme import PAPER, PlotColors, plot_colors


# The units of a time axis whose ticks name their own ("10 µs", "1 ms").
TIME_UNITS = "ns … s"
EMPTY_HINT = "Run a probe, or drop CPUs here"
# What an empty log axis of time or of counts spans until a run gives it data: enough decades to
# show their units, about what a jitter run fills.
EMPTY_TIME_NS = (1e2, 1e7)
EMPTY_COUNT = (1.0, 1e6)


def titled(quantity: str, unit: str) -> str:
    """An axis title with its unit: "gap length (ns … s)", "CPU time (µs)"."""
    return f"{quantity} ({unit})"


def label_axes(item: pg.PlotItem, bottom: str, left: str, *, worded_ticks: bool = False) -> None:
    """Title the bottom and left axes (in the colour their plot gave them). With `worded_ticks` the
    ticks carry their own unit ("10 µs", "1M"), so pyqtgraph's SI factor on the title (which would
    lie) is off."""
    item.setLabel("bottom", bottom)
    item.setLabel("left", left)
    for axis in ("left", "bottom"):
        if worded_ticks:
            item.getAxis(axis).enableAutoSIPrefix(False)


class ProbePlot(pg.PlotWidget):
    """A probe's plot in `colors`: the palette's (widgets/theme.py plot_colors), again on every
    PaletteChange (Qt sends one to every widget when the desktop switches theme), or PAPER once
    `to_paper()` was called (a report's picture). Subclasses add their grid, title and legend through
    `show_grid`, `set_title` and `add_legend`, so a change of colours reaches them, and override
    `restyled(colors)` for their own items drawn in the foreground colour."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._paper = False
        self._grid = (False, False)
        self.colors: PlotColors = plot_colors(self)
        self.apply_colors()

    def show_grid(self, x: bool, y: bool) -> None:
        self._grid = (x, y)
        self.getPlotItem().showGrid(x=x, y=y, alpha=self.colors.grid_alpha)

    def set_title(self, text: str) -> None:
        self.getPlotItem().setTitle(text, color=self.colors.foreground.name())

    def add_legend(self, **options) -> pg.LegendItem:
        """The runs' legend, in a row of its own above the plot, never over a curve (issue 28: anchored
        in the plot's corner, it covered the runs' longest gaps). `offset` is accepted and ignored:
        the legend has its place in the plot's layout, not a corner."""
        options.pop("offset", None)
        item = self.getPlotItem()
        legend = pg.LegendItem(offset=None, labelTextColor=self.colors.foreground,
                               colCount=options.pop("colCount", 3), **options)
        item.legend = legend            # PlotItem.addItem adds a named curve to its `legend`
        # Row 1 is the top axis's, hidden on these plots (none shows it): the legend takes its cell,
        # above the view and below the title.
        item.layout.removeItem(item.getAxis("top"))
        item.layout.addItem(legend, 1, 1)
        self.legend = legend
        return legend

    def to_paper(self) -> None:
        """Draw on PAPER from now on, whatever the desktop's theme: the plot goes into a report."""
        self._paper = True
        self._restyle(PAPER)

    def restyled(self, colors: PlotColors) -> None:
        """A subclass's hook: give its own foreground-coloured items `colors`."""

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        # GraphicsView.__init__ changes the palette before this class's fields exist
        if event.type() == QEvent.Type.PaletteChange and "colors" in self.__dict__ and not self._paper:
            self._restyle(plot_colors(self))

    def _restyle(self, colors: PlotColors) -> None:
        if colors == self.colors:
            return
        self.colors = colors
        self.apply_colors()
        self.restyled(colors)

    def apply_colors(self) -> None:
        """Give the background, every axis (again after adding one, as a colour bar does), the title,
        the grid, the legend and the empty hint `colors`."""
        colors = self.colors
        self.setBackground(colors.background)
        for item in self.scene().items():      # the plot's four axes, and a colour bar's
            if isinstance(item, pg.AxisItem):
                item.setPen(colors.foreground)
                item.setTextPen(colors.foreground)
        item = self.getPlotItem()
        if item.titleLabel.text:
            item.titleLabel.setText(item.titleLabel.text, color=colors.foreground.name())
        if any(self._grid):
            item.showGrid(x=self._grid[0], y=self._grid[1], alpha=colors.grid_alpha)
        legend = self.__dict__.get("legend")
        if legend is not None:
            legend.setLabelTextColor(colors.foreground)
            for _sample, label in legend.items:   # setAttr alone does not draw the text again
                label.setText(label.text)
        for hint in self.findChildren(EmptyHint):
            hint.set_colors(colors)


def to_paper(widget: QWidget) -> None:
    """Put every ProbePlot in `widget` (itself included) on paper, for a report's picture."""
    for plot in ([widget] if isinstance(widget, ProbePlot) else []) + widget.findChildren(ProbePlot):
        plot.to_paper()


def empty_log_ticks(item: pg.PlotItem, axis: str, span: tuple[float, float], label) -> None:
    """Decade ticks over `span` on a log axis that has no data yet, and the view over them, so an
    empty plot shows its units ("100 ns", "1 ms") rather than pyqtgraph's bare 2…9."""
    item.getAxis(axis).setTicks(decade_ticks(span[0], span[1], label))
    lo, hi = math.log10(span[0]), math.log10(span[1])
    if axis == "bottom":
        item.setXRange(lo, hi, padding=0.02)
    else:
        item.setYRange(lo, hi, padding=0.02)


class EmptyHint(QLabel):
    """EMPTY_HINT over the middle of a plot widget while it has nothing to draw; `set_empty(empty)`."""

    def __init__(self, plot: QWidget, text: str = EMPTY_HINT):
        super().__init__(text, plot)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.set_colors(getattr(plot, "colors", None) or plot_colors(plot))
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)   # drops reach the panel
        plot.installEventFilter(self)
        self._place()

    def set_colors(self, colors: PlotColors) -> None:
        """The plot's text on its own background, a little see-through, framed in its muted grey."""
        bg, muted = colors.background, colors.muted
        self.setStyleSheet(f"color: {colors.foreground.name()}; background: rgba({bg.red()}, {bg.green()}, "
                           f"{bg.blue()}, 215); padding: 6px 10px; border: 1px solid {muted.name()}; "
                           "border-radius: 4px;")

    def set_empty(self, empty: bool) -> None:
        self.setVisible(empty)
        if empty:
            self._place()
            self.raise_()

    def eventFilter(self, obj, event) -> bool:
        if event.type() == event.Type.Resize:
            self._place()
        return False

    def _place(self) -> None:
        # One line where the plot is wide enough, wrapped to its width where not: at its one-line width the
        # hint ran past both sides of a plot squeezed beside the probe form (a capture's window at 1400 px).
        parent = self.parentWidget()
        self.setWordWrap(False)
        self.adjustSize()
        if self.width() > parent.width() - 8:
            self.setWordWrap(True)
            width = max(60, parent.width() - 8)
            self.resize(width, self.heightForWidth(width))
        self.move((parent.width() - self.width()) // 2, (parent.height() - self.height()) // 2)


def decade_ticks(lo: float, hi: float, label, max_labels: int | None = None) -> list:
    """Ticks at whole decades spanning [lo, hi] (values > 0), labelled by `label(10**d)`; positions
    are log10 values, as a log-mode axis expects. With `max_labels`, only every k-th decade is
    labelled (the others stay as unlabelled minor ticks) so the labels do not run into each other."""
    if not (lo > 0 and hi > 0):
        return [[], []]
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = list(range(d0, max(d1, d0 + 1) + 1))
    step = max(1, math.ceil(len(decades) / max_labels)) if max_labels else 1
    major = [(d, label(10.0 ** d)) for d in decades if (d - d0) % step == 0]
    minor = [(d, "") for d in decades if (d - d0) % step != 0]
    return [major, minor]
