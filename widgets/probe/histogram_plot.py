"""HistogramPlot: probe gaps (or wakeup latencies) as counts per CPU-hour against their length, log x
and log y, one stepped curve per run, overlaid with a legend.

Runs are keyed by the caller (the probe panel uses its run ids). `set_run(key, label, buckets,
sampled_ns)` creates the run's curve on first use and afterwards only replaces its data in place
(`setData`), so a live run that gets a new `interval` line every 100 ms never rebuilds the plot.

Contract of the graphics items used here:
- each run is one PlotDataItem with stepMode="center": x holds len(y) + 1 bucket edges (ns) and
  y[i] is drawn flat from x[i] to x[i + 1]. stepMode curves honour the plot's log mode (pyqtgraph
  maps x and y through log10 before building the path), which BarGraphItem does not.
- a bucket that counted nothing sits between two that did (the probe's buckets are sparse above the
  fine-binning threshold): it is kept as y = 0, which log10 turns into NaN, and pyqtgraph's
  connect="finite" then breaks the line there. Zero has no place on a log axis, so the curve shows a
  gap rather than a made-up floor value.
- the probe's first bucket starts at 0 ns; log10(0) has no place either, so its left edge is drawn
  at 1 ns (the bucket still holds exactly the samples the probe counted).
- getOriginalDataset() returns (edges, per-hour values) as given, before the log mapping; the tests
  read it.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from app.format import format_compact, format_ns
from probes.histogram import NS_PER_HOUR, bucket_rows
from widgets.probe.axes import (EMPTY_COUNT, EMPTY_TIME_NS, TIME_UNITS, EmptyHint, ProbePlot, decade_ticks,
                                empty_log_ticks, label_axes, titled)
from widgets.theme import series_color


def step_data(buckets, sampled_ns: float) -> tuple[np.ndarray, np.ndarray]:
    """(edges, per-CPU-hour counts) for stepMode="center" from [lo, hi, count] buckets.

    Empty buckets and holes between buckets become y = 0 (a break on the log axis); leading and
    trailing empty buckets are dropped. Overlapping buckets (none come from one probe) are refused.
    """
    rows = sorted((int(lo), int(hi), int(c)) for lo, hi, c in bucket_rows(buckets))
    while rows and rows[0][2] == 0:
        rows.pop(0)
    while rows and rows[-1][2] == 0:
        rows.pop()
    scale = NS_PER_HOUR / sampled_ns if sampled_ns and sampled_ns > 0 else 0.0
    edges: list[float] = []
    ys: list[float] = []
    for lo, hi, c in rows:
        lo = max(lo, 1)
        if edges and lo < edges[-1]:
            raise ValueError(f"bucket [{lo}, {hi}) overlaps the previous one ending at {edges[-1]:g}")
        if not edges:
            edges.append(lo)
        elif lo > edges[-1]:
            ys.append(0.0)            # a hole between buckets: nothing was counted there
            edges.append(lo)
        edges.append(hi)
        ys.append(c * scale)
    return np.asarray(edges, dtype=float), np.asarray(ys, dtype=float)


class RunCurves:
    """Curves keyed by run, shared by the histogram and percentile plots: look one up, show or hide
    it, take it off the plot and the legend. A plot sets `_curves` and `legend` and defines
    `_update_ticks`; `_run_removed(key)` is its hook for what else it keeps per run."""

    def keys(self) -> list:
        return list(self._curves)

    def curve(self, key) -> pg.PlotDataItem | None:
        return self._curves.get(key)

    def set_run_visible(self, key, visible: bool) -> None:
        curve = self._curves.get(key)
        if curve is not None:
            curve.setVisible(visible)
            self._update_ticks()

    def remove_run(self, key) -> None:
        curve = self._curves.pop(key, None)
        if curve is not None:
            self.legend.removeItem(curve)
            self.getPlotItem().removeItem(curve)
            self._update_ticks()
            self._run_removed(key)

    def _run_removed(self, key) -> None:
        pass


class HistogramPlot(RunCurves, ProbePlot):
    """Count per CPU-hour against gap length, runs overlaid."""

    def __init__(self, parent=None, *, x_label: str = titled("gap length", TIME_UNITS),
                 y_label: str = titled("gaps", "count per CPU-hour")):
        super().__init__(parent)
        item = self.getPlotItem()
        item.setLogMode(x=True, y=True)
        self.show_grid(True, True)
        label_axes(item, x_label, y_label, worded_ticks=True)
        self.add_legend(offset=(-10, 10))
        self._curves: dict[object, pg.PlotDataItem] = {}
        self._labels: dict[object, str] = {}
        self._count = 0
        self.empty_hint = EmptyHint(self)
        self._update_ticks()

    # -- runs -------------------------------------------------------------------------------------
    def set_run(self, key, label: str, buckets, sampled_ns: float) -> pg.PlotDataItem:
        """Create the run's curve or replace its data in place."""
        x, y = step_data(buckets, sampled_ns)
        curve = self._curves.get(key)
        if curve is None:
            colour = series_color(self._count)
            self._count += 1
            curve = pg.PlotDataItem(stepMode="center", pen=pg.mkPen(colour, width=2), name=label)
            self._curves[key] = curve
            self._labels[key] = label
            self.getPlotItem().addItem(curve)
        if len(x) >= 2:
            curve.setData(x, y)
        else:
            curve.setData([], [])     # nothing counted yet: an empty curve, not a made-up point
        if label != self._labels[key]:
            self._labels[key] = label
            self.legend.removeItem(curve)
            self.legend.addItem(curve, label)
        self._update_ticks()
        return curve

    def _run_removed(self, key) -> None:
        self._labels.pop(key, None)

    def legend_labels(self) -> list[str]:
        return [label.text for _sample, label in self.legend.items]

    def _update_ticks(self) -> None:
        xs, ys = [], []
        for c in self._curves.values():
            if not c.isVisible():
                continue
            x, y = c.getOriginalDataset()
            if x is None or len(x) < 2:
                continue
            xs += [x[0], x[-1]]
            pos = y[y > 0]
            if len(pos):
                ys += [pos.min(), pos.max()]
        item = self.getPlotItem()
        self.empty_hint.set_empty(not xs)
        if not xs:
            empty_log_ticks(item, "bottom", EMPTY_TIME_NS, format_ns)
            empty_log_ticks(item, "left", EMPTY_COUNT, format_compact)
            return
        # about 55 px per "100 µs"-wide label, 22 px per label row on the count axis
        bottom = decade_ticks(min(xs), max(xs), format_ns, max(2, self.width() // 55))
        left = decade_ticks(min(ys), max(ys), format_compact, max(2, self.height() // 22)) if ys else None
        item.getAxis("bottom").setTicks(bottom)
        item.getAxis("left").setTicks(left)
        item.enableAutoRange()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # GraphicsView.__init__ resizes before our fields exist; PlotWidget.close() after its plot is gone.
        if "empty_hint" in self.__dict__ and self.getPlotItem() is not None:
            self._update_ticks()


class WakeupHistogramPlot(HistogramPlot):
    """Wake-up latencies (and any run whose every sample counts: a late wakeup is a sample in its own
    right), on axes of their own, never on the gaps' (issue 28: wakeup runs were drawn against "gap
    length")."""

    def __init__(self, parent=None):
        super().__init__(parent, x_label=titled("latency", TIME_UNITS),
                         y_label=titled("wake-ups", "count per CPU-hour"))

