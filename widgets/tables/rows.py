"""Row sync for the table models: apply a new list of rows in place, announce changed cells, and answer
a painted cell's roles in one call.

A model that is never reset keeps its views' sorting, filter, selection, expansion and scroll position
across ticks. `sync_rows` turns the old row list into the new one with begin/endRemoveRows and
begin/endInsertRows (one call per contiguous run); `changed_columns` and `emit_changed` send
dataChanged for exactly the cells whose text changed, in as few signals as that allows.

A view paints a cell by asking for seven roles at once (QStyledItemDelegate::initStyleOption: font,
alignment, foreground, check state, decoration, display, background) through multiData. A
QSortFilterProxyModel answers that with Qt's default multiData: seven calls of its own data(), each
mapping the index to the source (the source's index(), or rowCount() and columnCount() for a table
model, in Python) and calling the source's data() in Python. That is 16 Python calls a cell in the
thread tree and 24 in the IRQ table, most of the time the window spends painting them (issue 12). So
each table's proxy overrides multiData with one mapping and one call of its model, which looks the
cell up once and sets every role with `fill_span`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QModelRoleData, QModelRoleDataSpan


def sync_rows(model: QAbstractItemModel, parent: QModelIndex, old: list, new: Sequence,
              after_edit: Callable[[], None] | None = None) -> bool:
    """Turn the row list `old` (edited in place) into `new` with begin/endRemoveRows and
    begin/endInsertRows on `parent`, one call per contiguous run.

    Both lists must be in the same order for the rows they share (the models keep their rows sorted
    by a stable key). Returns False, leaving `old` untouched, when they are not; the caller then
    resets instead. `after_edit` runs after each edit of `old`, before the matching end*Rows, so the
    model can refresh its row lookups before views ask for indexes.
    """
    new_set = set(new)
    survivors = [k for k in old if k in new_set]
    old_set = set(old)
    if survivors != [k for k in new if k in old_set]:
        return False
    i = len(old) - 1
    while i >= 0:                      # remove from the bottom so earlier indexes stay valid
        if old[i] in new_set:
            i -= 1
            continue
        last = i
        while i - 1 >= 0 and old[i - 1] not in new_set:
            i -= 1
        model.beginRemoveRows(parent, i, last)
        del old[i:last + 1]
        if after_edit is not None:
            after_edit()
        model.endRemoveRows()
        i -= 1
    i = 0
    while i < len(new):
        if i < len(old) and old[i] == new[i]:
            i += 1
            continue
        j = i
        while j < len(new) and new[j] not in old_set:
            j += 1
        model.beginInsertRows(parent, i, j - 1)
        old[i:i] = new[i:j]
        if after_edit is not None:
            after_edit()
        model.endInsertRows()
        i = j
    return True


def changed_columns(old: tuple, new: tuple) -> tuple[tuple[int, int], ...]:
    """The column ranges (first, last) whose cells differ between two rows of cells."""
    ranges = []
    start = None
    for c in range(len(new)):
        if old[c] != new[c]:
            if start is None:
                start = c
        elif start is not None:
            ranges.append((start, c - 1))
            start = None
    if start is not None:
        ranges.append((start, len(new) - 1))
    return tuple(ranges)


def emit_changed(model: QAbstractItemModel, changes: list[tuple[int, tuple[tuple[int, int], ...]]],
                 parent: QModelIndex = QModelIndex()) -> int:
    """dataChanged for exactly the changed cells, as few signals as that allows: `changes` holds
    (row, column ranges) in ascending rows; neighbouring rows with the same ranges share a signal.
    Fewer signals matter: a sorting proxy handles each one separately. Returns the signal count."""
    n = 0
    i = 0
    while i < len(changes):
        first, ranges = changes[i]
        last = first
        j = i + 1
        while j < len(changes) and changes[j][0] == last + 1 and changes[j][1] == ranges:
            last += 1
            j += 1
        for c0, c1 in ranges:
            model.dataChanged.emit(model.index(first, c0, parent), model.index(last, c1, parent))
            n += 1
        i = j
    return n


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
