"""The two plots of "Where threads run" (widgets/residency_plot.py draws through this): CPU over time,
a stepped line per thread, and the share of CPU time per CPU, a bar per CPU and thread.

Legible with several threads (issue 23: four threads' trails stacked on two lines in colours hard to
tell apart): thread i of n is drawn `offset(i, n)` above or below its CPU's line, in its own band
of the CPU's height, so threads on the same CPU lie side by side instead of over one another; the
bars use the same bands, so a thread's bar sits level with its trail. Each thread has a colour of
widgets/theme.SERIES and its name at its trail's newest end. The share axis runs to 100%, labelled.

Contracts of the pyqtgraph items used here:
- the trail curves use stepMode="right": y[i] is held from x[i] to x[i + 1], which is what a sampled
  "last CPU" means (the thread was seen on that CPU at x[i] and is taken to stay until the next
  sample); len(x) == len(y). `trail(tid)` returns the CPUs as sampled (the band offset removed).
- the share bars are a BarGraphItem per thread with horizontal bars (x0=0, width=share) centred on
  each CPU id plus the thread's offset; BarGraphItem ignores log axes, which is fine for shares in
  [0, 1].
- the name labels are TextItems anchored at their right end (anchor x=1): the newest point is at
  x≈0, the right edge of the view, so the text extends into the plot, never past its edge.

Imported by widgets/residency_plot.py only when the plots are first shown: pyqtgraph with numpy is
~0.3 s of start-up and ~30 MB (issue 12).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QWidget

from app.format import format_cpus
from widgets.theme import PlotColors, series_color, style_plot

# Tick labels for every CPU up to this many CPUs in view; above it pyqtgraph's own spacing.
MAX_CPU_TICKS = 24
BAND = 0.7                  # the share of a CPU's height the threads' bands fill together
SHARE_TICKS = [[(0.0, "0"), (0.5, "50%"), (1.0, "100%")], [(0.25, ""), (0.75, "")]]


def offset(i: int, n: int) -> float:
    """Where thread i of n sits within its CPU's height: bands of BAND / n, centred on the CPU."""
    h = BAND / max(n, 1)
    return -BAND / 2 + h * (i + 0.5)


