"""Several IRQs selected in the IRQ table and dropped on the grid spread one per CPU, each device's NUMA
node first, as `coremap pin --spread` does (issue 30): the drag's hint and the Pin to… dialog say where
each goes before anything is written, the batch is journalled as one and one undo puts every IRQ back.

On a writable copy of worker1 (80 CPUs: even ones on node 0, odd ones on node 1; eno1's queues on node 0),
rows picked with real clicks (click, Ctrl+click), the drag built by the table's own startDrag path, the
drop delivered as QDragEnter/Move/Drop events."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.machine.topology import read_topology
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.gui.test_pinning import _drop, _enter_move, _point_on
from tests.unit.test_pin_irqs import _copy_worker1, _eno1_queues
from widgets.application import build_window
from widgets.pinning.drag import chip_text, pin_drag
from widgets.pinning.mime import decode_pin_mime
from widgets.tables.irqs import COL_DEVICE


@pytest.fixture
def worker1(qtbot, tmp_path):
    root = SysRoot(_copy_worker1(tmp_path / "worker1"))
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    assert w.set_state(Sampler(root).tick())
    w.topology_view.zoom_fit()
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(root, journal)
    show_pins(w, service)
    yield w, service, root
    journal.close()


def _smp(root: SysRoot, irq: int) -> str:
    return Path(root.irq_dir(irq, "smp_affinity_list")).read_text().strip()


def _click_rows(qtbot, table, irqs) -> None:
    """Select the rows of `irqs` as a user does: a click on the first, Ctrl+click on each other."""
    view, model, proxy = table.view, table.model, table.proxy
    for i, irq in enumerate(irqs):
        idx = proxy.mapFromSource(model.index(model.row_of(str(irq)), COL_DEVICE))
        view.scrollTo(idx)
        mod = Qt.KeyboardModifier.ControlModifier if i else Qt.KeyboardModifier.NoModifier
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, mod, view.visualRect(idx).center())
    picked = sorted(int(i.data()) for i in view.selectionModel().selectedRows(0))
    assert picked == sorted(irqs)


def test_two_irq_rows_dropped_on_a_cpu_selection_spread_node_first_and_undo_as_one(worker1, qtbot):
    w, service, root = worker1
    queues = {q: n for n, q in _eno1_queues(Path(root.root)).items()}
    irqs = [queues[0], queues[1]]                        # eno1 TxRx-0 and TxRx-1, on node 0
    before = {n: _smp(root, n) for n in irqs}
    _click_rows(qtbot, w.irq_table, irqs)
    drag = pin_drag(w.irq_table.view, COL_DEVICE)        # what the table's startDrag hands QDrag
    payload = decode_pin_mime(drag.mimeData())
    assert payload.ids == tuple(irqs) and chip_text(payload, None) == "2 IRQs"
    grid = w.topology_view
    grid.select_cpus([1, 2])                              # CPU 1 on node 1, CPU 2 on node 0
    pos = _point_on(grid, grid.cell_item(2))
    enter, move = _enter_move(grid, pos, drag.mimeData())
    assert enter.isAccepted() and move.isAccepted()
    # The preview says where each goes: the first queue on node 0's CPU 2, then CPU 1 (one per CPU).
    assert grid.pin_drops.last_hint.endswith(f": IRQ {irqs[0]} → 2, IRQ {irqs[1]} → 1"), grid.pin_drops.last_hint
    assert grid.pin_drops.last_hint.startswith("spread 2 IRQs over ")
    assert {n: _smp(root, n) for n in irqs} == before     # nothing written before the drop
    with qtbot.waitSignal(grid.pin_requested, timeout=2000) as blocker:
        assert _drop(grid, pos, drag.mimeData()).isAccepted()
    settle(w)
    assert blocker.args[0].each == ((2,), (1,))
    assert (_smp(root, irqs[0]), _smp(root, irqs[1])) == ("2", "1")
    entries = [e for e in service.journal.entries() if e.kind == "irq"]
    assert [(e.target_id, e.requested, e.state) for e in entries] == [(irqs[0], (2,), "done"), (irqs[1], (1,), "done")]
    assert len({e.batch for e in entries}) == 1
    w.pin_controller.undo_action.trigger()               # Edit → Undo: the whole spread
    settle(w)
    assert {n: _smp(root, n) for n in irqs} == before


def test_the_pin_to_dialog_previews_the_spread_and_pins_it(worker1, qtbot):
    w, service, root = worker1
    queues = {q: n for n, q in _eno1_queues(Path(root.root)).items()}
    irqs = [queues[0], queues[1], queues[2]]
    before = {n: _smp(root, n) for n in irqs}
    _click_rows(qtbot, w.irq_table, irqs)
    dialog = w.pin_controller.sources.open_dialog(w.irq_table.view)
    dialog.cpu_edit.clear()
    QTest.keyClicks(dialog.cpu_edit, "3-4")               # CPU 3 on node 1, CPU 4 on node 0
    assert dialog.ok_button.isEnabled()
    assert dialog.reason_label.text() == (f"spread over CPUs 3-4: IRQ {irqs[0]} → 4, IRQ {irqs[1]} → 3, "
                                          f"IRQ {irqs[2]} → 4")
    assert {n: _smp(root, n) for n in irqs} == before
    QTest.keyClick(dialog.cpu_edit, Qt.Key.Key_Return)
    settle(w)
    assert [_smp(root, n) for n in irqs] == ["4", "3", "4"]
    w.pin_controller.undo_action.trigger()
    settle(w)
    assert {n: _smp(root, n) for n in irqs} == before


def test_a_devices_rows_by_filter_and_select_all_spread_over_its_node(worker1, qtbot):
    # "eno1" in the filter, Ctrl+A: the device's row group; dropped on package 0 (node 0, eno1's node):
    # its 80 queues two to each of the node's 40 CPUs, in queue order.
    w, service, root = worker1
    queues = _eno1_queues(Path(root.root))
    table = w.irq_table
    QTest.keyClicks(table.filter_edit, "eno1")
    table.view.setFocus()
    QTest.keyClick(table.view, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    payload = decode_pin_mime(pin_drag(table.view, COL_DEVICE).mimeData())
    assert payload.ids == tuple(sorted(queues))
    grid = w.topology_view
    package = grid.group_item("package", 0)
    node0 = sorted(c.id for c in read_topology(root).cpus if c.node == 0)
    assert len(node0) == 40
    pos = _point_on(grid, package)
    mime = pin_drag(table.view, COL_DEVICE).mimeData()
    enter, move = _enter_move(grid, pos, mime)
    assert enter.isAccepted() and move.isAccepted()
    assert grid.pin_drops.last_hint.startswith("spread 80 IRQs over package 0"), grid.pin_drops.last_hint
    with qtbot.waitSignal(grid.pin_requested, timeout=2000):
        assert _drop(grid, pos, mime).isAccepted()
    settle(w)
    assert {n: _smp(root, n) for n in queues} == {n: str(node0[q % 40]) for n, q in queues.items()}
    assert len({e.batch for e in service.journal.entries()}) == 1
