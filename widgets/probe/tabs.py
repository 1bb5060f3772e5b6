"""ProbeTabs: the probe panel's views of its runs, one tab each: Histogram and Percentiles (the gaps
of runs of read-to-read intervals: jitter, and oslat files, overlaid, keyed by run), Latency and
Latency percentiles (runs whose every sample counts: wakeup runs, cyclictest files, .hlog files that
are not a jitter run's; another quantity, never drawn on the gaps' axes, issue 28), Figures (RunTable:
the histogram runs' figures side by side), then each probe's own view, where its record names one
(View of widgets/probe/<name>.py: Sweep, Core to core, ... in the catalog's order), Summary (the text
`coremap probe` prints, probes/text.py) and Gaps (what ran in a jitter run's largest gaps).

A record's view takes `show_result(result, order)`, order being the CPUs in the grid's order
(`set_topology`): siblings of a core side by side, not in id order. A view with `cpus_highlighted`
(a series view's selected row) passes it on.

The plots (pyqtgraph, and numpy with it: ~0.3 s of start-up and ~30 MB) are built when their tab is
first painted or drawn on; until then a tab holds an empty page (issue 12: the first frame imports only
what it shows). `histogram_plot`, `percentile_plot` and `view(probe)` build theirs when read.
"""
from __future__ import annotations

from functools import partial

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QPlainTextEdit, QTabWidget, QWidget

from app.machine.topology import Topology, layout
from probes.catalog import RECORDS
from probes.text import format_result
from widgets.probe.gap_attribution import GapAttributionView
from widgets.probe.runs import RunRecord


def _histogram(parent, latency=False):
    from widgets.probe.histogram_plot import HistogramPlot, WakeupHistogramPlot
    return (WakeupHistogramPlot if latency else HistogramPlot)(parent)


def _percentiles(parent, latency=False):
    from widgets.probe.percentile_plot import PercentilePlot, WakeupPercentilePlot
    return (WakeupPercentilePlot if latency else PercentilePlot)(parent)


def _figures(parent):
    from widgets.probe.run_table import RunTable
    return RunTable(parent)


# (key, tab title, what builds it) of each plot tab, in tab order; they come first. A plot's module is
# imported when its tab is first built, not at the top: see the module docstring.
_PLOTS = (("histogram", "Histogram", _histogram), ("percentiles", "Percentiles", _percentiles),
          ("latency", "Latency", partial(_histogram, latency=True)),
          ("latency-percentiles", "Latency percentiles", partial(_percentiles, latency=True)),
          ("figures", "Figures", _figures),
          *((r.name, r.view, lambda parent, r=r: r.part("widgets.probe.{}").View(parent))
            for r in RECORDS.values() if r.view))
_INDEX = {key: i for i, (key, _title, _build) in enumerate(_PLOTS)}
# The (histogram, percentiles) tabs of each kind of histogram run (axes_of)
_PAIRS = {"gaps": ("histogram", "percentiles"), "latency": ("latency", "latency-percentiles")}


def axes_of(rec: RunRecord) -> str:
    """"gaps" for a run of read-to-read intervals (jitter, an oslat or jitter file: it draws only its
    gaps), "latency" for one of samples that each count (wakeup, a cyclictest file)."""
    record = RECORDS.get(rec.probe)
    return "gaps" if rec.gaps_from_ns is not None or (record is not None and record.gaps_from) else "latency"


def topology_order(topology: Topology) -> list[int]:
    """CPU ids in the order the grid draws them (nested groups, siblings of a core together)."""
    out: list[int] = []

    def walk(g):
        for ch in g.children:
            if isinstance(ch, int):
                out.append(ch)
            else:
                walk(ch)
    walk(layout(topology))
    seen = set(out)
    return out + [c for c in topology.online if c not in seen]


