"""FirstTouchView: a first-touch run (probes/first_touch.py summarize) as the cost per page along the
mapping, first touch against second (PageCostPlot, log time axis: a fault costs microseconds, a
touch of a present page nanoseconds), the node table beside it (local against remote) and the
verdict under them.

Contract of the graphics items used here:
- each (node, touch) is one PlotDataItem with stepMode="center", keyed by (node, touch): x holds the
  stretch edges along the mapping in MiB (one more than the stretches; the last ends at the
  mapping's end, the last stretch being the remainder), y[i] the mean time per page of stretch i in ns. stepMode curves honour the log y axis (pyqtgraph maps y through log10 first).
- the first touch is solid, the second dashed; each node has its own colour.
- getOriginalDataset() returns (edges, ns per page) as given; the tests read it.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.format import format_count, format_factor, format_ns, format_percent
from widgets.probe.axes import decade_ticks, label_axes
from widgets.probe.histogram_plot import run_colour
from widgets.probe.result_table import SeriesView

COLUMNS = ("node", "first / page", "second / page", "ratio", "in kernel", "minor faults", "huge pages",
           "p99 first", "pages on node")
MiB = float(1 << 20)


class PageCostPlot(pg.PlotWidget):
    def __init__(self, parent=None):
        super().__init__(parent, background="w")
        item = self.getPlotItem()
        item.setLogMode(x=False, y=True)
        item.showGrid(x=True, y=True, alpha=0.25)
        label_axes(item, "position in the mapping (MiB)", "time per page", worded_ticks=True)
        item.setTitle("cost per page: first touch (solid) and second (dashed)", color="k")
        self.legend = item.addLegend(labelTextColor="k")
        # right, halfway up: between a fault's microseconds and a present page's nanoseconds
        self.legend.anchor(itemPos=(1, 0.5), parentPos=(1, 0.5), offset=(-10, 0))
        self._curves: dict[tuple[int, int], pg.PlotDataItem] = {}

    def curve(self, node: int, touch: int) -> pg.PlotDataItem | None:
        return self._curves.get((node, touch))

    def set_result(self, summary: dict) -> None:
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
                                            pen=pg.mkPen(run_colour(i), width=2, style=style))
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


class FirstTouchView(SeriesView):
    """The First touch tab: `plot`, `table`, `verdict_label`."""

    def __init__(self, parent=None):
        super().__init__(PageCostPlot(), COLUMNS, "run the first-touch probe to see what fresh memory costs", parent)

    def set_result(self, summary: dict) -> None:
        self.plot.set_result(summary)
        rows, cpus = [], []
        cpu = summary.get("cpu")
        for n in summary.get("nodes", []):
            f, s = n["first"], n["second"]
            where = {True: " (local)", False: " (remote)", None: ""}[n["local"]]
            rows.append([f"{n['node']}{where}", format_ns(f["ns_per_page"]), format_ns(s["ns_per_page"]),
                         format_factor(n["ratio"]), _share(f["sys_share"]), format_count(f["minor_faults"]),
                         "?" if n["huge_pages"] is None else format_count(n["huge_pages"]),
                         format_ns((f.get("percentiles") or {}).get("p99")), _share(n["on_node_share"])])
            cpus.append((cpu,) if isinstance(cpu, int) else ())
        self.table.set_rows(rows, cpus)
        thp = summary.get("thp") or {}
        notes = [f"THP: {thp.get('meaning')} (system: {thp.get('system')}, defrag {thp.get('defrag')})"]
        if summary.get("table_note"):
            notes.append(summary["table_note"])
        self.verdict_label.setText(summary.get("verdict", "") + "\n" + "; ".join(notes))


def _share(v) -> str:
    return "-" if v is None else format_percent(100 * v)
