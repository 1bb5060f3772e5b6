"""Details of one CPU: where it sits, which IRQs and softirqs land on it, which threads ran on it.

`set_cpu(cpu_id)` chooses the CPU, `set_state(state)` applies a MachineState. The three small tables
keep their items and only change the text of cells that changed, so a tick does not rebuild them.
The pure part (`cpu_irqs`, `cpu_softirqs`, `cpu_threads`) is separate so tests can compare it to the
tables it was computed from.
"""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from app.format import cpus_word, format_count, format_cpus, format_percent, format_rate, per_cpu_pairs
from app.machine.topology import isolation_label
from app.sampling.machine_state import MachineState
from widgets.pinning.drag import pin_drag
from widgets.pinning.mime import PIN_MIME, payload_from_rows, pin_mime_data
from widgets.tables.irqs import device_text

# More rows than this would bury the few that matter; the rest are counted in the caption.
TOP_ROWS = 25


@dataclass(frozen=True)
class Landing:
    """One IRQ, softirq or thread on the chosen CPU: its label, a description, and its load."""
    key: str
    label: str
    value: float            # per second when `rate`, else a count since boot (or CPU % for threads)
    rate: bool


def _column_of(cpus, cpu: int) -> int | None:
    # /proc/interrupts and /proc/softirqs list online CPUs only, so the column of CPU n is found
    # in the header, never assumed to be n (kernel/irq/proc.c show_interrupts).
    try:
        return list(cpus).index(cpu)
    except ValueError:
        return None


def cpu_irqs(state: MachineState, cpu: int) -> list[Landing]:
    """IRQs landing on `cpu`, largest first: rates when the state has them, else counts since boot.
    Only non-zero loads are listed."""
    table = state.sample.interrupts
    if table is None and state.irqs is not None:
        table = state.irqs
    if table is None:
        return []
    info = state.irqs.info if state.irqs is not None else {}
    rates = state.rates
    out = []
    if rates is not None:
        rate_cpus = rates.cpus or table.cpus
        for row in table.rows:
            r = rates.irqs.get(row.irq)
            if r is None:
                continue
            v = dict(per_cpu_pairs(r.per_cpu, rate_cpus)).get(cpu, 0)
            if v:
                out.append(Landing(row.irq, device_text(row, info.get(row.irq)), float(v), True))
    else:
        col = _column_of(table.cpus, cpu)
        if col is None:
            return []
        for row in table.rows:
            if col < len(row.counts) and row.counts[col]:
                out.append(Landing(row.irq, device_text(row, info.get(row.irq)), float(row.counts[col]), False))
    out.sort(key=lambda x: (-x.value, x.key))
    return out


def cpu_softirqs(state: MachineState, cpu: int) -> list[Landing]:
    """Softirqs (NET_RX, TIMER, ...) on `cpu`, largest first; rates when known, else counts."""
    rates = state.rates
    cpu_rates = rates.per_cpu.get(cpu) if rates is not None else None
    soft_rates = cpu_rates.softirq_per_s if cpu_rates is not None else None
    out = []
    if soft_rates:
        out = [Landing(name, name, float(v), True) for name, v in soft_rates.items() if v]
    elif rates is None:
        table = state.sample.softirqs
        if table is not None:
            col = _column_of(table.cpus, cpu)
            if col is not None:
                out = [Landing(name, name, float(c[col]), False)
                       for name, c in table.counts.items() if col < len(c) and c[col]]
    out.sort(key=lambda x: (-x.value, x.key))
    return out


def cpu_threads(state: MachineState, cpu: int) -> list[Landing]:
    """Threads whose last CPU is `cpu`, busiest first (CPU % when rates exist; all of them otherwise)."""
    tasks = state.sample.tasks
    if tasks is None:
        return []
    rate_tasks = state.rates.tasks if state.rates is not None else {}
    out = []
    for tid, t in tasks.tasks.items():
        r = rate_tasks.get(tid)
        if (t.last_cpu if r is None else r.last_cpu) != cpu:
            continue
        pct = r.cpu_pct if r is not None else 0.0
        out.append(Landing(str(tid), state.thread_names.name(t.pid, tid, t.comm), float(pct), r is not None))
    out.sort(key=lambda x: (-x.value, int(x.key)))
    return out


class _RankedTable(QTableWidget):
    """A read-only table whose items are reused across updates: only changed texts are set."""

    def __init__(self, headers: tuple[str, ...], parent=None, pin_kind: str | None = None):
        super().__init__(0, len(headers), parent)
        self.pin_kind = pin_kind      # "irq" / "thread": rows drag onto the grid to pin (widgets/pinning.py)
        self.setHorizontalHeaderLabels(list(headers))
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setWordWrap(False)
        # The name column takes what is left; the short ones keep their headers readable in a
        # narrow dock.
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)

    def set_rows(self, rows: list[tuple[str, ...]]) -> None:
        if self.rowCount() != len(rows):
            self.setRowCount(len(rows))
        for r, values in enumerate(rows):
            for c, text in enumerate(values):
                item = self.item(r, c)
                if item is None:
                    item = QTableWidgetItem(text)
                    if c != 1:
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.setItem(r, c, item)
                elif item.text() != text:
                    item.setText(text)

    def set_header(self, column: int, text: str) -> None:
        item = self.horizontalHeaderItem(column)
        if item is not None and item.text() != text:
            item.setText(text)

    # Drag source: column 0 holds the IRQ label or the TID; only numbered IRQs have an affinity.
    def mimeTypes(self) -> list[str]:
        return [PIN_MIME]

    def mimeData(self, items):
        if self.pin_kind is None:
            return None
        keys = {self.item(it.row(), 0).text() for it in items if self.item(it.row(), 0) is not None}
        return pin_mime_data(payload_from_rows((self.pin_kind, int(k), None) for k in keys if k.isdigit()))

    def startDrag(self, supportedActions) -> None:
        # The chip names the rows (column 1 holds their name): widgets/pinning/drag.py.
        drag = pin_drag(self, 1)
        if drag is not None:
            drag.exec(supportedActions, Qt.DropAction.CopyAction)

    def texts(self) -> list[tuple[str, ...]]:
        return [tuple(self.item(r, c).text() for c in range(self.columnCount())) for r in range(self.rowCount())]


