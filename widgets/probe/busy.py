"""BusyCheck: before a probe measures CPUs, whether another thread was busy on them over the last
seconds (app/sampling/intruders.py, the rule `coremap probe` warns by too), and the bar that says so.

It keeps the thread reads of the states the window applied (a read is one ThreadsSample object: the
sampler hands the same object out on the ticks between reads, so a read is kept once, at the time of
the tick that brought it) back to BUSY_WINDOW_S before the newest, and compares the oldest with the
newest. The bar names each busy thread by its full name (a Java thread's whole name, state.thread_names)
and its share, the whole sentence in its tooltip and on the status line, and offers Run anyway; no
dialog. Its buttons sit under its words: beside the form, a row of both left the words a column one
word wide.
"""
from __future__ import annotations

import os
from collections import deque

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from app.machine.thread_names import NO_THREAD_NAMES
from app.sampling.intruders import BUSY_WINDOW_S, busy_brief, busy_line, busy_on, thread_shares
from app.sampling.machine_state import MachineState
from widgets.theme import apply_notice_style


class BusyBar(QFrame):
    """The notice's words, then Run anyway and Not now under them; hidden until shown."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("probe-busy-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        apply_notice_style(self, self.objectName())
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)      # thread names are the machine's text
        self.label.setWordWrap(True)
        self.run_button = QPushButton("Run anyway", self)
        self.dismiss_button = QPushButton("Not now", self)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.dismiss_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 3, 8, 3)
        lay.addWidget(self.label)
        lay.addLayout(buttons)
        self.hide()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            apply_notice_style(self, self.objectName())


class BusyCheck(QObject):
    """`bar` (hidden until a warning), `run_anyway` when its button is clicked; `warning(cpus)` before a
    run; `set_state(state)` on every state."""

    run_anyway = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._reads: deque = deque()          # (time, ThreadsSample), oldest first
        self._names = NO_THREAD_NAMES
        self.bar = BusyBar(parent)
        self.run_button = self.bar.run_button
        self.run_button.clicked.connect(lambda _checked=False: self.run_anyway.emit())
        self.bar.dismiss_button.clicked.connect(lambda _checked=False: self.dismiss())

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
        """The whole sentence for the threads busy on `cpus` (the bar shows its few words), or None
        (the bar hidden). Not coremap's own threads on this machine: a run keeps them off its CPUs."""
        line = brief = None
        if cpus and len(self._reads) >= 2:
            (t0, earlier), (t1, later) = self._reads[0], self._reads[-1]
            busy = busy_on(cpus, later, thread_shares(earlier, later, t1 - t0), self._names,
                           skip_pids={os.getpid()} if local else ())
            line, brief = busy_line(busy, t1 - t0), busy_brief(busy)
        if line:
            self.bar.label.setText(brief)
            self.bar.setToolTip(line)
            self.bar.show()
        else:
            self.bar.hide()
        return line

    def dismiss(self) -> None:
        self.bar.hide()
