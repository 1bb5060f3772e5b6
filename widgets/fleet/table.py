"""FleetTableModel: one row per host — its facts, busiest IRQ, jitter — with the cells that set a machine
apart from the others (app.remote.fleet.odd_cells) in amber, the reason in their tooltip, a host
that could not be read in red with why, and one that stopped answering with when it was last seen; the
Status of a host read well ends with its note (a topology completed from a capture, or why not)."""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

from app.format import printable
from app.remote.fleet import FleetRow, jitter_text, odd_cells
from widgets.theme import status_color

ODD_COLOR = QColor(255, 214, 102)
ODD_TEXT = QColor(29, 36, 48)


class FleetTableModel(QAbstractTableModel):
    """Columns: Host, Name, the facts (Core kinds only when a host has two kinds of cores), Top IRQ,
    Jitter (only when measured), Status."""

    def __init__(self, rows: list[FleetRow] | None = None, parent=None):
        super().__init__(parent)
        self.rows: list[FleetRow] = []
        self.columns: list[str] = []
        self.odd: dict[tuple[int, str], str] = {}
        self.set_rows(rows or [])

    def set_rows(self, rows: list[FleetRow]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        facts = ["Model", "Shape", "NUMA nodes", "Kernel", "isolcpus", "nohz_full", "irqbalance"]
        if any(r.fact("Core kinds") for r in rows):
            facts.insert(2, "Core kinds")
        self.columns = ["Host", "Name", *facts, "Top IRQ"] + (["Jitter"] if any(r.probe for r in rows) else []) \
            + ["Status"]
        self.odd = odd_cells(self.rows)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def text(self, row: int, column: str) -> str:
        r = self.rows[row]
        if column == "Host":
            return r.host
        if column == "Name":
            return r.name
        if column == "Top IRQ":
            return r.top_irq
        if column == "Jitter":
            return jitter_text(r.probe)
        if column == "Status":
            # The row's note (its topology completed from a capture, or why a capture was refused) follows.
            return r.stale or ((f"ok, {r.seconds:.1f} s" + (f"; {r.note}" if r.note else "")) if r.ok else r.error)
        return r.fact(column)

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, column = index.row(), self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            # printable(): every fact came from another machine.
            return printable(self.text(row, column))
        if role == Qt.ItemDataRole.ToolTipRole:
            why = self.odd.get((row, column))
            return printable(self.text(row, column)) + (f"\n\nstands out: {why}" if why else "")
        if role == Qt.ItemDataRole.BackgroundRole and (row, column) in self.odd:
            return QBrush(ODD_COLOR)
        if role == Qt.ItemDataRole.ForegroundRole and (row, column) in self.odd:
            return QBrush(ODD_TEXT)             # on the amber, whatever the palette's text colour
        if role == Qt.ItemDataRole.ForegroundRole and column == "Status" and not self.rows[row].ok:
            return QBrush(status_color("fail"))
        if role == Qt.ItemDataRole.ForegroundRole and column == "Status" and self.rows[row].stale:
            return QBrush(status_color("stale"))
        return None

    def headerData(self, section: int, orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return self.columns[section] if 0 <= section < len(self.columns) else None
        return str(section + 1)
