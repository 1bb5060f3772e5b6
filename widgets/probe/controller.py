"""ProbeController: runs probe jobs (probes/spec.py Job; probes/runner.py ProbeRun, one
`python -m probes` child each) batch after batch (probes/spec.py batches: the per-CPU children of a
jitter or wakeup run all at once, as oslat -c; any other job alone) without ever blocking the UI
thread, and keeps coremap's own threads off the probed CPUs while a batch runs (probes/own_affinity.py).

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
from probes.spec import Job, ProbeSpecError, batches

# The probes stream a line per ~100 ms chunk; polling faster only wakes the window (next to the
# probed CPU) for nothing: bench_window_jitter counted 160-560 context switches/s at 40 ms.
POLL_MS = 100
DRAIN_S = 1.0


class _Running:
    """One job of the batch running now: its run, its lines so far, and how far its end is seen."""

    def __init__(self, job: Job, run: RunningProbe):
        self.job, self.run = job, run
        self.lines: list[dict] = []
        self.ended_at: float | None = None
        self.saw_end = False

    def take_lines(self):
        """The lines that arrived, each added to `lines` just before it is handed out (a handler reads
        the lines so far, its own the last)."""
        for line in self.run.poll():
            self.lines.append(line)
            self.saw_end = self.saw_end or line.get("type") in ("done", "error")
            yield line

    def over(self) -> bool:
        """The child exited and its last line is in (or DRAIN_S passed since, for one that sent none)."""
        if self.run.returncode is None:
            return False
        if self.ended_at is None:
            self.ended_at = time.monotonic()
        return self.saw_end or time.monotonic() - self.ended_at >= DRAIN_S


class ProbeController(QObject):
    """Runs jobs, a batch at a time. `current_lines` is the lines so far of the job a signal was last
    emitted for (the list the panel's run record keeps); `guard.active` says whether coremap's threads
    are kept off the batch's CPUs now; `active_jobs` are the jobs running."""

    job_started = Signal(object)            # Job
    line_received = Signal(object, object)  # Job, line dict
    job_finished = Signal(object)           # Job (its lines: current_lines until the next batch)
    job_failed = Signal(object, str)        # Job, message (the probe's `error` line or exit status)
    finished = Signal(str)                  # all jobs over: "done", "failed" or "cancelled"
    affinity_note = Signal(str)

    def __init__(self, parent=None, *, guard: OwnAffinityGuard | None = None):
        super().__init__(parent)
        self.guard = guard or OwnAffinityGuard()
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._queue: list[list[Job]] = []
        self._running: list[_Running] = []
        self._lines: list[dict] = []
        self._starting: Job | None = None      # the job whose child is being started
        self._start_run: ProbeStarter = ProbeRun.start
        self._remote = False
        self._at_once: int | None = None      # children of a batch at once: all here, AT_ONCE over ssh

    # -- state ------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return bool(self._running)

    @property
    def pid(self) -> int | None:
        """The first running child's pid (pids: all of them)."""
        return self._running[0].run.pid if self._running else None

    @property
    def pids(self) -> list[int]:
        return [r.run.pid for r in self._running]

    @property
    def remote(self) -> bool:
        """Jobs run on another machine (use_runner): its threads are not this process's."""
        return self._remote

    @property
    def current_lines(self) -> list[dict]:
        return self._lines

    # -- control ----------------------------------------------------------------------------------
    def use_runner(self, start: ProbeStarter | None, *, elsewhere: bool) -> None:
        """Run jobs with `start(probe, args)`: the shown Host's (app/host.py), ProbeRun.start when it has
        none. `elsewhere`: on another machine, whose CPUs are not this process's: then coremap's own
        threads stay where they are."""
        self._start_run = start or ProbeRun.start
        self._remote = elsewhere
        self._at_once = None
        if elsewhere:
            from app.remote.probe_runs import AT_ONCE     # the remote rooms load when a host is opened
            self._at_once = AT_ONCE

    def start(self, jobs: list[Job]) -> None:
        if self.running:
            raise ProbeSpecError("a probe is already running; cancel it or wait for it to end")
        if not jobs:
            raise ProbeSpecError("nothing to run: choose a probe and CPUs")
        self._queue = batches(jobs, self._at_once)
        self._start_next()

    def cancel(self) -> None:
        """Stop the running children now (SIGTERM, then SIGKILL after ProbeRun.TERM_GRACE_S) and drop the
        jobs still queued."""
        if not self._running:
            return
        self._queue.clear()
        for r in self._running:
            r.run.cancel()
            r.lines.extend(r.run.poll())
        self._end_batch()
        self.finished.emit("cancelled")

    # -- internals --------------------------------------------------------------------------------
    def _start_next(self) -> None:
        """Start the next batch's children, then keep coremap's threads off all their CPUs. A child
        that cannot start (another machine's link down) stops those already started."""
        batch = self._queue.pop(0)
        try:
            for job in batch:
                self._starting = job
                with self.guard.spawning(job.cpus):
                    self._running.append(_Running(job, self._start_run(job.probe, job.args)))
        except CoremapError:
            for r in self._running:
                r.run.cancel()
            self._running = []
            raise
        cpus = {c for job in batch for c in job.cpus}
        if cpus and not self._remote:
            note = self.guard.exclude(cpus)
            if note:
                self.affinity_note.emit(note)
        self._timer.start()
        for r in list(self._running):
            self._lines = r.lines
            self.job_started.emit(r.job)

    def _end_batch(self) -> None:
        self._timer.stop()
        self.guard.restore()
        self._running = []

    def _on_timer_timeout(self) -> None:
        if not self._running:
            self._timer.stop()
            return
        for r in list(self._running):
            for line in r.take_lines():
                self._lines = r.lines
                self.line_received.emit(r.job, line)
            if not r.over():
                continue
            message = r.run.failure(r.job.label)
            if message is not None:
                self._fail(r, message)
                return
            self._running.remove(r)
            self._lines = r.lines
            if not self._running:
                self._end_batch()
            self.job_finished.emit(r.job)
        if not self._running:
            self._next_batch()

    def _fail(self, failed: _Running, message: str) -> None:
        """One job of the batch failed: the others stop with it, and nothing queued runs."""
        self._queue.clear()
        for r in self._running:
            if r is not failed:
                r.run.cancel()
        self._end_batch()
        self._lines = failed.lines
        self.job_failed.emit(failed.job, message)
        self.finished.emit("failed")

    def _next_batch(self) -> None:
        if not self._queue:
            self.finished.emit("done")
            return
        try:
            self._start_next()
        except CoremapError as e:           # another machine's link went down between two batches
            self._queue.clear()
            self.job_failed.emit(self._starting, str(e))
            self.finished.emit("failed")
