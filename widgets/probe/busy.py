"""BusyCheck: before a probe measures CPUs, whether another thread was busy on them over the last
seconds (app/sampling/intruders.py, the rule `coremap probe` warns by too), and the bar that says so.

It keeps the thread reads of the states the window applied (a read is one ThreadsSample object: the
sampler hands the same object out on the ticks between reads, so a read is kept once, at the time of
the tick that brought it) back to BUSY_WINDOW_S before the newest, and compares the oldest with the
newest. The bar names each busy thread by its full name (a Java thread's whole name, state.thread_names)
and offers Run anyway; no dialog.
"""
from __future__ import annotations

import os
from collections import deque

from PySide6.QtCore import QObject, Signal

from app.sampling.intruders import BUSY_WINDOW_S, busy_line, busy_on, thread_shares
from app.sampling.machine_state import MachineState
from app.machine.thread_names import NO_THREAD_NAMES
from widgets.notice_bar import NoticeBar


class BusyCheck(QObject):
    """`bar` (hidden until a warning), `run_anyway` when its button is clicked; `warning(cpus)` before a
    run; `set_state(state)` on every state."""

    run_anyway = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._reads: deque = deque()          # (time, ThreadsSample), oldest first
        self._names = NO_THREAD_NAMES
        self.bar = NoticeBar("probe-busy-bar", parent)
        self.run_button = self.bar.add_button("Run anyway", self.run_anyway.emit)
        self.bar.add_button("Not now", self.dismiss)

    def set_state(self, state: MachineState) -> None:
        tasks = state.sample.tasks
        if not state.live or tasks is None:
            return
        self._names = state.thread_names
        if self._reads and self._reads[-1][1] is tasks:
            return
        now = state.sample.time
        if self._reads and now < self._reads[-1][0]:
            self._reads.clear()               # another machine's clock (a sampler was swapped)
        self._reads.append((now, tasks))
        # keep the newest read at or before the window's start, so the window is never shorter
        while len(self._reads) > 2 and self._reads[1][0] <= now - BUSY_WINDOW_S:
            self._reads.popleft()

    def warning(self, cpus, *, local: bool = True) -> str | None:
        """The line for the threads busy on `cpus` (shown in the bar), or None (the bar hidden). Not
        coremap's own threads on this machine: a run keeps them off its CPUs."""
        line = None
        if cpus and len(self._reads) >= 2:
            (t0, earlier), (t1, later) = self._reads[0], self._reads[-1]
            busy = busy_on(cpus, later, thread_shares(earlier, later, t1 - t0), self._names,
                           skip_pids={os.getpid()} if local else ())
            line = busy_line(busy, t1 - t0)
        if line:
            self.bar.label.setText(line)
            self.bar.show()
        else:
            self.bar.hide()
        return line

    def dismiss(self) -> None:
        self.bar.hide()
