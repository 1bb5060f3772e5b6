"""ProbePanel: choose a probe, its CPUs and options, run it, watch it, overlay and compare runs.

It composes the rooms of widgets/probe/:
- ProbeForm (form.py): the fields and the ProbeSpec they describe; Run hands the spec's jobs (one
  per CPU for a per-CPU probe, one for the list otherwise: the probe's record, probes/catalog.py) to
  a ProbeController (controller.py), which polls each child from a QTimer and moves coremap's own
  threads off the probed CPUs meanwhile.
- LiveRuns (live.py): each job as a run while it measures: its `interval` lines move the progress bar
  and redraw it where its record says (the histogram curves, or the probe's own view); a finished
  run's percentiles go to the table and its text to the Summary tab.
- CpuDrop (drop.py): CPUs dropped from the grid fill the CPU field; `set_cpu` takes the grid's
  cpu_selected.
- RunStore (runs.py): this session's runs and those ResultFiles (result_files.py) opens with "Open
  Probe Result…" (.hlog, cyclictest --json, oslat --json; probes/files.py) or takes from a session,
  each with a check box (shown or hidden); a finished one can be removed or saved (ResultFiles) as
  .hlog, CSV, cyclictest-style text or JSON.
- ProbeTabs (tabs.py) and RunTable (run_table.py, its Figures tab): the views and the runs' figures. A view's
  selected row names CPUs, which the panel passes on (`cpus_highlighted`) for the grid to select.
  A click on a run, in the table or the Runs list, selects it and shows its tabs.
- BusyCheck (busy.py): before a run, whether another thread was busy on the CPUs it measures (issue
  28: a quiet CPU's run lost 44% to a pinned Java thread at 66%, and nothing said so); if one was, a
  bar names it and offers "Run anyway".
An `error` line lands on the status line, never in a dialog.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QLayout, QMenu, QProgressBar, QPushButton,
                               QSplitter, QToolButton, QVBoxLayout, QWidget)

from app.errors import CoremapError
from app.parse.cpulist import format_cpulist
from app.sampling.machine_state import MachineState
from probes.periods import result_figures
from widgets.probe.busy import BusyCheck
from widgets.probe.controller import ProbeController
from widgets.probe.drop import CpuDrop
from widgets.probe.form import ProbeForm
from widgets.theme import status_style
from widgets.probe.live import LiveRuns
from widgets.probe.result_files import ResultFiles
from widgets.probe.run_table import RunTable
from widgets.probe.runs import RunRecord, RunStore
from widgets.probe.tabs import ProbeTabs


class ProbePanel(QWidget):
    """The Probes dock. Parts, for tests and the window: `form`, `controller`, `run_store`,
    `plots` (the tabs), `table`, `progress`, `live` (the runs measuring), `files` (opening and saving
    them), `menu` (the &Probes menu)."""

    run_finished = Signal(object)   # RunRecord
    busy_changed = Signal(bool)
    status_changed = Signal(str)
    cpus_highlighted = Signal(object)   # tuple of CPU ids a series view's selected row ran on
    heat_changed = Signal(str, object)  # probe, {cpu: figures}: the grid's per-CPU heat (live.py)

    def __init__(self, parent=None, *, controller: ProbeController | None = None):
        super().__init__(parent)
        self.setObjectName("probe-panel")
        self.controller = controller or ProbeController(self)
        self._live = True               # False while the window shows a capture (set_state)
        self.form = ProbeForm(self)
        self.run_store = RunStore(self)
        self.plots = ProbeTabs(self)
        self.table: RunTable = self.plots.figures
        self.drop = CpuDrop(self, self.controller.guard)
        self.busy_check = BusyCheck(self)
        self._build_actions()
        self.live = LiveRuns(self.controller, self.run_store, self.plots, self.table, self.progress, self)
        self.files = ResultFiles(self.run_store, self.plots, self.table, self)
        self._build_layout()
        self._connect()

    # -- building --------------------------------------------------------------------------------
    def _build_actions(self) -> None:
        self.run_button = QPushButton("Run", self)
        self.run_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        self.run_action = QAction("Run Probe", self)
        self.cancel_action = QAction("Cancel Probe", self)
        self.cancel_action.setEnabled(False)
        self.open_action = QAction("Open Probe Result…", self)
        self.save_action = QAction("Save Run As…", self)
        self.save_action.setEnabled(False)
        file_menu = QMenu("File", self)
        file_menu.addAction(self.open_action)
        file_menu.addAction(self.save_action)
        self.file_button = QToolButton(self)
        self.file_button.setText("File")
        self.file_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.file_button.setMenu(file_menu)
        self.menu = QMenu("&Probes", self)
        for a in (self.run_action, self.cancel_action, None, self.open_action, self.save_action):
            self.menu.addSeparator() if a is None else self.menu.addAction(a)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setFormat("idle")
        self.progress.setTextVisible(True)
        self.status_label = QLabel(self)
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _build_layout(self) -> None:
        buttons = QHBoxLayout()
        for b in (self.run_button, self.cancel_button, self.file_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        controls = QWidget(self)
        cl = QVBoxLayout(controls)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.form)
        cl.addLayout(buttons)
        cl.addWidget(self.busy_check.bar)
        cl.addWidget(self.progress)
        cl.addWidget(self.status_label)
        cl.addWidget(self.run_store, 1)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(controls)
        split.addWidget(self.plots)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        # the form needs ~300 px; the plots take whatever the dock has beyond it
        split.setSizes([300, 900])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(split)
        if QGuiApplication.platformName() == "offscreen":
            # As in MainWindow: the offscreen platform warns "does not support propagateSizeHints()"
            # when a top-level window takes a minimum size from its layout (the panel is top-level in
            # tests and screenshots); nobody resizes an offscreen window, so it needs none.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)

    def _connect(self) -> None:
        for signal, slot in ((self.run_button.clicked, self.run), (self.cancel_button.clicked, self.cancel),
                             (self.run_action.triggered, self.run), (self.cancel_action.triggered, self.cancel),
                             (self.open_action.triggered, self.files.ask_open),
                             (self.save_action.triggered, self.files.ask_save),
                             (self.run_store.save_button.clicked, self.files.ask_save),
                             (self.run_store.remove_button.clicked, self._on_remove_button_clicked),
                             (self.run_store.visibility_changed, self.plots.set_run_visible),
                             (self.run_store.selection_changed, self._on_run_store_selection_changed),
                             (self.run_store.selection_changed, self._show_selected_heat),
                             (self.run_store.run_clicked, self._on_run_clicked),
                             (self.table.run_clicked, self._on_run_clicked),
                             (self.busy_check.run_anyway, lambda: self.run(anyway=True)),
                             (self.plots.cpus_highlighted, self.cpus_highlighted),
                             (self.drop.cpus_dropped, self._on_drop_cpus_dropped),
                             (self.drop.drop_refused, self._on_drop_drop_refused),
                             (self.live.status, self._status), (self.files.status, self._status),
                             (self.live.heat_changed, self.heat_changed),
                             (self.live.run_finished, self._on_live_run_finished),
                             (self.controller.finished, self._on_controller_finished),
                             (self.controller.affinity_note, self._status)):
            signal.connect(slot)

    # -- public ----------------------------------------------------------------------------------
    def set_probe(self, name: str) -> None:
        self.form.set_probe(name)

    def set_cpus(self, cpus) -> None:
        self.form.set_cpus(cpus)

    def set_quiet_cpus(self, cpus) -> None:
        """CPUs made quiet (an isolate moved coremap off them): probes may still run there."""
        self.controller.guard.lent = frozenset(cpus)

    def set_cpu(self, cpu: int) -> None:
        """The grid's cpu_selected: probe this CPU next."""
        self.form.set_cpus([cpu])

    def cpus(self) -> tuple[int, ...]:
        return self.form.cpus()

    def set_state(self, state: MachineState) -> None:
        self.plots.set_topology(state.topology)
        self.drop.set_state(state)
        self.busy_check.set_state(state)
        if state.live != self._live:
            # Probes run on this machine; a capture of another one cannot be probed from here.
            self._live = state.live
            self._set_busy(self.controller.running)
            if not state.live:
                host = state.topology.hostname or "another machine"
                self._status(f"this window shows a capture of {host}; probes measure the machine coremap "
                             "runs on, so run coremap there to probe it (opening result files still works)")

    @property
    def runs(self) -> list[RunRecord]:
        return self.run_store.records

    @property
    def status_text(self) -> str:
        return self.status_label.text()

    @property
    def busy(self) -> bool:
        return self.controller.running

    def run(self, anyway: bool = False) -> bool:
        """Start the probe the form describes; False (and why on the status line) if it cannot, or,
        unless `anyway`, if another thread was busy on its CPUs (the busy bar then offers Run anyway)."""
        if self.controller.running:
            self._status("a probe is already running; cancel it first", error=True)
            return False
        if not self._live:
            self._status("this window shows a capture of another machine; probes run only on the "
                         "machine coremap runs on", error=True)
            return False
        try:
            jobs = self.form.spec().jobs()
            warning = None if anyway else self.busy_check.warning({c for j in jobs for c in j.cpus},
                                                                  local=not self.controller.remote)
            if warning:
                # the whole sentence on the window's status line; the bar over this label has its words
                self._status("not started: another thread is busy there (see above)")
                self.status_changed.emit(warning)
                return False
            self.busy_check.dismiss()
            self.live.start(jobs)
        except CoremapError as e:
            self._status(str(e), error=True)
            return False
        self._set_busy(True)
        return True

    def cancel(self) -> None:
        if self.controller.running:
            pid = self.controller.pid
            self.controller.cancel()
            self._status(f"cancelled (probe process {pid} stopped)")

    # -- opening and saving (result_files.py) ---------------------------------------------------------
    def open_result(self, path) -> list[RunRecord]:
        """Add the runs of an .hlog, cyclictest --json or oslat --json file; CoremapError if it is none."""
        return self.files.open_result(path)

    def add_result(self, result: dict, source: str) -> RunRecord | None:
        """Show a probe result object (the CLI's `--json` shape, as a session stores it) as a run."""
        return self.files.add_result(result, source)

    def save_run(self, key: int, path) -> None:
        """Write a finished run: .hlog, .csv, .txt (cyclictest-style histogram) or .json (any probe)."""
        self.files.save_run(key, path)

    def remove_run(self, key: int) -> None:
        if any(rec.key == key for rec in self.live.measuring.values()):
            self._status("that run is still going; cancel it before removing it", error=True)
            return
        self.live.discard(key)

    # -- status ----------------------------------------------------------------------------------
    def _status(self, text: str, error: bool = False) -> None:
        self.status_label.setStyleSheet(status_style("fail", self) if error else "")
        self.status_label.setText(("error: " if error else "") + text)
        self.status_changed.emit(self.status_label.text())

    def _set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy and self._live)
        self.run_action.setEnabled(not busy and self._live)
        self.cancel_button.setEnabled(busy)
        self.cancel_action.setEnabled(busy)
        if not busy:
            self.progress.setFormat("idle")
            self.progress.setValue(0)
        self.busy_changed.emit(busy)

    # -- handlers ----------------------------------------------------------------------------------
    def _on_live_run_finished(self, rec: RunRecord) -> None:
        self._on_run_store_selection_changed()
        self.run_finished.emit(rec)

    def _on_controller_finished(self, how: str) -> None:
        self._set_busy(False)
        if how == "done":
            last = [r.label for r in self.runs if r.finished and r.measured_here][-1:]
            self._status("done" + (f": {last[0]}" if last else ""))

    # -- handlers: runs, drops, files ------------------------------------------------------------
    def _on_run_store_selection_changed(self) -> None:
        self.run_store.update_buttons()
        self.save_action.setEnabled(self.run_store.can_save)
        selected = self.run_store.selected()
        if len(selected) == 1:
            self.plots.show_result(selected[0])

    def _show_selected_heat(self) -> None:
        """The selected finished runs of one CPU each (jitter or wakeup, measured here or opened from a
        session or a file) as the grid's heat: a session's 80 CPUs read on the machine's picture."""
        heat, probe = {}, None
        for rec in self.run_store.selected():
            result = rec.stored or rec.summary or {}
            cpu, name = result.get("cpu"), result.get("probe")
            f = result_figures(result) if rec.finished and isinstance(cpu, int) and name in ("jitter", "wakeup") else None
            if f is not None and probe in (None, name):
                probe, heat[cpu] = name, f
        if heat:
            self.heat_changed.emit(probe, heat)

    def _on_run_clicked(self, key: int) -> None:
        """A run clicked in the table or the list: select it (in both) and show its tabs."""
        self.run_store.select(key)
        self.table.select(key)
        rec = self.run_store.get(key)
        self.plots.show_result(rec)
        self.plots.show_tab_for(rec.probe, rec)

    def _on_remove_button_clicked(self) -> None:
        for rec in self.run_store.selected():
            self.remove_run(rec.key)

    def _on_drop_cpus_dropped(self, cpus: tuple[int, ...]) -> None:
        self.form.set_cpus(cpus)
        self._status(f"CPUs {format_cpulist(cpus)} from the drop")

    def _on_drop_drop_refused(self, why: str) -> None:
        self._status(why, error=True)