class ProbeTabs(QTabWidget):
    cpus_highlighted = Signal(object)       # tuple of CPU ids: a series view's selected row

    def __init__(self, parent=None):
        super().__init__(parent)
        self._plots: dict[str, QWidget] = {}
        self._placing = False                   # a built plot is taking its tab's place
        for _key, title, _build in _PLOTS:
            self.addTab(QWidget(self), title)
        self.summary_text = QPlainTextEdit(self)
        self.summary_text.setReadOnly(True)
        self.summary_text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.gap_view = GapAttributionView(self)
        self.addTab(self.summary_text, "Summary")
        self.addTab(self.gap_view, "Gaps")
        self._topology: Topology | None = None
        self._axes: dict[int, str] = {}          # run key -> the kind of axes it is drawn on
        self._order: list[int] = []
        self.currentChanged.connect(self._on_current_changed)

    # -- the plots, built on first use ----------------------------------------------------------
    histogram_plot = property(lambda self: self._plot(_INDEX["histogram"]))
    percentile_plot = property(lambda self: self._plot(_INDEX["percentiles"]))
    wakeup_plot = property(lambda self: self._plot(_INDEX["latency"]))
    # no plot, so no pyqtgraph: built with the panel, which connects to it
    figures = property(lambda self: self._plot(_INDEX["figures"]))
    wakeup_percentile_plot = property(lambda self: self._plot(_INDEX["latency-percentiles"]))

    def plots_of(self, axes: str) -> tuple[QWidget, QWidget]:
        """The (histogram, percentiles) plots of runs drawn on `axes` ("gaps" or "latency")."""
        return tuple(self._plot(_INDEX[key]) for key in _PAIRS[axes])

    def view(self, probe: str) -> QWidget:
        """The tab that draws `probe`'s runs, as its record names it; KeyError for a probe without one."""
        return self._plot(_INDEX[probe])

    def _plot(self, i: int) -> QWidget:
        key, title, build = _PLOTS[i]
        plot = self._plots.get(key)
        if plot is None:
            plot = self._plots[key] = build(self)
            if hasattr(plot, "cpus_highlighted"):
                plot.cpus_highlighted.connect(self.cpus_highlighted)
            current, empty = self.currentIndex(), self.widget(i)
            self._placing = True
            self.removeTab(i)
            self.insertTab(i, plot, title)
            self.setCurrentIndex(current)
            self._placing = False
            empty.deleteLater()
        return plot

    def paintEvent(self, event) -> None:
        # Painted means on screen: the Probes dock starts tabbed behind another, "visible" to Qt but
        # never painted. The current tab's plot is built after this paint, not inside it.
        super().paintEvent(event)
        if 0 <= self.currentIndex() < len(_PLOTS) and _PLOTS[self.currentIndex()][0] not in self._plots:
            QTimer.singleShot(0, lambda: self._on_current_changed(self.currentIndex()))

    def _on_current_changed(self, index: int) -> None:
        if not self._placing and not self.visibleRegion().isEmpty() and 0 <= index < len(_PLOTS):
            self._plot(index)

    @property
    def order(self) -> list[int]:
        """CPU ids in the grid's order (empty before the first topology)."""
        return list(self._order)

    def set_topology(self, topology: Topology) -> None:
        if topology is not self._topology:
            self._topology = topology
            self._order = topology_order(topology)

    def tabs_of(self, probe: str, run: RunRecord | None = None) -> list[QWidget]:
        """The tabs that show a run of `probe` (`run`, when known), the one to go to first: its record's
        view, its kind's histogram and percentiles, or else its Summary; then its Summary, and the Gaps
        of a run that was attributed."""
        rec = RECORDS.get(probe)
        if rec is not None and rec.view:
            tabs = [self.view(probe)]
        elif rec is None or rec.histogram:
            axes = axes_of(run) if run is not None else ("gaps" if rec is not None and rec.gaps_from else "latency")
            tabs = [*self.plots_of(axes), self.figures]
        else:
            tabs = []
        tabs.append(self.summary_text)
        if run is not None and (run.attribution is not None or "attribution" in (run.summary or {})):
            tabs.append(self.gap_view)
        return tabs

    def show_tab_for(self, probe: str, run: RunRecord | None = None) -> None:
        """Show a tab of a run of `probe`: the one showing now if it draws the run, else its first. The
        Figures tab, where runs are clicked to be looked at, gives way to the run's first."""
        tabs = self.tabs_of(probe, run)
        if self.currentWidget() not in tabs or self.currentWidget() is self.figures:
            self.setCurrentWidget(tabs[0])

    # -- histogram runs --------------------------------------------------------------------------
    def draw_histogram(self, rec: RunRecord) -> None:
        """Create the run's curves or give them its buckets so far."""
        buckets = rec.drawn_buckets
        axes = self._axes.setdefault(rec.key, axes_of(rec))
        histogram, percentiles = self.plots_of(axes)
        histogram.set_run(rec.key, rec.label, buckets, rec.sampled_ns)
        percentiles.set_run(rec.key, rec.label, buckets)

    def set_run_visible(self, key: int, visible: bool) -> None:
        if key in self._axes:
            for plot in self.plots_of(self._axes[key]):
                plot.set_run_visible(key, visible)

    def remove_run(self, key: int) -> None:
        axes = self._axes.pop(key, None)
        if axes is not None:
            for plot in self.plots_of(axes):
                plot.remove_run(key)

    # -- a probe's own view, summary and gaps ---------------------------------------------------------
    def draw_result(self, probe: str, summary: dict) -> None:
        """A result object of `probe` (its summarize), run or read, on the view its record names."""
        self.view(probe).show_result(summary, self._order)

    def show_result(self, rec: RunRecord) -> None:
        """A run's Summary text and its own view, and for a run that was attributed (jitter) its
        Gaps; a run read from a file has only its attribution to show."""
        record = RECORDS.get(rec.probe)
        # what the attributed samples are: a wakeup run's (measured here, or opened) are late wakeups
        what = "late wakeups" if "wakeup" in (rec.probe, (rec.stored or {}).get("probe")) else "gaps"
        if rec.summary and record is not None:
            self.summary_text.setPlainText(format_result(rec.summary))
            if record.view:
                self.draw_result(rec.probe, rec.summary)
            if "attribution" in rec.summary:
                self.gap_view.set_attribution(rec.summary["attribution"], rec.label, what)
        elif rec.attribution is not None:
            self.gap_view.set_attribution(rec.attribution, rec.label, what)
