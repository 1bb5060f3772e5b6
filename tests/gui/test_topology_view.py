"""TopologyView: one cell per CPU, one box per core, recolouring that follows the data."""
from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt

from app.machine.sample import MachineSample
from app.machine.topology import read_topology
from app.rates import CpuRates, Rates
from app.state import MachineState
from app.sysroot import SysRoot
from tests.machines import extract
from widgets.colors import LUT, ColorScale, parse_metric
from widgets.topology_view import CoreBoxItem, GroupBoxItem, TopologyView


def _topology(name):
    return read_topology(SysRoot(extract(name)))


def _rates_state(topo, generation, irq_per_s: dict, default=10.0):
    per_cpu = {c: CpuRates(c, irq_per_s.get(c, default), {"NET_RX": irq_per_s.get(c, default) / 2},
                           irq_per_s.get(c, default) / 2, busy_pct=50.0, irq_softirq_pct=5.0)
               for c in topo.online}
    rates = Rates(1.0, tuple(topo.online), per_cpu, {}, {})
    return MachineState(generation, topo, MachineSample(float(generation)), rates, live=True)


@pytest.fixture
def view(qtbot):
    v = TopologyView()
    qtbot.addWidget(v)
    v.resize(1200, 800)
    return v


@pytest.mark.parametrize("name", ["master.internal", "16em64t-4s2c2t-offlines", "256ppc-8n8s4t",
                                  "20em64t-hybrid-1p6c2t+2ca4co1t", "128arm-2pa2n8cluster4co"])
def test_one_cell_per_cpu_and_one_box_per_core(view, name):
    topo = _topology(name)
    view.set_topology(topo)
    cells = view.cells()
    assert sorted(c for c, it in cells.items() if it.online) == sorted(topo.online)
    assert {c for c, it in cells.items() if not it.online} <= set(topo.offline)
    cores = [c for c in view.core_items() if c.core_index >= 0]
    assert len(cores) == len(topo.cores)
    for core in topo.cores:
        box = view.core_item(core.index)
        assert isinstance(box, CoreBoxItem) and tuple(sorted(box.cpus)) == tuple(sorted(core.cpus))
        # Each thread's cell sits inside its core's box, side by side.
        for cpu in core.cpus:
            assert view.cell_item(cpu).parentItem() is box
        ys = {round(view.cell_item(c).pos().y(), 3) for c in core.cpus}
        assert len(ys) == 1
    # No two cells overlap in scene coordinates.
    rects = sorted((it.sceneBoundingRect().adjusted(3, 3, -3, -3) for it in cells.values()),
                   key=lambda r: (r.y(), r.x()))
    for a, b in zip(rects, rects[1:]):
        assert not a.intersects(b)


def test_offline_cpus_are_drawn_hatched_and_not_selectable(view):
    topo = _topology("16em64t-4s2c2t-offlines")
    view.set_topology(topo)
    assert topo.offline
    for cpu in topo.offline:
        cell = view.cell_item(cpu)
        assert cell is not None and not cell.online
        assert not (cell.flags() & cell.GraphicsItemFlag.ItemIsSelectable)


def test_isolated_and_nohz_full_cells_are_marked(view):
    topo = _topology("worker1.internal")
    view.set_topology(topo)
    assert topo.isolated and topo.nohz_full
    for cpu, cell in view.cells().items():
        assert cell.isolated == (cpu in topo.isolated)
        assert cell.nohz_full == (cpu in topo.nohz_full)


def test_hybrid_core_boxes_carry_their_kind(view):
    topo = _topology("20em64t-hybrid-1p6c2t+2ca4co1t")
    view.set_topology(topo)
    kinds = {view.core_item(c.index).kind for c in topo.cores}
    assert kinds == {"P", "E"}
    for core in topo.cores:
        assert view.core_item(core.index).kind == core.kind


