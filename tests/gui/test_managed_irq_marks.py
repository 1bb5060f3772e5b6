"""A managed IRQ a Make quiet could not move off is marked where the user looks (issue 28 item 5: the
managed disk IRQ 36 stayed on the quiet CPU at up to 9,388/s, and neither the IRQ table nor the grid
said so): its Effective cell in the IRQ table and a chip on the quiet CPU's cell, each with its rate
there and a tooltip saying why it could not move. On a copy of the sno machine whose debugfs calls IRQ
57 managed, captured twice a second apart (tests/unit/test_intruders.py managed_tree)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import show_pins
from tests.unit.test_intruders import EXTRA, MANAGED_CPU, MANAGED_IRQ, managed_tree
from widgets.tables.irqs import COL_EFFECTIVE, QUIET_LEAK_BRUSH, IrqTableWidget
from widgets.topology.items import LEAK_COLOR
from widgets.topology.view import TopologyView


def _state(tmp_path):
    return Sampler(SysRoot(managed_tree(tmp_path))).tick()


def test_the_irq_table_marks_a_managed_irq_on_a_quiet_cpu_with_its_rate(qtbot, qtmodeltester, tmp_path):
    state = _state(tmp_path)
    table = IrqTableWidget()
    qtbot.addWidget(table)
    table.set_state(state)
    model = table.model
    cell = model.index(model.row_of(MANAGED_IRQ), COL_EFFECTIVE)
    assert cell.data() == str(MANAGED_CPU)                    # not quiet: nothing to say
    table.set_quiet_cpus([MANAGED_CPU])
    table.set_state(state)
    assert cell.data() == f"{MANAGED_CPU} · quiet {EXTRA:,}/s"
    assert cell.data(Qt.ItemDataRole.BackgroundRole) == QUIET_LEAK_BRUSH
    tip = cell.data(Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith(f"managed IRQ {MANAGED_IRQ} is still delivered on quiet CPU {MANAGED_CPU} ({EXTRA:,}/s)")
    assert "isolcpus=managed_irq" in tip
    # the other IRQs delivered on that CPU are not managed: not marked
    for row in range(model.rowCount()):
        irq = model.index(row, 0).data()
        if irq != MANAGED_IRQ:
            assert model.index(row, COL_EFFECTIVE).data(Qt.ItemDataRole.BackgroundRole) != QUIET_LEAK_BRUSH, irq
    assert "managed, still on a quiet CPU" in table.legend.text()
    qtmodeltester.check(model)


def test_the_grid_marks_the_quiet_cell_with_the_irq_and_says_why_in_its_tooltip(qtbot, tmp_path):
    state = _state(tmp_path)
    view = TopologyView()
    qtbot.addWidget(view)
    view.resize(1000, 600)
    view.show()
    view.set_state(state)
    assert all(c.managed_mark == "" for c in view.cells().values())
    view.set_quiet_cpus([MANAGED_CPU])
    view.set_state(state)
    marks = {cpu: c.managed_mark for cpu, c in view.cells().items() if c.managed_mark}
    assert marks == {MANAGED_CPU: f"IRQ {MANAGED_IRQ} 9.4k/s"}
    tip = view.tooltip_for(MANAGED_CPU)
    assert f"IRQ {MANAGED_IRQ} ({EXTRA:,}/s)" in tip and "isolcpus=managed_irq" in tip
    assert "managed IRQ" not in view.tooltip_for(0)
    # the chip is painted: the mark's red inside the quiet cell, in none of the others
    view.zoom_fit()
    qtbot.wait(50)
    image = view.viewport().grab().toImage()

    def reds(cpu: int) -> int:
        r = view.mapFromScene(view.cell_item(cpu).sceneBoundingRect()).boundingRect().intersected(image.rect())
        return sum(1 for x in range(r.left(), r.right()) for y in range(r.top(), r.bottom())
                   if _near(QColor(image.pixel(x, y)), LEAK_COLOR))
    assert reds(MANAGED_CPU) > 5
    assert all(reds(c) == 0 for c in view.cells() if c != MANAGED_CPU)
    # give back: the mark goes with the quiet
    view.set_quiet_cpus([])
    view.set_state(state)
    assert view.cell_item(MANAGED_CPU).managed_mark == ""


def _near(a: QColor, b: QColor) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) < 60


def test_without_debugfs_the_make_quiets_own_refusal_says_which_irq_is_managed(qtbot, tmp_path):
    """Where debugfs is not mounted (this VM: the disk's IRQ 36 stayed on quiet CPU 1, unmarked), the
    kernel says an IRQ is managed only by refusing the Make quiet's move of it: that refusal, journalled,
    marks it in the IRQ table and on the quiet cell as debugfs would."""
    import shutil
    from app.pinning.journal import Journal
    from app.pinning.service import AffinityService
    from tests.machines import writable_test_tree
    from widgets.application import build_window
    tree = managed_tree(tmp_path)
    shutil.rmtree(tree / "sys" / "kernel" / "debug")
    root = SysRoot(writable_test_tree(tree))
    sampler = Sampler(root)
    state = sampler.tick()
    assert state.irqs.info[MANAGED_IRQ].managed is None                      # nothing else can say
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(root, journal)
    batch = journal.quiet("isolate", (MANAGED_CPU,), service.root_key, planned=2)
    jid = journal.record(kind="irq", target_id=int(MANAGED_IRQ), requested=(0,), before=(MANAGED_CPU,),
                         root=service.root_key, origin="isolate", batch=batch)
    journal.mark(jid, "failed", None, None, code="managed", message=f"IRQ {MANAGED_IRQ} cannot be moved")
    moved = journal.record(kind="irqdefault", target_id=0, requested=(0,), before=(0, MANAGED_CPU),
                           root=service.root_key, origin="isolate", batch=batch)     # what the isolate did move
    journal.mark(moved, "done", (0,), None)
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    show_pins(w, service)
    assert w.set_state(state)                         # the journal read: CPU 3 quiet, IRQ 57 refused
    assert w.topology_view.quiet_cpus == (MANAGED_CPU,)
    assert w.set_state(sampler.tick())                # marked from the next state on
    marks = {cpu: c.managed_mark for cpu, c in w.topology_view.cells().items() if c.managed_mark}
    assert marks == {MANAGED_CPU: f"IRQ {MANAGED_IRQ} 9.4k/s"}
    model = w.irq_table.model
    cell = model.index(model.row_of(MANAGED_IRQ), COL_EFFECTIVE)
    assert cell.data() == f"{MANAGED_CPU} · quiet {EXTRA:,}/s"
    assert "isolcpus=managed_irq" in cell.data(Qt.ItemDataRole.ToolTipRole)
    w.close()
    journal.close()
