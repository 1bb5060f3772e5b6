"""SearchBar: Edit → Find (Ctrl+F), one field that searches the grid, the IRQ table and the thread tree
at once, as htop's F3 and lstopo's keys do (issue 23: nothing searched across them).

The text goes to the IRQ table's and the thread tree's own filters (their boxes show it, and their
rules decide what matches: IRQ, device, queue and "cpu:N" words; thread, process and command-line
names and ids), and the grid selects the CPUs the matches are on: where each matching IRQ may or does
land, where each matching thread last ran, and the CPUs named with "cpu:N". The bar counts them, and
keeps counting what the tables show as they change: a process that matched when the search was made
may be gone a tick later (issue 28: the bar said "2 threads" while the tree showed one; the other was
the short-lived program that typed the name, whose command line held it). The grid's selection is the
search's, made once, so a CPU the user selects after it stays selected.
Esc (or its ×) closes it and clears what it put into the filters.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QToolButton

from app.format import cpus_word, plural
from app.sampling.machine_state import MachineState
from widgets.tables.irqs import FILTER_ROLE, IrqTableWidget, parse_filter
from widgets.tables.threads import ThreadTableWidget
from widgets.topology.view import TopologyView

DEBOUNCE_MS = 150           # a search per pause in typing, not per key, on a machine with 2,000 threads


class SearchBar(QFrame):
    """Hidden until `open()`. Parameters: the IRQ table, the thread tree and the grid it searches, and
    `state()`, the MachineState shown (where the matching threads last ran)."""

    def __init__(self, irqs: IrqTableWidget, threads: ThreadTableWidget, grid: TopologyView,
                 state: Callable[[], MachineState | None], parent=None):
        super().__init__(parent)
        self.setObjectName("search-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._irqs, self._threads, self._grid, self._state = irqs, threads, grid, state
        self.field = QLineEdit(self)
        self.field.setPlaceholderText("Find in the grid, the IRQs and the threads: a name, a device, an id, cpu:N")
        self.field.setClearButtonEnabled(True)
        self.count_label = QLabel(self)
        close = QToolButton(self)
        close.setText("×")
        close.setToolTip("Close the search (Esc)")
        close.setAutoRaise(True)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 2, 6, 2)
        lay.addWidget(QLabel("Find:", self))
        lay.addWidget(self.field, 1)
        lay.addWidget(self.count_label)
        lay.addWidget(close)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.search_now)
        self.field.textChanged.connect(lambda _text: self._timer.start())
        close.clicked.connect(self.close_search)
        self._put = ""               # the text this bar put into the table filters
        self._cpus: list[int] = []   # the CPUs the search selected
        # Recount once the tables settle: a tick adds and removes rows one range at a time.
        self._recount = QTimer(self)
        self._recount.setSingleShot(True)
        self._recount.setInterval(0)
        self._recount.timeout.connect(self.recount)
        for proxy in (irqs.proxy, threads.proxy):
            for signal in (proxy.rowsInserted, proxy.rowsRemoved, proxy.modelReset, proxy.layoutChanged):
                signal.connect(self._on_proxy_rows_changed)
        self.hide()

    def open(self) -> None:
        """Show the bar with its text selected, ready to type over."""
        self.show()
        self.field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.field.selectAll()

    def keyPressEvent(self, event) -> None:
        if event.matches(QKeySequence.StandardKey.Cancel) or event.key() == Qt.Key.Key_Escape:
            self.close_search()
            return
        super().keyPressEvent(event)

    def close_search(self) -> None:
        """Hide the bar and take its text out of the filters (a filter the user typed since stays)."""
        self._timer.stop()
        for table in (self._irqs, self._threads):
            if table.filter_edit.text() == self._put:
                table.set_filter("")
        if self._put:
            self._grid.select_cpus([])
        self._put = ""
        self._cpus = []
        self.field.clear()
        self.hide()

    def search_now(self) -> tuple[int, int, list[int]]:
        """Filter both tables by the field's text and select the CPUs the matches are on; (IRQs,
        threads, CPUs) found, and the bar says so."""
        self._timer.stop()
        text = self.field.text().strip()
        self._put = text
        self._irqs.set_filter(text)
        self._threads.set_filter(text)
        if not text:
            self._grid.select_cpus([])
            self._cpus = []
            self.count_label.setText("")
            return 0, 0, []
        n_irqs, irq_cpus = self._irq_matches()
        n_threads, thread_cpus = self._thread_matches()
        self._cpus = cpus = sorted(irq_cpus | thread_cpus | parse_filter(text)[1])
        self._grid.select_cpus(cpus)
        self._show_count(n_irqs, n_threads)
        return n_irqs, n_threads, cpus

    def recount(self) -> tuple[int, int]:
        """Count again what the tables show now (they follow every tick); (IRQs, threads). The grid's
        selection stays the search's."""
        self._recount.stop()
        if not self._put or self._timer.isActive():
            return 0, 0         # no search shown, or a new one is due
        n_irqs, _ = self._irq_matches()
        n_threads, _ = self._thread_matches()
        self._show_count(n_irqs, n_threads)
        return n_irqs, n_threads

    def _show_count(self, n_irqs: int, n_threads: int) -> None:
        cpus = self._cpus
        if n_irqs or n_threads or cpus:
            self.count_label.setText(f"{plural(n_irqs, 'IRQ')} · {plural(n_threads, 'thread')}"
                                     + (f" · on {cpus_word(cpus)}" if cpus else ""))
        else:
            self.count_label.setText("nothing matches")

    def _on_proxy_rows_changed(self, *_args) -> None:
        if self._put:
            self._recount.start()

    def _irq_matches(self) -> tuple[int, set[int]]:
        proxy = self._irqs.proxy
        cpus: set[int] = set()
        for r in range(proxy.rowCount()):
            found = proxy.index(r, 0).data(FILTER_ROLE)
            if found:
                cpus |= set(found[1])
        return proxy.rowCount(), cpus

    def _thread_matches(self) -> tuple[int, set[int]]:
        """Threads whose rows the filter kept (ThreadTableWidget.shown_threads), and the CPUs they
        last ran on."""
        state = self._state()
        tasks = state.sample.tasks.tasks if state is not None and state.sample.tasks is not None else {}
        tids = self._threads.shown_threads()
        cpus = {tasks[t].last_cpu for t in tids if t in tasks and tasks[t].last_cpu is not None}
        return len(tids), cpus
