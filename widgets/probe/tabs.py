"""ProbeTabs: the probe panel's views of its runs, one tab each: Histogram and Percentiles (runs
overlaid, keyed by run), Sweep (bars per CPU), Core to core (the matrix), Messaging (throughput per
placement over time), First touch (cost per page), Scaling (throughput against CPUs), Summary (the
text `coremap probe` prints, probes/text.py) and Gaps (what ran in a jitter run's largest gaps).
The three series views say which CPUs a selected table row ran on (`cpus_highlighted`).

Sweep bars and the c2c matrix put the CPUs in the grid's order (`set_topology`): siblings of a
core side by side, not in id order.
"""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QPlainTextEdit, QTabWidget

from app.machine.topology import Topology, layout
from probes.spec import SERIES_PROBES
from probes.text import format_result
from widgets.probe.c2c_heatmap import C2CHeatmap
from widgets.probe.first_touch_view import FirstTouchView
from widgets.probe.gap_attribution import GapAttributionView
from widgets.probe.histogram_plot import HistogramPlot
from widgets.probe.messaging_view import MessagingView
from widgets.probe.percentile_plot import PercentilePlot
from widgets.probe.runs import RunRecord
from widgets.probe.scaling_view import ScalingView
from widgets.probe.sweep_plot import SweepPlot


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
        self.histogram_plot = HistogramPlot(self)
        self.percentile_plot = PercentilePlot(self)
        self.sweep_plot = SweepPlot(self)
        self.c2c_heatmap = C2CHeatmap(self)
        self.messaging_view = MessagingView(self)
        self.first_touch_view = FirstTouchView(self)
        self.scaling_view = ScalingView(self)
        self.series_views = {"messaging": self.messaging_view, "first-touch": self.first_touch_view,
                             "scaling": self.scaling_view}
        self.summary_text = QPlainTextEdit(self)
        self.summary_text.setReadOnly(True)
        self.summary_text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.gap_view = GapAttributionView(self)
        self.addTab(self.histogram_plot, "Histogram")
        self.addTab(self.percentile_plot, "Percentiles")
        self.addTab(self.sweep_plot, "Sweep")
        self.addTab(self.c2c_heatmap, "Core to core")
        self.addTab(self.messaging_view, "Messaging")
        self.addTab(self.first_touch_view, "First touch")
        self.addTab(self.scaling_view, "Scaling")
        self.addTab(self.summary_text, "Summary")
        self.addTab(self.gap_view, "Gaps")
        self._topology: Topology | None = None
        self._order: list[int] = []
        for view in self.series_views.values():
            view.cpus_highlighted.connect(self.cpus_highlighted)

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
        self.setCurrentWidget({"sweep": self.sweep_plot, "c2c": self.c2c_heatmap, "counters": self.summary_text,
                               **self.series_views}.get(probe, self.histogram_plot))

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
        self.series_views[probe].set_result(summary)

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