def _value_text(x: Landing) -> str:
    return format_rate(x.value) if x.rate else format_count(int(x.value))


class CpuDetailsWidget(QWidget):
    """The chosen CPU's position, and the IRQs, softirqs and threads on it."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._cpu: int | None = None
        self._state: MachineState | None = None
        self.title_label = QLabel(self)
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title_label.font()
        font.setBold(True)
        self.title_label.setFont(font)
        self.position_label = QLabel(self)
        self.position_label.setTextFormat(Qt.TextFormat.PlainText)
        self.position_label.setWordWrap(True)
        self.irq_caption = QLabel(self)
        self.irq_table = _RankedTable(("IRQ", "Device / queue", "Rate"), self, pin_kind="irq")
        self.softirq_caption = QLabel(self)
        self.softirq_table = _RankedTable(("#", "Softirq", "Rate"), self)
        self.thread_caption = QLabel(self)
        self.thread_table = _RankedTable(("TID", "Thread", "CPU %"), self, pin_kind="thread")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        for w in (self.title_label, self.position_label, self.irq_caption, self.irq_table,
                  self.softirq_caption, self.softirq_table, self.thread_caption, self.thread_table):
            layout.addWidget(w)
        self._refresh()

    @property
    def cpu(self) -> int | None:
        return self._cpu

    def set_cpu(self, cpu_id: int | None) -> None:
        self._cpu = cpu_id
        self._refresh()

    def set_state(self, state: MachineState) -> None:
        self._state = state
        self._refresh()

    def _refresh(self) -> None:
        state, cpu = self._state, self._cpu
        if cpu is None or state is None:
            self.title_label.setText("No CPU chosen")
            self.position_label.setText("Click a CPU in the topology view to see what runs on it.")
            for cap, table in ((self.irq_caption, self.irq_table), (self.softirq_caption, self.softirq_table),
                               (self.thread_caption, self.thread_table)):
                cap.setText("")
                table.set_rows([])
            return
        self.title_label.setText(f"CPU {cpu}")
        self.position_label.setText(position_text(state.topology, cpu))
        counts = "" if state.rates is not None else " (counts since boot: one sample only)"
        value_header = "Rate (/s)" if state.rates is not None else "Count"
        self.irq_table.set_header(2, value_header)
        self.softirq_table.set_header(2, value_header)

        irqs = cpu_irqs(state, cpu)
        self.irq_caption.setText(_caption("IRQs landing here", len(irqs)) + counts)
        self.irq_table.set_rows([(x.key, x.label, _value_text(x)) for x in irqs[:TOP_ROWS]])

        soft = cpu_softirqs(state, cpu)
        self.softirq_caption.setText(_caption("Softirqs", len(soft)) + counts)
        self.softirq_table.set_rows([(str(i + 1), x.label, _value_text(x)) for i, x in enumerate(soft[:TOP_ROWS])])

        threads = cpu_threads(state, cpu)
        self.thread_caption.setText(_caption("Threads that last ran here", len(threads)))
        self.thread_table.set_rows([(x.key, x.label, format_percent(x.value) if x.rate else "")
                                    for x in threads[:TOP_ROWS]])


def _caption(what: str, n: int) -> str:
    if n > TOP_ROWS:
        return f"{what}: {n} (top {TOP_ROWS} shown)"
    return f"{what}: {n}"


def position_text(topology, cpu: int) -> str:
    """'core 3 (CPUs 3,59) · package 0 · die 0 · node 0 · P-core · isolated (domain, nohz_full)', or why not."""
    if topology is None:
        return ""
    by_id = {c.id: c for c in topology.cpus}
    c = by_id.get(cpu)
    if c is None:
        return f"CPU {cpu} is not on this machine (CPUs {format_cpus(by_id)})"
    parts = []
    if not c.online:
        parts.append("offline")
    core = next((k for k in topology.cores if cpu in k.cpus), None)
    if core is not None:
        parts.append(f"core {core.index} ({cpus_word(core.cpus)})")
    elif c.siblings:
        parts.append(f"core of {cpus_word(c.siblings)}")
    if c.package_id is not None:
        parts.append(f"package {c.package_id}")
    if c.die_id is not None:
        parts.append(f"die {c.die_id}")
    if c.node is not None:
        parts.append(f"node {c.node}")
    if c.kind:
        parts.append(f"{c.kind}-core")
    if c.capacity is not None:
        parts.append(f"capacity {c.capacity}")
    flags = topology.isolation_of(c.id)
    if flags:
        parts.append(isolation_label(flags))
    return " · ".join(parts)
