"""The tables' proxies' multiData (widgets/tables/rows.py says why): a painted cell of the IRQ table or the
thread tree costs its model one call (fill_cell, fill_roles), and that call answers every role exactly as
data() does."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QModelIndex, QModelRoleData, QSortFilterProxyModel, Qt

from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.states import first_state
from widgets.tables.irqs import IrqTableWidget
from widgets.tables.irqs import SORT_ROLE as IRQ_SORT
from widgets.tables.threads import SORT_ROLE as THREAD_SORT
from widgets.tables.threads import ThreadTableWidget

pytestmark = pytest.mark.qt_log_level_fail("WARNING")

R = Qt.ItemDataRole
ROLES = (R.DisplayRole, R.DecorationRole, R.FontRole, R.TextAlignmentRole, R.BackgroundRole,
         R.ForegroundRole, R.CheckStateRole, R.ToolTipRole, R.SizeHintRole)


def all_indexes(model, parent=QModelIndex()):
    for row in range(model.rowCount(parent)):
        for col in range(model.columnCount(parent)):
            yield model.index(row, col, parent)
        yield from all_indexes(model, model.index(row, 0, parent))


def assert_one_call_answers_as_data(proxy, extra_roles) -> int:
    """Each cell's answer through multiData equals data()'s, with one QModelRoleData per role handed
    from cell to cell as a delegate does: a role the cell has no value for must be cleared, not left
    with the last cell's."""
    n = 0
    held = {role: QModelRoleData(int(role)) for role in (*ROLES, *extra_roles)}
    for index in all_indexes(proxy):
        for role in (*ROLES, *extra_roles):
            rd = held[role]
            proxy.multiData(index, rd)
            # QSortFilterProxyModel.data: the per-role path (mapping, then the model's data()).
            assert rd.data() == QSortFilterProxyModel.data(proxy, index, role), (index.row(), index.column(), role)
            n += 1
    return n


@pytest.fixture(scope="module")
def master_state():
    return first_state("master.internal")


@pytest.fixture(scope="module")
def live_states():
    sampler = Sampler(SysRoot("/"))
    first = sampler.tick()
    return first, sampler.tick()


def test_irq_cells_answer_every_role_in_one_call(qtbot, master_state):
    widget = IrqTableWidget()
    qtbot.addWidget(widget)
    widget.set_state(master_state)
    proxy = widget.proxy
    assert assert_one_call_answers_as_data(proxy, (IRQ_SORT,)) > 1000
    # The proxy keeps each row's source row (IrqFilterProxyModel): after a sort, a filter and a new
    # state with rows gone, a cell still answers as the per-role path does, flags too.
    proxy.sort(0, Qt.SortOrder.DescendingOrder)
    word = next(proxy.index(r, 1).data().split()[0] for r in range(proxy.rowCount())
                if (proxy.index(r, 1).data() or "").strip() and proxy.index(r, 0).data().isdigit())
    widget.set_filter(word)
    n = assert_one_call_answers_as_data(proxy, (IRQ_SORT,))
    assert 0 < n < 1000
    widget.set_filter("")
    from dataclasses import replace
    from app.parse.interrupts import InterruptTable
    table = master_state.sample.interrupts
    fewer = replace(master_state, generation=master_state.generation + 1,
                    sample=replace(master_state.sample, interrupts=InterruptTable(table.cpus, table.rows[::2])))
    widget.set_state(fewer)
    assert assert_one_call_answers_as_data(proxy, (IRQ_SORT,)) > 500
    for row in range(proxy.rowCount()):
        index = proxy.index(row, 0)
        assert proxy.flags(index) == widget.model.flags(proxy.mapToSource(index))


def test_thread_cells_answer_every_role_in_one_call(qtbot, live_states):
    widget = ThreadTableWidget()
    qtbot.addWidget(widget)
    for state in live_states:
        widget.set_state(state)
    assert assert_one_call_answers_as_data(widget.proxy, (THREAD_SORT,)) > 1000


@pytest.mark.parametrize("which", ["irqs", "threads"])
def test_the_tables_paint_as_with_qts_own_proxy(qtbot, which, master_state, live_states):
    """The same pixels as a plain QSortFilterProxyModel (Qt's per-role path) over the same model,
    sorted alike: alignment, colours and text of every painted cell."""
    from PySide6.QtWidgets import QTableView, QTreeView
    widget = IrqTableWidget() if which == "irqs" else ThreadTableWidget()
    qtbot.addWidget(widget)
    for state in ((master_state,) if which == "irqs" else live_states[:1]):
        widget.set_state(state)
    plain = QSortFilterProxyModel()
    plain.setSourceModel(widget.model)
    images = []
    for proxy in (widget.proxy, plain):
        proxy.setSortRole(widget.proxy.sortRole())
        proxy.sort(3, Qt.SortOrder.AscendingOrder)
        view = QTableView() if which == "irqs" else QTreeView()
        qtbot.addWidget(view)
        view.setModel(proxy)
        view.resize(900, 600)
        if which == "threads":
            view.expandAll()
        images.append(view.grab().toImage())
    assert images[0] == images[1]


@pytest.mark.parametrize("which", ["irqs", "threads"])
def test_a_painted_cell_costs_its_model_one_call(qtbot, which, master_state, live_states):
    widget = IrqTableWidget() if which == "irqs" else ThreadTableWidget()
    qtbot.addWidget(widget)
    for state in ((master_state,) if which == "irqs" else live_states):
        widget.set_state(state)
    widget.resize(900, 500)
    if which == "threads":
        widget.view.expandAll()
    model = widget.model
    one_call = "fill_cell" if which == "irqs" else "fill_roles"     # IrqFilterProxyModel / ThreadFilterProxyModel
    calls = {"data": 0, one_call: 0}
    data, fill = model.data, getattr(model, one_call)

    def counting_data(*a):
        calls["data"] += 1
        return data(*a)

    def counting_fill(*a):
        calls[one_call] += 1
        return fill(*a)

    model.data = counting_data
    setattr(model, one_call, counting_fill)
    try:
        widget.grab()                         # paints it, shown or not
    finally:
        del model.data
        delattr(model, one_call)
    view = widget.view
    shown = sum(1 for i in all_indexes(widget.proxy)
                if view.visualRect(i).intersects(view.viewport().rect()) and not view.isIndexHidden(i))
    assert shown > 20
    assert calls["data"] == 0
    assert calls[one_call] >= shown
