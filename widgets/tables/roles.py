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

from PySide6.QtCore import QModelRoleData, QModelRoleDataSpan, QSortFilterProxyModel


class OneCallProxy(QSortFilterProxyModel):
    """A QSortFilterProxyModel whose multiData is one call of the source's fill_roles (see above)."""

    def multiData(self, index, span) -> None:
        if isinstance(span, QModelRoleData):        # a Python caller's single role (Qt converts it)
            span = QModelRoleDataSpan(span)
        src = self.sourceModel()
        fill = getattr(src, "fill_roles", None)
        if fill is None:
            super().multiData(index, span)
        elif index.isValid():
            fill(self.mapToSource(index), span)


def fill_span(span, value_of) -> None:
    """Set each role of `span` (a QModelRoleDataSpan) to `value_of(role)`, skipping None (the role
    stays unset, which a view reads as "no value", as it reads data()'s None)."""
    for k in range(len(span)):
        rd = span[k]
        v = value_of(rd.role())
        if v is not None:
            rd.setData(v)
