"""ScalingView: a scaling run (probes/scaling/measure.py summarize) as throughput against the number of CPUs
with the ideal line (ScalingPlot), the width table beside it (selecting a row lights up its CPUs in
the grid) and the verdict under them.

Contract of the graphics items used here:
- `measured`: one PlotDataItem through the pinned widths (x = CPUs, y = median throughput) with a
  round symbol per width; a width flagged for negative scaling gets its symbol in the warning colour
  (symbolBrush per point).
- `ideal`: a dashed PlotDataItem from the one-CPU throughput, y = throughput(1) x CPUs, over the same
  widths: what perfect scaling would give.
- `unpinned`: a single star ScatterPlotItem at (CPUs it may use, its median throughput).
- each is created once and given new data with setData on every update; the y range starts at 0.
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.format import format_compact, format_count, format_factor, format_ns, format_percent
from widgets.probe.axes import ProbePlot, label_axes
from widgets.probe.result_table import SeriesView
from widgets.probe.sweep import FLAG_COLOUR, NORMAL_COLOUR

COLUMNS = ("CPUs", "throughput", "speedup", "ideal", "waiting / wall", "CPU time", "CPUs used", "switches",
           "migrations", "negative")
IDEAL_COLOUR = "#7f7f7f"
UNPINNED_COLOUR = "#009E73"


class ScalingPlot(ProbePlot):
    def __init__(self, parent=None):
        super().__init__(parent)
        item = self.getPlotItem()
        self.show_grid(True, True)
        label_axes(item, "CPUs", "throughput")
        self.set_title("throughput against CPUs (median of the rounds)")
        self.add_legend(offset=(10, 10))
        self.measured = pg.PlotDataItem(name="measured", pen=pg.mkPen(NORMAL_COLOUR, width=2), symbol="o",
                                        symbolSize=9, symbolPen=None, symbolBrush=NORMAL_COLOUR)
        self.ideal = pg.PlotDataItem(name="ideal", pen=pg.mkPen(IDEAL_COLOUR, width=1.5, style=Qt.PenStyle.DashLine))
        self.unpinned = pg.ScatterPlotItem(name="unpinned", symbol="star", size=14, pen=None,
                                           brush=UNPINNED_COLOUR)
        for it in (self.ideal, self.measured, self.unpinned):
            item.addItem(it)

    def set_result(self, summary: dict) -> None:
        unit = "runs/s" if summary.get("mode") == "command" else "ops/s"
        self.getPlotItem().setLabel("left", "throughput", units=unit)
        rows = [r for r in summary.get("widths", []) if r["throughput"]]
        pinned = [r for r in rows if r["pinned"]]
        xs = [r["width"] for r in pinned]
        self.measured.setData(xs, [r["throughput"] for r in pinned],
                              symbolBrush=[FLAG_COLOUR if r["flagged"] else NORMAL_COLOUR for r in pinned])
        one = next((r["throughput"] for r in pinned if r["width"] == 1), None)
        self.ideal.setData(xs, [one * w for w in xs] if one else [])
        free = [r for r in rows if not r["pinned"]]
        self.unpinned.setData([r["width"] for r in free], [r["throughput"] for r in free])
        item = self.getPlotItem()
        widths = sorted({r["width"] for r in rows})
        item.getAxis("bottom").setTicks([[(w, str(w)) for w in widths], []])
        top = max([r["throughput"] for r in rows] + ([one * max(xs)] if one and xs else []), default=1.0)
        item.setYRange(0, top * 1.08, padding=0)
        if widths:
            item.setXRange(min(widths) - 0.3, max(widths) + 0.3, padding=0)


class ScalingView(SeriesView):
    """The Scaling tab: `plot`, `table`, `verdict_label`."""

    def __init__(self, parent=None):
        super().__init__(ScalingPlot(), COLUMNS, "run the scaling probe to see whether more CPUs help", parent)

    def set_result(self, summary: dict) -> None:
        self.plot.set_result(summary)
        command = summary.get("mode") == "command"
        rows, cpus = [], []
        for w in summary.get("widths", []):
            switches = None if w["voluntary"] is None else w["voluntary"] + (w["involuntary"] or 0)
            rows.append([w["label"], format_compact(w["throughput"]) + ("/s" if w["throughput"] else ""),
                         format_factor(w["speedup"]), f"{w['width']}x",
                         format_ns(w["wall_ns"]) if command else _share(w.get("wait_share")),
                         format_ns(w["cpu_ns"]), "-" if w.get("cpus_used") is None else f"{w['cpus_used']:.2f}",
                         _count(switches), _count(w["migrations"]),
                         f"{format_factor(w['factor'])} slower" if w["flagged"] else ""])
            cpus.append(tuple(w["cpus"]) if w["pinned"] else ())
        self.table.set_rows(rows, cpus)
        self.verdict_label.setText(summary.get("verdict", ""))


def _share(v) -> str:
    return "-" if v is None else format_percent(100 * v)


def _count(v) -> str:
    return "?" if v is None else format_count(round(v))


# What the probe panel and a report find here by the probe's name (probes/record.py: view, picture).
View, Picture = ScalingView, ScalingPlot
