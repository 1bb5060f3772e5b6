"""What ran during a jitter run's largest gaps: the `attribution` of a run (probes/trace.py) as two
sortable tables, causes summed over every attributed gap, and the longest gaps one by one.

`GapAttributionView.set_attribution(attribution_or_None, label)` shows one run's; a run without
attribution says why on the view's status line (not asked for, not root, no tracefs).
"""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QSplitter, QTableView, QVBoxLayout, QWidget

from app.format import format_ns
from probes.trace import HARDWARE

SORT_ROLE = Qt.ItemDataRole.UserRole + 1


class _RowsModel(QAbstractTableModel):
    """A read-only table of dict rows: columns are (header, cell text fn, sort key fn)."""

    def __init__(self, columns, parent=None):
        super().__init__(parent)
        self._columns = columns
        self._rows: list[dict] = []

    def set_rows(self, rows: list[dict]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self._columns)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole \
                and 0 <= section < len(self._columns):
            return self._columns[section][0]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        row = self._rows[index.row()]
        _, text, key = self._columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return text(row)
        if role == Qt.ItemDataRole.ToolTipRole:
            return row.get("_tip")
        if role == SORT_ROLE:
            return key(row)
        if role == Qt.ItemDataRole.TextAlignmentRole and isinstance(key(row), (int, float)):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def _cause_text(g: dict) -> str:
    if not g.get("traced", True):
        return g.get("verdict", "not traced")
    if not g["causes"]:
        return HARDWARE
    return ", ".join(f"{c['name']} {format_ns(c['ns'])}" if c["ns"] else c["name"] for c in g["causes"])


CAUSE_COLUMNS = (
    ("Cause", lambda r: r["cause"], lambda r: r["cause"]),
    ("Gaps", lambda r: f"{r['gaps']:,}", lambda r: r["gaps"]),
    ("Time in gaps", lambda r: format_ns(r["ns"]), lambda r: r["ns"]),
)
GAP_COLUMNS = (
    ("Gap", lambda g: format_ns(g["gap_ns"]), lambda g: g["gap_ns"]),
    ("At", lambda g: f"{g['t_ns'] / 1e9:.4f} s", lambda g: g["t_ns"]),
    ("What ran", _cause_text, lambda g: _cause_text(g)),
    ("No event", lambda g: format_ns(g["unexplained_ns"]) if g.get("traced", True) else "",
     lambda g: g["unexplained_ns"]),
)


class GapAttributionView(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.status = QLabel(self)
        self.status.setWordWrap(True)
        self.cause_model = _RowsModel(CAUSE_COLUMNS, self)
        self.gap_model = _RowsModel(GAP_COLUMNS, self)
        self.cause_view = self._table(self.cause_model)
        self.gap_view = self._table(self.gap_model)
        self.gap_view.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.cause_view.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.cause_view)
        split.addWidget(self.gap_view)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.status)
        lay.addWidget(split, 1)
        self.set_attribution(None)

    def _table(self, model) -> QTableView:
        proxy = QSortFilterProxyModel(self)
        proxy.setSourceModel(model)
        proxy.setSortRole(SORT_ROLE)
        v = QTableView(self)
        v.setModel(proxy)
        v.setSortingEnabled(True)
        v.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        v.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        v.verticalHeader().setVisible(False)
        v.setWordWrap(False)
        return v

    def set_attribution(self, attribution: dict | None, label: str = "", what: str = "gaps") -> None:
        """Show a run's attribution (the `attribution` of probes.jitter.measure.summarize, or of a wakeup run's
        latest wakeups: `what` names them), or say why there is none."""
        if attribution is None:
            self.cause_model.set_rows([])
            self.gap_model.set_rows([])
            self.status.setText((f"{label}: " if label else "") +
                                "no gap attribution: run a jitter probe with 'attribute gaps' ticked "
                                "(needs root and tracefs)")
            return
        if not attribution.get("available"):
            self.cause_model.set_rows([])
            self.gap_model.set_rows([])
            self.status.setText((f"{label}: " if label else "") + f"{what} not attributed: {attribution.get('reason')}")
            return
        gaps = [dict(g, _tip=g.get("verdict")) for g in attribution.get("gaps", [])]
        self.cause_model.set_rows(attribution.get("by_cause", []))
        self.gap_model.set_rows(gaps)
        self.cause_view.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.gap_view.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        for v in (self.cause_view, self.gap_view):
            v.resizeColumnsToContents()
        untraced = attribution.get("untraced_gaps", 0)
        self.status.setText(
            (f"{label}: " if label else "") +
            f"{attribution['attributed_gaps']:,} largest {what} attributed from {attribution['cpu_events']:,} "
            f"events on the CPU; '{HARDWARE}' = one with no interrupt, softirq, NMI or task switch in it"
            + (f"; {untraced} {what} predate the trace buffer's oldest event" if untraced else ""))
