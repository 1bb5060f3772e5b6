"""SamplerThread: drives app.sampling.sampler.Sampler.tick() in a worker QThread, one MachineState per tick.

A worker object is moved to its own QThread; the UI thread talks to it only through queued signals
(`set_interval`, `pause`, `resume`, `track`, `refresh_topology` emit request signals whose slots run
in the worker), and SamplerThread re-emits its answers, `state_ready(state)` first, in the UI thread. A slow tick (thousands of
threads, a slow /proc on a loaded machine) therefore delays the next state, never the UI. The
receiver drops a state whose generation is not newer than the one it applied last
(`is_newer(state, last_generation)`).
"""
from __future__ import annotations

import atexit
import threading
import time
import weakref

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, QTimer, Signal, Slot

from app.errors import CoremapError
from app.sampling.sampler import clamp_interval
from app.sampling.sources import MachineSource

# After the first tick the second comes sooner than a full interval, so that the first rates are on
# screen within half a second of opening the window.
FIRST_RATES_AFTER = 0.5
# A tick asked for at once (sample_now) comes at least this long after the last: its rates are over
# this much time, not over the few ms a tick that just ended left, where a thread's CPU % (counted in
# 10 ms ticks) would read 0 or 100.
NOW_AFTER = 0.2


def stop_at_exit(owner) -> None:
    """Call `owner.stop()` when the interpreter exits, if `owner` is still alive then: a QThread
    destroyed while it runs aborts the process (qFatal), and a script or a test that builds a window
    and never closes it leaves its worker threads running into interpreter shutdown."""
    ref = weakref.ref(owner)

    def stop() -> None:
        alive = ref()
        if alive is not None:
            try:
                alive.stop()
            except RuntimeError:        # its Qt side was already deleted: nothing runs any more
                pass
    atexit.register(stop)


class WorkerThread:
    """A worker QObject in a QThread of its own, the one way SamplerThread and GuardThread
    (widgets/pinning/guard.py) run theirs: the worker is moved to the thread at once; `stop()` emits the
    worker's `stop_requested` (queued into its thread, whose slot ends with `end_worker`) and waits for
    the thread to end."""

    def __init__(self, worker: QObject, name: str):
        self.worker = worker
        self.qthread = QThread()
        self.qthread.setObjectName(name)
        worker.moveToThread(self.qthread)

    @property
    def running(self) -> bool:
        return self.qthread.isRunning()

    def start(self) -> None:
        self.qthread.start()

    def stop(self, timeout_ms: int) -> bool:
        """End the thread (after the worker's work in progress); False when it was not running."""
        if not self.qthread.isRunning():
            return False
        self.worker.stop_requested.emit()
        self.qthread.wait(timeout_ms)
        return True


def end_worker(worker: QObject) -> None:
    """A worker's last step, in its thread: hand it back to the application's thread so it can be deleted
    there once the thread has ended (a QObject must be destroyed in the thread it lives in), and end it."""
    app = QCoreApplication.instance()
    thread = worker.thread()
    if app is not None:
        worker.moveToThread(app.thread())
    thread.quit()


def is_newer(state, last_generation: int | None) -> bool:
    return last_generation is None or state.generation > last_generation


