"""MainWindow: the topology grid in the centre, the IRQ and thread tables below it, the chosen CPU's
details and the residency plot at the right, a toolbar (widgets/grid_toolbar.py) for what colours the
grid and how often it is sampled, and a status bar (widgets/window_status.py).

The window never reads the machine: it applies the MachineStates a SamplerThread emits (dropping
any whose generation is not newer than the last applied) and forwards user choices back to it
(interval, pause, the threads to follow). Pinning, the probe panel and the File menu are added by the
composition root (widgets/application.py, `build_window`), which hands each the narrow parts of
the window it needs.
"""
from __future__ import annotations

import gc
import html
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QLayout, QMainWindow, QVBoxLayout, QWidget

from app.format import cpus_word
from app.sampling.machine_state import MachineState
from widgets.colors import Metric
from widgets.cpu_details import CpuDetailsWidget
from widgets.grid_toolbar import GridToolBar
from widgets.residency_plot import ResidencyPlot
from widgets.sampler_thread import SamplerThread, is_newer
from widgets.summary_bar import SummaryBar
from widgets.tables.irqs import IrqTableWidget
from widgets.tables.threads import ThreadTableWidget
from widgets.topology.view import TopologyView
from widgets.window_status import WindowStatusBar

if TYPE_CHECKING:   # only for annotations: the composition root builds and sets these
    from app.host import Host
    from widgets.pinning.controller import PinController
    from widgets.pinning.guard import GuardThread
    from widgets.probe.panel import ProbePanel
    from widgets.quiet.controller import QuietController
    from widgets.help_menu import HelpMenu
    from widgets.remote.connect import ConnectController
    from widgets.search_bar import SearchBar
    from widgets.session_controller import SessionController
    from widgets.compare import CompareController
    from widgets.autosave import SaveOnQuit
    from widgets.topology.cpu_menu import CpuMenu

STATUS_SECONDS = 15.0       # how long a message stays on the status line


