"""MessagingView: a messaging run (probes/messaging/measure.py summarize) as the throughput of every placement
over its own measured time, one stepped line each (ThroughputPlot), under it the CPUs the unpinned
sender and receiver ran on, window by window (CpuStepsPlot), the placement table beside them (selecting
a row lights up the pair in the grid: what each lost, and the latency at each of the sender's paces)
and the verdict under them. MessagingPicture is the two plots stacked, as a report pictures a run.

Contract of the graphics items used here:
- each placement is one PlotDataItem with stepMode="center", keyed by its index in the run:
  x holds len(rates) + 1 window edges in seconds of that placement's own measured time (its segments
  back to back, in the order they ran: each pace in turn), y[i] the messages per second of window i,
  drawn flat across it. A live run's curves get setData as windows arrive; they are created once per
  placement.
- the unpinned placement is dashed, so it reads as the reference the pinned ones are compared with.
- the y range starts at 0 and is set on every update (no auto-range): steps keep their true size.
- CpuStepsPlot: two PlotDataItems (sender, receiver) with stepMode="center" over the same window
  edges, y[i] the CPU that side was on when window i closed (read every 256 messages and when it
  waits: sampled, so a thread that left and came back within a window shows no step); a window
  where a side's CPU was not read is a break (NaN). The y axis ticks are whole CPU ids.
- getOriginalDataset() returns (edges, values) as given; the tests read it.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.format import format_compact, format_count, format_ns, format_percent
from probes.messaging.measure import rate_label
from widgets.probe.axes import ProbePlot, label_axes
from widgets.probe.result_table import SeriesView
from widgets.theme import PlotColors, series_color

COLUMNS = ("placement", "sender -> receiver", "median (max pace)", "CV", "lost", "migrations")


def _over_time(plot: ProbePlot, left: str, title: str, legend_offset) -> pg.PlotItem:
    """A plot against the placement's own measured time (both of this view's plots), with its legend."""
    item = plot.getPlotItem()
    plot.show_grid(True, True)
    label_axes(item, "measured time of the placement", left)
    item.setLabel("bottom", "measured time of the placement", units="s")
    plot.set_title(title)
    plot.add_legend(offset=legend_offset)
    return item


class ThroughputPlot(ProbePlot):
    def __init__(self, parent=None):
        super().__init__(parent)
        # legend bottom right: the axis starts at 0, so the lines leave the bottom of the plot free
        item = _over_time(self, "messages", "throughput per 100 ms window, each pace in turn", (-10, -10))
        item.setLabel("left", "messages", units="/s")
        self._curves: dict[int, pg.PlotDataItem] = {}
        self._marks: list = []          # the pace lines and labels, replaced on every update

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
                                        pen=pg.mkPen(series_color(i), width=2, style=style))
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
            self.getPlotItem().setYRange(0, top * 1.15, padding=0)
        self._mark_paces(placements, summary.get("rates") or [], window_s, top)

    def _mark_paces(self, placements: list[dict], rates: list, window_s: float, top: float) -> None:
        """A dotted line where the sender's pace changes and the pace written above each stretch: every
        placement runs its paces in the same order (the alternated order turns round for all alike)."""
        item = self.getPlotItem()
        for mark in self._marks:
            item.removeItem(mark)
        self._marks = []
        paces = next((p.get("pace_of_window") for p in placements if p.get("pace_of_window")), None)
        if not paces or not rates or not top:
            return
        start = 0
        for i in range(1, len(paces) + 1):
            if i < len(paces) and paces[i] == paces[start]:
                continue
            if start:
                line = pg.InfiniteLine(start * window_s, angle=90,
                                       pen=pg.mkPen(self.colors.muted, style=Qt.PenStyle.DotLine))
                item.addItem(line)
                self._marks.append(line)
            rate = rates[paces[start]] if paces[start] < len(rates) else 0
            text = pg.TextItem(rate_label(rate), color=self.colors.muted, anchor=(0.5, 0))
            text.setPos((start + i) / 2 * window_s, top * 1.14)
            item.addItem(text)
            self._marks.append(text)
            start = i


    def restyled(self, colors: PlotColors) -> None:
        for mark in self._marks:
            if isinstance(mark, pg.TextItem):
                mark.setColor(colors.muted)
            else:
                mark.setPen(pg.mkPen(colors.muted, style=Qt.PenStyle.DotLine))


def cpu_steps(placement: dict, window_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edges, sender's CPU, receiver's CPU) per window of a placement; NaN where a side was not read
    (a run of an older coremap kept no CPUs: every window NaN)."""
    cpus = placement.get("cpu_series") or [None] * len(placement.get("series", []))
    send = np.array([c[0] if c and c[0] is not None and c[0] >= 0 else np.nan for c in cpus], dtype=float)
    recv = np.array([c[1] if c and c[1] is not None and c[1] >= 0 else np.nan for c in cpus], dtype=float)
    return np.arange(len(cpus) + 1) * window_s, send, recv


