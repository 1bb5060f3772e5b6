"""ProbeController: runs probe jobs (probes/spec.py Job; probes/runner.py ProbeRun, one
`python -m probes` child each) one after another without ever blocking the UI thread, and keeps
coremap's own threads off the probed CPUs while each job runs (probes/own_affinity.py).

The child's stdout is read by ProbeRun's reader thread; a QTimer in the UI thread collects what it
read (`ProbeRun.poll()`, which never blocks) every POLL_MS and re-emits each line. A job ends when its
process has exited and its last line (`done` or `error`) was seen, or, for a child that died without
one, DRAIN_S after its exit (by then the reader has read everything the pipe held).
"""
from __future__ import annotations

import time

from PySide6.QtCore import QObject, QTimer, Signal

from app.errors import CoremapError
from probes.own_affinity import OwnAffinityGuard
from probes.runner import ProbeRun, ProbeStarter, RunningProbe
from probes.spec import Job, ProbeSpecError

# The probes stream a line per ~100 ms chunk; polling faster only wakes the window (next to the
# probed CPU) for nothing: bench_window_jitter counted 160-560 context switches/s at 40 ms.
POLL_MS = 100
DRAIN_S = 1.0


class ProbeController(QObject):
    """Runs jobs in turn. `current_lines` is the running job's lines so far (the list the panel's
    run record keeps); `guard.active` says whether coremap's threads are kept off its CPUs now."""

    job_started = Signal(object)            # Job
    line_received = Signal(object, object)  # Job, line dict
    job_finished = Signal(object)           # Job (its lines: current_lines until the next job starts)
    job_failed = Signal(object, str)        # Job, message (the probe's `error` line or exit status)
    finished = Signal(str)                  # all jobs over: "done", "failed" or "cancelled"
    affinity_note = Signal(str)

    def __init__(self, parent=None, *, guard: OwnAffinityGuard | None = None):
        super().__init__(parent)
        self.guard = guard or OwnAffinityGuard()
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._queue: list[Job] = []
        self._job: Job | None = None
        self._lines: list[dict] = []
        self._run: RunningProbe | None = None
        self._ended_at: float | None = None
        self._saw_end = False
        self._start_run: ProbeStarter = ProbeRun.start
        self._remote = False

    # -- state ------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._run is not None

    @property
    def pid(self) -> int | None:
        return self._run.pid if self._run is not None else None

    @property
    def remote(self) -> bool:
        """Jobs run on another machine (use_runner): its threads are not this process's."""
        return self._remote

    @property
    def current_lines(self) -> list[dict]:
        return self._lines

    # -- control ----------------------------------------------------------------------------------
    def use_runner(self, start: ProbeStarter | None = None) -> None:
        """Run jobs with `start(probe, args)`, a ProbeRun-like run on another machine
        (app/remote/probe_runs.py), or here (None). Another machine's CPUs are not this process's:
        then coremap's own threads stay where they are."""
        self._start_run = start or ProbeRun.start
        self._remote = start is not None

    def start(self, jobs: list[Job]) -> None:
        if self.running:
            raise ProbeSpecError("a probe is already running; cancel it or wait for it to end")
        if not jobs:
            raise ProbeSpecError("nothing to run: choose a probe and CPUs")
        self._queue = list(jobs)
        self._start_next()

    def cancel(self) -> None:
        """Stop the running child now (SIGTERM, then SIGKILL after ProbeRun.TERM_GRACE_S) and drop the
        jobs still queued."""
        if self._run is None:
            return
        self._queue.clear()
        run = self._run
        run.cancel()
        self._lines.extend(run.poll())
        self._end_job()
        self.finished.emit("cancelled")

    # -- internals --------------------------------------------------------------------------------
    def _start_next(self) -> None:
        job = self._queue.pop(0)
        self._job = job
        self._lines = []
        self._saw_end = False
        self._ended_at = None
        with self.guard.spawning(job.cpus):
            self._run = self._start_run(job.probe, job.args)
        if job.cpus and not self._remote:
            note = self.guard.exclude(job.cpus)
            if note:
                self.affinity_note.emit(note)
        self._timer.start()
        self.job_started.emit(job)

    def _end_job(self) -> None:
        self._timer.stop()
        self.guard.restore()
        self._run = None
        self._job = None

    def _on_timer_timeout(self) -> None:
        run, job = self._run, self._job
        if run is None:
            self._timer.stop()
            return
        for line in run.poll():
            self._lines.append(line)
            if line.get("type") in ("done", "error"):
                self._saw_end = True
            self.line_received.emit(job, line)
        if run.returncode is None:
            return
        if self._ended_at is None:
            self._ended_at = time.monotonic()
        if not self._saw_end and time.monotonic() - self._ended_at < DRAIN_S:
            return
        message = run.failure(job.label)
        self._end_job()
        if message is not None:
            self._queue.clear()
            self.job_failed.emit(job, message)
            self.finished.emit("failed")
            return
        self.job_finished.emit(job)
        if not self._queue:
            self.finished.emit("done")
            return
        try:
            self._start_next()
        except CoremapError as e:           # another machine's link went down between two jobs
            failed, self._job = self._job, None
            self._queue.clear()
            self.job_failed.emit(failed, str(e))
            self.finished.emit("failed")