class SamplerThread(QObject):
    """Lives in the UI thread; its worker (a _SamplerWorker moved to a QThread) does the ticking.

    Every public signal is emitted from the UI thread (re-emitted from the worker's queued ones), so
    any slot or plain Python callable connected to `state_ready` runs in the UI thread: a lambda
    connected to a signal of an object living in another thread would run in that thread instead.
    """

    state_ready = Signal(object)          # MachineState
    tick_failed = Signal(str)             # a CoremapError's message; sampling goes on
    paused_changed = Signal(bool)
    interval_changed = Signal(float)
    tick_seconds = Signal(float)          # how long the last tick took (for the status bar)

    def __init__(self, sampler: MachineSource, parent=None):
        super().__init__(parent)
        self.sampler = sampler
        self._thread = WorkerThread(_SamplerWorker(sampler), "coremap-sampler")
        self._worker = self._thread.worker
        self._paused = False
        stop_at_exit(self)
        w = self._worker
        # Queued into slots of this (UI-thread) object, which re-emit. No Python object crosses the
        # thread boundary inside a Qt event: the worker leaves its newest state in a locked slot and
        # posts only its generation. Carrying the MachineState itself through a queued signal
        # crashed or deadlocked the interpreter in the UI thread's garbage collection while the
        # worker ticked (PySide6 6.11, seen in the GUI tests on the 112-CPU capture).
        w.state_posted.connect(self._on_worker_state_posted, Qt.ConnectionType.QueuedConnection)
        w.tick_failed.connect(self._on_worker_tick_failed, Qt.ConnectionType.QueuedConnection)
        w.paused_changed.connect(self._on_worker_paused_changed, Qt.ConnectionType.QueuedConnection)
        w.interval_changed.connect(self._on_worker_interval_changed, Qt.ConnectionType.QueuedConnection)
        w.tick_seconds.connect(self._on_worker_tick_seconds, Qt.ConnectionType.QueuedConnection)

    # -- UI-thread API (all queued to the worker) --------------------------------------------------
    @property
    def interval(self) -> float:
        return self.sampler.interval

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def running(self) -> bool:
        return self._thread.running

    def start(self) -> None:
        self._thread.start()
        self._worker.start_requested.emit()

    def stop(self, timeout_ms: int = 10000) -> None:
        """Stop ticking and end the worker thread (waits for a tick in progress)."""
        self._thread.stop(timeout_ms)

    def set_interval(self, seconds: float) -> None:
        self._worker.interval_requested.emit(clamp_interval(seconds))

    def pause(self) -> None:
        self._worker.pause_requested.emit(True)

    def resume(self) -> None:
        self._worker.pause_requested.emit(False)

    def track(self, tids, pids=()) -> None:
        self._worker.track_requested.emit(list(tids), list(pids))

    def refresh_topology(self) -> None:
        self._worker.topology_requested.emit()

    def sample_now(self) -> None:
        """Tick now (NOW_AFTER after the last tick at the earliest) rather than when the interval is
        up: after coremap's own batch (a pin, an isolate, a give-back, a restore) the window shows
        what it did at once, not a tick (or, with a slow thread list, seconds) later. Nothing while
        paused, and nothing for a capture, which does not change."""
        self._worker.now_requested.emit()

    def forget_threads(self, pids=None) -> None:
        """After a pin: the next thread read re-reads these processes (all when None), so their new
        affinity shows at once rather than when their threads next run (app/machine/threads.py)."""
        self._worker.forget_requested.emit([] if pids is None else [int(p) for p in pids], pids is None)

    @Slot(int)
    def _on_worker_state_posted(self, generation: int) -> None:
        state = self._worker.take_state()
        # Several posts may be queued for one newest state: the first takes it, the rest find None.
        if state is not None:
            self.state_ready.emit(state)

    @Slot(str)
    def _on_worker_tick_failed(self, message: str) -> None:
        self.tick_failed.emit(message)

    @Slot(float)
    def _on_worker_interval_changed(self, seconds: float) -> None:
        self.interval_changed.emit(seconds)

    @Slot(float)
    def _on_worker_tick_seconds(self, seconds: float) -> None:
        self.tick_seconds.emit(seconds)

    @Slot(bool)
    def _on_worker_paused_changed(self, paused: bool) -> None:
        self._paused = paused
        self.paused_changed.emit(paused)


