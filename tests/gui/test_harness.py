"""widgets/harness.py, the Qt plumbing the benchmarks use instead of importing Qt themselves."""
from __future__ import annotations

import time

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from widgets import harness


class Ticker(QObject):
    ticked = Signal()


def test_run_until_returns_when_done_after_a_signal(qtbot):
    t = Ticker()
    n = []
    t.ticked.connect(lambda: n.append(1))
    for ms in (10, 20, 30):
        QTimer.singleShot(ms, t.ticked.emit)
    t0 = time.monotonic()
    assert harness.run_until(t.ticked, lambda: len(n) >= 3, 60.0)
    assert time.monotonic() - t0 < 60.0 and n == [1, 1, 1]     # returned when done, not at its timeout
    # and gives up at the timeout, saying so
    assert not harness.run_until(t.ticked, lambda: False, 0.05)


def test_dispose_really_deletes_the_window(qtbot):
    w = QWidget()
    w.show()
    harness.dispose(w)
    assert not shiboken6.isValid(w)
