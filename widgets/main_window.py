"""MainWindow: the topology grid in the centre, the IRQ and thread tables below it, the chosen CPU's
details and the residency plot at the right, and a toolbar for what colours the grid and how often
it is sampled.

The window never reads the machine: it applies the MachineStates a SamplerThread emits (dropping
any whose generation is not newer than the last applied) and forwards user choices back to it
(interval, pause, the threads to follow).
"""
from __future__ import annotations

import gc

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QComboBox, QDockWidget, QDoubleSpinBox, QLabel, QLayout, QMainWindow,
                               QToolBar, QVBoxLayout, QWidget)

from app.parse.cpulist import format_cpulist
from app.sampler import MAX_INTERVAL, MIN_INTERVAL
from widgets.colors import METRIC_BASES, SOFTIRQ_KINDS, Metric, parse_metric
from widgets.cpu_details import CpuDetailsWidget
from widgets.irq_table import IrqTableWidget
from widgets.pinning.controller import PinController
from widgets.probe_panel import ProbePanel
from widgets.residency_plot import ResidencyPlot
from widgets.sampler_thread import SamplerThread, is_newer
from widgets.session_controller import SessionController
from widgets.summary_bar import SummaryBar
from widgets.thread_table import ThreadTableWidget
from widgets.topology.view import TopologyView


