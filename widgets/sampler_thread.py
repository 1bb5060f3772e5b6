"""SamplerThread: drives app.sampler.Sampler.tick() in a worker QThread, one MachineState per tick.

The object is moved to its own QThread; the UI thread talks to it only through queued signals
(`set_interval`, `pause`, `resume`, `track`, `refresh_topology` emit private request signals whose
slots run in the worker), and it answers with `state_ready(state)`. A slow tick (thousands of
threads, a slow /proc on a loaded machine) therefore delays the next state, never the UI. The
receiver drops a state whose generation is not newer than the one it applied last
(`is_newer(state, last_generation)`).
"""
from __future__ import annotations

import time

from PySide6.QtCore import QCoreApplication, QObject, QThread, QTimer, Signal, Slot

from app.errors import CoremapError
from app.sampler import Sampler, clamp_interval

# After the first tick the second comes sooner than a full interval, so that the first rates are on
# screen within half a second of opening the window.
FIRST_RATES_AFTER = 0.5


def is_newer(state, last_generation: int | None) -> bool:
    return last_generation is None or state.generation > last_generation


class SamplerThread(QObject):
    state_ready = Signal(object)          # MachineState
    tick_failed = Signal(str)             # a CoremapError's message; sampling goes on
    paused_changed = Signal(bool)
    interval_changed = Signal(float)
    tick_seconds = Signal(float)          # how long the last tick took (for the status bar)

    _interval_requested = Signal(float)
    _pause_requested = Signal(bool)
    _track_requested = Signal(list, list)
    _topology_requested = Signal()
    _stop_requested = Signal()
    _start_requested = Signal()

    def __init__(self, sampler: Sampler):
        super().__init__()
        self.sampler = sampler
        self._thread = QThread()
        self._thread.setObjectName("coremap-sampler")
        self._timer: QTimer | None = None
        self._paused = False
        self._ticks = 0
        self.moveToThread(self._thread)
        self._interval_requested.connect(self._on_interval_requested)
        self._pause_requested.connect(self._on_pause_requested)
        self._track_requested.connect(self._on_track_requested)
        self._topology_requested.connect(self._on_topology_requested)
        self._stop_requested.connect(self._on_stop_requested)
        self._start_requested.connect(self._on_start_requested)

    # -- UI-thread API (all queued to the worker) --------------------------------------------------
    @property
    def interval(self) -> float:
        return self.sampler.interval

    @property
    def paused(self) -> bool:
        return self._paused

    def start(self) -> None:
        self._thread.start()
        self._start_requested.emit()

    def stop(self, timeout_ms: int = 10000) -> None:
        """Stop ticking and end the worker thread (waits for a tick in progress)."""
        if not self._thread.isRunning():
            return
        self._stop_requested.emit()
        self._thread.wait(timeout_ms)

    def set_interval(self, seconds: float) -> None:
        self._interval_requested.emit(clamp_interval(seconds))

    def pause(self) -> None:
        self._pause_requested.emit(True)

    def resume(self) -> None:
        self._pause_requested.emit(False)

    def track(self, tids, pids=()) -> None:
        self._track_requested.emit(list(tids), list(pids))

    def refresh_topology(self) -> None:
        self._topology_requested.emit()

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
        self.tick_seconds.emit(time.perf_counter() - t0)
        if state is not None:
            self.state_ready.emit(state)
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
        # Hand the object back to the application's thread so it can be deleted there once the
        # worker has ended (a QObject must be destroyed in the thread it lives in).
        app = QCoreApplication.instance()
        if app is not None:
            self.moveToThread(app.thread())
        self._thread.quit()
