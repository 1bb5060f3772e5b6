"""PercentilePlot: the percentile distribution of each run, as HdrHistogram's plotter draws it:
x = percentile on the 1/(1 - p) log scale (50%, 90%, 99%, 99.9%, 99.99% evenly spaced), y = latency
(log scale, ns), runs overlaid.

The values are those an HdrHistogram built by probes.histogram.buckets_to_histogram gives: each bucket
stands at its midpoint (bucket_mid), and the value at percentile p is the first bucket midpoint
whose cumulative count reaches round(p x total) (HdrHistogram.get_value_at_percentile, within its 3
significant digits). They are computed with numpy from the buckets, because calling hdrh's
get_value_at_percentile for every point (it walks ~32k counts in Python per call) would cost a
third of a second per redraw.

Contract of the graphics items used here:
- each run is one PlotDataItem (a plain polyline, no step mode): x = log10(1 / (1 - p)) for p in
  [0, 1 - 1/N] (N the sample count: beyond that the distribution says nothing; the last point
  carries the maximum), y = latency in ns;
  the plot's y log mode maps y through log10, x is already on its log scale and its axis ticks
  name the percentiles.
- getOriginalDataset() returns (x, latency ns) before the y log mapping.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from app.format import format_ns
from probes.histogram import bucket_mid, bucket_rows
from widgets.probe.axes import (EMPTY_TIME_NS, TIME_UNITS, EmptyHint, ProbePlot, decade_ticks, empty_log_ticks,
                                label_axes, titled)
from widgets.probe.histogram_plot import RunCurves
from widgets.theme import series_color

PERCENTILE_TICKS = ((50.0, "50%"), (90.0, "90%"), (99.0, "99%"), (99.9, "99.9%"),
                    (99.99, "99.99%")) + tuple((100.0 - 10.0 ** (2 - n), f"99.{'9' * (n - 2)}%") for n in range(5, 11))
POINTS = 400


def percentile_x(p_percent: float) -> float:
    """Position of percentile p (0-100) on the 1/(1-p) log scale."""
    return math.log10(1.0 / (1.0 - p_percent / 100.0))


def _cumulative(buckets) -> tuple[np.ndarray, np.ndarray]:
    rows = sorted((bucket_mid(lo, hi), int(c)) for lo, hi, c in bucket_rows(buckets) if int(c) > 0)
    mids = np.array([m for m, _ in rows], dtype=float)
    cum = np.cumsum([c for _, c in rows]).astype(float) if rows else np.zeros(0)
    return mids, cum


def _values(mids: np.ndarray, cum: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    # hdrh get_target_count_at_percentile: the count to reach is int(p * total + 0.5), at least 1;
    # the value is that of the first bucket whose cumulative count reaches it.
    need = np.maximum(1.0, np.floor(fractions * cum[-1] + 0.5))
    idx = np.searchsorted(cum, need, side="left")
    return mids[np.minimum(idx, len(mids) - 1)]


def values_at(buckets, percents) -> np.ndarray:
    """Latency (ns, a bucket midpoint) at each percentile (0-100)."""
    mids, cum = _cumulative(buckets)
    if not len(mids):
        return np.full(len(percents), np.nan)
    return _values(mids, cum, np.asarray(percents, dtype=float) / 100.0)


def percentile_curve(buckets, points: int = POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(x, value_ns) of the distribution; empty arrays for no samples."""
    mids, cum = _cumulative(buckets)
    if not len(mids):
        return np.zeros(0), np.zeros(0)
    total = cum[-1]
    x_max = math.log10(total) if total > 1 else 0.0
    x = np.linspace(0.0, x_max, points) if x_max > 0 else np.zeros(1)
    fractions = 1.0 - 10.0 ** (-x)
    fractions[-1] = 1.0      # the last point is the maximum (p = 100% has no place on this axis)
    return x, _values(mids, cum, fractions)


class PercentilePlot(RunCurves, ProbePlot):
    """Gap length (or, WakeupPercentilePlot, wake-up latency) by percentile, runs overlaid."""

    def __init__(self, parent=None, *, y_label: str = titled("gap length", TIME_UNITS)):
        super().__init__(parent)
        item = self.getPlotItem()
        item.setLogMode(x=False, y=True)
        self.show_grid(True, True)
        label_axes(item, titled("percentile", "%"), y_label, worded_ticks=True)
        item.getAxis("bottom").setTicks([[(percentile_x(p), t) for p, t in PERCENTILE_TICKS], []])
        self.add_legend(offset=(10, 10))
        self._curves: dict[object, pg.PlotDataItem] = {}
        self._count = 0
        self.empty_hint = EmptyHint(self)
        self._update_ticks()

    def set_run(self, key, label: str, buckets) -> pg.PlotDataItem:
        x, y = percentile_curve(buckets)
        curve = self._curves.get(key)
        if curve is None:
            curve = pg.PlotDataItem(pen=pg.mkPen(series_color(self._count), width=2), name=label)
            self._count += 1
            self._curves[key] = curve
            self.getPlotItem().addItem(curve)
        curve.setData(x, y)
        self._update_ticks()
        return curve

    def _update_ticks(self) -> None:
        ys = []
        for c in self._curves.values():
            _x, y = c.getOriginalDataset()
            if c.isVisible() and y is not None and len(y):
                pos = y[y > 0]
                if len(pos):
                    ys += [pos.min(), pos.max()]
        item = self.getPlotItem()
        self.empty_hint.set_empty(not ys)
        if not ys:
            empty_log_ticks(item, "left", EMPTY_TIME_NS, format_ns)
            return
        item.getAxis("left").setTicks(decade_ticks(min(ys), max(ys), format_ns))
        item.enableAutoRange(axis="y")


class WakeupPercentilePlot(PercentilePlot):
    """Wake-up latencies by percentile, apart from the gaps' (see WakeupHistogramPlot)."""

    def __init__(self, parent=None):
        super().__init__(parent, y_label=titled("latency", TIME_UNITS))

