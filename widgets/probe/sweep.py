"""SweepPlot: the sweep probe's mean work-unit time per CPU as bars with ±1 standard deviation error
bars, CPUs in topology order (siblings of a core side by side), flagged CPUs (probes/sweep/measure.py
analyse: slower than the best CPU by more than its limit) in a warning colour.

`set_result(per_cpu, order)` takes the rows of probes.sweep.measure.analyse()["per_cpu"] (or the `cpus` list
of sweep.summarize) and draws them; it is called on every round of a live sweep.

Contract of the graphics items used here:
- bars: one BarGraphItem per colour class (normal, flagged), x = slot index (0..n-1 in topology
  order), height = mean in µs, width 0.7; BarGraphItem ignores log axes, and this plot is linear.
  Its boundingRect covers x - width/2 .. x + width/2 and 0 .. height, so autoRange includes them.
- error bars: one ErrorBarItem at the same x, y = mean, top = bottom = sd (µs); it is redrawn with
  setData, never re-created.
- the bottom axis has one tick per slot labelled with the CPU id (the slot order is not the id order).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from widgets.probe.axes import EmptyHint, ProbePlot, label_axes, titled
from widgets.theme import PlotColors, SERIES

# A CPU as fast as the others, and one flagged slower: the series' blue and red, which read on a light
# and a dark background alike.
NORMAL_COLOUR = SERIES[0]
FLAG_COLOUR = SERIES[3]


class SweepPlot(ProbePlot):
    def __init__(self, parent=None):
        super().__init__(parent)
        item = self.getPlotItem()
        self.show_grid(False, True)
        label_axes(item, titled("CPU", "id, in the grid's order"), titled("work unit, mean ± sd", "µs"))
        self.normal_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brush=NORMAL_COLOUR, pen=None)
        self.flag_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brush=FLAG_COLOUR, pen=None)
        self.error_bars = pg.ErrorBarItem(x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0),
                                          beam=0.25, pen=pg.mkPen(self.colors.foreground, width=1))
        for it in (self.normal_bars, self.flag_bars, self.error_bars):
            item.addItem(it)
        self._cpus: list[int] = []
        self._flagged: list[int] = []
        self._means: list[float] = []
        self.empty_hint = EmptyHint(self, "Run a sweep, or drop CPUs here")

    def restyled(self, colors: PlotColors) -> None:
        self.error_bars.setOpts(pen=pg.mkPen(colors.foreground, width=1))

    @property
    def cpus(self) -> list[int]:
        """CPU ids in slot order, as drawn."""
        return list(self._cpus)

    @property
    def flagged(self) -> list[int]:
        return list(self._flagged)

    def bar_brush(self, cpu: int) -> str:
        return FLAG_COLOUR if cpu in self._flagged else NORMAL_COLOUR

    def show_result(self, result: dict, order) -> None:
        """A sweep's result object (its record's view; probes/catalog.py): its `cpus` rows."""
        self.set_result(result["cpus"], order)

    def set_result(self, per_cpu, order=None) -> None:
        rows = {int(r["cpu"]): r for r in (per_cpu.values() if isinstance(per_cpu, dict) else per_cpu)}
        pos = {c: i for i, c in enumerate(order or ())}
        cpus = sorted(rows, key=lambda c: (pos.get(c, len(pos)), c))
        self._cpus = cpus
        self._flagged = [c for c in cpus if rows[c].get("flagged")]
        x = np.arange(len(cpus), dtype=float)
        mean = np.array([rows[c]["mean_ns"] / 1e3 for c in cpus], dtype=float)
        sd = np.array([(rows[c].get("sd_ns") or 0.0) / 1e3 for c in cpus], dtype=float)
        self._means = list(mean)
        flag = np.array([c in self._flagged for c in cpus], dtype=bool)
        self.normal_bars.setOpts(x=x[~flag], height=mean[~flag])
        self.flag_bars.setOpts(x=x[flag], height=mean[flag])
        self.error_bars.setData(x=x, y=mean, top=sd, bottom=sd)
        self.getPlotItem().getAxis("bottom").setTicks([[(i, str(c)) for i, c in enumerate(cpus)], []])
        self.empty_hint.set_empty(not cpus)
        if cpus:
            self.getPlotItem().setXRange(-0.6, len(cpus) - 0.4, padding=0)
            self.getPlotItem().setYRange(0, float((mean + sd).max()) * 1.08 or 1.0, padding=0)


# What the probe panel finds here by the probe's name (probes/record.py: view).
View = SweepPlot
