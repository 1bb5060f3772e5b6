"""The IRQ table: one row per line of /proc/interrupts, with its rate, where it lands, and its affinity.

`IrqTableModel.set_state(state)` applies one MachineState. When the set of IRQs is unchanged (every
tick but the rare hot-plug), only the cells whose text changed are announced with dataChanged; IRQs
that appear or vanish are inserted/removed in place (widgets/tables/rows.py), so sorting, the filter, the
selection and the scroll position survive every tick.
"""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QVBoxLayout, QWidget

from app.format import format_count, format_cpus, format_rate, format_shares, nonzero_pairs, shares_of
from app.machine.interrupts import IrqInfo
from app.sampling.intruders import ManagedIrq, managed_on_quiet
from app.sampling.rates import Rates
from app.sampling.machine_state import MachineState
from widgets.pinning.drag import PinDragTableView
from widgets.pinning.mime import PIN_MIME, payload_from_rows, pin_mime_data
from widgets.tables.rows import changed_columns, emit_changed, fill_span, sync_rows
from widgets.tables.sorting import SortHold
from widgets.text_line import TextLine

SORT_ROLE = Qt.ItemDataRole.UserRole + 1      # a number or a padded string, so columns sort naturally
FILTER_ROLE = Qt.ItemDataRole.UserRole + 2    # (haystack text, CPUs the IRQ may or does land on)
KEY_ROLE = Qt.ItemDataRole.UserRole + 3       # the IRQ label, e.g. "24" or "LOC"

# Only what a user must act on is coloured (issue 12): on x86 every IRQ is delivered to one CPU of its
# mask, so "effective narrower than requested" is every row and says nothing; its tooltip still
# explains it. Translucent so they read on light and dark palettes alike.
OUTSIDE_BRUSH = QColor(230, 40, 40, 100)      # delivered on CPUs that were not requested
MOVING_BRUSH = QColor(255, 170, 0, 110)       # the mask changed here; delivery has not followed yet
REVERTED_BRUSH = QColor(150, 70, 230, 90)     # coremap pinned it; something changed the mask back
QUIET_LEAK_BRUSH = QColor(0, 121, 191, 110)   # a managed IRQ a Make quiet could not move off (the quiet band's blue)
_MARKS = ((OUTSIDE_BRUSH, "delivered outside the requested CPUs"),
         (MOVING_BRUSH, "mask changed, delivery not moved yet"),
         (REVERTED_BRUSH, "a pin was changed back"),
         (QUIET_LEAK_BRUSH, "managed, still on a quiet CPU"))

COL_IRQ, COL_DEVICE, COL_RATE, COL_SPREAD, COL_REQUESTED, COL_EFFECTIVE, COL_NODE = range(7)
_HEADERS = ("IRQ", "Device / queue", "Rate", "Per-CPU spread", "Requested", "Effective", "Node")
_NUMERIC = (COL_RATE, COL_NODE)
_NCOLS = len(_HEADERS)

# Qt calls data(), index() (through rowCount and columnCount) and flags() for every painted cell and
# every proxy mapping; PySide6's enums are Python enums, each comparison or `|` a Python call. Roles
# are plain ints here, and a role maps straight to the slot of a cell that answers it (as in
# widgets/tables/threads.py).
_CELL_SLOT = {int(Qt.ItemDataRole.DisplayRole): 0, int(SORT_ROLE): 1, int(Qt.ItemDataRole.ToolTipRole): 2,
              int(Qt.ItemDataRole.BackgroundRole): 3}
_ALIGN = int(Qt.ItemDataRole.TextAlignmentRole)
_FILTER, _KEY = int(FILTER_ROLE), int(KEY_ROLE)
_RIGHT = int((Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter).value)
_ROW_FLAGS = Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled
_DRAG_FLAGS = _ROW_FLAGS | Qt.ItemFlag.ItemIsDragEnabled
_NO_FLAGS = Qt.ItemFlag.NoItemFlags


def _irq_order(irq: str) -> tuple:
    # Numbered device IRQs first in numeric order, then the architecture rows (NMI, LOC, IPI0...) by name.
    return (0, int(irq), "") if irq.isdigit() else (1, 0, irq)


