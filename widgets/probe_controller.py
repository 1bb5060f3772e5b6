"""ProbeController: runs probe jobs (probes/runner.py ProbeRun, one `python -m probes` child each) one
after another without ever blocking the UI thread, and keeps coremap's own threads off the probed
CPUs while each job runs.

The child's stdout is read by ProbeRun's reader thread; a QTimer in the UI thread collects what it
read (`ProbeRun.poll()`, which never blocks) every POLL_MS and re-emits each line. A job ends when its
process has exited and its last line (`done` or `error`) was seen, or, for a child that died without
one, DRAIN_S after its exit (by then the reader has read everything the pipe held).

Own affinity (OwnAffinityGuard): a probe measures what happens on its CPU, and coremap's UI thread,
sampler thread and the probe's reader threads are among the things that could. While a job runs,
every thread of this process (each /proc/self/task entry: sched_setaffinity on the process changes
only the calling thread, and threads inherit a mask only when created) is moved to the online CPUs
the job does not probe; when it ends each gets its own earlier mask back. The job's child is
started before the move, so it inherits the full mask and may pin itself to the probed CPU.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QTimer, Signal

from app.errors import CoremapError
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.sysroot import SysRoot
from app.machine.topology import read_online_cpus
from probes.runner import ProbeRun

# The probes stream a line per ~100 ms chunk; polling faster only wakes the window (next to the
# probed CPU) for nothing: bench_window_jitter counted 160-560 context switches/s at 40 ms.
POLL_MS = 100
DRAIN_S = 1.0


class OwnAffinityGuard:
    """Move every thread of this process off some CPUs, and back. Qt-free."""

    def __init__(self, root: SysRoot | None = None):
        self.root = root or SysRoot("/")
        self._saved: dict[int, set[int]] | None = None
        self._process_mask: set[int] | None = None

    @property
    def active(self) -> bool:
        return self._saved is not None

    def own_tids(self) -> list[int]:
        return [int(t) for t in self.root.listdir(self.root.task_dir(os.getpid(), None, "task")) if t.isdigit()]

    def exclude(self, cpus) -> str | None:
        """Move all own threads to the online CPUs not in `cpus`. Returns a note when it cannot
        (every online CPU is probed, e.g. a one-CPU machine) and then changes nothing."""
        self.restore()
        probed = set(cpus)
        online = set(read_online_cpus(self.root))
        process_mask = set(os.sched_getaffinity(0))
        keep = (online & process_mask) - probed
        if not keep:
            return (f"coremap's own threads stay where they are: CPUs {format_cpulist(sorted(probed))} are "
                    f"all the online CPUs it may use ({format_cpulist(sorted(online & process_mask))})")
        saved: dict[int, set[int]] = {}
        for tid in self.own_tids():
            try:
                saved[tid] = set(os.sched_getaffinity(tid))
                os.sched_setaffinity(tid, keep)
            except ProcessLookupError:
                # the thread ended between listing /proc/self/task and this call: nothing to move
                saved.pop(tid, None)
        self._saved = saved
        self._process_mask = process_mask
        return None

    def restore(self) -> None:
        """Give each thread its earlier mask; threads born meanwhile get the process's earlier mask."""
        if self._saved is None:
            return
        saved, mask = self._saved, self._process_mask
        self._saved = self._process_mask = None
        for tid in self.own_tids():
            try:
                os.sched_setaffinity(tid, saved.get(tid, mask))
            except ProcessLookupError:
                # the thread ended between listing /proc/self/task and this call: nothing to restore
                pass


@dataclass
class ProbeJob:
    """One child: `python -m probes PROBE ARGS`; `cpus` are the CPUs it measures (kept free of
    coremap's threads while it runs), `label` names it in the window."""
    probe: str
    args: list[str]
    cpus: tuple[int, ...] = ()
    label: str = ""
    seconds: float | None = None
    job_id: int = 0
    lines: list = field(default_factory=list)


def cpus_of_args(args: list[str]) -> tuple[int, ...]:
    """The CPUs a child's argument list names with --cpu (and c2c's --pairs)."""
    out: set[int] = set()
    for i, a in enumerate(args[:-1]):
        if a == "--cpu":
            out.update(parse_cpulist(args[i + 1], what="--cpu"))
        elif a == "--pairs":
            for piece in args[i + 1].split(","):
                for c in piece.split(":"):
                    if c.strip().isdigit():
                        out.add(int(c))
    return tuple(sorted(out))


class ProbeController(QObject):
    job_started = Signal(object)            # ProbeJob
    line_received = Signal(object, object)  # ProbeJob, line dict
    job_finished = Signal(object, int)      # ProbeJob, exit status 0
    job_failed = Signal(object, str)        # ProbeJob, message (the probe's `error` line or exit status)
    finished = Signal(str)                  # all jobs over: "done", "failed" or "cancelled"
    affinity_note = Signal(str)

    def __init__(self, parent=None, *, guard: OwnAffinityGuard | None = None):
        super().__init__(parent)
        self.guard = guard or OwnAffinityGuard()
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._queue: list[ProbeJob] = []
        self._job: ProbeJob | None = None
        self._run: ProbeRun | None = None
        self._ended_at: float | None = None
        self._saw_end = False
        self._next_id = 1

    # -- state ------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._run is not None

    @property
    def pid(self) -> int | None:
        return self._run.pid if self._run is not None else None

    @property
    def current_job(self) -> ProbeJob | None:
        return self._job

    @property
    def jobs_left(self) -> int:
        return len(self._queue)

    # -- control ----------------------------------------------------------------------------------
    def start(self, jobs: list[ProbeJob]) -> None:
        if self.running:
            raise CoremapError("a probe is already running; cancel it or wait for it to end")
        if not jobs:
            raise CoremapError("nothing to run: choose a probe and CPUs")
        for j in jobs:
            j.job_id = self._next_id
            self._next_id += 1
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
        for line in run.poll():
            self._job.lines.append(line)
        self._end_job()
        self.finished.emit("cancelled")

    # -- internals --------------------------------------------------------------------------------
    def _start_next(self) -> None:
        job = self._queue.pop(0)
        self._job = job
        self._saw_end = False
        self._ended_at = None
        self._run = ProbeRun.start(job.probe, job.args)
        if job.cpus:
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
            job.lines.append(line)
            if line.get("type") in ("done", "error"):
                self._saw_end = True
            self.line_received.emit(job, line)
        rc = run.returncode
        if rc is None:
            return
        if self._ended_at is None:
            self._ended_at = time.monotonic()
        if not self._saw_end and time.monotonic() - self._ended_at < DRAIN_S:
            return
        message = run.error()
        if message is None and rc != 0:
            tail = "; ".join(run.stderr_lines[-3:])
            message = f"the {job.probe} probe exited with status {rc}" + (f": {tail}" if tail else "")
        self._end_job()
        if message is not None:
            self._queue.clear()
            self.job_failed.emit(job, message)
            self.finished.emit("failed")
            return
        self.job_finished.emit(job, rc)
        if self._queue:
            self._start_next()
        else:
            self.finished.emit("done")