class CpuStepsPlot(ProbePlot):
    """The CPUs the unpinned placement's sender and receiver ran on, window by window."""

    def __init__(self, parent=None):
        super().__init__(parent)
        item = _over_time(self, "CPU", "unpinned: the CPU each side ran on", (-10, 5))
        self.sender = pg.PlotDataItem(stepMode="center", name="sender", connect="finite",
                                      pen=pg.mkPen(series_color(0), width=2))
        self.receiver = pg.PlotDataItem(stepMode="center", name="receiver", connect="finite",
                                        pen=pg.mkPen(series_color(1), width=2, style=Qt.PenStyle.DashLine))
        item.addItem(self.sender)
        item.addItem(self.receiver)
        # CPU ids are names, not quantities: no "(x0.001)" when the range is one CPU wide
        item.getAxis("left").enableAutoSIPrefix(False)

    def set_result(self, summary: dict) -> None:
        window_s = (summary.get("window_ns") or 100_000_000) / 1e9
        unpinned = next((p for p in summary.get("placements", []) if p["kind"] == "unpinned" and p["series"]), None)
        if unpinned is None:
            self.sender.setData([], [])
            self.receiver.setData([], [])
            return
        x, send, recv = cpu_steps(unpinned, window_s)
        self.sender.setData(x, send)
        self.receiver.setData(x, recv)
        seen = sorted({int(v) for v in np.concatenate([send, recv]) if not np.isnan(v)})
        axis = self.getPlotItem().getAxis("left")
        axis.setTicks([[(c, str(c)) for c in seen], []] if seen else None)
        if seen:
            self.getPlotItem().setYRange(seen[0] - 0.5, seen[-1] + 0.5, padding=0)


class MessagingPicture(QWidget):
    """The throughput over the unpinned placement's CPU steps: what a report pictures of a run."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.throughput = ThroughputPlot(self)
        self.steps = CpuStepsPlot(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.throughput, 3)
        lay.addWidget(self.steps, 2)

    def set_result(self, summary: dict) -> None:
        self.throughput.set_result(summary)
        self.steps.set_result(summary)


class MessagingView(SeriesView):
    """The Messaging tab: `plot` (a MessagingPicture: `plot.throughput`, `plot.steps`), `table`,
    `verdict_label`."""

    def __init__(self, parent=None):
        super().__init__(MessagingPicture(), COLUMNS, "run the messaging probe to compare placements", parent)

    def set_result(self, summary: dict) -> None:
        self.plot.set_result(summary)
        paces = [x["label"] for x in (summary.get("placements") or [{}])[0].get("paces", [])]
        columns = [*COLUMNS, *(f"p50 / p99 at {label}" for label in paces)]
        if columns != [self.table.horizontalHeaderItem(c).text() for c in range(self.table.columnCount())
                       if self.table.horizontalHeaderItem(c) is not None]:
            self.table.setColumnCount(len(columns))
            self.table.setHorizontalHeaderLabels(columns)
        rows, cpus = [], []
        for p in summary.get("placements", []):
            moved = p["migrations"]
            pair = "unpinned" if p["send"] is None else f"{p['send']} -> {p['recv']}"
            median = format_compact(p["median_rate"]) + "/s" if p.get("median_rate") is not None else "-"
            rows.append([p["name"], pair, median, format_percent(100 * p["cv"]) if p["cv"] is not None else "-",
                         _lost(p), f"{_count(moved['sender'])} / {_count(moved['receiver'])}",
                         *(_latency(x) for x in p.get("paces", []))])
            cpus.append(() if p["send"] is None else tuple(sorted({p["send"], p["recv"]})))
        self.table.set_rows(rows, cpus)
        missing = summary.get("missing") or []
        self.verdict_label.setText(summary.get("verdict", "") +
                                   (f"\nnot on this machine: {'; '.join(missing)}" if missing else ""))


def _latency(x: dict) -> str:
    lat = x.get("latency") or {}
    return f"{format_ns(lat.get('p50'))} / {format_ns(lat.get('p99'))}" if lat else "-"


def _lost(p: dict) -> str:
    if p.get("lost") is None:
        return "-"
    if not p["lost"]:
        return "none"
    return f"{format_count(p['lost'])} ({format_percent(100 * p['lost'] / p['sent'])})" if p.get("sent") else \
        format_count(p["lost"])


def _count(v) -> str:
    return "?" if v is None else format_count(v)


# What the probe panel and a report find here by the probe's name (probes/record.py: view, picture).
View, Picture = MessagingView, MessagingPicture
