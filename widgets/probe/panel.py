"""ProbePanel: choose a probe, its CPUs and options, run it, watch it, overlay and compare runs.

It composes the rooms of widgets/probe/:
- ProbeForm (form.py): the fields and the ProbeSpec they describe; Run hands the spec's jobs (one
  per CPU for jitter, wakeup and counters, one for the list for sweep and c2c) to a
  ProbeController (controller.py), which polls each child from a QTimer and moves coremap's own
  threads off the probed CPUs meanwhile.
- CpuDrop (drop.py): CPUs dropped from the grid fill the CPU field; `set_cpu` takes the grid's
  cpu_selected.
- RunStore (runs.py): this session's runs and files opened with "Open Probe Result…" (.hlog,
  cyclictest --json, oslat --json; probes/files.py), each with a check box (shown or hidden); a
  finished one can be removed or saved as .hlog, CSV, cyclictest-style text or JSON.
- ProbeTabs (tabs.py) and RunTable (run_table.py): each `interval` line updates the run's curves
  in place, the sweep bars, the c2c matrix or a series probe's view (messaging, first-touch,
  scaling: redrawn from the result of the lines so far), and the progress bar; a finished run's
  percentiles go to the table and its text to the Summary tab. A series view's selected row names
  CPUs, which the panel passes on (`cpus_highlighted`) for the grid to select.
An `error` line lands on the status line, never in a dialog.
"""
from __future__ import annotations

import os
import re
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QLayout, QMenu, QProgressBar, QPushButton,
                               QSplitter, QToolButton, QVBoxLayout, QWidget)

from app.errors import CoremapError
from app.format import cpus_word
from app.parse.cpulist import format_cpulist
from app.sampling.machine_state import MachineState
from probes import c2c, files, histogram, sweep
from probes.files import FileRun
from probes.spec import HISTOGRAM_PROBES, SERIES_PROBES, Job
from widgets.probe.controller import ProbeController
from widgets.probe.drop import CpuDrop
from widgets.probe.form import ProbeForm
from widgets.probe.run_table import RunTable
from widgets.probe.runs import SOURCE_HERE, RunRecord, RunStore
from widgets.probe.tabs import ProbeTabs

LIVE_REDRAW_S = 0.25


