"""A painted cell's roles in one Python call: OneCallProxy, the sorting proxy under the big tables.

A view paints a cell by asking for seven roles at once (QStyledItemDelegate::initStyleOption: font,
alignment, foreground, check state, decoration, display, background) through multiData. A
QSortFilterProxyModel answers that with Qt's default multiData: seven calls of its own data(), each
mapping the index to the source (the source's index(), or rowCount() and columnCount() for a table
model, in Python) and calling the source's data() in Python. That is 16 Python calls a cell in the
thread tree and 24 in the IRQ table, most of the time the window spends painting them (issue 12).

OneCallProxy overrides multiData: one mapping, then the source model's `fill_roles(index, span)`,
which looks the cell up once and sets every role it answers. A source model without fill_roles
gets Qt's default.
"""
from __future__ import annotations

from PySide6.QtCore import QModelRoleData, QModelRoleDataSpan, QSortFilterProxyModel, Qt


class OneCallProxy(QSortFilterProxyModel):
    """A QSortFilterProxyModel whose multiData is one call of the source's fill_roles (see above)."""

    def multiData(self, index, span) -> None:
        src = self.sourceModel()
        fill = getattr(src, "fill_roles", None)
        if fill is None:
            super().multiData(index, span)
        elif index.isValid():
            fill(self.mapToSource(index), span)


class OneCallTableProxy(OneCallProxy):
    """A OneCallProxy over a flat table model that answers `fill_cell(row, column, span)` and
    `cell_flags(row, column)`: the source row of each of the proxy's rows is kept in a list, made
    again after any change of the proxy's rows (a sort, a filter, rows in or out), so a painted cell
    costs its roles and its flags one Python call each, with no mapping through the model (a table
    model's index() asks its rowCount() and columnCount(), two more Python calls a mapping)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._source_rows: list[int] | None = None
        # Connected before any view is: a view that repaints on these finds the list made anew.
        for changed in (self.layoutChanged, self.rowsInserted, self.rowsRemoved, self.rowsMoved,
                        self.modelReset):
            changed.connect(self._forget_rows)

    def _forget_rows(self, *_) -> None:
        self._source_rows = None

    def _source_row(self, row: int) -> int:
        rows = self._source_rows
        if rows is None:
            rows = self._source_rows = [self.mapToSource(self.index(r, 0)).row()
                                        for r in range(self.rowCount())]
        return rows[row] if 0 <= row < len(rows) else -1

    def multiData(self, index, span) -> None:
        fill = getattr(self.sourceModel(), "fill_cell", None)
        if fill is None:
            super().multiData(index, span)          # a model without it: one mapping a cell
            return
        if index.isValid():
            fill(self._source_row(index.row()), index.column(), span)

    def flags(self, index):
        flags_of = getattr(self.sourceModel(), "cell_flags", None)
        if flags_of is None:
            return super().flags(index)
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return flags_of(self._source_row(index.row()), index.column())


def fill_span(span, value_of) -> None:
    """Set each role of `span` (a QModelRoleDataSpan) to `value_of(role)`, None as "no value". Every
    role is set, None ones cleared: a delegate hands the same span from cell to cell, so a role left
    alone keeps the last cell's value (a numeric cell's right alignment, a kernel thread's grey)."""
    if isinstance(span, QModelRoleData):        # a Python caller's single role (Qt converts it)
        span = QModelRoleDataSpan(span)
    for k in range(len(span)):
        rd = span[k]
        v = value_of(rd.role())
        if v is None:
            rd.clearData()
        else:
            rd.setData(v)
