"""MessagingView: a messaging run (probes/messaging.py summarize) as the throughput of every placement
over its own measured time, one stepped line each (ThroughputPlot), the placement table beside it
(selecting a row lights up the pair in the grid) and the verdict under them.

Contract of the graphics items used here:
- each placement is one PlotDataItem with stepMode="center", keyed by its index in the run:
  x holds len(rates) + 1 window edges in seconds of that placement's own measured time (its segments
  back to back, in the order they ran), y[i] the messages per second of window i, drawn flat across
  it. A live run's curves get setData as windows arrive; they are created once per placement.
- the unpinned placement is dashed, so it reads as the reference the pinned ones are compared with.
- the y range starts at 0 and is set on every update (no auto-range): steps keep their true size.
- getOriginalDataset() returns (edges, rates) as given; the tests read it.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.format import format_compact, format_count, format_ns, format_percent
from widgets.probe.axes import label_axes
from widgets.probe.histogram_plot import run_colour
from widgets.probe.result_table import SeriesView

COLUMNS = ("placement", "sender -> receiver", "median", "CV", "migrations", "p50", "p99", "received")


class ThroughputPlot(pg.PlotWidget):
    def __init__(self, parent=None):
        super().__init__(parent, background="w")
        item = self.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.25)
        label_axes(item, "measured time of the placement", "messages")
        item.setLabel("bottom", "measured time of the placement", units="s")
        item.setLabel("left", "messages", units="/s")
        item.setTitle("throughput per 100 ms window", color="k")
        # bottom right: the axis starts at 0, so the lines leave the bottom of the plot free
        self.legend = item.addLegend(offset=(-10, -10), labelTextColor="k")
        self._curves: dict[int, pg.PlotDataItem] = {}

    def curve(self, index: int) -> pg.PlotDataItem | None:
        return self._curves.get(index)

    def legend_labels(self) -> list[str]:
        return [label.text for _sample, label in self.legend.items]

    def set_result(self, summary: dict) -> None:
        window_s = (summary.get("window_ns") or 100_000_000) / 1e9
        placements = summary.get("placements", [])
        for gone in [i for i in self._curves if i >= len(placements)]:
            self.legend.removeItem(self._curves[gone])
            self.getPlotItem().removeItem(self._curves.pop(gone))
        for i, p in enumerate(placements):
            curve = self._curves.get(i)
            if curve is None or curve.name() != p["name"]:
                if curve is not None:
                    self.legend.removeItem(curve)
                    self.getPlotItem().removeItem(curve)
                style = Qt.PenStyle.DashLine if p["kind"] == "unpinned" else Qt.PenStyle.SolidLine
                curve = pg.PlotDataItem(stepMode="center", name=p["name"],
                                        pen=pg.mkPen(run_colour(i), width=2, style=style))
                self._curves[i] = curve
                self.getPlotItem().addItem(curve)
            rates = np.asarray(p["series"], dtype=float)
            if len(rates):
                curve.setData(np.arange(len(rates) + 1) * window_s, rates)
            else:
                curve.setData([], [])
        # from zero: a step from 20M to 10M is half the throughput, and looks it
        top = max((max(p["series"]) for p in placements if p["series"]), default=0.0)
        if top:
            self.getPlotItem().setYRange(0, top * 1.08, padding=0)


class MessagingView(SeriesView):
    """The Messaging tab: `plot`, `table`, `verdict_label`."""

    def __init__(self, parent=None):
        super().__init__(ThroughputPlot(), COLUMNS, "run the messaging probe to compare placements", parent)

    def set_result(self, summary: dict) -> None:
        self.plot.set_result(summary)
        rows, cpus = [], []
        for p in summary.get("placements", []):
            lat = p.get("latency") or {}
            moved = p["migrations"]
            pair = "unpinned" if p["send"] is None else f"{p['send']} -> {p['recv']}"
            rows.append([p["name"], pair, format_compact(p["median_rate"]) + "/s",
                         format_percent(100 * p["cv"]) if p["cv"] is not None else "-",
                         f"{_count(moved['sender'])} / {_count(moved['receiver'])}",
                         format_ns(lat.get("p50")), format_ns(lat.get("p99")), format_count(p["received"])])
            cpus.append(() if p["send"] is None else tuple(sorted({p["send"], p["recv"]})))
        self.table.set_rows(rows, cpus)
        missing = summary.get("missing") or []
        self.verdict_label.setText(summary.get("verdict", "") +
                                   (f"\nnot on this machine: {'; '.join(missing)}" if missing else ""))


def _count(v) -> str:
    return "?" if v is None else format_count(v)
