"""Where the selected threads ran: CPU over time (a stepped line per thread) and the share of CPU time
per CPU (one bar per CPU and thread).

`set_tids(tids)` chooses the threads, `set_state(state)` applies a MachineState; both read only
`state.trails` (tid -> ((time, cpu), ...)) and `state.residency` (tid -> {cpu: share}). Curves are
created when a thread is chosen and only get new data on a tick.

The plots are built when the widget is first painted (or asked for a curve), and drawn only while it
is on screen: the dock starts behind the thread table, and pyqtgraph with numpy is ~0.3 s of start-up and
~30 MB (issue 12: the first frame imports only what it shows; nothing hidden is redrawn per tick).

Contracts of the pyqtgraph items used here:
- the trail curves use stepMode="right": y[i] is held from x[i] to x[i + 1], which is what a sampled
  "last CPU" means (the thread was seen on that CPU at x[i] and is taken to stay until the next
  sample); len(x) == len(y), and getData() returns the samples, not the drawn steps.
- the share bars are a BarGraphItem per thread with horizontal bars (x0=0, width=share) centred on
  each CPU id, offset per thread so several threads sit side by side; BarGraphItem ignores log
  axes, which is fine for shares in [0, 1].
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QWidget

from app.format import format_cpus
from app.sampling.machine_state import MachineState

if TYPE_CHECKING:
    import pyqtgraph as pg

# Tick labels for every CPU up to this many CPUs in view; above it pyqtgraph's own spacing.
_MAX_CPU_TICKS = 24


def _colour(i: int):
    import pyqtgraph as pg          # loaded already: only a built plot asks for colours
    return pg.intColor(i, hues=9, values=1, maxValue=220)


class ResidencyPlot(QWidget):
    """CPU-over-time for the chosen threads, with their per-CPU residency share beside it."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._tids: list[int] = []
        self._state: MachineState | None = None
        self._curves: dict[int, pg.PlotDataItem] = {}
        self._bars: dict[int, pg.BarGraphItem] = {}
        self._stale = False             # a state or thread choice not drawn yet (built but hidden)
        self.trail_plot: pg.PlotWidget | None = None
        self.share_plot: pg.PlotWidget | None = None
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)

    def paintEvent(self, event) -> None:
        # Painted means on screen: a dock tabbed behind another stays "visible" to Qt but is never
        # painted. Build and draw after this paint, not inside it.
        super().paintEvent(event)
        if self.trail_plot is None or self._stale:
            QTimer.singleShot(0, self._draw_now)

    def _build(self) -> None:
        # Imported here, not at the top: see the module docstring (start-up time and memory).
        import pyqtgraph as pg
        self.trail_plot = pg.PlotWidget(self)
        self.trail_plot.setLabel("left", "CPU")
        self.trail_plot.setLabel("bottom", "seconds before now")
        self.trail_plot.showGrid(x=True, y=True, alpha=0.2)
        self.legend = self.trail_plot.addLegend(offset=(10, 10))
        self.share_plot = pg.PlotWidget(self)
        self.share_plot.setLabel("bottom", "share of CPU time")
        self.share_plot.setXRange(0, 1, padding=0.02)
        self.share_plot.setYLink(self.trail_plot)
        self.share_plot.setMouseEnabled(x=False, y=True)
        self._layout.addWidget(self.trail_plot, 4)
        self._layout.addWidget(self.share_plot, 1)

    def _draw_now(self) -> None:
        """Build the plots if need be and draw what is not drawn yet."""
        if self.trail_plot is None:
            self._build()
            self._stale = True
        if self._stale:
            self._stale = False
            self._sync_curves()
            self._redraw()

    def _changed(self) -> None:
        if self.trail_plot is not None and not self.visibleRegion().isEmpty():
            self._draw_now()
        else:
            self._stale = True              # drawn at the next paint (widgets/residency_plot.py)

    @property
    def tids(self) -> list[int]:
        return list(self._tids)

    def set_tids(self, tids) -> None:
        tids = list(dict.fromkeys(int(t) for t in tids))
        if tids == self._tids:
            return
        self._tids = tids
        self._changed()

    def _sync_curves(self) -> None:
        """One trail curve per chosen thread (the plots are built)."""
        import pyqtgraph as pg          # loaded by _build
        tids = self._tids
        for tid in [t for t in self._curves if t not in tids]:
            curve = self._curves.pop(tid)
            self.legend.removeItem(curve)
            self.trail_plot.removeItem(curve)
        for tid in [t for t in self._bars if t not in tids]:
            self.share_plot.removeItem(self._bars.pop(tid))
        for i, tid in enumerate(tids):
            if tid not in self._curves:
                pen = pg.mkPen(_colour(i), width=2)
                curve = pg.PlotDataItem(stepMode="right", pen=pen, name=self._name(tid))
                self.trail_plot.addItem(curve)
                self._curves[tid] = curve

    def set_state(self, state: MachineState) -> None:
        self._state = state
        self._changed()

    def curve(self, tid: int) -> pg.PlotDataItem | None:
        """The trail curve of a chosen thread (tests read its data); drawn now if it was not."""
        self._draw_now()
        return self._curves.get(tid)

    def shares(self, tid: int) -> dict[int, float]:
        """The residency shares drawn for a chosen thread."""
        self._draw_now()
        bar = self._bars.get(tid)
        if bar is None:
            return {}
        ys = bar.opts["y"]
        ws = bar.opts["width"]
        off = self._bar_offset(self._tids.index(tid))
        return {int(round(y - off)): float(w) for y, w in zip(ys, ws)}

    def _name(self, tid: int) -> str:
        state = self._state
        tasks = state.sample.tasks if state is not None else None
        t = tasks.tasks.get(tid) if tasks is not None else None
        return f"{t.comm} ({tid})" if t is not None else f"tid {tid}"

    def _bar_offset(self, i: int) -> float:
        n = max(len(self._tids), 1)
        h = 0.8 / n
        return -0.4 + h * (i + 0.5)

    def _redraw(self) -> None:
        import numpy as np              # loaded with pyqtgraph by _build
        import pyqtgraph as pg
        state = self._state
        trails = state.trails if state is not None else {}
        residency = state.residency if state is not None else {}
        now = state.sample.time if state is not None else 0.0
        cpus_seen: set[int] = set()
        n = max(len(self._tids), 1)
        for i, tid in enumerate(self._tids):
            curve = self._curves[tid]
            trail = trails.get(tid, ())
            if trail:
                xs = np.fromiter((t - now for t, _ in trail), dtype=float, count=len(trail))
                ys = np.fromiter((c for _, c in trail), dtype=float, count=len(trail))
                cpus_seen.update(int(c) for c in ys)
                curve.setData(xs, ys)
            else:
                curve.setData([], [])
            label = self.legend.getLabel(curve)
            name = self._name(tid)
            if label is not None and label.text != name:
                label.setText(name)
            share = residency.get(tid) or {}
            cpus_seen.update(share)
            bar = self._bars.get(tid)
            if bar is not None:
                self.share_plot.removeItem(bar)
                del self._bars[tid]
            if share:
                ids = sorted(share)
                bar = pg.BarGraphItem(x0=0, y=np.array(ids, dtype=float) + self._bar_offset(i),
                                      height=0.8 / n, width=[share[c] for c in ids],
                                      brush=_colour(i), pen=pg.mkPen(None))
                self.share_plot.addItem(bar)
                self._bars[tid] = bar
        self._set_cpu_ticks(cpus_seen)

    def _set_cpu_ticks(self, cpus: set[int]) -> None:
        # Integer ticks on the CPU axis: a thread hopping between CPUs 6 and 11 reads as "6" and "11",
        # not "7.5". Only the CPUs that appear are labelled, so a 256-CPU machine stays legible.
        for plot in (self.trail_plot, self.share_plot):
            axis = plot.getAxis("left")
            if cpus and len(cpus) <= _MAX_CPU_TICKS:
                axis.setTicks([[(c, str(c)) for c in sorted(cpus)], []])
            else:
                axis.setTicks(None)
        if cpus:
            self.trail_plot.setYRange(min(cpus) - 0.5, max(cpus) + 0.5, padding=0)
            self.trail_plot.setToolTip(f"CPUs in view: {format_cpus(cpus)}")