def _irq_sort(irq: str) -> str:
    return f"0{int(irq):012d}" if irq.isdigit() else f"1{irq.lower()}"


def _cpus_sort(cpus) -> str:
    if not cpus:
        return ""
    return ",".join(f"{c:05d}" for c in sorted(cpus))


def device_text(row, info: IrqInfo | None) -> str:
    """The device line read from sysfs ("i40e eno1 TxRx-0 (0000:3b:00.0)") where known, else the
    handler names printed in /proc/interrupts."""
    dev = info.device if info is not None else None
    if dev is not None and dev.description:
        return dev.description
    return row.name if row is not None else ""


class _Cell(tuple):
    """(display, sort, tooltip, background) of one cell; compared to decide what changed."""
    __slots__ = ()


class IrqTableModel(QAbstractTableModel):
    """One row per /proc/interrupts line. Roles: DisplayRole, SORT_ROLE, FILTER_ROLE, KEY_ROLE,
    ToolTipRole, BackgroundRole (affinity mismatch), TextAlignmentRole."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._keys: list[str] = []
        self._cells: dict[str, tuple[_Cell, ...]] = {}
        self._filter: dict[str, tuple[str, frozenset]] = {}
        self._rates_known = False
        self._built: dict[str, tuple] = {}     # irq -> (inputs, cells, filter): skip unchanged rows
        self._pins: dict[str, tuple[int, ...]] = {}
        self._first_requested: dict[str, tuple[int, ...] | None] = {}   # irq -> its mask when first seen
        self._quiet: tuple[int, ...] = ()
        self._refused: frozenset[int] = frozenset()
        self.generation = -1

    def set_quiet_cpus(self, cpus) -> None:
        """The CPUs made quiet (the journal's isolate in effect): a managed IRQ still delivered on one is
        marked, with its rate there. Shown from the next state on."""
        self._quiet = tuple(cpus)

    def set_refused_managed(self, irqs) -> None:
        """IRQs a Make quiet could not move, the kernel managing them (app/sampling/intruders.py
        managed_on_quiet). Shown from the next state on."""
        self._refused = frozenset(irqs)

    def set_pins(self, pins: dict[str, tuple[int, ...]]) -> None:
        """IRQ label -> the CPUs coremap pinned it to, for pins still in effect (app.pinning.journal
        Journal.pinned_irqs): a mask that differs from its pin was changed back. Shown from the next
        state on."""
        self._pins = dict(pins)

    # -- the one way in ---------------------------------------------------------------------
    def set_state(self, state: MachineState) -> None:
        """Apply one MachineState: insert/remove IRQs that came or went, dataChanged for changed cells."""
        self.generation = state.generation
        rows, cpus, info = _rows_of(state)
        rates = state.rates
        rates_known = rates is not None
        new_cells: dict[str, tuple[_Cell, ...]] = {}
        new_filter: dict[str, tuple[str, frozenset]] = {}
        built = {}
        managed = managed_on_quiet(state.irqs, rates, self._quiet, self._refused)
        for row in rows:
            irq = row.irq
            row_info = info.get(irq)
            rate = rates.irqs.get(irq) if rates is not None else None
            requested = row_info.requested if row_info is not None else None
            changed = self._first_requested.setdefault(irq, requested) != requested
            leak = managed.get(irq)
            inputs = (row, row_info, cpus, rates is not None, rate, self._pins.get(irq), changed, leak)
            prev = self._built.get(irq)
            if prev is not None and prev[0] == inputs:
                cells, filt = prev[1], prev[2]
            else:
                cells, filt = _build_row(row, cpus, row_info, rates, self._pins.get(irq), changed, leak)
            built[irq] = (inputs, cells, filt)
            new_cells[irq], new_filter[irq] = cells, filt
        self._built = built
        new_keys = sorted(new_cells, key=_irq_order)

        old_cells = self._cells
        # Rows that stay keep showing their old cells until the dataChanged below; new rows need
        # their cells before endInsertRows (views query them at once).
        self._cells = {**old_cells, **new_cells}
        self._filter = {**self._filter, **new_filter}
        if not sync_rows(self, QModelIndex(), self._keys, new_keys):
            self.beginResetModel()
            self._keys = list(new_keys)
            self._cells, self._filter = new_cells, new_filter
            self.endResetModel()
        self._cells, self._filter = new_cells, new_filter
        if rates_known != self._rates_known:
            self._rates_known = rates_known
            self.headerDataChanged.emit(Qt.Orientation.Horizontal, COL_RATE, COL_RATE)
        changes = []
        for r, key in enumerate(self._keys):
            old = old_cells.get(key)
            if old is not None:
                new = new_cells[key]
                if old is not new and old != new:
                    changes.append((r, changed_columns(old, new)))
        if changes:
            emit_changed(self, changes)

    def row_of(self, irq: str) -> int:
        """Row of an IRQ label, -1 when absent."""
        try:
            return self._keys.index(irq)
        except ValueError:
            return -1

    # -- Qt model interface -----------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._keys)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else _NCOLS

    # -- drag source: numbered IRQs drag onto the grid as the pin MIME type (widgets/pinning.py) ----
    def flags(self, index):
        return self.cell_flags(index.row(), index.column())

    def cell_flags(self, r: int, c: int):
        # What QAbstractTableModel::flags gives a valid index (selectable, enabled), plus drag for
        # numbered IRQs: LOC, NMI, ... are per-CPU counters, with no affinity to pin.
        if not 0 <= r < len(self._keys) or not 0 <= c < _NCOLS:
            return _NO_FLAGS
        return _DRAG_FLAGS if self._keys[r].isdigit() else _ROW_FLAGS

    def mimeTypes(self) -> list[str]:
        return [PIN_MIME]

    def mimeData(self, indexes):
        keys = {self._keys[i.row()] for i in indexes if i.isValid() and 0 <= i.row() < len(self._keys)}
        return pin_mime_data(payload_from_rows(("irq", int(k), None) for k in keys if k.isdigit()))

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(_HEADERS):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            if section == COL_RATE:
                return "Rate (/s)" if self._rates_known else "Count"
            return _HEADERS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            if section == COL_RATE and not self._rates_known:
                return "Interrupts since boot: only one sample exists, so no rate yet"
            if section == COL_EFFECTIVE:
                return ("effective_affinity_list: the CPUs the kernel actually delivers this IRQ on. Red: "
                        "outside the requested CPUs; amber: the mask changed and delivery has not moved "
                        "yet. Delivery on fewer CPUs of the mask (one, on x86) is normal and not coloured.")
            if section == COL_NODE:
                return ("The NUMA node of the device that raises the IRQ (its PCI numa_node); in brackets the "
                        "IRQ's own /proc/irq/N/node where the two differ.")
            if section == COL_REQUESTED:
                return ("smp_affinity_list: the CPUs requested for this IRQ. Purple: coremap pinned it and "
                        "something (irqbalance?) changed the mask back.")
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        # The delegate asks each painted cell for decoration, font, foreground, check state and size
        # hint too: those fall through to None after one dict lookup. An invalid index has row -1.
        r, c = index.row(), index.column()
        if not (0 <= r < len(self._keys) and 0 <= c < _NCOLS):
            return None
        return self._answer(r, c, role)

    def fill_cell(self, r: int, c: int, span) -> None:
        """Every role of one painted cell in one call (IrqFilterProxyModel.multiData)."""
        if 0 <= r < len(self._keys) and 0 <= c < _NCOLS:
            fill_span(span, lambda role: self._answer(r, c, role))

    def _answer(self, r: int, c: int, role: int):
        """What the cell at row r, column c shows for `role`."""
        slot = _CELL_SLOT.get(role)
        if slot is not None:
            return self._cells[self._keys[r]][c][slot]
        if role == _ALIGN:
            return _RIGHT if c in _NUMERIC else None
        if role == _FILTER:
            return self._filter[self._keys[r]]
        if role == _KEY:
            return self._keys[r]
        return None


def _rows_of(state: MachineState):
    """(InterruptRows, CPU id per column, {irq: IrqInfo}) from the newest counters, with the affinity
    info that is refreshed every few ticks."""
    irqs = state.irqs
    info = dict(irqs.info) if irqs is not None else {}
    table = state.sample.interrupts
    if table is not None:
        return table.rows, table.cpus, info
    if irqs is not None:
        return irqs.rows, irqs.cpus, info
    return (), (), info


def affinity_mark(requested, effective, pinned=None, mask_changed: bool = False):
    """(brush or None, tooltip or None) of the Effective cell, and (brush or None, tooltip or None)
    of the Requested cell, for an IRQ's requested and effective CPUs, the CPUs coremap pinned it to
    (None when it did not) and whether its mask changed since the window first saw it."""
    req_text, eff_text = format_cpus(requested), format_cpus(effective)
    eff_mark: tuple = (None, None)
    req_mark: tuple = (None, None)
    if pinned is not None and requested is not None and set(requested) != set(pinned):
        req_mark = (REVERTED_BRUSH, f"coremap pinned it to {format_cpus(pinned)}; the mask is {req_text} "
                                    "now: irqbalance or another tool changed it back (pin it again, and "
                                    "see the summary line on irqbalance)")
    if requested is not None and effective is not None and set(requested) != set(effective):
        tip = f"the kernel delivers on {eff_text}, not on {req_text} as requested"
        if set(effective) <= set(requested):
            # Nothing to do: the interrupt controller picks CPUs of the mask. No colour.
            if len(effective) == 1 and len(requested) > 1:
                # x86 vector allocation targets one CPU of the mask (arch/x86/kernel/apic/vector.c).
                tip += " (the interrupt controller delivers to one CPU of the mask)"
            eff_mark = (None, tip)
        elif pinned is not None or mask_changed:
            eff_mark = (MOVING_BRUSH, tip + " (the mask changed and delivery has not moved yet: x86 "
                                            "moves a vector at the IRQ's next interrupt)")
        else:
            eff_mark = (OUTSIDE_BRUSH, tip + " (outside the requested set: e.g. a managed IRQ or an "
                                             "isolcpus=managed_irq CPU)")
    return eff_mark, req_mark


def _build_row(row, cpus, info: IrqInfo | None, rates: Rates | None, pinned=None,
               mask_changed: bool = False, leak: ManagedIrq | None = None) -> tuple[tuple[_Cell, ...], tuple[str, frozenset]]:
    irq = row.irq
    dev = device_text(row, info)
    rate = rates.irqs.get(irq) if rates is not None else None
    if rates is not None:
        value = rate.total if rate is not None else None
        rate_cell = _Cell((format_rate(value), float(value) if value is not None else -1.0, None, None))
        load = rate.per_cpu if rate is not None else None
        load_cpus = rates.cpus or cpus
    else:
        rate_cell = _Cell((format_count(row.total), float(row.total), "interrupts since boot", None))
        load = row.counts
        load_cpus = cpus
    pairs = nonzero_pairs(load, load_cpus)
    shares = shares_of(pairs)
    spread_cell = _Cell((format_shares(shares), shares[0][1] if shares else 0.0,
                         "\n".join(f"CPU {c}: {f * 100:.1f}%" for c, f in shares[:16]) or None, None))
    requested = info.requested if info is not None else None
    effective = info.effective if info is not None else None
    req_text, eff_text = format_cpus(requested), format_cpus(effective)
    (brush, tip), (req_brush, req_tip) = affinity_mark(requested, effective, pinned, mask_changed)
    if info is not None and info.managed:
        tip = (tip + "\n" if tip else "") + "kernel-managed: its affinity cannot be changed"
    if leak is not None:
        # Marked apart from the other colours: the one row a Make quiet leaves on the quiet CPUs.
        rate = leak.rate_text()
        eff_text = f"{eff_text} · quiet" + (f" {rate}" if rate else "")
        brush, tip = QUIET_LEAK_BRUSH, leak.sentence() + ("\n" + tip if tip else "")
    cells = (
        _Cell((irq, _irq_sort(irq), row.description or None, None)),
        _Cell((dev, dev.lower(), row.description or None, None)),
        rate_cell,
        spread_cell,
        _Cell((req_text, _cpus_sort(requested), req_tip, req_brush)),
        _Cell((eff_text, _cpus_sort(effective), tip, brush)),
        _node_cell(irq, info),
    )
    # Where it lands: CPUs with a non-zero rate (or, in a one-capture snapshot, a non-zero count
    # since boot), and the CPUs the kernel currently delivers it on.
    landing = {c for c, _ in pairs}
    landing.update(effective or ())
    haystack = " ".join(x for x in (irq, dev, row.name, row.description, row.chip or "") if x).lower()
    return cells, (haystack, frozenset(landing))


def _node_cell(irq: str, info: IrqInfo | None) -> _Cell:
    """The device's NUMA node, and the IRQ's own where it differs (IrqInfo.node_text); sorted by the
    device's node, then the IRQ's."""
    if info is None:
        return _Cell(("", -1.0, None, None))
    dev, own = info.device_node, info.node
    key = dev if dev is not None else own
    differs = own is not None and own != key
    sort = -1.0 if key is None else key + ((own + 1) / 10_000 if differs else 0.0)
    if dev is not None and differs:
        tip = (f"the device {info.device.pci_address} is on NUMA node {dev}; the IRQ's own node "
               f"(/proc/irq/{irq}/node, where the kernel allocated its descriptor) is {own}")
    elif dev is not None:
        tip = f"the device {info.device.pci_address} is on NUMA node {dev}"
    elif own is not None:
        tip = f"the IRQ's own node (/proc/irq/{irq}/node): no device node is known"
    else:
        tip = None
    return _Cell((info.node_text(), sort, tip, None))


def parse_filter(text: str) -> tuple[list[str], set[int]]:
    """Filter words and CPU ids: "cpu:5", "cpu5" or "cpu 5" select the IRQs landing on CPU 5."""
    words: list[str] = []
    cpus: set[int] = set()
    parts = text.lower().split()
    i = 0
    while i < len(parts):
        p = parts[i]
        if p.startswith("cpu"):
            rest = p[3:].lstrip(":=")
            if rest.isdigit():
                cpus.add(int(rest))
                i += 1
                continue
            if rest == "" and i + 1 < len(parts) and parts[i + 1].isdigit():
                cpus.add(int(parts[i + 1]))
                i += 2
                continue
        words.append(p)
        i += 1
    return words, cpus


class IrqFilterProxyModel(QSortFilterProxyModel):
    """The IRQ table's one proxy. Sorts by SORT_ROLE once per state, when a row is out of place (its
    SortHold, widgets/tables/sorting.py; the widget calls `settle()`); keeps rows whose text holds every
    word and that land on every CPU named "cpu:N". A painted cell's roles and flags cost one call of the
    model each (widgets/tables/rows.py), with no mapping: each proxy row's source row is kept in a list,
    made again when the proxy's rows change (a table model's index() costs two more Python calls)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._words: list[str] = []
        self._cpus: set[int] = set()
        self._source_rows: list[int] | None = None
        self.hold = SortHold(self)
        self.setDynamicSortFilter(False)
        self.setSortRole(SORT_ROLE)
        # Connected before any view is: a view that repaints on these finds the list made anew.
        for changed in (self.layoutChanged, self.rowsInserted, self.rowsRemoved, self.rowsMoved,
                        self.modelReset):
            changed.connect(self._forget_rows)

    def setSourceModel(self, model) -> None:
        super().setSourceModel(model)
        self.hold.watch(model)

    def settle(self) -> None:
        """After a state: re-filter when a filter is on (its values may have changed), then sort when
        a changed or new row is out of place."""
        if self._words or self._cpus:
            self.beginFilterChange()
            self.endFilterChange()
        self.hold.settle()

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        """Sort now (a click on a header, or settle()); the hold starts again."""
        self.hold.restart()
        super().sort(column, order)

    def set_filter_text(self, text: str) -> None:
        self.beginFilterChange()
        self._words, self._cpus = parse_filter(text)
        self.endFilterChange()

    def filterAcceptsRow(self, source_row, source_parent):
        if not self._words and not self._cpus:
            return True
        src = self.sourceModel()
        hay, landing = src.data(src.index(source_row, 0, source_parent), FILTER_ROLE)
        return all(w in hay for w in self._words) and self._cpus <= landing

    def multiData(self, index, span) -> None:
        if index.isValid():
            self.sourceModel().fill_cell(self._source_row(index.row()), index.column(), span)

    def flags(self, index):
        if not index.isValid():
            return _NO_FLAGS
        return self.sourceModel().cell_flags(self._source_row(index.row()), index.column())

    def _forget_rows(self, *_) -> None:
        self._source_rows = None

    def _source_row(self, row: int) -> int:
        rows = self._source_rows
        if rows is None:
            rows = self._source_rows = [self.mapToSource(self.index(r, 0)).row()
                                        for r in range(self.rowCount())]
        return rows[row] if 0 <= row < len(rows) else -1


