"""GuardThread: the pin guard (app/quiet/guard.py) ticking in its own QThread while the window runs.

Like SamplerThread, a worker object lives in a QThread and the UI thread talks to it only through
queued signals: `start(root, journal_path)` gives it the machine and the journal (it opens its own
Journal on that file, so it never shares the UI thread's Journal object; the journal's flock keeps
the two writers' lines whole), `set_interval`, `set_enabled`, `stop`. After each tick that found
something the worker leaves the GuardTick in a locked list and posts only a count; `ticked` then
carries it in the UI thread — no Python object crosses the thread boundary inside a Qt event (see
widgets/sampler_thread.py for why).

The guard leaves this process's own threads alone (probes/own_affinity.py moves them off probed
CPUs on purpose) and re-applies nothing unless a pin's policy says so (the Pins panel's menu).
"""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from app.pinning.service import AffinityService
from app.errors import CoremapError
from app.quiet.guard import Guard, GuardTick
from app.pinning.journal import Journal
from app.sysroot import SysRoot
from widgets.sampler_thread import WorkerThread, end_worker, stop_at_exit


class GuardThread(QObject):
    """Lives in the UI thread; see the module docstring. `ticked(GuardTick)` after every tick that
    found a change or pinned a new thread; `failed(str)` when the guard cannot work (the journal
    cannot be opened); `last_tick` is the newest tick (its cost, how many threads it compared)."""

    ticked = Signal(object)            # GuardTick with events, followed threads or notes
    failed = Signal(str)

    def __init__(self, parent=None, *, interval: float = 1.0):
        super().__init__(parent)
        self._thread = WorkerThread(_GuardWorker(interval), "coremap-guard")
        self._worker = self._thread.worker
        self._worker.posted.connect(self._on_worker_posted, Qt.ConnectionType.QueuedConnection)
        self._worker.failed.connect(self._on_worker_failed, Qt.ConnectionType.QueuedConnection)
        self.source: tuple[str, str] | None = None       # (root, journal path) being guarded
        self.enabled = True
        stop_at_exit(self)

    @property
    def running(self) -> bool:
        return self._thread.running

    @property
    def last_tick(self) -> GuardTick | None:
        return self._worker.last_tick

    def start(self, root: SysRoot, journal_path: Path) -> None:
        """Guard the pins `journal_path` holds for `root` (restarting on another root or journal)."""
        source = (str(root.root), str(journal_path))
        if source == self.source and self.running:
            return
        self.source = source
        if not self._thread.running:
            self._thread.start()
        self._worker.start_requested.emit(str(root.root), str(journal_path))

    def set_interval(self, seconds: float) -> None:
        self._worker.interval_requested.emit(float(seconds))

    def set_enabled(self, on: bool) -> None:
        """Pause (False) or resume the guard; paused, it reads nothing and writes nothing."""
        self.enabled = bool(on)
        self._worker.enabled_requested.emit(self.enabled)

    def stop(self, timeout_ms: int = 10000) -> None:
        if self._thread.stop(timeout_ms):
            self.source = None

    @Slot(int)
    def _on_worker_posted(self, _count: int) -> None:
        for tick in self._worker.take():
            self.ticked.emit(tick)

    @Slot(str)
    def _on_worker_failed(self, message: str) -> None:
        self.failed.emit(message)


class _GuardWorker(QObject):
    """Runs in the guard's QThread: a repeating timer drives Guard.tick()."""

    posted = Signal(int)
    failed = Signal(str)
    start_requested = Signal(str, str)
    interval_requested = Signal(float)
    enabled_requested = Signal(bool)
    stop_requested = Signal()

    def __init__(self, interval: float):
        super().__init__()
        self.interval = interval
        self.last_tick: GuardTick | None = None
        self._guard: Guard | None = None
        self._journal: Journal | None = None
        self._timer: QTimer | None = None
        self._enabled = True
        self._lock = threading.Lock()
        self._found: list[GuardTick] = []
        self.start_requested.connect(self._on_start_requested)
        self.interval_requested.connect(self._on_interval_requested)
        self.enabled_requested.connect(self._on_enabled_requested)
        self.stop_requested.connect(self._on_stop_requested)

    def take(self) -> list[GuardTick]:
        with self._lock:
            found, self._found = self._found, []
        return found

    @Slot(str, str)
    def _on_start_requested(self, root: str, journal_path: str) -> None:
        self._close()
        try:
            self._journal = Journal(journal_path)
            self._guard = Guard(AffinityService(SysRoot(root), self._journal))
        except CoremapError as e:
            self._close()
            self.failed.emit(f"the pin guard is off: {e}")
            return
        if self._timer is None:
            self._timer = QTimer(self)
            self._timer.timeout.connect(self._on_timer_timeout)
        self._timer.start(int(self.interval * 1000))

    @Slot()
    def _on_timer_timeout(self) -> None:
        if self._guard is None or not self._enabled:
            return
        try:
            tick = self._guard.tick()
        except CoremapError as e:
            self.failed.emit(f"pin guard: {e}")
            return
        self.last_tick = tick
        if tick.events or tick.followed or tick.notes:
            with self._lock:
                self._found.append(tick)
            self.posted.emit(len(tick.events) + len(tick.followed) + len(tick.notes))

    @Slot(float)
    def _on_interval_requested(self, seconds: float) -> None:
        self.interval = seconds
        if self._timer is not None and self._timer.isActive():
            self._timer.start(int(seconds * 1000))

    @Slot(bool)
    def _on_enabled_requested(self, on: bool) -> None:
        self._enabled = on

    def _close(self) -> None:
        self._guard = None
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    @Slot()
    def _on_stop_requested(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._close()
        end_worker(self)
