"""FirstTouchView: a first-touch run (probes/first_touch/measure.py summarize) as the cost per page along the
mapping, first touch against second (PageCostPlot, log time axis: a fault costs microseconds, a
touch of a present page nanoseconds), the node table beside it (local against remote: ms per GiB
touched, first and pre-touched, the CPU time per GiB, THP stalls) and the verdict under them. A run
of a JVM command without and with -XX:+AlwaysPreTouch (probes/pretouch.py) is two pairs of bars
instead, start-up time and system time, and a table of the two runs.

Contract of the graphics items used here:
- each (node, touch) is one PlotDataItem with stepMode="center", keyed by (node, touch): x holds the
  stretch edges along the mapping in MiB (one more than the stretches; the last ends at the
  mapping's end, the last stretch being the remainder), y[i] the mean time per page of stretch i in ns. stepMode curves honour the log y axis (pyqtgraph maps y through log10 first).
- the first touch is solid, the second dashed; each node has its own colour.
- getOriginalDataset() returns (edges, ns per page) as given; the tests read it.
- a command run: one BarGraphItem per figure (start-up, system time) over x = 0 (without) and 1
  (with), on linear axes (the plot leaves log mode for it; BarGraphItem does not honour log axes).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.format import format_count, format_factor, format_ns, format_percent
from widgets.probe.axes import ProbePlot, decade_ticks, label_axes
from widgets.probe.result_table import SeriesView
from widgets.theme import series_color

COLUMNS = ("node", "first / GiB", "pre-touched / GiB", "ratio", "in kernel", "minor faults", "huge pages",
           "CPU / GiB", "compaction stalls", "pages ≥ 1 ms", "p99 first", "pages on node")
COMMAND_COLUMNS = ("run", "start-up", "user", "system", "minor faults", "flag given in")
MiB = float(1 << 20)


class PageCostPlot(ProbePlot):
    def __init__(self, parent=None):
        super().__init__(parent)
        item = self.getPlotItem()
        item.setLogMode(x=False, y=True)
        self.show_grid(True, True)
        label_axes(item, "position in the mapping (MiB)", "time per page", worded_ticks=True)
        self.set_title("cost per page: first touch (solid) and second (dashed)")
        self.add_legend()
        # right, halfway up: between a fault's microseconds and a present page's nanoseconds
        self.legend.anchor(itemPos=(1, 0.5), parentPos=(1, 0.5), offset=(-10, 0))
        self._curves: dict[tuple[int, int], pg.PlotDataItem] = {}
        self.bars: list[pg.BarGraphItem] = []       # a command run's: start-up, system time

    def curve(self, node: int, touch: int) -> pg.PlotDataItem | None:
        return self._curves.get((node, touch))

    def set_result(self, summary: dict) -> None:
        item = self.getPlotItem()
        for bar in self.bars:
            item.removeItem(bar)
        self.bars = []
        if summary.get("mode") == "command":
            self._set_command(summary)
            return
        item.setLogMode(x=False, y=True)
        item.getAxis("bottom").setTicks(None)
        label_axes(item, "position in the mapping (MiB)", "time per page", worded_ticks=True)
        self.set_title("cost per page: first touch (solid) and second (dashed)")
        stretch = float(summary.get("stretch_bytes") or 0)
        rows = summary.get("nodes", [])
        several = len(rows) > 1
        keep = set()
        ys: list[float] = []
        for i, row in enumerate(rows):
            for touch, key in ((1, "first"), (2, "second")):
                k = (row["node"], touch)
                keep.add(k)
                curve = self._curves.get(k)
                if curve is None:
                    name = f"{key} touch" + (f", memory on node {row['node']}" if several else "")
                    style = Qt.PenStyle.SolidLine if touch == 1 else Qt.PenStyle.DashLine
                    curve = pg.PlotDataItem(stepMode="center", name=name,
                                            pen=pg.mkPen(series_color(i), width=2, style=style))
                    self._curves[k] = curve
                    self.getPlotItem().addItem(curve)
                series = row["series"][key]
                if series:
                    offsets = [o for o, _ in series]
                    end = min(offsets[-1] + stretch, float(summary.get("size_bytes") or offsets[-1] + stretch))
                    x = np.asarray(offsets + [end], dtype=float) / MiB
                    y = np.asarray([v for _, v in series], dtype=float)
                    curve.setData(x, y)
                    ys += [float(y[y > 0].min()), float(y.max())] if (y > 0).any() else []
                else:
                    curve.setData([], [])
        for k in [k for k in self._curves if k not in keep]:
            self.legend.removeItem(self._curves[k])
            self.getPlotItem().removeItem(self._curves.pop(k))
        left = decade_ticks(min(ys), max(ys), format_ns, max(2, self.height() // 22)) if ys else None
        self.getPlotItem().getAxis("left").setTicks(left)

    def _set_command(self, summary: dict) -> None:
        """Start-up and system time of the two runs, side by side."""
        item = self.getPlotItem()
        for k in list(self._curves):
            self.legend.removeItem(self._curves[k])
            item.removeItem(self._curves.pop(k))
        item.setLogMode(x=False, y=False)
        label_axes(item, "the JVM command, run twice", "seconds", worded_ticks=True)
        self.set_title("start-up and system time, without and with -XX:+AlwaysPreTouch")
        runs = sorted(summary.get("runs", []), key=lambda r: r["pretouch"])
        for i, (key, name) in enumerate((("wall_ns", "start-up"), ("sys_ns", "system time"))):
            bar = pg.BarGraphItem(x=[j + (i - 0.5) * 0.3 for j in range(len(runs))], width=0.28,
                                  height=[r[key] / 1e9 for r in runs], brush=series_color(i), name=name)
            item.addItem(bar)
            self.bars.append(bar)
        item.getAxis("bottom").setTicks([[(0, "without"), (1, "with -XX:+AlwaysPreTouch")], []])
        item.getAxis("left").setTicks(None)
        item.setXRange(-0.6, 1.6, padding=0)


class FirstTouchView(SeriesView):
    """The First touch tab: `plot`, `table`, `verdict_label`."""

    def __init__(self, parent=None):
        super().__init__(PageCostPlot(), COLUMNS, "run the first-touch probe to see what fresh memory costs", parent)

    def set_result(self, summary: dict) -> None:
        self.plot.set_result(summary)
        if summary.get("mode") == "command":
            self._set_command(summary)
            return
        self._columns(COLUMNS)
        rows, cpus = [], []
        cpu = summary.get("cpu")
        for n in summary.get("nodes", []):
            f, s = n["first"], n["second"]
            where = {True: " (local)", False: " (remote)", None: ""}[n["local"]]
            vm = f.get("vmstat") or {}
            rows.append([f"{n['node']}{where}", _ms(f.get("ms_per_gib")), _ms(s.get("ms_per_gib")),
                         format_factor(n["ratio"]), _share(f["sys_share"]), format_count(f["minor_faults"]),
                         "?" if n["huge_pages"] is None else format_count(n["huge_pages"]), _ms(f.get("cpu_ms_per_gib")),
                         _n(vm.get("compact_stall")), _n(f.get("stalls")),
                         format_ns((f.get("percentiles") or {}).get("p99")), _share(n["on_node_share"])])
            cpus.append((cpu,) if isinstance(cpu, int) else ())
        self.table.set_rows(rows, cpus)
        thp = summary.get("thp") or {}
        notes = [f"THP: {thp.get('meaning')} (system: {thp.get('system')}, defrag {thp.get('defrag')})"]
        if summary.get("table_note"):
            notes.append(summary["table_note"])
        self.verdict_label.setText(summary.get("verdict", "") + "\n" + "; ".join(notes))

    def _set_command(self, summary: dict) -> None:
        self._columns(COMMAND_COLUMNS)
        rows = []
        for r in sorted(summary.get("runs", []), key=lambda r: r["pretouch"]):
            rows.append(["with -XX:+AlwaysPreTouch" if r["pretouch"] else "without", _s(r["wall_ns"]),
                         _s(r["user_ns"]), _s(r["sys_ns"]), format_count(r["minor_faults"]), r["flag_in"]])
        cpu = summary.get("cpu")
        self.table.set_rows(rows, [(cpu,) if isinstance(cpu, int) else ()] * len(rows))
        self.verdict_label.setText(summary.get("verdict", ""))

    def _columns(self, columns: tuple[str, ...]) -> None:
        if self.table.columnCount() != len(columns) or self.table.horizontalHeaderItem(0).text() != columns[0]:
            self.table.setColumnCount(len(columns))
            self.table.setHorizontalHeaderLabels(list(columns))


def _share(v) -> str:
    return "-" if v is None else format_percent(100 * v)


def _ms(v) -> str:
    return "-" if v is None else f"{v:,.1f} ms" if v < 100 else f"{v:,.0f} ms"


def _s(ns) -> str:
    return "-" if ns is None else f"{ns / 1e9:.2f} s"


def _n(v) -> str:
    return "-" if v is None else format_count(v)


# What the probe panel and a report find here by the probe's name (probes/record.py: view, picture).
View, Picture = FirstTouchView, PageCostPlot