class MainWindow(QMainWindow):
    state_applied = Signal(object)        # after a MachineState reached every widget
    closing = Signal()                    # the window is closing: its controllers finish their work
    host_changed = Signal(object)         # the Host now shown (set_host): its controllers take its parts

    def __init__(self, *, metric: Metric | str | None = None, interval: float = 1.0, parent=None):
        super().__init__(parent)
        self.host: Host | None = None                   # the machine shown (set_host)
        self.sampler_thread: SamplerThread | None = None   # ticking its sampler, once started
        self._generation: int | None = None
        self._power = None                # the idle states last offered in the toolbar came from it
        self._state: MachineState | None = None
        self._interval = interval
        self._paused = False
        self._applied_threads = None
        self._docks_sized = False
        self.setObjectName("coremap-main-window")
        self.setWindowTitle("coremap")
        # What widgets/application.build_window adds: pinning and its guard, the probe panel and its dock,
        # the Quiet menu, the File menu.
        self.pin_controller: PinController | None = None
        self.probe_panel: ProbePanel | None = None
        self.probe_dock: QDockWidget | None = None
        self.session_controller: SessionController | None = None
        self.compare_controller: CompareController | None = None     # File → Compare with…
        self.guard_thread: GuardThread | None = None
        self.quiet_controller: QuietController | None = None
        self.connect_controller: ConnectController | None = None
        self.search_bar: SearchBar | None = None
        self.help_menu: HelpMenu | None = None
        self.cpu_menu: CpuMenu | None = None
        self.quit_saver: SaveOnQuit | None = None
        # May the window close? Called with whether it may say no (widgets/autosave.py SaveOnQuit keeps
        # unsaved probe runs); a close asked for by a signal (close_now) may not be refused.
        self.close_guard: Callable[[bool], bool] | None = None
        self._force_close = False

        self._build_centre(metric)
        self._build_docks()
        self._build_toolbar(interval)
        self._build_status_bar()
        self.toolbar.show_metric(self.topology_view.color_metric)
        self.summary.set_interval(interval)
        self._connect()

    # -- building ------------------------------------------------------------------------------------
    def _build_centre(self, metric: Metric | str | None) -> None:
        """The summary line, the grid and its legend."""
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

    def _build_docks(self) -> None:
        """IRQs and threads below the grid (threads tabbed with the residency plot), the CPU at the right."""
        self.irq_table = IrqTableWidget(self)
        self.thread_table = ThreadTableWidget(self)
        self.cpu_details = CpuDetailsWidget(self)
        self.residency_plot = ResidencyPlot(self)
        bottom, right = Qt.DockWidgetArea.BottomDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea
        self.irq_dock = self.add_dock("IRQs", "irq-dock", self.irq_table, bottom)
        self.thread_dock = self.add_dock("Threads", "thread-dock", self.thread_table, bottom)
        self.details_dock = self.add_dock("CPU", "cpu-dock", self.cpu_details, right)
        self.residency_dock = self.add_dock("Where threads run", "residency-dock", self.residency_plot, bottom)
        self.splitDockWidget(self.irq_dock, self.thread_dock, Qt.Orientation.Horizontal)
        self.tabifyDockWidget(self.thread_dock, self.residency_dock)
        self.thread_dock.raise_()

    def _build_toolbar(self, interval: float) -> None:
        """Colour by, the sampling interval and pause, and the zoom actions (widgets/grid_toolbar.py);
        its controls are the window's attributes too, as tests and the composition root use them."""
        self.toolbar = GridToolBar(interval, self)
        self.addToolBar(self.toolbar)
        tb = self.toolbar
        self.metric_combo, self.kind_combo, self.interval_spin = tb.metric_combo, tb.kind_combo, tb.interval_spin
        self.pause_action, self.fit_action = tb.pause_action, tb.fit_action
        self.zoom_in_action, self.zoom_out_action = tb.zoom_in_action, tb.zoom_out_action

    def _build_status_bar(self) -> None:
        """The note or selection line and coremap's own usage (widgets/window_status.py)."""
        status = WindowStatusBar(self)
        self.setStatusBar(status)
        self.status_label, self.tick_label = status.status_label, status.tick_label
        if QGuiApplication.platformName() == "offscreen":
            # The offscreen platform (screenshots, tests) warns "This plugin does not support
            # propagateSizeHints()" whenever a top-level window gets a minimum size from its
            # layout; an offscreen window is never resized by a user, so it needs none.
            self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)

    def _connect(self) -> None:
        self.toolbar.metric_chosen.connect(self.topology_view.set_metric)
        self.interval_spin.valueChanged.connect(self._on_interval_spin_changed)
        self.pause_action.toggled.connect(self._on_pause_action_toggled)
        self.fit_action.triggered.connect(self.topology_view.zoom_fit)
        self.zoom_in_action.triggered.connect(self._on_zoom_in_triggered)
        self.zoom_out_action.triggered.connect(self._on_zoom_out_triggered)
        self.topology_view.cpu_selected.connect(self._on_topology_cpu_selected)
        self.topology_view.selection_changed.connect(self._on_topology_selection_changed)
        self.thread_table.selection_changed.connect(self._on_thread_table_selection_changed)

    def add_dock(self, title: str, name: str, widget: QWidget, area: Qt.DockWidgetArea,
                 tab_with: QDockWidget | None = None) -> QDockWidget:
        """`widget` in a movable, floatable, closable dock in `area` (as a tab beside `tab_with`)."""
        d = QDockWidget(title, self)
        d.setObjectName(name)
        d.setWidget(widget)
        d.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                      | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                      | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(area, d)
        if tab_with is not None:
            self.tabifyDockWidget(tab_with, d)
        return d

    def restore_layout(self, state, version: int) -> bool:
        """Put the docks and the toolbar where a saved `state` (QMainWindow.saveState) had them; then
        the first show keeps them instead of sizing the docks for a first start."""
        if not self.restoreState(state, version):
            return False
        self._docks_sized = True
        return True

    def add_top_bar(self, bar: QWidget) -> None:
        """A notice bar (crash recovery, restore pins) above the grid."""
        self.centralWidget().layout().insertWidget(0, bar)

    def show_message(self, text: str, seconds: float = STATUS_SECONDS) -> None:
        """The status sink: `text` on the status line for `seconds`."""
        self.statusBar().showMessage(text, int(seconds * 1000))

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
            # Once the docks have their new widths.
            QTimer.singleShot(0, lambda: fit_columns(self.irq_table.view, IRQ_DEVICE_COLUMN))

    # -- the sampler ------------------------------------------------------------------------------------
    def _sampler_signals(self, t: SamplerThread) -> tuple:
        return ((t.state_ready, self._on_sampler_state_ready), (t.tick_failed, self._on_sampler_tick_failed),
                (t.paused_changed, self._on_sampler_paused_changed),
                (t.interval_changed, self._on_sampler_interval_changed), (t.tick_seconds, self._on_sampler_tick_seconds))

    def set_host(self, host: Host) -> None:
        """Show `host` (File → Connect…, an opened session, Back to Live): close the machine shown (its
        connection, its opened session), forget its states (the new sampler counts generations from the
        start), and hand the host to every controller (host_changed). Its SamplerThread is built here
        and started by the caller (`sampler_thread.start()`), once the window is ready for states."""
        old, old_host = self.sampler_thread, self.host
        for signal, slot in self._sampler_signals(old) if old is not None else ():
            signal.disconnect(slot)
        if old_host is not None:
            old_host.close()              # first: a tick waiting on the network ends at once
        if old is not None:
            old.stop()
        self.host = host
        self.sampler_thread = thread = SamplerThread(host.sampler)
        self._generation = None
        self._power = None                # the idle states last offered in the toolbar came from it
        self._state = None
        self._applied_threads = None
        # Free the old sampler's Qt objects now, before the new worker starts: a garbage collection
        # of PySide wrappers concurrent with a ticking worker crashed the interpreter (see
        # tests/gui/conftest.py).
        del old
        gc.collect()
        for signal, slot in self._sampler_signals(thread):
            signal.connect(slot)
        self.host_changed.emit(host)

    def forget_processes(self, pids: list[int] | None) -> None:
        """Affinities changed (coremap's own batch: a pin, an isolate, a give-back, undo or restore):
        have the sampler re-read these processes (every one when None) instead of reusing a sleeping
        process's last read (app/machine/threads.py: checked every 15-30 s), and the IRQs' affinities
        (none of `pids` for an IRQ pin), and tick at once, so the tables show the batch's effect now."""
        if self.sampler_thread is not None:
            self.sampler_thread.forget_threads(None if pids is None else sorted(pids))
            self.sampler_thread.sample_now()

    # -- applying states ---------------------------------------------------------------------------------
    @property
    def state(self) -> MachineState | None:
        return self._state

    def set_state(self, state: MachineState) -> bool:
        """Apply one MachineState to every widget; False (and nothing done) when it is stale."""
        if not is_newer(state, self._generation):
            return False
        first = self._state is None or state.topology is not self._state.topology
        relabel = not first and (state.stale != self._state.stale or state.host != self._state.host)
        self._generation = state.generation
        self._state = state
        self.topology_view.set_state(state)
        self.summary.set_state(state)
        self.irq_table.set_state(state)
        if first or _threads_changed(self._applied_threads, state):
            # The thread list is read less often than the counters on a machine with thousands of
            # threads (app/sampling/sampler.py); re-applying an unchanged list would cost as much as a new one.
            self.thread_table.set_state(state)
            self._applied_threads = _thread_key(state)
        self.cpu_details.set_state(state)
        self.residency_plot.set_state(state)
        if state.power is not None and state.power is not self._power:
            self._power = state.power
            self.toolbar.set_idle_states(state.power.state_names())
        if first:
            self._show_machine(state)
        elif relabel:
            self._set_title(state)
        notes = list(state.notes[:1])
        self.status_label.setText("  ·  ".join(notes) if notes else self._selection_text())
        if state.notes:
            self.status_label.setToolTip(wrapped_tooltip(state.notes))
        self.state_applied.emit(state)
        return True

    def _show_machine(self, state: MachineState) -> None:
        """A new machine: its title, the docks it has data for, live controls only when live."""
        self._set_title(state)
        self.irq_dock.setVisible(state.sample.interrupts is not None or state.irqs is not None)
        self.thread_dock.setVisible(state.sample.tasks is not None)
        self.residency_dock.setVisible(state.live and state.sample.tasks is not None)
        self.toolbar.set_live(state.live)

    def _set_title(self, state: MachineState) -> None:
        """`node7 (live) — coremap`; over ssh `node7 (over ssh root@node7, live)`, or stale with why."""
        host = state.topology.hostname or "machine"
        if state.host:
            src = f"over ssh {state.host}, " + (f"STALE: {state.stale}" if state.stale else
                                                 "live" if state.live else f"snapshot {state.source}")
        else:
            src = "live" if state.live else state.source
        self.setWindowTitle(f"{host} ({src}) — coremap")

    def _selection_text(self) -> str:
        cpus = self.topology_view.selected_cpus()
        return f"selected {cpus_word(cpus)}" if cpus else ""

    # -- handlers ----------------------------------------------------------------------------------------
    def _on_sampler_state_ready(self, state: MachineState) -> None:
        self.set_state(state)

    def _on_sampler_tick_failed(self, message: str) -> None:
        self.show_message(f"sampling: {message}", 10)

    def _on_sampler_paused_changed(self, paused: bool) -> None:
        self._paused = paused
        self.toolbar.show_paused(paused)
        self.summary.set_paused(paused)

    def _on_sampler_interval_changed(self, seconds: float) -> None:
        self._interval = seconds
        self.summary.set_interval(seconds)

    def _on_sampler_tick_seconds(self, seconds: float) -> None:
        # A capture or a replay's moment is read once (its sampler is not live): no share to show.
        self.statusBar().show_tick(seconds, ticking=self.host is None or self.host.sampler.live)

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
        self.residency_plot.set_selection(tids, pids)

    def close_now(self) -> bool:
        """Close even if the close guard would refuse (SIGTERM, SIGHUP, Ctrl+C in the terminal)."""
        self._force_close = True
        return self.close()

    def closeEvent(self, event) -> None:
        if self.close_guard is not None and not self.close_guard(not self._force_close):
            event.ignore()
            return
        if self.host is not None:
            self.host.close()             # before the thread: a tick waiting on ssh ends at once
        if self.sampler_thread is not None:
            self.sampler_thread.stop()
        self.closing.emit()
        super().closeEvent(event)


