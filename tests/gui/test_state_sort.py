"""The IRQ table's proxy and its SortHold (widgets/tables/sorting.py): rows re-sort once per state, only
when one is out of place by more than TIE, and at most every HOLD_SECONDS; a header click sorts at once."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel

from widgets.tables.irqs import IrqFilterProxyModel
from widgets.tables.sorting import HOLD_SECONDS


def _model(values):
    m = QStandardItemModel()
    for v in values:
        item = QStandardItem()
        item.setData(float(v), Qt.ItemDataRole.DisplayRole)
        m.appendRow(item)
    return m


def _order(proxy):
    return [proxy.index(r, 0).data() for r in range(proxy.rowCount())]


def _sorted(values):
    """The IRQ table's proxy on `values` (sorted by what the cells show), sorted descending at time 100
    on its own clock: (the clock as a one-item list, the source model, the proxy, the times of its
    layout changes)."""
    now = [100.0]
    source = _model(values)
    proxy = IrqFilterProxyModel()
    proxy.setSortRole(Qt.ItemDataRole.DisplayRole)
    proxy.hold.clock = lambda: now[0]
    proxy.setSourceModel(source)
    layouts = []
    proxy.layoutChanged.connect(lambda *a: layouts.append(now[0]))
    proxy.sort(0, Qt.SortOrder.DescendingOrder)
    return now, source, proxy, layouts


def test_rows_move_only_when_clearly_out_of_place_and_not_more_often_than_the_hold(qtbot):
    now, source, proxy, layouts = _sorted([10, 20, 30])
    assert _order(proxy) == [30, 20, 10] and len(layouts) == 1
    # 20 -> 60 clearly overtakes 30, but the last sort was just now: the cell shows 60, the row waits.
    now[0] += 1
    source.item(1).setData(60.0, Qt.ItemDataRole.DisplayRole)
    proxy.settle()
    assert _order(proxy) == [30, 60, 10] and len(layouts) == 1
    now[0] += HOLD_SECONDS
    proxy.settle()                                  # nothing new changed; the waiting row moves now
    assert _order(proxy) == [60, 30, 10] and len(layouts) == 2
    # 30 -> 62: within TIE of the 60 above it, so nothing moves, however long after.
    now[0] += 10 * HOLD_SECONDS
    source.item(2).setData(62.0, Qt.ItemDataRole.DisplayRole)
    proxy.settle()
    assert _order(proxy) == [60, 62, 10] and len(layouts) == 2
    # A row that arrives is placed at once.
    source.appendRow(QStandardItem("x"))
    source.item(3).setData(99.0, Qt.ItemDataRole.DisplayRole)
    proxy.settle()
    assert _order(proxy) == [99, 62, 60, 10]


def test_rates_a_unit_apart_count_as_tied(qtbot):
    """An idle VM's queues take one interrupt now and then: 2/s above 3/s does not re-sort (and
    repaint) the table; 2/s above 4/s does."""
    now, source, proxy, layouts = _sorted([5, 0, 2])
    assert _order(proxy) == [5, 2, 0] and len(layouts) == 1
    now[0] += 10 * HOLD_SECONDS
    source.item(1).setData(3.0, Qt.ItemDataRole.DisplayRole)
    proxy.settle()
    assert _order(proxy) == [5, 2, 3] and len(layouts) == 1
    source.item(1).setData(4.0, Qt.ItemDataRole.DisplayRole)
    proxy.settle()
    assert _order(proxy) == [5, 4, 2] and len(layouts) == 2


def test_a_row_back_in_place_when_the_hold_ends_sorts_nothing(qtbot):
    """A burst moves a row out of place, and it is back before the hold ends: no sort (a sort that
    moves nothing still repaints the whole table)."""
    now, source, proxy, layouts = _sorted([30, 20, 10])
    now[0] += 1
    source.item(2).setData(90.0, Qt.ItemDataRole.DisplayRole)       # a burst: out of place, held
    proxy.settle()
    now[0] += 1
    source.item(2).setData(11.0, Qt.ItemDataRole.DisplayRole)       # over before the hold ends
    proxy.settle()
    now[0] += HOLD_SECONDS
    proxy.settle()
    assert len(layouts) == 1 and _order(proxy) == [30, 20, 11]
    source.item(2).setData(90.0, Qt.ItemDataRole.DisplayRole)       # and one that stays: it moves
    proxy.settle()
    now[0] += HOLD_SECONDS
    proxy.settle()
    assert len(layouts) == 2 and _order(proxy) == [90, 30, 20]
