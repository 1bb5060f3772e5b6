"""PinWorker: every pin, batch, undo, restore, isolate preview and call over ssh runs here, in one worker
QThread, one job at a time and in the order asked, so the UI thread never waits on a write or on the
network (issue 19). While a job runs the window repaints, shows each result as it arrives, and may
cancel it between two writes (app/pinning/flow.py Progress).

Like SamplerThread, no Python object crosses the thread boundary inside a Qt event (a queued signal
carrying one crashed PySide6 6.11 in the UI thread's garbage collection, widgets/sampler_thread.py):
the worker puts what it has to say in a locked outbox and posts only a count; the UI thread's slot
drains it and calls the job's callbacks there. A job superseded by a newer one of the same `key`
(a second preview while the first is computed) is dropped unstarted, or its answer is ignored.
"""
from __future__ import annotations

import itertools
import threading
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from app.errors import CoremapError
from app.pinning.flow import Progress
from widgets.sampler_thread import stop_at_exit


@dataclass
class PinJob:
    """One piece of work: `run(progress)` in the worker; the callbacks in the UI thread."""
    id: int
    what: str                                            # "pin", "undo", "isolate CPU 1", ...
    run: Callable[[Progress], object]
    on_done: Callable[[object], None] | None = None
    on_failed: Callable[[str], None] | None = None
    on_result: Callable[[object, int, int], None] | None = None   # (PinResult, done, total)
    key: str = ""                                        # a newer job of the same key supersedes this one
    progress: Progress = field(default_factory=Progress)


class PinWorker(QObject):
    """Lives in the UI thread; its runner lives in the "coremap-pins" QThread. `busy_changed(bool)`
    when it starts or ends work; `job_started(id, what)` as each job starts."""

    busy_changed = Signal(bool)
    job_started = Signal(int, str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._jobs: dict[int, PinJob] = {}          # submitted, not yet finished
        self._latest: dict[str, int] = {}           # key -> the newest job of that key
        self._thread = QThread()
        self._thread.setObjectName("coremap-pins")
        self._runner = _Runner()
        self._runner.moveToThread(self._thread)
        self._runner.posted.connect(self._on_runner_posted, Qt.ConnectionType.QueuedConnection)
        stop_at_exit(self)

    @property
    def busy(self) -> bool:
        return bool(self._jobs)

    @property
    def current(self) -> PinJob | None:
        """The oldest unfinished job (the one running, or about to)."""
        return self._jobs[min(self._jobs)] if self._jobs else None

    def submit(self, what: str, run: Callable[[Progress], object], *, on_done=None, on_failed=None,
               on_result=None, key: str = "") -> PinJob:
        """Queue `run`; its callbacks are called in the UI thread. Returns the job (its `progress`
        cancels it)."""
        job = PinJob(next(self._ids), what, run, on_done, on_failed, on_result, key)
        job.progress = Progress(lambda r, done, total, j=job: self._runner.put(("result", j.id, (r, done, total))))
        was_busy = self.busy
        self._jobs[job.id] = job
        if key:
            older = self._latest.get(key)
            if older is not None and older in self._jobs:
                self._jobs[older].progress.cancel()
            self._latest[key] = job.id
        if not self._thread.isRunning():
            self._thread.start()
        self._runner.queue(job)
        if not was_busy:
            self.busy_changed.emit(True)
        return job

    def cancel(self) -> None:
        """Cancel every job not yet finished: the running one stops between two writes, the waiting
        ones do not start."""
        for job in list(self._jobs.values()):
            job.progress.cancel()

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Block until every job has run (tests and shutdown only: the window never calls it)."""
        ok = self._runner.idle.wait(timeout_s)
        self._on_runner_posted(0)
        return ok

    def stop(self, timeout_ms: int = 10000) -> None:
        self.cancel()
        if self._thread.isRunning():
            self._thread.quit()
            self._thread.wait(timeout_ms)

    # -- the UI side ----------------------------------------------------------------------------------
    @Slot(int)
    def _on_runner_posted(self, _count: int) -> None:
        for kind, job_id, value in self._runner.take():
            job = self._jobs.get(job_id)
            if job is None:
                continue
            stale = bool(job.key) and self._latest.get(job.key) != job_id
            if kind == "started":
                self.job_started.emit(job_id, job.what)
            elif kind == "result":
                if job.on_result is not None and not stale:
                    job.on_result(*value)
            else:
                del self._jobs[job_id]
                callback = job.on_done if kind == "done" else job.on_failed
                if callback is not None and not stale:
                    callback(value)
                if not self._jobs:
                    self._park()
                    self.busy_changed.emit(False)

    def _park(self) -> None:
        """End the worker thread once every job has reported: a window or controller collected while
        it sat idle must not take a running QThread with it ("QThread: Destroyed while thread is still
        running" aborts the process). The runner has nothing left but to return to its event loop, so
        the wait is microseconds; the next submit starts the thread again (~0.1 ms)."""
        if self._thread.isRunning():
            self._thread.quit()
            self._thread.wait(5000)


class _Runner(QObject):
    """Lives in the worker thread: runs each queued job, and leaves what happened in the outbox."""

    posted = Signal(int)
    _run_requested = Signal()

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self._waiting: deque[PinJob] = deque()
        self._outbox: list[tuple[str, int, object]] = []
        self.idle = threading.Event()
        self.idle.set()
        self._run_requested.connect(self._on_run_requested, Qt.ConnectionType.QueuedConnection)

    def queue(self, job: PinJob) -> None:
        with self._lock:
            self._waiting.append(job)
            self.idle.clear()
        self._run_requested.emit()

    def put(self, item: tuple[str, int, object]) -> None:
        with self._lock:
            self._outbox.append(item)
            n = len(self._outbox)
        self.posted.emit(n)

    def take(self) -> list[tuple[str, int, object]]:
        with self._lock:
            out, self._outbox = self._outbox, []
        return out

    @Slot()
    def _on_run_requested(self) -> None:
        while True:
            with self._lock:
                if not self._waiting:
                    self.idle.set()
                    return
                job = self._waiting.popleft()
            self._run(job)

    def _run(self, job: PinJob) -> None:
        if job.progress.cancelled and job.key:
            self.put(("failed", job.id, f"{job.what}: superseded"))
            return
        self.put(("started", job.id, None))
        try:
            value = job.run(job.progress)
        except CoremapError as e:
            self.put(("failed", job.id, f"{job.what}: {e}"))
        except Exception as e:  # noqa: BLE001 - a bug in a job must end the job, not the worker thread
            traceback.print_exc()
            self.put(("failed", job.id, f"{job.what} failed ({type(e).__name__}: {e}); this is a bug in coremap"))
        else:
            self.put(("done", job.id, value))