class MainWindow(QMainWindow):
    state_applied = Signal(object)        # after a MachineState reached every widget

    def __init__(self, sampler_thread: SamplerThread | None = None, *, metric: Metric | str | None = None,
                 interval: float = 1.0, crash_recovery: bool = False, parent=None):
        super().__init__(parent)
        self.sampler_thread = sampler_thread
        self._generation: int | None = None
        self._state = None
        self._interval = interval
        self._paused = False
        self._applied_threads = None
        self._docks_sized = False
        self.setObjectName("coremap-main-window")
        self.setWindowTitle("coremap")

        # -- centre: summary, grid, legend ---------------------------------------------------------
        self.summary = SummaryBar(self)
        self.topology_view = TopologyView(self, metric=metric)
        self.legend = self.topology_view.legend
        centre = QWidget(self)
        lay = QVBoxLayout(centre)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.setSpacing(2)
        lay.addWidget(self.summary)
        lay.addWidget(self.topology_view, 1)
        lay.addWidget(self.legend)
        self.setCentralWidget(centre)

        # -- docks ---------------------------------------------------------------------------------
        self.irq_table = IrqTableWidget(self)
        self.thread_table = ThreadTableWidget(self)
        self.cpu_details = CpuDetailsWidget(self)
        self.residency_plot = ResidencyPlot(self)
        self.irq_dock = self._dock("IRQs", "irq-dock", self.irq_table, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.thread_dock = self._dock("Threads", "thread-dock", self.thread_table,
                                      Qt.DockWidgetArea.BottomDockWidgetArea)
        self.details_dock = self._dock("CPU", "cpu-dock", self.cpu_details, Qt.DockWidgetArea.RightDockWidgetArea)
        self.residency_dock = self._dock("Where threads run", "residency-dock", self.residency_plot,
                                         Qt.DockWidgetArea.BottomDockWidgetArea)
        self.splitDockWidget(self.irq_dock, self.thread_dock, Qt.Orientation.Horizontal)
        self.tabifyDockWidget(self.thread_dock, self.residency_dock)
        self.thread_dock.raise_()

        # -- toolbar ---------------------------------------------------------------------------------
        tb = QToolBar("Grid", self)
        tb.setObjectName("grid-toolbar")
        tb.setMovable(False)
        self.addToolBar(tb)
        tb.addWidget(QLabel(" Colour by ", tb))
        self.metric_combo = QComboBox(tb)
        for key, label in METRIC_BASES:
            self.metric_combo.addItem(label, key)
        self.metric_combo.setToolTip("What colours each CPU cell")
        tb.addWidget(self.metric_combo)
        self.softirq_combo = QComboBox(tb)
        self.softirq_combo.addItem("all kinds", "")
        for kind in SOFTIRQ_KINDS:
            self.softirq_combo.addItem(kind, kind)
        self.softirq_combo.setToolTip("Which softirq kind (with Colour by: Softirqs)")
        tb.addWidget(self.softirq_combo)
        tb.addSeparator()
        tb.addWidget(QLabel(" Every ", tb))
        self.interval_spin = QDoubleSpinBox(tb)
        self.interval_spin.setRange(MIN_INTERVAL, MAX_INTERVAL)
        self.interval_spin.setSingleStep(0.25)
        self.interval_spin.setDecimals(2)
        self.interval_spin.setSuffix(" s")
        self.interval_spin.setValue(interval)
        self.interval_spin.setToolTip("Sampling interval")
        tb.addWidget(self.interval_spin)
        self.pause_action = QAction("Pause", self)
        self.pause_action.setCheckable(True)
        self.pause_action.setShortcut(QKeySequence(Qt.Key.Key_Space))
        self.pause_action.setToolTip("Pause / resume sampling (Space)")
        tb.addAction(self.pause_action)
        tb.addSeparator()
        self.fit_action = QAction("Fit", self)
        self.fit_action.setShortcut(QKeySequence("Ctrl+0"))
        self.fit_action.setToolTip("Zoom the grid to fit (Ctrl+0); Ctrl+wheel or +/- to zoom")
        tb.addAction(self.fit_action)
        self.zoom_in_action = QAction("Zoom in", self)
        self.zoom_in_action.setShortcut(QKeySequence.StandardKey.ZoomIn)
        tb.addAction(self.zoom_in_action)
        self.zoom_out_action = QAction("Zoom out", self)
        self.zoom_out_action.setShortcut(QKeySequence.StandardKey.ZoomOut)
        tb.addAction(self.zoom_out_action)

        self.status_label = QLabel(self)
        self.statusBar().addWidget(self.status_label, 1)
        self.tick_label = QLabel(self)
        self.statusBar().addPermanentWidget(self.tick_label)

        if QGuiApplication.platformName() == "offscreen":
            # The offscreen platform (screenshots, tests) warns "This plugin does not support
            # propagateSizeHints()" whenever a top-level window gets a minimum size from its
            # layout; an offscreen window is never resized by a user, so it needs none.
            self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)

        self._show_metric(self.topology_view.color_metric)
        self.summary.set_interval(interval)

        # -- wiring ------------------------------------------------------------------------------------
        self.metric_combo.currentIndexChanged.connect(self._on_metric_combo_changed)
        self.softirq_combo.currentIndexChanged.connect(self._on_metric_combo_changed)
        self.interval_spin.valueChanged.connect(self._on_interval_spin_changed)
        self.pause_action.toggled.connect(self._on_pause_action_toggled)
        self.fit_action.triggered.connect(self.topology_view.zoom_fit)
        self.zoom_in_action.triggered.connect(self._on_zoom_in_triggered)
        self.zoom_out_action.triggered.connect(self._on_zoom_out_triggered)
        self.topology_view.cpu_selected.connect(self._on_topology_cpu_selected)
        self.topology_view.selection_changed.connect(self._on_topology_selection_changed)
        self.thread_table.selection_changed.connect(self._on_thread_table_selection_changed)
        if sampler_thread is not None:
            self._connect_sampler(sampler_thread)

        # Pinning (drops on the grid, Pin to…, Edit → Undo/Redo/Restore all, the Pins dock, the result
        # line and the restore bar): widgets/pinning/.
        self.pin_controller = PinController(
            self.topology_view, (self.irq_table.view, self.thread_table.view, self.cpu_details.irq_table,
                                 self.cpu_details.thread_table),
            self.menuBar().addMenu("&Edit"), self.statusBar(), self.state_applied, parent=self)
        self.pin_controller.results_shown.connect(self._on_pin_controller_results_shown)
        # The journal: a tab beside the thread table (it is a wide table; the right-hand dock is narrow).
        self.pins_dock = self._dock("Pins", "pins-dock", self.pin_controller.journal_widget,
                                    Qt.DockWidgetArea.BottomDockWidgetArea)
        self.tabifyDockWidget(self.thread_dock, self.pins_dock)
        self.thread_dock.raise_()
        lay.insertWidget(0, self.pin_controller.restore_bar)

        # Probes (a dock, the Probes menu, the grid's clicked CPU as the next probe's CPU):
        # widgets/probe_panel.py.
        self.probe_panel = ProbePanel(self)
        self.probe_dock = self._dock("Probes", "probe-dock", self.probe_panel, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.tabifyDockWidget(self.residency_dock, self.probe_dock)
        self.thread_dock.raise_()
        self.menuBar().addMenu(self.probe_panel.menu)
        self.topology_view.cpu_selected.connect(self.probe_panel.set_cpu)
        self.state_applied.connect(self.probe_panel.set_state)

        # File: sessions, screenshots, reports, autosave (widgets/session_controller.py).
        self.session_controller = SessionController(self, crash_recovery=crash_recovery)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._docks_sized:
            # Qt gives docks their size hints, which leaves the grid a strip on a laptop screen: start
            # with the grid on ~60% of the height and the IRQ table on ~45% of the width below it.
            self._docks_sized = True
            w, h = self.width(), self.height()
            self.resizeDocks([self.irq_dock, self.thread_dock], [int(h * 0.4)] * 2, Qt.Orientation.Vertical)
            self.resizeDocks([self.irq_dock, self.thread_dock], [int(w * 0.42), int(w * 0.58)],
                             Qt.Orientation.Horizontal)
            self.resizeDocks([self.details_dock], [int(w * 0.2)], Qt.Orientation.Horizontal)

    def _connect_sampler(self, t: SamplerThread) -> None:
        t.state_ready.connect(self._on_sampler_state_ready)
        t.tick_failed.connect(self._on_sampler_tick_failed)
        t.paused_changed.connect(self._on_sampler_paused_changed)
        t.interval_changed.connect(self._on_sampler_interval_changed)
        t.tick_seconds.connect(self._on_sampler_tick_seconds)

    def set_sampler_thread(self, thread: SamplerThread) -> None:
        """Show another machine (an opened session, a snapshot): stop the current sampler, forget its
        states (the new one counts generations from the start), and apply the new one's."""
        old = self.sampler_thread
        if old is not None:
            old.state_ready.disconnect(self._on_sampler_state_ready)
            old.tick_failed.disconnect(self._on_sampler_tick_failed)
            old.paused_changed.disconnect(self._on_sampler_paused_changed)
            old.interval_changed.disconnect(self._on_sampler_interval_changed)
            old.tick_seconds.disconnect(self._on_sampler_tick_seconds)
            old.stop()
        self.sampler_thread = thread
        self._generation = None
        self._state = None
        self._applied_threads = None
        # Free the old sampler's Qt objects now, before the new worker starts: a garbage collection
        # of PySide wrappers concurrent with a ticking worker crashed the interpreter (see
        # tests/gui/conftest.py).
        del old
        gc.collect()
        self._connect_sampler(thread)

    def _on_pin_controller_results_shown(self, results) -> None:
        """A pin, undo or restore changed affinities: have the sampler re-read those processes now
        instead of reusing a sleeping process's last read (app/machine/threads.py, REUSE_SECONDS)."""
        pids = {r.target.pid or r.target.id for r in results if r.target.kind in ("thread", "process")}
        if pids and self.sampler_thread is not None:
            self.sampler_thread.forget_threads(sorted(pids))

    def _dock(self, title: str, name: str, widget: QWidget, area) -> QDockWidget:
        d = QDockWidget(title, self)
        d.setObjectName(name)
        d.setWidget(widget)
        d.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                      | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                      | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(area, d)
        return d

    # -- applying states ---------------------------------------------------------------------------------
    @property
    def state(self):
        return self._state

    def set_state(self, state) -> bool:
        """Apply one MachineState to every widget; False (and nothing done) when it is stale."""
        if not is_newer(state, self._generation):
            return False
        first = self._state is None or state.topology is not self._state.topology
        self._generation = state.generation
        self._state = state
        self.topology_view.set_state(state)
        self.summary.set_state(state)
        self.irq_table.set_state(state)
        if first or _threads_changed(self._applied_threads, state):
            # The thread list is read less often than the counters on a machine with thousands of
            # threads (app/sampler.py); re-applying an unchanged list would cost as much as a new one.
            self.thread_table.set_state(state)
            self._applied_threads = _thread_key(state)
        self.cpu_details.set_state(state)
        self.residency_plot.set_state(state)
        if first:
            self._update_title(state)
            self.irq_dock.setVisible(state.sample.interrupts is not None or state.irqs is not None)
            self.thread_dock.setVisible(state.sample.tasks is not None)
            self.residency_dock.setVisible(state.live and state.sample.tasks is not None)
            self.pause_action.setEnabled(state.live)
            self.interval_spin.setEnabled(state.live)
        notes = list(state.notes[:1])
        self.status_label.setText("  ·  ".join(notes) if notes else self._selection_text())
        if state.notes:
            self.status_label.setToolTip("\n".join(state.notes))
        self.state_applied.emit(state)
        return True

    def _update_title(self, state) -> None:
        host = state.topology.hostname or "machine"
        src = "live" if state.live else state.source
        self.setWindowTitle(f"{host} ({src}) — coremap")

    def _show_metric(self, m: Metric) -> None:
        for w in (self.metric_combo, self.softirq_combo):
            w.blockSignals(True)
        self.metric_combo.setCurrentIndex(max(0, self.metric_combo.findData(m.base)))
        self.softirq_combo.setCurrentIndex(max(0, self.softirq_combo.findData(m.softirq_kind or "")))
        self.softirq_combo.setEnabled(m.base == "softirq")
        for w in (self.metric_combo, self.softirq_combo):
            w.blockSignals(False)

    def _selection_text(self) -> str:
        cpus = self.topology_view.selected_cpus()
        return f"selected CPUs {format_cpulist(cpus)}" if cpus else ""

    # -- handlers ----------------------------------------------------------------------------------------
    def _on_sampler_state_ready(self, state) -> None:
        self.set_state(state)

    def _on_sampler_tick_failed(self, message: str) -> None:
        self.statusBar().showMessage(f"sampling: {message}", 10000)

    def _on_sampler_paused_changed(self, paused: bool) -> None:
        self._paused = paused
        self.pause_action.blockSignals(True)
        self.pause_action.setChecked(paused)
        self.pause_action.setText("Resume" if paused else "Pause")
        self.pause_action.blockSignals(False)
        self.summary.set_paused(paused)

    def _on_sampler_interval_changed(self, seconds: float) -> None:
        self._interval = seconds
        self.summary.set_interval(seconds)

    def _on_sampler_tick_seconds(self, seconds: float) -> None:
        self.tick_label.setText(f"tick {seconds * 1000:.0f} ms")

    def _on_metric_combo_changed(self, _index: int) -> None:
        base = self.metric_combo.currentData()
        kind = self.softirq_combo.currentData() if base == "softirq" else ""
        m = parse_metric(f"{base}:{kind}" if kind else base)
        self.softirq_combo.setEnabled(base == "softirq")
        self.topology_view.set_metric(m)

    def _on_interval_spin_changed(self, value: float) -> None:
        if self.sampler_thread is not None:
            self.sampler_thread.set_interval(value)
        else:
            self._on_sampler_interval_changed(value)

    def _on_pause_action_toggled(self, checked: bool) -> None:
        if self.sampler_thread is None:
            self._on_sampler_paused_changed(checked)
        elif checked:
            self.sampler_thread.pause()
        else:
            self.sampler_thread.resume()

    def _on_zoom_in_triggered(self) -> None:
        self.topology_view.zoom_by(1.25)

    def _on_zoom_out_triggered(self) -> None:
        self.topology_view.zoom_by(1 / 1.25)

    def _on_topology_cpu_selected(self, cpu: int) -> None:
        self.cpu_details.set_cpu(cpu)
        self.details_dock.raise_()

    def _on_topology_selection_changed(self, cpus: list) -> None:
        if self._state is None or not self._state.notes:
            self.status_label.setText(self._selection_text())

    def _on_thread_table_selection_changed(self, tids: list, pids: list) -> None:
        if self.sampler_thread is not None:
            self.sampler_thread.track(tids, pids)
        self.residency_plot.set_tids(tids)

    def closeEvent(self, event) -> None:
        if self.sampler_thread is not None:
            self.sampler_thread.stop()
        self.pin_controller.close()
        self.probe_panel.cancel()
        self.session_controller.close()
        super().closeEvent(event)


def _thread_key(state):
    """The objects the thread table shows (held, not their ids, so an id cannot be reused)."""
    return (state.sample.tasks, state.rates.tasks if state.rates is not None else None)


def _threads_changed(applied, state) -> bool:
    if applied is None:
        return True
    return any(a is not b for a, b in zip(applied, _thread_key(state)))
