"""The grid's per-CPU probe heat: what the last jitter or wakeup run measured on each CPU, as a band
along the top of its cell and a line of its tooltip (issue 30: 74 CPUs measured at once are read on
the machine's own picture, not in 74 histograms).

The heat is the run's figures (probes/periods.py figures: the longest gap or wakeup and how many
reached 10 µs, per second measured), sent by the probe panel as its lines come and when it ends
(widgets/probe/live.py heat_changed). The band's colour says the longest, in the four steps a jitter
user reads gaps by (probes/histogram.py GAP_STEPS_NS beyond 2 µs): under 10 µs, under 100 µs, under
1 ms, and beyond. It stays until the next run of a histogram probe replaces it.
"""
from __future__ import annotations

import html

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QGraphicsItem

from app.format import format_ns
from widgets.topology.layout import CELL_W

_BAND_H = 5.0
# ColorBrewer RdYlGn ends and two between: none is the isolated, nohz, quiet or leak colour of items.py
LEVELS = ((10_000, QColor(26, 152, 80), "under 10 µs"), (100_000, QColor(254, 224, 139), "under 100 µs"),
          (1_000_000, QColor(244, 109, 67), "under 1 ms"), (None, QColor(165, 0, 38), "1 ms or more"))


def level(max_ns: float | None) -> tuple[QColor, str] | None:
    """The band's colour and its words for a longest gap or wakeup; None when nothing was measured."""
    if max_ns is None:
        return None
    for upto, color, words in LEVELS:
        if upto is None or max_ns < upto:
            return color, words
    return None


class _ProbeHeatItem(QGraphicsItem):
    """A band along the top of one CPU cell, its parent. Contract: boundingRect is the band
    (0, 0, CELL_W, _BAND_H), inside the cell's own rect, so the cell's update covers it; `set_color`
    calls update() only when the colour changed."""

    def __init__(self, parent: QGraphicsItem):
        super().__init__(parent)
        self.color: QColor | None = None
        self.setAcceptHoverEvents(False)          # the view composes tooltips (tooltip.py)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)

    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, CELL_W, _BAND_H)

    def set_color(self, color: QColor) -> None:
        if color != self.color:
            self.color = color
            self.update()

    def paint(self, painter: QPainter, option, widget=None) -> None:
        if self.color is not None:
            painter.fillRect(self.boundingRect(), self.color)
            # a dark edge under it: the green band reads on a cell the metric paints light green too
            painter.fillRect(QRectF(0, _BAND_H - 1, CELL_W, 1), QColor(0, 0, 0, 110))


class ProbeHeat:
    """The heat over a TopologyView's cells: `show(probe, {cpu: figures})` marks those CPUs (and takes
    the marks off the others), `tooltip(cpu)` is its line for the CPU's tooltip, `cpus` those marked.
    `reattach()` puts the bands on the cells of a rebuilt scene."""

    def __init__(self, cells, legend=None):
        self._cells = cells                       # () -> {cpu: CpuCellItem} of the view now
        self._legend = legend                     # the view's ColorLegend, which keys the band
        self._probe = ""
        self._figures: dict[int, dict] = {}
        self._items: dict[int, tuple[QGraphicsItem, _ProbeHeatItem]] = {}     # cpu: (its cell, the band)

    @property
    def cpus(self) -> tuple[int, ...]:
        return tuple(sorted(self._items))

    def item(self, cpu: int) -> _ProbeHeatItem | None:
        got = self._items.get(cpu)
        return got[1] if got is not None else None

    def show(self, probe: str, figures: dict[int, dict]) -> None:
        self._probe, self._figures = probe, dict(figures)
        self.reattach()
        if self._legend is not None:
            self._legend.set_heat(probe if self._items else "")

    def reattach(self) -> None:
        cells = self._cells()
        for cpu, (cell, item) in list(self._items.items()):
            if cells.get(cpu) is not cell:
                del self._items[cpu]              # a rebuilt scene: the old cell took its band with it
            elif level(self._figures.get(cpu, {}).get("max_ns")) is None:
                item.scene().removeItem(item)
                del self._items[cpu]
        for cpu, f in self._figures.items():
            cell, lv = cells.get(cpu), level(f.get("max_ns"))
            if cell is None or lv is None:
                continue
            if cpu not in self._items:
                self._items[cpu] = (cell, _ProbeHeatItem(cell))
            self._items[cpu][1].set_color(lv[0])

    def tooltip(self, cpu: int) -> str:
        """`jitter: longest gap 23.1 µs (under 100 µs), 4.20/s of at least 10 µs over 1.00 s measured`."""
        f = self._figures.get(cpu)
        lv = level(f.get("max_ns")) if f else None
        if lv is None:
            return ""
        what = "gap" if self._probe == "jitter" else "wakeup"
        per_s = f"{f['per_s']:.2f}/s" if f.get("per_s") is not None else "none"
        return (f'<span style="color:{lv[0].darker(130).name()}">&#9632;</span> {html.escape(self._probe)}: '
                f"longest {what} {format_ns(f['max_ns'])} ({lv[1]}), {per_s} of at least "
                f"{format_ns(f['at_least_ns'])} over {f['sampled_s']:.2f} s measured")