def test_groups_are_reachable_by_kind_and_id_including_folded_levels(view):
    topo = _topology("master.internal")
    view.set_topology(topo)
    for pkg in topo.packages:
        item = view.group_item("package", pkg.id)
        assert isinstance(item, GroupBoxItem) and set(item.cpus) == set(pkg.cpus)
    for node in topo.nodes:
        # On this 2-socket server node N is package N: one box answers to both names.
        assert view.group_item("node", node.id) is view.group_item("package", node.id)


def test_colour_follows_a_rate_change_and_only_changed_cells_repaint(view):
    topo = _topology("master.internal")
    a = _rates_state(topo, 1, {3: 1000.0})
    b = _rates_state(topo, 2, {3: 1000.0, 1: 90_000.0})
    view.set_state(a)
    idx_a = {c: it.color_index for c, it in view.cells().items()}
    view.set_state(b)
    idx_b = {c: it.color_index for c, it in view.cells().items()}
    assert idx_a[1] < idx_a[3] == len(LUT) - 1
    assert idx_b[1] == len(LUT) - 1 and idx_a[1] < idx_b[1]
    assert idx_b[0] < idx_b[3] < idx_b[1]
    assert view.cell_item(1).brush_color() != view.cell_item(0).brush_color()
    assert view.cell_item(1).figure == "90k"
    # The same figures again: nothing to repaint.
    assert view._recolor(dataclasses.replace(b, generation=3)) == 0


def test_metrics_choose_the_matching_figure(view):
    topo = _topology("master.internal")
    view.set_state(_rates_state(topo, 1, {5: 500.0}))
    view.set_metric("busy")
    assert view.color_scale == ColorScale(0.0, 100.0, False)
    assert view.cell_item(5).figure == "50%"
    view.set_metric("softirq:NET_RX")
    assert view.cell_item(5).figure == "250"
    view.set_metric(parse_metric("residency"))
    assert view.cell_item(5).color_index is None           # nothing selected: no figure, not zero
    assert "select a thread" in view.legend.note


def test_one_capture_says_totals_not_rates(view):
    from app.sampler import Sampler
    state = Sampler(SysRoot(extract("worker1.internal"))).tick()
    view.set_state(state)
    assert "not rates" in view.legend.note
    assert all(it.color_index is not None for it in view.cells().values() if it.online)
    # CPU 5 (housekeeping, most interrupts) is the hottest on worker1.
    hottest = max(view.cells().values(), key=lambda it: it.color_index)
    assert hottest.cpu_id == 5


def test_click_and_rubber_band_select(view, qtbot):
    topo = _topology("master.internal")
    view.set_state(_rates_state(topo, 1, {}))
    view.show()
    qtbot.waitExposed(view)
    view.zoom_fit()
    cell = view.cell_item(2)
    pos = view.mapFromScene(cell.sceneBoundingRect().center())
    with qtbot.waitSignal(view.cpu_selected) as sig:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert sig.args == [2]
    assert view.selected_cpus() == [2]
    with qtbot.waitSignal(view.selection_changed) as sig:
        view.select_cpus([0, 56, 999])
    assert sig.args == [[0, 56]]


def test_tooltip_names_the_cpu_its_place_and_its_figures(view):
    topo = _topology("master.internal")
    view.set_state(_rates_state(topo, 1, {56: 1234.0}))
    text = view.tooltip_for(56)
    assert "CPU 56" in text and "package 0" in text and "node 0" in text
    assert "1.2k" in text and "busy 50%" in text


def test_zoom_keys_and_fit(view, qtbot):
    view.set_topology(_topology("256ppc-8n8s4t"))
    view.show()
    qtbot.waitExposed(view)
    s0 = view.transform().m11()
    qtbot.keyClick(view, Qt.Key.Key_Plus)
    assert view.transform().m11() == pytest.approx(s0 * 1.25)
    view.zoom_fit()
    assert view.transform().m11() == pytest.approx(s0)
    assert view.sceneRect().width() * s0 <= view.viewport().width() + 1