class _SamplerWorker(QObject):
    """Runs in the sampler's QThread: a single-shot timer drives Sampler.tick()."""

    state_posted = Signal(int)          # generation of the state take_state() now returns
    tick_failed = Signal(str)
    paused_changed = Signal(bool)
    interval_changed = Signal(float)
    tick_seconds = Signal(float)

    # Requests from the UI thread (queued: this object lives in the worker thread).
    interval_requested = Signal(float)
    pause_requested = Signal(bool)
    track_requested = Signal(list, list)
    topology_requested = Signal()
    forget_requested = Signal(list, bool)   # pids, every process
    now_requested = Signal()
    stop_requested = Signal()
    start_requested = Signal()

    def __init__(self, sampler: MachineSource):
        super().__init__()
        self.sampler = sampler
        self._timer: QTimer | None = None
        self._paused = False
        self._ticks = 0
        self._ticked_at = 0.0       # time.monotonic() at the end of the last tick
        self._lock = threading.Lock()
        self._newest = None         # the newest MachineState not yet taken by the UI thread
        self.interval_requested.connect(self._on_interval_requested)
        self.pause_requested.connect(self._on_pause_requested)
        self.track_requested.connect(self._on_track_requested)
        self.topology_requested.connect(self._on_topology_requested)
        self.forget_requested.connect(self._on_forget_requested)
        self.now_requested.connect(self._on_now_requested)
        self.stop_requested.connect(self._on_stop_requested)
        self.start_requested.connect(self._on_start_requested)

    def take_state(self):
        """The newest state, once (called from the UI thread); None when already taken."""
        with self._lock:
            state, self._newest = self._newest, None
        return state

    # -- worker thread ---------------------------------------------------------------------------------
    @Slot()
    def _on_start_requested(self) -> None:
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._timer.start(0)

    @Slot()
    def _on_timer_timeout(self) -> None:
        if self._paused:
            return
        t0 = time.perf_counter()
        try:
            state = self.sampler.tick()
        except CoremapError as e:
            self.tick_failed.emit(str(e))
            state = None
        self._ticks += 1
        self._ticked_at = time.monotonic()
        self.tick_seconds.emit(time.perf_counter() - t0)
        if state is not None:
            with self._lock:
                self._newest = state
            self.state_posted.emit(state.generation)
        if not self.sampler.live and state is not None:
            return      # a capture does not change: one state is all there is
        self._schedule()

    def _schedule(self) -> None:
        if self._timer is None or self._paused:
            return
        seconds = self.sampler.interval
        if self._ticks == 1:
            seconds = min(seconds, FIRST_RATES_AFTER)
        self._timer.start(int(seconds * 1000))

    @Slot(float)
    def _on_interval_requested(self, seconds: float) -> None:
        self.sampler.set_interval(seconds)
        if self._timer is not None and self._timer.isActive():
            self._timer.start(int(self.sampler.interval * 1000))
        self.interval_changed.emit(self.sampler.interval)

    @Slot(bool)
    def _on_pause_requested(self, paused: bool) -> None:
        if paused == self._paused:
            return
        self._paused = paused
        if self._timer is not None:
            if paused:
                self._timer.stop()
            elif self.sampler.live or self._ticks == 0:
                self._timer.start(0)
        self.paused_changed.emit(paused)

    @Slot(list, list)
    def _on_track_requested(self, tids: list, pids: list) -> None:
        self.sampler.track(tids, pids)

    @Slot(list, bool)
    def _on_forget_requested(self, pids: list, every: bool) -> None:
        self.sampler.forget_threads(None if every else pids)

    @Slot()
    def _on_now_requested(self) -> None:
        # An inactive timer: paused, a capture's one state given, or not started; a tick under way
        # cannot be, as this runs in the worker's thread between ticks.
        if self._timer is None or self._paused or not self._timer.isActive():
            return
        wait = NOW_AFTER - (time.monotonic() - self._ticked_at)
        self._timer.start(max(0, int(wait * 1000)))

    @Slot()
    def _on_topology_requested(self) -> None:
        try:
            self.sampler.refresh_topology()
        except CoremapError as e:
            self.tick_failed.emit(str(e))
            return
        if self._timer is not None and not self._paused:
            self._timer.start(0)

    @Slot()
    def _on_stop_requested(self) -> None:
        if self._timer is not None:
            self._timer.stop()      # a stopped child timer moves with this object, without warnings
        end_worker(self)