class TrailPlots(QWidget):
    """The CPU-over-time plot and the share plot beside it; `draw(rows, now)` draws them."""

    def __init__(self, colors: PlotColors, parent=None):
        super().__init__(parent)
        self.trail_plot = pg.PlotWidget(self)
        self.trail_plot.setLabel("left", "CPU")
        self.trail_plot.setLabel("bottom", "seconds before now")
        self.share_plot = pg.PlotWidget(self)
        self.share_plot.setLabel("bottom", "share of CPU time")
        # Past 1.0 by a label's half width: pyqtgraph drops a tick label that would cross the axis's end.
        self.share_plot.setXRange(-0.04, 1.18, padding=0)
        self.share_plot.getAxis("bottom").setTicks(SHARE_TICKS)
        for plot in (self.trail_plot, self.share_plot):
            plot.getAxis("left").enableAutoSIPrefix(False)       # CPU numbers, never "CPU (x0.001)"
        self.share_plot.setYLink(self.trail_plot)
        self.share_plot.setMouseEnabled(x=False, y=True)
        self.share_plot.getAxis("left").setWidth(28)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.trail_plot, 3)
        lay.addWidget(self.share_plot, 1)
        self._curves: dict[int, pg.PlotDataItem] = {}
        self._labels: dict[int, pg.TextItem] = {}
        self._bars: dict[int, pg.BarGraphItem] = {}
        self._trails: dict[int, list[int]] = {}
        self._names: dict[int, str] = {}
        self.set_colors(colors)

    def set_colors(self, colors: PlotColors) -> None:
        self._colors = colors
        for plot in (self.trail_plot, self.share_plot):
            style_plot(plot, colors)
            plot.showGrid(x=True, y=True, alpha=colors.grid_alpha)

    def draw(self, rows: list[tuple[int, str, tuple, dict]], now: float) -> None:
        """One row per thread shown, in order: (tid, name, trail ((time, cpu), ...), shares {cpu: share})."""
        shown = [tid for tid, *_ in rows]
        for tid in [t for t in self._curves if t not in shown]:
            self.trail_plot.removeItem(self._curves.pop(tid))
            self.trail_plot.removeItem(self._labels.pop(tid))
            self._trails.pop(tid, None)
            self._names.pop(tid, None)
        for tid in [t for t in self._bars if t not in shown]:
            self.share_plot.removeItem(self._bars.pop(tid))
        n = len(rows)
        cpus_seen: set[int] = set()
        for i, (tid, name, trail, shares) in enumerate(rows):
            colour = series_color(i)
            cpus = [int(c) for _, c in trail]
            cpus_seen.update(cpus)
            cpus_seen.update(shares)
            self._draw_trail(tid, name, trail, cpus, now, colour, offset(i, n))
            self._draw_bars(tid, shares, colour, offset(i, n), BAND / max(n, 1))
        self._set_cpu_ticks(cpus_seen)

    def _draw_trail(self, tid: int, name: str, trail, cpus: list[int], now: float, colour, off: float) -> None:
        curve, label = self._curves.get(tid), self._labels.get(tid)
        if curve is None:
            curve = pg.PlotDataItem(stepMode="right")
            label = pg.TextItem(anchor=(1, 1))
            self.trail_plot.addItem(curve)
            self.trail_plot.addItem(label)
            self._curves[tid], self._labels[tid] = curve, label
        curve.setPen(pg.mkPen(colour, width=2.5))
        self._trails[tid], self._names[tid] = cpus, name
        if trail:
            xs = np.fromiter((t - now for t, _ in trail), dtype=float, count=len(trail))
            curve.setData(xs, np.array(cpus, dtype=float) + off)
            label.setText(name, color=colour)
            label.setPos(float(xs[-1]), cpus[-1] + off)
            label.setVisible(True)
        else:
            curve.setData([], [])
            label.setVisible(False)

    def _draw_bars(self, tid: int, shares: dict, colour, off: float, height: float) -> None:
        bar = self._bars.pop(tid, None)
        if bar is not None:
            self.share_plot.removeItem(bar)
        if shares:
            ids = sorted(shares)
            bar = pg.BarGraphItem(x0=0, y=np.array(ids, dtype=float) + off, height=height,
                                  width=[shares[c] for c in ids], brush=colour, pen=pg.mkPen(None))
            self.share_plot.addItem(bar)
            self._bars[tid] = bar

    def _set_cpu_ticks(self, cpus: set[int]) -> None:
        # Integer ticks on the CPU axis: a thread hopping between CPUs 6 and 11 reads as "6" and "11",
        # not "7.5". Only the CPUs that appear are labelled, so a 256-CPU machine stays legible.
        for plot in (self.trail_plot, self.share_plot):
            axis = plot.getAxis("left")
            if cpus and len(cpus) <= MAX_CPU_TICKS:
                axis.setTicks([[(c, str(c)) for c in sorted(cpus)], []])
            else:
                axis.setTicks(None)
        if cpus:
            self.trail_plot.setYRange(min(cpus) - 0.5, max(cpus) + 0.5, padding=0)
            self.trail_plot.setToolTip(f"CPUs in view: {format_cpus(cpus)}")

    # -- what is drawn (tests read it) --------------------------------------------------------------
    def curve(self, tid: int) -> pg.PlotDataItem | None:
        return self._curves.get(tid)

    def trail(self, tid: int) -> list[int]:
        """The CPUs of a thread's trail as sampled, without its band offset."""
        return list(self._trails.get(tid, ()))

    def label(self, tid: int) -> str | None:
        item = self._labels.get(tid)
        return self._names.get(tid) if item is not None and item.isVisible() else None

    def shares(self, tid: int, off: float) -> dict[int, float]:
        bar = self._bars.get(tid)
        if bar is None:
            return {}
        return {int(round(y - off)): float(w) for y, w in zip(bar.opts["y"], bar.opts["width"])}
