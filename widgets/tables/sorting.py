"""SortHold: the IRQ table's proxy re-sorts once per applied state, and only when a row is out of place.

A QSortFilterProxyModel with dynamicSortFilter re-sorts on every dataChanged that touches the sort
column and announces a layout change each time, and a view answers each with a repaint of all of
itself (cells, header, scroll bars): two or three times a tick in the IRQ table sorted by rate, most
of them for an order that did not change (issue 12: no repaint of unchanged cells). Here SortHold
notes which rows changed in the sort column; `settle()`, called once the model has applied a state,
compares each of them with its neighbours and sorts (one layout change) only when one is out of
place by more than TIE, at most once per HOLD_SECONDS, and only if one still is when the hold
ends (a burst that is over moves nothing). Rows that arrived are placed by a sort too:
cheap for tables whose rows rarely come and go (IRQs), not for the thread tree, whose 2,000 threads
a sort compares through Python's data() 60,000 times (80 ms, measured); it keeps Qt's dynamic
sort, which places each arrival by itself. The proxy re-applies a filter that is on before it settles,
since the values the filter looks at may have changed.
"""
from __future__ import annotations

import time

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QSortFilterProxyModel, Qt


# Numbers within this share of each other count as tied, so rows with near-equal rates (the timer and
# the IPIs of an idle machine) keep their places instead of swapping, and the view its paint, every
# tick. A row that clearly overtakes another moves; a click on the header sorts exactly. The thread
# tree's dead band is the same rule (widgets/tables/threads.py): one calm order for both tables.
TIE = 0.25
# And numbers at most this far apart, whatever their size: an idle queue's 0/s beside another's 1/s
# (a VM's virtio queues take one interrupt now and then) is noise, not an order worth a repaint; in
# the thread tree, 1% of a core or 1 migration/s.
TIE_ABSOLUTE = 1.0
# And a row out of place waits until this long after the last sort: on a machine whose interrupts
# burst (a VM's virtio queues) the order would otherwise change, and the whole table repaint, nearly
# every tick. The cells show the new values at once; the rows move at most this often. With 10% and
# 3 s the IRQ table of this idle VM re-sorted 12 times a minute, each a full repaint (2.5 ms); with a
# quarter and 10 s, 6 times.
HOLD_SECONDS = 10.0


def near(a: float, b: float, share: float, absolute: float) -> bool:
    """Whether two numbers are within `share` of the larger, or `absolute` of each other: the rule by
    which the tables let near-equal values keep their order (here between neighbours; in the thread
    tree, widgets/tables/threads.py, between a row's value now and the one it was placed by)."""
    return abs(a - b) <= max(share * max(abs(a), abs(b)), absolute)


def _may_stand_above(upper, lower, descending: bool) -> bool:
    """Whether a row whose sort value is `upper` may stand right above one whose value is `lower`."""
    if isinstance(upper, (int, float)) and isinstance(lower, (int, float)):
        if near(upper, lower, TIE, TIE_ABSOLUTE):
            return True
    try:
        return upper >= lower if descending else upper <= lower
    except TypeError:                        # values of different kinds: Qt's own sort places them
        return True


class SortHold:
    """When the IRQ table's proxy (widgets/tables/irqs.py) sorts: `settle()`, after a state, sorts it when
    a row changed in the sort column, or new, is out of place (module docstring). The proxy calls
    `restart()` on each of its sorts, a header click's too. Tests give their own `clock`."""

    def __init__(self, proxy: QSortFilterProxyModel):
        self._proxy = proxy
        self._changed: list[tuple[int, int]] = []   # (first, last) source rows changed in the sort column
        self._arrived = False
        self._waiting: set[int] = set()              # source rows seen out of place, waiting for HOLD_SECONDS
        self._sorted_at = -HOLD_SECONDS
        self.clock = time.monotonic

    def watch(self, model: QAbstractItemModel) -> None:
        """Follow `model`, the proxy's new source (a flat table)."""
        model.dataChanged.connect(self._on_source_data_changed)
        model.rowsInserted.connect(self._on_source_rows_inserted)

    def restart(self) -> None:
        """The proxy sorts now: nothing waits any more, and the hold starts again."""
        self._waiting = set()
        self._sorted_at = self.clock()

    def settle(self) -> None:
        """After a state: sort the proxy when a changed or new row is out of place."""
        proxy = self._proxy
        changed, self._changed = self._changed, []
        arrived, self._arrived = self._arrived, False
        column = proxy.sortColumn()
        if column < 0:
            return
        self._waiting |= {row for first, last in changed for row in range(first, last + 1)
                          if row not in self._waiting and not self._in_place(row, column)}
        if arrived:
            proxy.sort(column, proxy.sortOrder())
        elif self._waiting and self.clock() - self._sorted_at >= HOLD_SECONDS:
            # Look again: a row out of place when it changed may be back in place by now (a burst
            # that ended), and a sort that moves nothing still repaints the whole table.
            if any(not self._in_place(row, column) for row in self._waiting):
                proxy.sort(column, proxy.sortOrder())
            else:
                self._waiting = set()

    def _in_place(self, source_row: int, column: int) -> bool:
        """Whether a source row still sits between its neighbours in the proxy's order."""
        proxy = self._proxy
        here = proxy.mapFromSource(proxy.sourceModel().index(source_row, column))
        if not here.isValid():
            return True                     # filtered out, or gone: nothing shows out of place
        row = here.row()
        descending = proxy.sortOrder() == Qt.SortOrder.DescendingOrder
        role = proxy.sortRole()
        mine = here.data(role)
        if row > 0 and not _may_stand_above(proxy.index(row - 1, column).data(role), mine, descending):
            return False
        if row + 1 < proxy.rowCount() and \
                not _may_stand_above(mine, proxy.index(row + 1, column).data(role), descending):
            return False
        return True

    def _on_source_data_changed(self, top_left: QModelIndex, bottom_right: QModelIndex, _roles=()) -> None:
        column = self._proxy.sortColumn()
        if column >= 0 and top_left.column() <= column <= bottom_right.column():
            self._changed.append((top_left.row(), bottom_right.row()))

    def _on_source_rows_inserted(self, _parent: QModelIndex, _first: int, _last: int) -> None:
        self._arrived = True
