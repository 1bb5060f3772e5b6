"""Pictures made offscreen, for reports, `coremap screenshot` and `coremap --screenshot`: the topology
grid (with its legend) for a MachineState coloured by a metric, and probe result plots, as PNG or SVG
bytes. The whole window is pictured by the composition root (widgets/application.py), which alone
builds it; `offscreen` and `picture_bytes` here are what both use.

Nothing here reads the machine itself: a MachineState comes from app.sampling.sampler.Sampler (the same
code the window runs), and probe plots draw the result objects they are given.

A probe whose record names a picture is pictured by the Picture of widgets/probe/<name>.py, the plot its panel
tab shows (render_result_plot), given the result object. Histogram probes' plots: gap length (µs,
log) against gaps per CPU-hour (log), or a wakeup run's latency against wake-ups per CPU-hour (never
on the gaps' axes), drawn with pyqtgraph's
stepMode="center" curves, which honour log axes (BarGraphItem does not). A histogram row with no
gap is not drawn at all: log10(0) has no place on the axis, and inventing a floor would draw a
count that was never measured. So each run of non-empty rows is its own stepped curve.

Contract of the plot items: for stepMode="center", len(x) == len(y) + 1 (x are the bin edges).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLayout, QVBoxLayout, QWidget

from app.format import format_compact, format_ns
from app.sampling.sampler import Sampler
from app.sampling.sources import MachineSource
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot
from probes.catalog import RECORDS
from probes.histogram import gaps_per_hour
from widgets import export
from widgets.harness import application
from widgets.theme import PAPER, series_color, style_plot
from widgets.topology.view import TopologyView

GRID_SIZE = (1200, 760)
PLOT_SIZE = (900, 380)
# Seconds between the two reads of the live machine that give a picture its first rates.
RATE_WINDOW = 0.5


def first_state(sampler: MachineSource, wait: float = RATE_WINDOW) -> MachineState:
    """The state a picture shows: a snapshot's two captures (rates) or its one (totals); the live
    machine is sampled twice, `wait` seconds apart, so the colours are rates."""
    state = sampler.tick()
    if sampler.live:
        time.sleep(wait)
        state = sampler.tick()
    return state


def state_for(root: SysRoot) -> MachineState:
    """first_state of a new Sampler on `root`."""
    return first_state(Sampler(root))


def settle(n: int = 3) -> None:
    """Let Qt lay out and paint what was just shown or changed (offscreen, nothing else drives it)."""
    app = application()
    for _ in range(n):
        app.processEvents()


@contextmanager
def offscreen(build: Callable[[], QWidget], size: tuple[int, int]) -> Iterator[QWidget]:
    """The top-level widget `build()` makes (once the QApplication exists), shown at `size` for the
    `with` block (offscreen unless a display was chosen), then closed and deleted."""
    application()
    widget = build()
    if QGuiApplication.platformName() == "offscreen" and widget.layout() is not None:
        # The offscreen platform warns "does not support propagateSizeHints()" when a top-level
        # widget's layout sets a minimum size (see widgets/main_window.py); nobody resizes it.
        widget.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
    try:
        widget.resize(*size)
        widget.show()
        settle()
        yield widget
    finally:
        widget.close()
        widget.deleteLater()
        settle(1)


def picture_bytes(widget: QWidget, fmt: str, *, title: str, extra_below: QWidget | None = None) -> bytes:
    """What `widget` shows as PNG bytes, or (fmt "svg") it and `extra_below` drawn as SVG."""
    if fmt == "svg":
        return export.svg_bytes(widget, title=title, extra_below=extra_below)
    return export.png_bytes(widget)


# -- the grid ------------------------------------------------------------------------------------

class _GridPanel(QWidget):
    """A TopologyView with its colour legend under it, as the window shows them."""

    def __init__(self, metric):
        super().__init__()
        self.view = TopologyView(self, metric=metric)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.view.legend)


def _fit_height(panel: _GridPanel) -> None:
    """A small machine's grid stops growing at the view's largest fit scale, and sat as a small box in
    a tall empty frame (a 2-CPU machine's report): shorten the picture to the grid's height."""
    view = panel.view
    want = int(view.scene().sceneRect().height() * view.transform().m11()) + 2 * view.frameWidth() + 16
    if want < view.height() - 16:
        panel.resize(panel.width(), panel.height() - (view.height() - want))
        settle()
        view.zoom_fit()
        settle()


def render_grid(state: MachineState, *, fmt: str = "png", size=GRID_SIZE, metric: str | None = "irq",
                quiet=()) -> bytes:
    """The topology grid for `state` coloured by `metric`, as PNG or SVG bytes; the `quiet` CPUs (made
    quiet by an isolate in effect) carry the quiet badge the window's grid shows, isolated ones
    (isolcpus) their own as always."""
    with offscreen(lambda: _GridPanel(metric), size) as panel:
        panel.view.set_quiet_cpus(quiet)
        panel.view.set_state(state)
        settle()
        panel.view.zoom_fit()
        settle()
        _fit_height(panel)
        if fmt == "svg":
            return picture_bytes(panel.view, fmt, title="coremap topology", extra_below=panel.view.legend)
        return picture_bytes(panel, fmt, title="coremap topology")


# -- probe plots ----------------------------------------------------------------------------------

def gap_rows(result: dict) -> list[tuple[float, float, float]]:
    """(lo_us, hi_us, gaps per CPU-hour) for a probe result: its own gaps_per_cpu_hour rows, or
    rows computed from its buckets and sampled time."""
    rows = result.get("gaps_per_cpu_hour")
    if not rows and result.get("buckets") and result.get("sampled_seconds"):
        rows = gaps_per_hour(result["buckets"], float(result["sampled_seconds"]) * 1e9)["rows"]
    out = []
    for r in rows or []:
        lo = float(r["lo_ns"])
        hi = float(r["hi_ns"]) if r.get("hi_ns") else lo * 2     # the open last row: one octave
        out.append((lo / 1e3, hi / 1e3, float(r.get("per_hour", 0.0))))
    return out


def _runs(rows):
    """Runs of consecutive non-empty rows: [(edges, values)], edges one longer than values."""
    runs, edges, vals = [], [], []
    for lo, hi, v in rows:
        if v > 0:
            if not edges:
                edges.append(lo)
            elif edges[-1] != lo:
                runs.append((edges, vals))
                edges, vals = [lo], []
            edges.append(hi)
            vals.append(v)
        elif edges:
            runs.append((edges, vals))
            edges, vals = [], []
    if edges:
        runs.append((edges, vals))
    return runs


# What a histogram run is drawn against, by the kind of its samples (axes_of): (x, y, empty plot's words).
AXES = {"gaps": ("gap length", "gaps per CPU-hour", "no gap above the threshold was measured"),
        "latency": ("latency", "wake-ups per CPU-hour", "no wake-up was measured")}


def axes_of(result: dict) -> str:
    """"gaps" for a result of read-to-read intervals (jitter: its record names where gaps start, or an
    unknown probe's result that counts gaps), "latency" for one whose every sample counts (a wakeup
    run): the panel draws each on axes of its own (widgets/probe/tabs.py), and so does a report;
    issue 28: wakeup runs were drawn against "gap length"."""
    record = RECORDS.get(result.get("probe"))
    return "gaps" if (record.gaps_from if record is not None else "gaps" in result) else "latency"


def build_probe_plot(results: list[dict], labels: list[str] | None = None, axes: str = "gaps"):
    """A pyqtgraph PlotWidget with one stepped curve set per result (not shown), on `axes` (AXES)."""
    # Imported here, not at the top: the window imports this module at start, and pyqtgraph with
    # numpy is ~0.3 s and ~30 MB that only a picture of a probe plot needs (issue 12).
    import numpy as np
    import pyqtgraph as pg
    w = pg.PlotWidget()
    item = w.getPlotItem()
    item.setLogMode(x=True, y=True)
    x_label, y_label, nothing = AXES[axes]
    item.setLabel("bottom", x_label)
    item.setLabel("left", y_label)
    # On paper: this picture goes into reports (widgets/theme.py, PAPER), whatever the desktop's theme.
    style_plot(w, PAPER)
    item.showGrid(x=True, y=True, alpha=PAPER.grid_alpha)
    legend = item.addLegend(offset=(-10, 10), labelTextColor=PAPER.foreground) if len(results) > 1 else None
    xs, ys = [], []
    runs_of = [_runs(gap_rows(res)) for res in results]
    all_vals = [v for runs in runs_of for _, vals in runs for v in vals]
    # Whole decades on the count axis: a range under one decade makes pyqtgraph label every minor
    # tick, and the curves close down to the bottom of the plot so each bar reads as a bar.
    floor = math.floor(math.log10(min(all_vals))) if all_vals else 0
    for i, res in enumerate(results):
        colour = series_color(i)
        label = (labels[i] if labels else None) or f"{res.get('probe', 'probe')} CPU {res.get('cpu')}"
        first = True
        fill = pg.mkColor(colour)
        fill.setAlpha(50 if len(results) > 1 else 80)
        for edges, vals in runs_of[i]:
            curve = pg.PlotDataItem(np.array(edges), np.array(vals), stepMode="center",
                                    pen=pg.mkPen(colour, width=2), fillLevel=floor, brush=fill,
                                    name=label if first and legend is not None else None)
            item.addItem(curve)
            first = False
            xs += edges
            ys += vals
    if xs:
        # Decade ticks only, labelled in words a reader compares at a glance (pyqtgraph's log
        # axis otherwise labels every minor tick when the range spans few decades).
        x_lo, x_hi = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
        item.getAxis("bottom").setTicks([[(d, format_ns(1e3 * 10.0 ** d)) for d in range(x_lo, x_hi + 1)], []])
        y_hi = max(floor + 1, math.ceil(math.log10(max(ys)) + 0.05))
        item.getAxis("left").setTicks([[(d, format_compact(10.0 ** d)) for d in range(floor, y_hi + 1)], []])
        item.setXRange(math.log10(min(xs)), math.log10(max(xs)), padding=0.04)
        # A little room past the end decades, or pyqtgraph drops their labels as clipped.
        item.setYRange(floor - 0.06, y_hi + 0.06, padding=0)
    else:
        text = pg.TextItem(nothing, color=PAPER.foreground, anchor=(0.5, 0.5))
        item.setLogMode(x=False, y=False)
        item.addItem(text)
        text.setPos(0.5, 0.5)
        item.setXRange(0, 1)
        item.setYRange(0, 1)
    return w


def render_probe_plot(results: list[dict] | dict, *, fmt: str = "png", size=PLOT_SIZE,
                      labels: list[str] | None = None) -> bytes:
    """Gap lengths (or wake-up latencies) per CPU-hour for one probe result or several side by side,
    on the first one's axes (axes_of), as PNG or SVG bytes."""
    if isinstance(results, dict):
        results = [results]
    with offscreen(lambda: build_probe_plot(list(results), labels, axes_of(results[0])), size) as plot:
        return picture_bytes(plot, fmt, title="coremap probe")


def render_result_plot(result: dict, *, fmt: str = "png", size=PLOT_SIZE) -> bytes:
    """A result drawn by its probe's Picture (widgets/probe/<name>.py: the plot its panel tab shows),
    as PNG or SVG bytes; its record's `picture` says what it shows. The plot's module (pyqtgraph,
    numpy) is imported when a picture is made, not with this module, which the window imports at start
    (issue 12: the first frame imports only what it shows)."""
    record = RECORDS[result["probe"]]
    from widgets.probe.axes import to_paper
    with offscreen(record.part("widgets.probe.{}").Picture, size) as plot:
        to_paper(plot)                      # a report is read on white, whatever the desktop's theme
        plot.set_result(result)
        settle()
        return picture_bytes(plot, fmt, title=f"coremap {record.name}: {record.picture}")
