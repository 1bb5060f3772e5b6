"""ProbeTabs: the probe panel's views of its runs, one tab each: Histogram and Percentiles (runs
overlaid, keyed by run), Sweep (bars per CPU), Core to core (the matrix), Messaging, First touch and
Scaling (a series probe's plot, table and verdict), Summary (the text `coremap probe` prints,
probes/text.py) and Gaps (what ran in a jitter run's largest gaps).

Sweep bars and the c2c matrix put the CPUs in the grid's order (`set_topology`): siblings of a
core side by side, not in id order.

The plots (pyqtgraph, and numpy with it: ~0.3 s of start-up and ~30 MB) are built when their tab is
first painted or drawn on; until then a tab holds an empty page (issue 12: the first frame imports only
what it shows). `histogram_plot` and the other plot attributes build theirs when read.
"""
from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QPlainTextEdit, QTabWidget, QWidget

from app.machine.topology import Topology, layout
from probes.spec import SERIES_PROBES
from probes.text import format_result
from widgets.probe.gap_attribution import GapAttributionView
from widgets.probe.runs import RunRecord


# The plot modules are imported in these factories, not at the top: see the module docstring.
def _histogram_plot(parent):
    from widgets.probe.histogram_plot import HistogramPlot
    return HistogramPlot(parent)


def _percentile_plot(parent):
    from widgets.probe.percentile_plot import PercentilePlot
    return PercentilePlot(parent)


def _sweep_plot(parent):
    from widgets.probe.sweep_plot import SweepPlot
    return SweepPlot(parent)


def _c2c_heatmap(parent):
    from widgets.probe.c2c_heatmap import C2CHeatmap
    return C2CHeatmap(parent)


def _messaging_view(parent):
    from widgets.probe.messaging_view import MessagingView
    return MessagingView(parent)


def _first_touch_view(parent):
    from widgets.probe.first_touch_view import FirstTouchView
    return FirstTouchView(parent)


def _scaling_view(parent):
    from widgets.probe.scaling_view import ScalingView
    return ScalingView(parent)


# (attribute, tab title, factory) of each plot tab, in tab order; they come first.
_PLOTS = (("histogram_plot", "Histogram", _histogram_plot), ("percentile_plot", "Percentiles", _percentile_plot),
          ("sweep_plot", "Sweep", _sweep_plot), ("c2c_heatmap", "Core to core", _c2c_heatmap),
          ("messaging_view", "Messaging", _messaging_view), ("first_touch_view", "First touch", _first_touch_view),
          ("scaling_view", "Scaling", _scaling_view))
_SERIES_TAB = {"messaging": 4, "first-touch": 5, "scaling": 6}


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
        for _attr, title, _factory in _PLOTS:
            self.addTab(QWidget(self), title)
        self.summary_text = QPlainTextEdit(self)
        self.summary_text.setReadOnly(True)
        self.summary_text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.gap_view = GapAttributionView(self)
        self.addTab(self.summary_text, "Summary")
        self.addTab(self.gap_view, "Gaps")
        self._topology: Topology | None = None
        self._order: list[int] = []
        self.currentChanged.connect(self._on_current_changed)

    # -- the plots, built on first use ----------------------------------------------------------
    histogram_plot = property(lambda self: self._plot(0))
    percentile_plot = property(lambda self: self._plot(1))
    sweep_plot = property(lambda self: self._plot(2))
    c2c_heatmap = property(lambda self: self._plot(3))
    messaging_view = property(lambda self: self._plot(4))
    first_touch_view = property(lambda self: self._plot(5))
    scaling_view = property(lambda self: self._plot(6))

    def series_view(self, probe: str) -> QWidget:
        """The tab of a messaging, first-touch or scaling run."""
        return self._plot(_SERIES_TAB[probe])

    def _plot(self, i: int) -> QWidget:
        attr, title, factory = _PLOTS[i]
        plot = self._plots.get(attr)
        if plot is None:
            plot = self._plots[attr] = factory(self)
            if i in _SERIES_TAB.values():
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

    def show_tab_for(self, probe: str) -> None:
        """The tab a run of `probe` draws on."""
        if probe in _SERIES_TAB:
            self.setCurrentWidget(self.series_view(probe))
            return
        self.setCurrentWidget({"sweep": self.sweep_plot, "c2c": self.c2c_heatmap,
                               "counters": self.summary_text}.get(probe, self.histogram_plot))

    # -- histogram runs --------------------------------------------------------------------------
    def draw_histogram(self, rec: RunRecord) -> None:
        """Create the run's curves or give them its buckets so far."""
        self.histogram_plot.set_run(rec.key, rec.label, rec.buckets, rec.sampled_ns)
        self.percentile_plot.set_run(rec.key, rec.label, rec.buckets)

    def set_run_visible(self, key: int, visible: bool) -> None:
        self.histogram_plot.set_run_visible(key, visible)
        self.percentile_plot.set_run_visible(key, visible)

    def remove_run(self, key: int) -> None:
        self.histogram_plot.remove_run(key)
        self.percentile_plot.remove_run(key)

    # -- sweep, c2c, summary ---------------------------------------------------------------------
    def draw_sweep(self, per_cpu) -> None:
        """probes.sweep.summarize's `cpus` rows."""
        self.sweep_plot.set_result(per_cpu, self._order)

    def draw_c2c(self, summary: dict) -> None:
        """probes.c2c.summarize's matrix."""
        self.c2c_heatmap.set_matrix(summary["matrix_cpus"], summary["matrix_ns"], self._order)

    def draw_series(self, probe: str, summary: dict) -> None:
        """A messaging, first-touch or scaling result object (its probe's summarize), run or read."""
        self.series_view(probe).set_result(summary)

    def show_result(self, rec: RunRecord) -> None:
        """A run's Summary text and, for a jitter run, its Gaps (a run read from a session has only
        its attribution to show); a series probe's run, measured or read, also on its own tab."""
        if rec.summary and rec.probe in SERIES_PROBES:
            self.summary_text.setPlainText(format_result(rec.summary))
            self.draw_series(rec.probe, rec.summary)
        elif rec.summary and rec.measured_here:
            self.summary_text.setPlainText(format_result(rec.summary))
            if rec.probe == "jitter":
                self.gap_view.set_attribution(rec.summary.get("attribution"), rec.label)
        elif rec.attribution is not None:
            self.gap_view.set_attribution(rec.attribution, rec.label)
