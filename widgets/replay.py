"""Replay in the window: a time slider over a replay host's history (open_host with --at: app/sources/live.py,
app/sources/replay.py), and the grid, the IRQ table and the rest of the window redrawn as of the chosen moment.

The window is the one every machine gets (widgets/application.py build_window); `add_replay(window)` gives it
a ReplayBar, a toolbar, whenever the host shown has a timeline, and takes it away when another machine is
shown. Moving the slider asks a ReplayWorker, on its own thread, for the state at that moment (a Prometheus
query or a pminfo run can take a moment; the UI thread never waits on it) from the host's sampler, which
numbers it after every state shown before; the newest request wins and older answers are dropped. The state
crosses threads through a locked slot and an argument-free signal (widgets/sampler_thread.py: a MachineState
in a queued signal crashed the interpreter).
"""
from __future__ import annotations

import bisect
import threading

from PySide6.QtCore import QObject, QThread, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QLabel, QSlider, QToolBar

from app.errors import CoremapError
from app.host import Host

DEBOUNCE_MS = 120


class ReplayWorker(QObject):
    """Asks the sampler for the state at a moment, off the UI thread; the newest answer waits in `take()`."""

    ready = Signal()
    failed = Signal(str)

    def __init__(self, sampler):
        super().__init__()
        self.sampler = sampler
        self._lock = threading.Lock()
        self._newest = None         # (ask, state)

    @Slot(float, int)
    def compute(self, t: float, ask: int) -> None:
        try:
            state = self.sampler.moment(t)
        except CoremapError as e:
            self.failed.emit(str(e))
            return
        with self._lock:
            if self._newest is None or self._newest[0] < ask:
                self._newest = (ask, state)
        self.ready.emit()

    def take(self):
        """(ask, state) of the newest answer, once; None when taken."""
        with self._lock:
            newest, self._newest = self._newest, None
        return newest


class ReplayBar(QToolBar):
    """The slider over the host's moments, the moment shown, and why one could not be."""

    requested = Signal(float, int)

    def __init__(self, host: Host, window, parent=None):
        super().__init__("Replay", parent)
        self.setObjectName("replay-toolbar")
        self.timeline, self.window = host.timeline, window
        self.asks = 0
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, len(self.timeline.times) - 1)
        self.slider.setMinimumWidth(400)
        self.label = QLabel(self)
        self.addWidget(QLabel(" Replay: ", self))
        self.addWidget(self.slider)
        self.addWidget(self.label)
        self._thread = QThread(self)
        self._thread.setObjectName("coremap-replay")
        self.worker = ReplayWorker(host.sampler)
        self.worker.moveToThread(self._thread)
        self.requested.connect(self.worker.compute, Qt.ConnectionType.QueuedConnection)
        self.worker.ready.connect(self._on_worker_ready, Qt.ConnectionType.QueuedConnection)
        self.worker.failed.connect(self._on_worker_failed, Qt.ConnectionType.QueuedConnection)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._ask)
        self._thread.start()
        self._place(host.at if host.at is not None else self.timeline.times[-1])
        self.slider.valueChanged.connect(self._on_slider_value_changed)

    def seek(self, t: float) -> None:
        """Show the moment at or before t."""
        self._place(t)
        self._ask()

    def _place(self, t: float) -> None:
        self.slider.setValue(max(0, bisect.bisect_right(self.timeline.times, t) - 1))
        self._describe()

    def _describe(self, pending: bool = False) -> None:
        i = self.slider.value()
        where = "reading…" if pending else f"{i + 1} of {len(self.timeline.times)}"
        self.label.setText(f" {self.timeline.describe(self.timeline.times[i])} ({where})")

    def _on_slider_value_changed(self, _value: int) -> None:
        self._describe(pending=True)
        self._debounce.start()

    def _ask(self) -> None:
        self.asks += 1
        self.requested.emit(self.timeline.times[self.slider.value()], self.asks)

    def _on_worker_ready(self) -> None:
        newest = self.worker.take()
        if newest is None or newest[0] != self.asks:
            return              # a newer moment was asked for since
        self.window.set_state(newest[1])
        self._describe()

    def _on_worker_failed(self, why: str) -> None:
        self.label.setText(f" {why}")

    def stop(self) -> None:
        self._thread.quit()
        self._thread.wait()


class ReplayControl(QObject):
    """Keeps a ReplayBar at the window's bottom while the host shown is a replay (`host.timeline`)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.bar: ReplayBar | None = None
        window.host_changed.connect(self._on_host_changed)
        window.closing.connect(self._drop)

    def _on_host_changed(self, host: Host) -> None:
        self._drop()
        if host.timeline is not None:
            self.bar = ReplayBar(host, self.window, self.window)
            self.window.addToolBar(Qt.ToolBarArea.BottomToolBarArea, self.bar)

    def _drop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.window.removeToolBar(self.bar)
            self.bar.deleteLater()
            self.bar = None
