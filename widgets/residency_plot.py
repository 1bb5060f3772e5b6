"""Where the selected threads ran: CPU over time (a stepped line per thread) and the share of CPU time
per CPU (a bar per CPU and thread), drawn by widgets/residency_trails.py.

`set_selection(tids, pids)` takes the thread table's selection, `set_state(state)` applies a
MachineState. A selected thread is drawn from `state.trails` and `state.residency`, which the
sampler keeps for the threads it is told to track. A selected process is drawn as its busiest threads
(up to MAX_SHOWN in all, by CPU % when chosen, said in the caption): the sampler keeps one residency
for the whole process, so the plot follows those threads itself, with its own ResidencyTracker
(app/sampling/residency.py) fed the thread lists the states already carry (issue 23: a selected
process showed nothing).

An honest empty state: with nothing selected, or before the first thread read of a selection, the
widget says so in words instead of drawing an empty plot with a meaningless 0.1…0.9 axis.

The plots are built when first shown with something to draw (pyqtgraph with numpy is ~0.3 s of
start-up and ~30 MB: issue 12, the first frame imports only what it shows), drawn only while on
screen (the dock starts behind the thread table), and restyled when the desktop's palette changes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtWidgets import QLabel, QStackedLayout, QVBoxLayout, QWidget

from app.format import plural
from app.sampling.machine_state import MachineState
from app.sampling.residency import ResidencyTracker
from widgets.theme import plot_colors

if TYPE_CHECKING:
    from widgets.residency_trails import TrailPlots

EMPTY_HINT = "Select a thread or a process in the Threads tab to see where it runs."
WAITING_HINT = "Following {what}: where it runs shows from the next read of the thread list."
MAX_SHOWN = 6               # threads drawn at once: more trails than this are no longer told apart
WINDOW_SECONDS = 60.0       # as long as the sampler's own residency window


class ResidencyPlot(QWidget):
    """CPU-over-time for the chosen threads (a process's busiest threads), their per-CPU shares beside it."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._chosen: tuple[list[int], list[int]] = ([], [])
        self._picked: dict[int, list[int]] = {}       # pid -> its threads drawn, busiest first
        self._of_process: dict[int, int] = {}          # pid -> how many threads it had when picked
        self._tracker = ResidencyTracker(WINDOW_SECONDS)
        self._fed_tasks = None                         # the thread list last fed to the tracker
        self._state: MachineState | None = None
        self._stale = False             # a state or selection not drawn yet (hidden)
        self.plots: TrailPlots | None = None
        self.hint = QLabel(EMPTY_HINT, self)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)
        self.caption = QLabel(self)
        self.caption.setTextFormat(Qt.TextFormat.PlainText)
        self._page = QWidget(self)
        page = QVBoxLayout(self._page)
        page.setContentsMargins(0, 0, 0, 0)
        page.setSpacing(2)
        page.addWidget(self.caption)
        self._stack = QStackedLayout(self)
        self._stack.addWidget(self.hint)
        self._stack.addWidget(self._page)
        self._restyle()

    # -- input ---------------------------------------------------------------------------------------
    def set_selection(self, tids, pids=()) -> None:
        chosen = (list(dict.fromkeys(int(t) for t in tids)), list(dict.fromkeys(int(p) for p in pids)))
        if chosen == self._chosen:
            return
        self._chosen = chosen
        self._picked, self._of_process = {}, {}
        self._tracker = ResidencyTracker(WINDOW_SECONDS)
        self._pick()
        self._changed()

    def set_tids(self, tids) -> None:
        """Threads alone (no process)."""
        self.set_selection(tids, ())

    def set_state(self, state: MachineState) -> None:
        previous = self._state
        self._state = state
        if previous is not None and (state.topology is not previous.topology
                                     or state.sample.time < previous.sample.time):
            self._tracker, self._fed_tasks = ResidencyTracker(WINDOW_SECONDS), None   # another machine
        self._pick()
        self._feed(state)
        self._changed()

    @property
    def tids(self) -> list[int]:
        """The threads drawn: the selected ones, then each selected process's picked threads."""
        return self._chosen[0] + [t for tids in self._picked.values() for t in tids if t not in self._chosen[0]]

    # -- a process's threads -----------------------------------------------------------------------------
    def _pick(self) -> None:
        """Choose each selected process's busiest threads (kept until one of them exits)."""
        tids, pids = self._chosen
        tasks = self._state.sample.tasks if self._state is not None else None
        if not pids or tasks is None:
            return
        rates = self._state.rates.tasks if self._state.rates is not None else {}
        room = max(1, (MAX_SHOWN - len(tids)) // len(pids))
        for pid in pids:
            kept = self._picked.get(pid)
            if kept and all(t in tasks.tasks for t in kept):
                continue
            threads = [t for t in tasks.threads_of(pid) if t.tid not in tids]
            threads.sort(key=lambda t: (-(rates[t.tid].cpu_pct if t.tid in rates else 0.0), -t.cpu_ticks, t.tid))
            self._picked[pid] = [t.tid for t in threads[:room]]
            self._of_process[pid] = len(threads)

    def _feed(self, state: MachineState) -> None:
        """Give the tracker the picked threads' new positions and CPU time (once per thread list)."""
        tasks = state.sample.tasks
        if tasks is None or tasks is self._fed_tasks:
            return
        previous, self._fed_tasks = self._fed_tasks, tasks
        picked = [t for tids in self._picked.values() for t in tids]
        if previous is not None and picked:
            self._tracker.add(state.sample.time, previous, tasks, picked)

    # -- drawing -------------------------------------------------------------------------------------
    def paintEvent(self, event) -> None:
        # Painted means on screen: a dock tabbed behind another stays "visible" to Qt but is never
        # painted. Draw after this paint, not inside it.
        super().paintEvent(event)
        if self._stale:
            QTimer.singleShot(0, self._draw_now)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._restyle()

    def _restyle(self) -> None:
        colors = plot_colors(self)
        self.hint.setStyleSheet(f"color: {colors.muted.name()}; padding: 12px;")
        self.caption.setStyleSheet(f"color: {colors.muted.name()};")
        if self.plots is not None:
            self.plots.set_colors(colors)

    def _changed(self) -> None:
        if not self.visibleRegion().isEmpty():
            self._draw_now()
        else:
            self._stale = True              # drawn at the next paint

    def _rows(self) -> list[tuple[int, str, tuple, dict]]:
        state = self._state
        trails = state.trails if state is not None else {}
        residency = state.residency if state is not None else {}
        rows = [(tid, self._name(tid), tuple(trails.get(tid, ())), dict(residency.get(tid) or {}))
                for tid in self._chosen[0]]
        rows += [(tid, self._name(tid), tuple(self._tracker.trail(tid)), self._tracker.share(tid))
                 for tid in self.tids[len(self._chosen[0]):]]
        return rows

    def _draw_now(self) -> None:
        """Show the hint, or build the plots if need be and draw them."""
        self._stale = False
        rows = self._rows()
        if not any(trail or shares for _, _, trail, shares in rows):
            self.hint.setText(WAITING_HINT.format(what=self._what()) if any(self._chosen) else EMPTY_HINT)
            self._stack.setCurrentWidget(self.hint)
            return
        if self.plots is None:
            # Imported here, not at the top: see the module docstring (start-up time and memory).
            from widgets.residency_trails import TrailPlots
            self.plots = TrailPlots(plot_colors(self), self._page)
            self._page.layout().addWidget(self.plots, 1)
        self.caption.setText(self._caption())
        self._stack.setCurrentWidget(self._page)
        self.plots.draw(rows, self._state.sample.time)

    def _what(self) -> str:
        tids, pids = self._chosen
        names = [self._name(t) for t in tids[:2]] + [f"process {self._process_name(p)}" for p in pids[:2]]
        more = len(tids) + len(pids) - len(names)
        return ", ".join(names) + (f" and {more} more" if more > 0 else "")

    def _caption(self) -> str:
        parts = []
        for pid, picked in self._picked.items():
            n = self._of_process.get(pid, len(picked))
            if n > len(picked):
                parts.append(f"process {self._process_name(pid)}: its {len(picked)} busiest of {plural(n, 'thread')}")
            else:
                parts.append(f"process {self._process_name(pid)}: {'its thread' if n == 1 else f'all {n} threads'}")
        parts.append("each thread in its own band of its CPU's row; the last 60 s")
        return " · ".join(parts)

    def _name(self, tid: int) -> str:
        tasks = self._state.sample.tasks if self._state is not None else None
        t = tasks.tasks.get(tid) if tasks is not None else None
        return f"{self._state.thread_names.name(t.pid, tid, t.comm)} ({tid})" if t is not None else f"thread {tid}"

    def _process_name(self, pid: int) -> str:
        tasks = self._state.sample.tasks if self._state is not None else None
        p = tasks.processes.get(pid) if tasks is not None else None
        return f"{p.comm} ({pid})" if p is not None and p.comm else str(pid)

    # -- what is drawn (tests read it) -----------------------------------------------------------------
    def curve(self, tid: int):
        """The trail curve of a drawn thread; drawn now if it was not."""
        self._draw_now()
        return self.plots.curve(tid) if self.plots is not None else None

    def trail(self, tid: int) -> list[int]:
        """The CPUs of a drawn thread's trail, as sampled."""
        self._draw_now()
        return self.plots.trail(tid) if self.plots is not None else []

    def label(self, tid: int) -> str | None:
        self._draw_now()
        return self.plots.label(tid) if self.plots is not None else None

    def shares(self, tid: int) -> dict[int, float]:
        """The residency shares drawn for a drawn thread."""
        self._draw_now()
        if self.plots is None or tid not in self.tids:
            return {}
        from widgets.residency_trails import offset
        return self.plots.shares(tid, offset(self.tids.index(tid), len(self.tids)))

    @property
    def showing_hint(self) -> bool:
        return self._stack.currentWidget() is self.hint
