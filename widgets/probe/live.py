"""LiveRuns: the probe panel's runs while they are measured. Each job the ProbeController starts
becomes a RunRecord in the RunStore; each of its `interval` lines moves the progress bar and redraws
the run where its record (probes/catalog.py) says it is drawn: a histogram run's curves get its
buckets so far, a probe with a view of its own is redrawn from the result of its lines so far; the
finished run gets its result object, its percentiles in the table and its text on the Summary tab.

How far a job is comes from its record's `progress`: the seconds its lines have measured, the steps
(rounds, pairs) they have made of the job's Job.steps, or the share each line says. The jobs of a
batch (a jitter or wakeup run's CPUs, measured at once) are runs side by side; the bar counts a
batch's seconds once.

`heat_changed` carries each CPU's figures of the runs of the probe measuring (probes/periods.py:
the longest gap or wakeup, how many reached 10 µs per second), as its lines come and when it ends,
for the grid's per-CPU heat (widgets/topology/probe_heat.py).
"""
from __future__ import annotations

import time

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QProgressBar

from app.format import cpus_word
from probes import histogram
from probes.catalog import RECORDS
from probes.periods import Tally, period_text
from probes.spec import Job, batches
from widgets.probe.controller import ProbeController
from widgets.probe.run_table import RunTable
from widgets.probe.runs import SOURCE_HERE, RunRecord, RunStore
from widgets.probe.tabs import ProbeTabs

# While a run measures, its plots are redrawn at most this often (the finished run is drawn in full):
# a plot per 100 ms chunk is work the window does while a probe measures its neighbour.
LIVE_REDRAW_S = 0.25


class LiveRuns(QObject):
    """Follows `controller`'s jobs into `runs`, `plots`, `table` and `progress`. `current` is the
    record of the job measuring now, the first of a batch (None between jobs); `measuring` all of them."""

    run_finished = Signal(object)       # RunRecord
    status = Signal(str, bool)          # a sentence for the status line, and whether it is an error
    heat_changed = Signal(str, object)  # probe, {cpu: periods.figures(...)} of its runs' lines so far

    def __init__(self, controller: ProbeController, runs: RunStore, plots: ProbeTabs, table: RunTable,
                 progress: QProgressBar, parent=None):
        super().__init__(parent)
        self.controller, self.runs, self.plots, self.table, self.progress = controller, runs, plots, table, progress
        self.measuring: dict[Job, RunRecord] = {}
        self._total_s = 0.0
        self._done_s = 0.0
        self._last_draw = 0.0
        self._tallies: dict[Job, Tally] = {}       # each pinned histogram run's heat so far
        self._heat: dict[int, dict] = {}
        controller.job_started.connect(self._on_controller_job_started)
        controller.line_received.connect(self._on_controller_line_received)
        controller.job_finished.connect(self._on_controller_job_finished)
        controller.job_failed.connect(self._on_controller_job_failed)
        controller.finished.connect(self._on_controller_finished)

    @property
    def current(self) -> RunRecord | None:
        return next(iter(self.measuring.values()), None)

    def start(self, jobs: list[Job]) -> None:
        """Run `jobs`; the progress bar covers the seconds of all of them (a batch's once)."""
        self._total_s = sum(max(j.seconds or 0.0 for j in b) for b in batches(jobs))
        self._done_s = 0.0
        self._heat, self._tallies = {}, {}
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
        self.measuring[job] = rec
        self.plots.show_tab_for(job.probe)
        cpus = sorted({c for j in self.measuring for c in j.cpus})
        where = f" on {cpus_word(cpus)}" if cpus else ""
        together = " at once, one pinned child each" if len(self.measuring) > 1 else ""
        pids = ", ".join(str(p) for p in self.controller.pids[:len(self.measuring)])
        others = "; coremap's threads kept off them" if cpus and self.controller.guard.active else ""
        self.status.emit(f"running {job.probe}{where}{together} (pid {pids}){others}", False)
        self._set_progress(self._done_s / self._total_s if self._total_s else 0.0, f"{job.label}: starting")

    def _on_controller_line_received(self, job: Job, line: dict) -> None:
        rec = self.measuring.get(job)
        if rec is None:
            return
        if line.get("type") == "error":
            self.status.emit(line.get("message", "the probe failed"), True)
            return
        record = RECORDS[job.probe]
        if line.get("type") == "hello" and record.gaps_from:
            rec.gaps_from_ns = int(line.get(record.gaps_from) or histogram.DEFAULT_GAP_NS)
        if line.get("type") == "period":
            self.status.emit(period_text(job.probe, line), False)
        if line.get("type") != "interval":
            return
        if record.histogram:
            if len(job.cpus) == 1:
                self._tallies.setdefault(job, Tally()).add(line)
            rec.buckets = histogram.merge_buckets(rec.buckets, line.get("buckets", []))
            rec.sampled_ns += float(line.get("sampled_ns", 0))
            if self._due():
                self.plots.draw_histogram(rec)
                self._send_heat(job.probe)
        elif record.view and self._due():
            self.plots.draw_result(job.probe, job.summarize(rec.lines))
        self._progress(job, record.progress, record.step, line, rec)

    def _send_heat(self, probe: str) -> None:
        """Each measured CPU's figures so far (a pinned run of a histogram probe: jitter, wakeup), for
        the grid's heat."""
        for job, tally in self._tallies.items():
            self._heat[job.cpus[0]] = tally.figures()
        if self._tallies:
            self.heat_changed.emit(probe, dict(self._heat))

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
        rec = self.measuring.get(job)
        if rec is None:
            return
        rec.summary = job.summarize(rec.lines)
        rec.finished = True
        self._send_heat(job.probe)
        del self.measuring[job]
        if not self.measuring:
            self._done_s += job.seconds or 0.0
        if rec.has_histogram:
            self.plots.draw_histogram(rec)
            self.table.set_runs(self.runs.records)
        self.plots.show_result(rec)
        self.run_finished.emit(rec)

    def _on_controller_job_failed(self, _job: Job, message: str) -> None:
        for rec in self.measuring.values():
            self.discard(rec.key)
        self.measuring = {}
        self.status.emit(message, True)

    def _on_controller_finished(self, how: str) -> None:
        if how == "cancelled":
            for rec in self.measuring.values():
                self.discard(rec.key)
        self.measuring = {}