IRQ_DEVICE_COLUMN = 1              # widgets/tables/irqs.py COL_DEVICE: the one that gives way


def fit_columns(view, narrowed: int, narrowest: int = 14) -> None:
    """On a first start, narrow column `narrowed` of a table view (down to `narrowest` digits' width;
    its tooltip holds the whole text) until every column fits the view, so the last header is not cut
    off at the dock's edge (issue 23: the IRQ table's Node). Remembered widths are not touched:
    MainWindow.restore_layout marks the docks sized before this would run."""
    header = view.horizontalHeader()
    last = header.count() - 1
    fixed = sum(header.sectionSize(c) for c in range(header.count()) if c not in (narrowed, last))
    bar = view.verticalScrollBar()
    # The rows come with the first state, after this: leave room for the scroll bar they bring.
    width = view.viewport().width() - (0 if bar.isVisible() else bar.sizeHint().width())
    room = width - fixed - header.sectionSizeHint(last)
    floor = narrowest * view.fontMetrics().horizontalAdvance("0")
    if room < header.sectionSize(narrowed):
        header.resizeSection(narrowed, max(floor, room))


def wrapped_tooltip(lines) -> str:
    """Lines as a tooltip Qt word-wraps: rich text is wrapped to a readable width, while a plain line
    is one line as wide as its text, which a long note ran past the screen's edge (issue 23)."""
    return "<qt>" + "".join(f"<p>{html.escape(line)}</p>" for line in lines) + "</qt>"


def _thread_key(state: MachineState):
    """The objects the thread table shows (held, not their ids, so an id cannot be reused). The full
    Java names too: a JVM's names arrive on a tick between two thread reads (app/sampling/sampler.py),
    and the tree and its drags name a thread by them."""
    return (state.sample.tasks, state.rates.tasks if state.rates is not None else None, state.thread_names)


def _threads_changed(applied, state: MachineState) -> bool:
    if applied is None:
        return True
    return any(a is not b for a, b in zip(applied, _thread_key(state)))
