"""LiveRuns: the probe panel's runs while they are measured. Each job the ProbeController starts
becomes a RunRecord in the RunStore; each of its `interval` lines moves the progress bar and redraws
the run where its record (probes/catalog.py) says it is drawn: a histogram run's curves get its
buckets so far, a probe with a view of its own is redrawn from the result of its lines so far; the
finished run gets its result object, its percentiles in the table and its text on the Summary tab.

How far a job is comes from its record's `progress`: the seconds its lines have measured, the steps
(rounds, pairs) they have made of the job's Job.steps, or the share each line says.
"""
from __future__ import annotations

import time

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QProgressBar

from app.format import cpus_word
from probes import histogram
from probes.catalog import RECORDS
from probes.spec import Job
from widgets.probe.controller import ProbeController
from widgets.probe.run_table import RunTable
from widgets.probe.runs import SOURCE_HERE, RunRecord, RunStore
from widgets.probe.tabs import ProbeTabs

# While a run measures, its plots are redrawn at most this often (the finished run is drawn in full):
# a plot per 100 ms chunk is work the window does while a probe measures its neighbour.
LIVE_REDRAW_S = 0.25


class LiveRuns(QObject):
    """Follows `controller`'s jobs into `runs`, `plots`, `table` and `progress`. `current` is the
    record of the job measuring now (None between jobs)."""

    run_finished = Signal(object)       # RunRecord
    status = Signal(str, bool)          # a sentence for the status line, and whether it is an error

    def __init__(self, controller: ProbeController, runs: RunStore, plots: ProbeTabs, table: RunTable,
                 progress: QProgressBar, parent=None):
        super().__init__(parent)
        self.controller, self.runs, self.plots, self.table, self.progress = controller, runs, plots, table, progress
        self.current: RunRecord | None = None
        self._total_s = 0.0
        self._done_s = 0.0
        self._last_draw = 0.0
        controller.job_started.connect(self._on_controller_job_started)
        controller.line_received.connect(self._on_controller_line_received)
        controller.job_finished.connect(self._on_controller_job_finished)
        controller.job_failed.connect(self._on_controller_job_failed)
        controller.finished.connect(self._on_controller_finished)

    def start(self, jobs: list[Job]) -> None:
        """Run `jobs`; the progress bar covers the seconds of all of them."""
        self._total_s = sum(j.seconds or 0.0 for j in jobs)
        self._done_s = 0.0
        self.controller.start(jobs)

    def discard(self, key: int) -> None:
        """Take a run off the store, the plots and the table."""
        if self.runs.remove(key) is not None:
            self.plots.remove_run(key)
            self.table.set_runs(self.runs.records)

    def _set_progress(self, fraction: float, text: str) -> None:
        self.progress.setFormat(text)         # first: whoever hears valueChanged reads this text
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))

    def _due(self) -> bool:
        """Whether a live redraw is due (LIVE_REDRAW_S since the last)."""
        now = time.monotonic()
        if now - self._last_draw < LIVE_REDRAW_S:
            return False
        self._last_draw = now
        return True

    # -- handlers: the controller ----------------------------------------------------------------
    def _on_controller_job_started(self, job: Job) -> None:
        rec = self.runs.add(job.probe, job.label, SOURCE_HERE, job.cpus)
        rec.lines = self.controller.current_lines
        self.current = rec
        self.plots.show_tab_for(job.probe)
        where = f" on {cpus_word(job.cpus)}" if job.cpus else ""
        others = "; coremap's threads kept off them" if job.cpus and self.controller.guard.active else ""
        self.status.emit(f"running {job.probe}{where} (pid {self.controller.pid}){others}", False)
        self._set_progress(self._done_s / self._total_s if self._total_s else 0.0, f"{job.label}: starting")

    def _on_controller_line_received(self, job: Job, line: dict) -> None:
        rec = self.current
        if rec is None:
            return
        if line.get("type") == "error":
            self.status.emit(line.get("message", "the probe failed"), True)
            return
        record = RECORDS[job.probe]
        if line.get("type") == "hello" and record.gaps_from:
            rec.gaps_from_ns = int(line.get(record.gaps_from) or histogram.DEFAULT_GAP_NS)
        if line.get("type") != "interval":
            return
        if record.histogram:
            rec.buckets = histogram.merge_buckets(rec.buckets, line.get("buckets", []))
            rec.sampled_ns += float(line.get("sampled_ns", 0))
            if self._due():
                self.plots.draw_histogram(rec)
        elif record.view is not None and self._due():
            self.plots.draw_result(job.probe, job.summarize(rec.lines))
        self._progress(job, record.progress, record.step, line, rec)

    def _progress(self, job: Job, how: str, step: str, line: dict, rec: RunRecord) -> None:
        if how == "seconds":
            elapsed_s = float(line.get("elapsed_ns", 0)) / 1e9
            total = self._total_s or (job.seconds or 1.0)
            self._set_progress((self._done_s + min(elapsed_s, job.seconds or elapsed_s)) / total,
                               f"{job.label}: {elapsed_s:.1f} / {job.seconds:g} s")
        elif how == "share":
            share = float(line.get("progress", 0.0))
            self._set_progress(share, f"{job.label}: {100 * share:.0f}%")
        else:
            done = sum(1 for l in rec.lines if l.get("type") == "interval")
            self._set_progress(done / job.steps, f"{job.label}: {step} {done} / {job.steps}")

    def _on_controller_job_finished(self, job: Job) -> None:
        rec, self.current = self.current, None
        if rec is None:
            return
        rec.summary = job.summarize(rec.lines)
        rec.finished = True
        self._done_s += job.seconds or 0.0
        if rec.has_histogram:
            self.plots.draw_histogram(rec)
            self.table.set_runs(self.runs.records)
        self.plots.show_result(rec)
        self.run_finished.emit(rec)

    def _on_controller_job_failed(self, _job: Job, message: str) -> None:
        rec, self.current = self.current, None
        if rec is not None:
            self.discard(rec.key)
        self.status.emit(message, True)

    def _on_controller_finished(self, how: str) -> None:
        rec, self.current = self.current, None
        if how == "cancelled" and rec is not None:
            self.discard(rec.key)
