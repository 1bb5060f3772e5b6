"""Replay in the window: a time slider over a Timeline (app/sources/replay.py), and the grid, the IRQ table and
the rest of the window redrawn as of the chosen moment.

The window is the one every machine gets (widgets/application.py build_window, with no sampler: nothing
ticks); ReplayBar is a toolbar added to it. Moving the slider asks a ReplayWorker, on its own thread, for the
state at that moment (a Prometheus query or a pminfo run can take a moment; the UI thread never waits on
it); the newest request wins and older answers are dropped by their generation, as the sampler's are.
The state crosses threads through a locked slot and an argument-free signal (widgets/sampler_thread.py:
a MachineState in a queued signal crashed the interpreter).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QLabel, QSlider, QToolBar

from app.atomic import write_atomic
from app.errors import CoremapError
from widgets.application import build_window, parse_size, render_window
from widgets.colors import parse_metric
from widgets.harness import application

DEBOUNCE_MS = 120


class ReplayWorker(QObject):
    """Computes Timeline.state_at off the UI thread; the newest answer waits in `take()`."""

    ready = Signal()
    failed = Signal(str)

    def __init__(self, timeline):
        super().__init__()
        self.timeline = timeline
        self._lock = threading.Lock()
        self._newest = None

    @Slot(float, int)
    def compute(self, t: float, generation: int) -> None:
        try:
            state = self.timeline.state_at(t, generation)
        except CoremapError as e:
            self.failed.emit(str(e))
            return
        with self._lock:
            if self._newest is None or self._newest.generation < generation:
                self._newest = state
        self.ready.emit()

    def take(self):
        with self._lock:
            state, self._newest = self._newest, None
        return state


class ReplayBar(QToolBar):
    """The slider over the timeline's moments, the moment shown, and why one could not be."""

    requested = Signal(float, int)

    def __init__(self, timeline, window, parent=None):
        super().__init__("Replay", parent)
        self.setObjectName("replay-toolbar")
        self.timeline, self.window = timeline, window
        self.generation = 0
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, len(timeline.times) - 1)
        self.slider.setMinimumWidth(400)
        self.label = QLabel(self)
        self.addWidget(QLabel(" Replay: ", self))
        self.addWidget(self.slider)
        self.addWidget(self.label)
        self._thread = QThread(self)
        self._thread.setObjectName("coremap-replay")
        self.worker = ReplayWorker(timeline)
        self.worker.moveToThread(self._thread)
        self.requested.connect(self.worker.compute, Qt.ConnectionType.QueuedConnection)
        self.worker.ready.connect(self._on_worker_ready, Qt.ConnectionType.QueuedConnection)
        self.worker.failed.connect(self._on_worker_failed, Qt.ConnectionType.QueuedConnection)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._ask)
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self._thread.start()

    def seek(self, t: float) -> None:
        """Show the moment at or before t."""
        import bisect
        self.slider.setValue(max(0, bisect.bisect_right(self.timeline.times, t) - 1))
        self._ask()

    def _on_slider_value_changed(self, _value: int) -> None:
        self.label.setText(f" {self.timeline.describe(self.timeline.times[self.slider.value()])} (reading…)")
        self._debounce.start()

    def _ask(self) -> None:
        self.generation += 1
        self.requested.emit(self.timeline.times[self.slider.value()], self.generation)

    def _on_worker_ready(self) -> None:
        state = self.worker.take()
        if state is None or state.generation != self.generation:
            return              # a newer moment was asked for since
        self.window.set_state(state)
        self.label.setText(f" {self.timeline.describe(self.timeline.times[self.slider.value()])} "
                           f"({self.slider.value() + 1} of {len(self.timeline.times)})")

    def _on_worker_failed(self, why: str) -> None:
        self.label.setText(f" {why}")

    def stop(self) -> None:
        self._thread.quit()
        self._thread.wait()


def run_replay_window(timeline, at: float, args) -> int:
    """The window at moment `at` of `timeline`: interactive with its slider, or --screenshot rendered."""
    metric = parse_metric(getattr(args, "color_by", None))
    size = parse_size(getattr(args, "size", None))
    out = getattr(args, "screenshot", None)
    if out:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        state = timeline.state_at(at)
        application()
        write_atomic(Path(out), render_window(state, size=size, metric=metric))
        print(f"{out}: {timeline.label} at {timeline.describe(timeline.nearest(at))}")
        return 0
    app = application()
    window = build_window(None, metric=metric)
    bar = ReplayBar(timeline, window)
    window.addToolBar(Qt.ToolBarArea.BottomToolBarArea, bar)
    window.resize(*size)
    window.show()
    bar.seek(at)
    try:
        return int(app.exec())
    finally:
        bar.stop()
