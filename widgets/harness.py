"""Qt plumbing: the one QApplication (the window, offscreen pictures and scripts all get it here), and
for scripts that drive the window from outside widgets/ (tests/benchmarks) running the event loop
for a while or until something happened, and really deleting a window. Keeps the rule that only
widgets/ imports Qt (../shared/STYLE.md) for the benchmarks too.
"""
from __future__ import annotations

import gc
import os
import time

from PySide6.QtCore import QCoreApplication, QEvent, QEventLoop, QTimer
from PySide6.QtWidgets import QApplication


def application(name: str = "coremap") -> QApplication:
    """The process's QApplication, made on first use.

    Qt's raster engine hands every fill of more than a few spans to a pool of threads and waits for
    them: for the window's cells and table rows the hand-off costs more than the fill (170 futex calls a
    second between the UI thread and two pool threads, for a window that repaints a few cells a
    second; issue 12). QT_NO_GUI_THREADPOOL, read by Qt when it first wants that pool
    (qthreadpool.cpp), keeps the fills on the painting thread; a user's own setting wins."""
    os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")
    return QApplication.instance() or QApplication([name])


def run_until(signal=None, done=lambda: False, timeout_s: float = 0.0) -> bool:
    """Run a local event loop until `done()` (checked whenever `signal` fires) or `timeout_s` has
    passed; returns done(). No polling timer, so the loop adds no wake-ups of its own.

    A local loop, not app.exec()/quit(): Qt 6's quit() closes every window first, which would stop
    a window's sampler."""
    if done():
        return True
    loop = QEventLoop()
    timer = QTimer()
    timer.setSingleShot(True)
    timer.timeout.connect(loop.quit)

    def check(*_):
        if done():
            loop.quit()
    if signal is not None:
        signal.connect(check)
    timer.start(int(timeout_s * 1000))
    loop.exec()
    timer.stop()
    if signal is not None:
        signal.disconnect(check)
    return done()


def run_for(seconds: float) -> None:
    run_until(None, lambda: False, seconds)


def dispose(window) -> None:
    """Close and really delete a window before the next measurement: deleteLater() runs only when
    control returns to an event loop, which processEvents() does not count as, so the deferred
    deletes are flushed here; then dead Qt objects are collected (with no sampler worker running,
    see MainWindow.set_host)."""
    window.close()
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    application().processEvents()
    gc.collect()


class StallClock:
    """Stamps the UI thread every `period_ms` (tests/benchmarks/bench_pin_stall.py); `longest()` is the largest gap since `reset()`, less the period."""

    def __init__(self, period_ms: int = 2):
        self.period_ms = period_ms
        self.stamps: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(period_ms)
        self.timer.timeout.connect(lambda: self.stamps.append(time.perf_counter()))
        self.timer.start()

    def reset(self) -> None:
        self.stamps = [time.perf_counter()]

    def longest(self) -> float:
        self.stamps.append(time.perf_counter())
        gaps = [b - a for a, b in zip(self.stamps, self.stamps[1:])]
        return max(0.0, max(gaps, default=0.0) - self.period_ms / 1000)