def _legend_html() -> str:
    """The colours of the table, each a swatch and its meaning."""
    swatch = '<span style="background-color:{};">&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;{}'
    return "&nbsp;&nbsp;".join(swatch.format(brush.name(QColor.NameFormat.HexArgb), text) for brush, text in _MARKS)


class IrqTableWidget(QWidget):
    """A filter box over a sortable IRQ table. Emits irq_selected(irq label) when the current row changes."""

    irq_selected = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.model = IrqTableModel(self)
        self.proxy = IrqFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setPlaceholderText("Filter: IRQ, device, NIC queue (TxRx), cpu:N")
        self.filter_edit.setClearButtonEnabled(True)
        self.count_label = TextLine(self)
        self.legend = QLabel(_legend_html(), self)
        self.legend.setToolTip("Only what needs a look is coloured. An IRQ delivered on fewer CPUs than its "
                               "mask asks for (one CPU of it, on x86) is normal and is not.")
        self.view = PinDragTableView(self, name_column=COL_DEVICE)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        # Busiest first: what a user opens the table for.
        self.view.sortByColumn(COL_RATE, Qt.SortOrder.DescendingOrder)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        # Several IRQs at once (Shift/Ctrl+click, or Ctrl+A over a filter such as "eno1"): dropped on the grid
        # or pinned with Pin to…, they spread one per CPU (issue 30).
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.verticalHeader().setVisible(False)
        self.view.verticalHeader().setDefaultSectionSize(self.view.fontMetrics().height() + 6)
        header = self.view.horizontalHeader()
        # Fixed starting widths (a docked table is often narrower than its columns; a stretched
        # device column would then shrink to nothing), the last column takes what is left.
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        em = self.view.fontMetrics().horizontalAdvance("0")
        for col, ems in ((COL_IRQ, 6), (COL_DEVICE, 24), (COL_RATE, 10), (COL_SPREAD, 16),
                         (COL_REQUESTED, 12), (COL_EFFECTIVE, 12), (COL_NODE, 6)):
            header.resizeSection(col, ems * em)
        self.view.setWordWrap(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.filter_edit)
        layout.addWidget(self.view)
        bottom = QHBoxLayout()
        bottom.addWidget(self.count_label, 1)
        bottom.addWidget(self.legend)
        layout.addLayout(bottom)
        self.filter_edit.textChanged.connect(self._on_filter_text_changed)
        self.view.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self.proxy.rowsInserted.connect(self._update_count)
        self.proxy.rowsRemoved.connect(self._update_count)
        self.proxy.modelReset.connect(self._update_count)
        self.proxy.layoutChanged.connect(self._update_count)

    def set_state(self, state: MachineState) -> None:
        self.model.set_state(state)
        self.proxy.settle()
        self._update_count()

    def set_quiet_cpus(self, cpus) -> None:
        """The quiet CPUs (the pin controller's quiet_changed): their managed IRQs are marked."""
        self.model.set_quiet_cpus(cpus)

    def set_refused_managed(self, irqs) -> None:
        """The pin controller's managed_refused: IRQs known managed where debugfs cannot say."""
        self.model.set_refused_managed(irqs)

    def set_filter(self, text: str) -> None:
        self.filter_edit.setText(text)

    def select_irq(self, irq: str) -> bool:
        """Make `irq` the current row (when it passes the filter). Returns whether it is shown."""
        r = self.model.row_of(irq)
        if r < 0:
            return False
        idx = self.proxy.mapFromSource(self.model.index(r, 0))
        if not idx.isValid():
            return False
        self.view.setCurrentIndex(idx)
        self.view.scrollTo(idx)
        return True

    def _on_filter_text_changed(self, text: str) -> None:
        self.proxy.set_filter_text(text)
        self._update_count()

    def _on_current_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.irq_selected.emit(current.data(KEY_ROLE))

    def _update_count(self, *_args) -> None:
        self.count_label.setText(f"{self.proxy.rowCount():,} of {self.model.rowCount():,} IRQs")