class ProbePanel(QWidget):
    """The Probes dock. Parts, for tests and the window: `form`, `controller`, `run_store`,
    `plots` (the tabs), `table`, `progress`, `menu` (the &Probes menu)."""

    run_finished = Signal(object)   # RunRecord
    busy_changed = Signal(bool)
    status_changed = Signal(str)
    cpus_highlighted = Signal(object)   # tuple of CPU ids a series view's selected row ran on

    def __init__(self, parent=None, *, controller: ProbeController | None = None):
        super().__init__(parent)
        self.setObjectName("probe-panel")
        self.controller = controller or ProbeController(self)
        self._live = True               # False while the window shows a capture (set_state)
        self._total_s = 0.0
        self._done_s = 0.0
        self._job_record: RunRecord | None = None
        self._last_live_draw = 0.0
        self.form = ProbeForm(self)
        self.run_store = RunStore(self)
        self.plots = ProbeTabs(self)
        self.table = RunTable(self)
        self.drop = CpuDrop(self, self.controller.guard)
        self._build_actions()
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
        cl.addWidget(self.progress)
        cl.addWidget(self.status_label)
        cl.addWidget(self.run_store, 1)
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(self.plots)
        right.addWidget(self.table)
        right.setStretchFactor(0, 4)
        right.setStretchFactor(1, 1)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(controls)
        split.addWidget(right)
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
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)
        self.run_action.triggered.connect(self.run)
        self.cancel_action.triggered.connect(self.cancel)
        self.open_action.triggered.connect(self._on_open_action_triggered)
        self.save_action.triggered.connect(self._on_save_action_triggered)
        self.run_store.save_button.clicked.connect(self._on_save_action_triggered)
        self.run_store.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.run_store.visibility_changed.connect(self.plots.set_run_visible)
        self.plots.cpus_highlighted.connect(self.cpus_highlighted)
        self.run_store.selection_changed.connect(self._on_run_store_selection_changed)
        self.drop.cpus_dropped.connect(self._on_drop_cpus_dropped)
        self.drop.drop_refused.connect(self._on_drop_drop_refused)
        c = self.controller
        c.job_started.connect(self._on_controller_job_started)
        c.line_received.connect(self._on_controller_line_received)
        c.job_finished.connect(self._on_controller_job_finished)
        c.job_failed.connect(self._on_controller_job_failed)
        c.finished.connect(self._on_controller_finished)
        c.affinity_note.connect(self._on_controller_affinity_note)

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

    def run(self) -> bool:
        """Start the probe the form describes; False (and why on the status line) if it cannot."""
        if self.controller.running:
            self._status("a probe is already running; cancel it first", error=True)
            return False
        if not self._live:
            self._status("this window shows a capture of another machine; probes run only on the "
                         "machine coremap runs on", error=True)
            return False
        try:
            jobs = self.form.spec().jobs()
            self._total_s = sum(j.seconds or 0.0 for j in jobs)
            self._done_s = 0.0
            self.controller.start(jobs)
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

    # -- opening and saving ----------------------------------------------------------------------
    def open_result(self, path) -> list[RunRecord]:
        """Add the runs of an .hlog, cyclictest --json or oslat --json file; CoremapError if it is none."""
        path = str(path)
        added = [self._add_file_run(run, path) for run in files.load_runs(path)]
        self._status(f"opened {os.path.basename(path)}: {len(added)} run{'s' if len(added) != 1 else ''}")
        self.plots.setCurrentWidget(self.plots.histogram_plot)
        return added

    def add_result(self, result: dict, source: str) -> RunRecord | None:
        """Show a probe result object (the CLI's `--json` shape, as a session stores it) as a run: a
        histogram, or a messaging, first-touch or scaling run on its own tab; None for sweep, c2c and
        counters results, whose figures stay in the file."""
        if result.get("probe") in SERIES_PROBES:
            rec = self.run_store.add(result["probe"], result.get("title") or result["probe"], source)
            rec.summary = dict(result)
            rec.finished = True
            self.plots.show_result(rec)
            return rec
        run = files.result_run(result)
        return self._add_file_run(run, source) if run is not None else None

    def save_run(self, key: int, path) -> None:
        """Write a finished run: .hlog, .csv, .txt (cyclictest-style histogram) or .json (any probe)."""
        rec = self.run_store.get(key)
        if not rec.finished:
            raise CoremapError(f"run {rec.label!r} has not finished; wait for it or cancel it first")
        files.write_run(path, label=rec.label, result=rec.summary,
                        buckets=rec.buckets if rec.has_histogram else None, sampled_ns=rec.sampled_ns,
                        lines=rec.lines)
        self._status(f"saved {rec.label} to {path}")

    def remove_run(self, key: int) -> None:
        if self._job_record is not None and self._job_record.key == key:
            self._status("that run is still going; cancel it before removing it", error=True)
            return
        if self.run_store.remove(key) is not None:
            self.plots.remove_run(key)
            self.table.set_runs(self.runs)

    def _add_file_run(self, run: FileRun, source: str) -> RunRecord:
        rec = self.run_store.add("file", run.label, source, () if run.cpu is None else (run.cpu,))
        rec.buckets = run.buckets
        rec.sampled_ns = run.sampled_ns
        rec.attribution = run.attribution
        rec.finished = True
        rec.summary = run.result(rec.label, source)
        self.plots.draw_histogram(rec)
        self.table.set_runs(self.runs)
        return rec

    # -- status ----------------------------------------------------------------------------------
    def _status(self, text: str, *, error: bool = False) -> None:
        self.status_label.setStyleSheet("color: #b00020;" if error else "")
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

    def _set_progress(self, fraction: float, text: str) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        self.progress.setFormat(text)

    # -- handlers: the controller ----------------------------------------------------------------
    def _on_controller_job_started(self, job: Job) -> None:
        rec = self.run_store.add(job.probe, job.label, SOURCE_HERE, job.cpus)
        rec.lines = self.controller.current_lines
        self._job_record = rec
        self.plots.show_tab_for(job.probe)
        where = f" on {cpus_word(job.cpus)}" if job.cpus else ""
        others = "; coremap's threads kept off them" if job.cpus and self.controller.guard.active else ""
        self._status(f"running {job.probe}{where} (pid {self.controller.pid}){others}")
        self._set_progress(self._done_s / self._total_s if self._total_s else 0.0, f"{job.label}: starting")

    def _on_controller_line_received(self, job: Job, line: dict) -> None:
        rec = self._job_record
        if rec is None:
            return
        kind = line.get("type")
        if kind == "error":
            self._status(line.get("message", "the probe failed"), error=True)
        elif kind == "interval" and job.probe in HISTOGRAM_PROBES:
            self._on_histogram_interval(job, rec, line)
        elif kind == "interval" and job.probe == "sweep":
            self.plots.draw_sweep(sweep.summarize(rec.lines)["cpus"])
            r = int(line.get("round", 0)) + 1
            self._set_progress(r / job.steps, f"{job.label}: round {r} / {job.steps}")
        elif kind == "interval" and job.probe in SERIES_PROBES:
            self._on_series_interval(job, rec, line)
        elif kind == "interval" and job.probe == "c2c":
            self.plots.draw_c2c(c2c.summarize(rec.lines))
            done = sum(1 for l in rec.lines if l.get("type") == "interval")
            self._set_progress(done / job.steps, f"{job.label}: pair {done} / {job.steps}")
        elif kind == "interval":
            self._set_progress(0.5, f"{job.label}: {line.get('mode', '')} done")

    def _on_histogram_interval(self, job: Job, rec: RunRecord, line: dict) -> None:
        rec.buckets = histogram.merge_buckets(rec.buckets, line.get("buckets", []))
        rec.sampled_ns += float(line.get("sampled_ns", 0))
        # redraw at most every LIVE_REDRAW_S while running (the finished run is drawn in full):
        # a plot per 100 ms chunk is work the window does while a probe measures its neighbour
        now = time.monotonic()
        if now - self._last_live_draw >= LIVE_REDRAW_S:
            self._last_live_draw = now
            self.plots.draw_histogram(rec)
        elapsed_s = float(line.get("elapsed_ns", 0)) / 1e9
        total = self._total_s or (job.seconds or 1.0)
        self._set_progress((self._done_s + min(elapsed_s, job.seconds or elapsed_s)) / total,
                           f"{job.label}: {elapsed_s:.1f} / {job.seconds:g} s")

    def _on_series_interval(self, job: Job, rec: RunRecord, line: dict) -> None:
        """Redraw the run's view from the result of its lines so far, at most every LIVE_REDRAW_S,
        and move the progress bar to where the probe says it is."""
        now = time.monotonic()
        if now - self._last_live_draw >= LIVE_REDRAW_S:
            self._last_live_draw = now
            self.plots.draw_series(job.probe, job.summarize(rec.lines))
        progress = float(line.get("progress", 0.0))
        self._set_progress(progress, f"{job.label}: {100 * progress:.0f}%")

    def _on_controller_job_finished(self, job: Job) -> None:
        rec = self._job_record
        self._job_record = None
        if rec is None:
            return
        rec.summary = job.summarize(rec.lines)
        rec.finished = True
        self._done_s += job.seconds or 0.0
        if job.probe in HISTOGRAM_PROBES:
            self.plots.draw_histogram(rec)
            self.table.set_runs(self.runs)
        elif job.probe == "sweep":
            self.plots.draw_sweep(rec.summary["cpus"])
        elif job.probe == "c2c":
            self.plots.draw_c2c(rec.summary)
        self.plots.show_result(rec)
        self._on_run_store_selection_changed()
        self.run_finished.emit(rec)

    def _on_controller_job_failed(self, _job: Job, message: str) -> None:
        rec = self._job_record
        self._job_record = None
        if rec is not None:
            self.remove_run(rec.key)
        self._status(message, error=True)

    def _on_controller_finished(self, how: str) -> None:
        rec = self._job_record
        self._job_record = None
        if how == "cancelled" and rec is not None:
            self.remove_run(rec.key)
        self._set_busy(False)
        if how == "done":
            last = [r.label for r in self.runs if r.finished and r.measured_here][-1:]
            self._status("done" + (f": {last[0]}" if last else ""))

    def _on_controller_affinity_note(self, note: str) -> None:
        self._status(note)

    # -- handlers: runs, drops, files ------------------------------------------------------------
    def _on_run_store_selection_changed(self) -> None:
        self.run_store.update_buttons()
        self.save_action.setEnabled(self.run_store.can_save)
        selected = self.run_store.selected()
        if len(selected) == 1:
            self.plots.show_result(selected[0])

    def _on_remove_button_clicked(self) -> None:
        for rec in self.run_store.selected():
            self.remove_run(rec.key)

    def _on_drop_cpus_dropped(self, cpus: tuple[int, ...]) -> None:
        self.form.set_cpus(cpus)
        self._status(f"CPUs {format_cpulist(cpus)} from the drop")

    def _on_drop_drop_refused(self, why: str) -> None:
        self._status(why, error=True)

    def _on_open_action_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open Probe Result", "",
                                              "Probe results (*.hlog *.json);;All files (*)")
        if not path:
            return
        try:
            self.open_result(path)
        except CoremapError as e:
            self._status(str(e), error=True)

    def _on_save_action_triggered(self) -> None:
        selected = self.run_store.selected()
        if len(selected) != 1:
            self._status("select one finished run to save", error=True)
            return
        rec = selected[0]
        filters = ("HdrHistogram log (*.hlog);;CSV buckets (*.csv);;cyclictest-style histogram (*.txt);;"
                   "JSON result (*.json)") if rec.has_histogram else "JSON result (*.json)"
        path, _ = QFileDialog.getSaveFileName(self, "Save Run", re.sub(r"[^\w.-]+", "_", rec.label), filters)
        if not path:
            return
        try:
            self.save_run(rec.key, path)
        except CoremapError as e:
            self._status(str(e), error=True)
