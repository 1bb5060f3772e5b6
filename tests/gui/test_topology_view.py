"""TopologyView: one cell per CPU, one box per core, recolouring that follows the data."""
from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt

from app.machine.sample import MachineSample
from app.machine.topology import read_topology
from app.parse.cpulist import format_cpulist
from app.sampling.rates import CpuRates, Rates
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot
from tests.machines import extract
from tests.states import first_state
from widgets.colors import LUT, ColorScale, parse_metric
from widgets.topology.items import CoreBoxItem, GroupBoxItem
from widgets.topology.view import TopologyView


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
    assert topo.isolcpus and not topo.isolated and topo.nohz_full    # isolcpus=managed_irq: not isolated
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
    state = first_state("worker1.internal")
    view.set_state(state)
    assert "not rates" in view.legend.note
    assert all(it.color_index is not None for it in view.cells().values() if it.online)
    # CPU 5 (housekeeping, most interrupts) is the hottest on worker1; counts since boot are coloured
    # from 0 (issue 23), so CPU 6's count, within 1% of it, may share its colour.
    hottest = max(it.color_index for it in view.cells().values() if it.online)
    assert view.cell_item(5).color_index == hottest
    assert view.color_scale.vmin == 0


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


# -- CPU drags to the probe panel (issue 5) ----------------------------------------------------------
def _payload(mime):
    """The CPUs a CPU drag carries, read the way the probe panel reads them."""
    from widgets.probe.drop import CPU_MIME, cpus_from_mime
    assert mime is not None and mime.formats() == [CPU_MIME]
    return cpus_from_mime(bytes(mime.data(CPU_MIME).data()))


def test_cpu_mime_for_a_cell_a_core_and_a_package(view):
    from widgets.probe.drop import CPU_MIME
    from widgets.topology.drag import CPU_MIME as GRID_CPU_MIME
    assert GRID_CPU_MIME == CPU_MIME
    topo = _topology("master.internal")          # siblings N and N+56
    view.set_topology(topo)
    assert _payload(view.gestures.cpu_mime_for(view.cell_item(5))) == (5,)
    assert view.gestures.drag_label_for(view.cell_item(5)) == "CPU 5"
    core = next(c for c in topo.cores if 5 in c.cpus)
    assert core.cpus == (5, 61)
    box = view.core_item(core.index)
    assert _payload(view.gestures.cpu_mime_for(box)) == (5, 61)
    assert view.gestures.drag_label_for(box) == f"core {core.index} (CPU 5,61)"
    for pkg in topo.packages:
        item = view.group_item("package", pkg.id)
        assert _payload(view.gestures.cpu_mime_for(item)) == tuple(sorted(pkg.cpus))
        # package 0 is the even CPUs 0-110: too long a list for the chip, so a count
        assert view.gestures.drag_label_for(item) == f"{item.label} ({len(pkg.cpus)} CPUs)"
    pkg0 = view.group_item("package", 0)
    view.select_cpus(pkg0.cpus[:3])
    cpus = tuple(sorted(pkg0.cpus[:3]))
    assert view.gestures.drag_label_for(view.cell_item(cpus[0])) == f"3 selected CPUs ({format_cpulist(cpus)})"


def test_a_drag_from_a_selected_cell_carries_the_selection(view):
    view.set_topology(_topology("master.internal"))
    view.select_cpus([1, 57, 3])
    assert _payload(view.gestures.cpu_mime_for(view.cell_item(57))) == (1, 3, 57)
    assert view.gestures.drag_label_for(view.cell_item(3)) == "3 selected CPUs (1,3,57)"
    # a cell outside the selection carries itself alone, as does the only selected cell
    assert _payload(view.gestures.cpu_mime_for(view.cell_item(7))) == (7,)
    view.select_cpus([9])
    assert _payload(view.gestures.cpu_mime_for(view.cell_item(9))) == (9,)


@pytest.mark.parametrize("name", ["16em64t-4s2c2t-offlines", "linux-amd64-offlineCPUs"])
def test_offline_cpus_are_never_dragged(view, name):
    topo = _topology(name)
    view.set_topology(topo)
    assert topo.offline
    off = topo.offline[0]
    assert view.gestures.cpu_mime_for(view.cell_item(off)) is None
    assert view.gestures.cpu_mime_for(view.cell_item(off).parentItem()) is None      # its (offline) core box
    assert view.gestures.cpu_mime_for(view.group_item("offline", None)) is None
    assert view.gestures.cpu_mime_for([off]) is None
    # a mixed list and the whole machine carry just the online CPUs
    mixed = list(topo.offline) + list(topo.online[:2])
    assert _payload(view.gestures.cpu_mime_for(mixed)) == tuple(sorted(topo.online[:2]))
    machine_box = next(it for it in view.scene().items() if isinstance(it, GroupBoxItem) and it.kind == "machine")
    assert set(machine_box.cpus) | set(topo.offline) >= set(topo.online)
    assert _payload(view.gestures.cpu_mime_for(machine_box)) == tuple(sorted(topo.online))
    pos = view.mapFromScene(view.cell_item(off).sceneBoundingRect().center())
    assert view.gestures.drag_source_at(pos) is None          # a press there rubber-bands


# -- the gesture: press, move past startDragDistance, QDrag.exec (patched: a real one blocks) -----------
def _mouse(view, kind, pos, button=Qt.MouseButton.LeftButton, buttons=None,
           modifiers=Qt.KeyboardModifier.NoModifier):
    from PySide6.QtCore import QEvent, QPointF
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QApplication
    t = {"press": QEvent.Type.MouseButtonPress, "move": QEvent.Type.MouseMove,
         "release": QEvent.Type.MouseButtonRelease}[kind]
    if buttons is None:
        buttons = Qt.MouseButton.NoButton if kind == "release" else button
    vp = view.viewport()
    p = QPointF(pos)
    ev = QMouseEvent(t, p, QPointF(vp.mapToGlobal(pos)), Qt.MouseButton.NoButton if kind == "move" else button,
                     buttons, modifiers)
    QApplication.sendEvent(vp, ev)


@pytest.fixture
def drags(monkeypatch):
    """Every QDrag.exec call's payload (None for a drag without our MIME type), instead of a real,
    blocking drag."""
    from PySide6.QtGui import QDrag
    seen = []

    def fake_exec(self, *args, **kwargs):
        seen.append(_payload(self.mimeData()))
        assert not self.pixmap().isNull()
        return Qt.DropAction.CopyAction
    monkeypatch.setattr(QDrag, "exec", fake_exec)
    return seen


@pytest.fixture
def shown(view, qtbot):
    view.set_state(_rates_state(_topology("master.internal"), 1, {}))
    view.show()
    qtbot.waitExposed(view)
    view.zoom_fit()
    return view


def _at(view, item, dx=0.0, dy=0.0):
    from PySide6.QtCore import QPointF
    r = item.sceneBoundingRect()
    return view.mapFromScene(r.center() + QPointF(dx, dy))


def test_a_drag_starts_past_the_drag_distance_only(shown, drags):
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QApplication
    view = shown
    d = QApplication.startDragDistance()
    p = _at(view, view.cell_item(4))
    selected = []
    view.cpu_selected.connect(selected.append)
    _mouse(view, "press", p)
    _mouse(view, "move", p + QPoint(d - 1, 0))
    assert drags == []
    _mouse(view, "move", p + QPoint(d, 0))
    assert drags == [(4,)]
    # A real drag's event loop eats the button release: the cell that grabbed the mouse on press must
    # have let go, or it would take the next click.
    assert selected == [] and view.scene().mouseGrabberItem() is None
    qtbot_click(view, _at(view, view.cell_item(6)))
    assert selected == [6] and view.selected_cpus() == [6] and len(drags) == 1


def qtbot_click(view, pos):
    _mouse(view, "press", pos)
    _mouse(view, "release", pos)


def test_drag_from_a_selected_cell_a_header_and_shift_for_the_core(shown, drags):
    from PySide6.QtCore import QPoint
    view = shown
    far = QPoint(30, 20)
    view.select_cpus([0, 56, 2])
    p = _at(view, view.cell_item(56))
    _mouse(view, "press", p)
    assert view.selected_cpus() == [0, 2, 56]          # pressing a selected cell keeps the selection
    _mouse(view, "move", p + far)
    _mouse(view, "release", p + far)
    assert drags[-1] == (0, 2, 56)
    # Shift: the cell's core
    p = _at(view, view.cell_item(7))
    _mouse(view, "press", p, modifiers=Qt.KeyboardModifier.ShiftModifier)
    _mouse(view, "move", p + far, modifiers=Qt.KeyboardModifier.ShiftModifier)
    _mouse(view, "release", p + far)
    assert drags[-1] == (7, 63)
    # the package's header band: the package's CPUs; its label line is above the first child
    pkg = view.group_item("package", 1)
    r = pkg.sceneBoundingRect()
    from PySide6.QtCore import QPointF
    head = view.mapFromScene(QPointF(r.left() + 30, r.top() + 6))
    assert view.gestures.drag_source_at(head) is pkg
    _mouse(view, "press", head)
    _mouse(view, "move", head + far)
    _mouse(view, "release", head + far)
    assert drags[-1] == tuple(sorted(_topology("master.internal").packages[1].cpus))
    # a click on the header (no move) clears the selection, as a click on empty space does
    view.select_cpus([3])
    qtbot_click(view, head)
    assert view.selected_cpus() == [] and len(drags) == 3


def test_rubber_band_and_pan_start_no_drag(shown, drags):
    from PySide6.QtCore import QPoint, QPointF
    view = shown
    # a point in package 0's body, below its header and outside every core: rubber band
    pkg = view.group_item("package", 0)
    r = pkg.sceneBoundingRect()
    body = None
    for fy in (0.999, 0.995, 0.99):
        for fx in (0.999, 0.995, 0.99, 0.5):
            pt = view.mapFromScene(QPointF(r.left() + r.width() * fx, r.top() + r.height() * fy))
            top = next((it for it in view.items(pt)), None)
            if top is pkg:
                body = pt
                break
        if body is not None:
            break
    assert body is not None and view.gestures.drag_source_at(body) is None
    end = _at(view, view.cell_item(0))
    _mouse(view, "press", body)
    _mouse(view, "move", (body + end) / 2)
    _mouse(view, "move", end)
    _mouse(view, "release", end)
    assert drags == []
    assert 0 in view.selected_cpus() and len(view.selected_cpus()) > 1      # the band selected cells
    # middle-button pan from a cell: the view scrolls, nothing is dragged
    view.zoom_by(3.0)
    p = _at(view, view.cell_item(4))
    h0, v0 = view.horizontalScrollBar().value(), view.verticalScrollBar().value()
    _mouse(view, "press", p, button=Qt.MouseButton.MiddleButton)
    _mouse(view, "move", p + QPoint(-40, -30), button=Qt.MouseButton.MiddleButton)
    _mouse(view, "release", p + QPoint(-40, -30), button=Qt.MouseButton.MiddleButton)
    assert drags == []
    assert (view.horizontalScrollBar().value(), view.verticalScrollBar().value()) != (h0, v0)


def test_the_grid_refuses_its_own_cpu_drag(shown):
    """A CPU drag hovering the grid is not a pin: the pin drop target says no (no highlight, no hint)."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QDragEnterEvent
    from PySide6.QtWidgets import QApplication
    view = shown
    mime = view.gestures.cpu_mime_for(view.cell_item(3))
    pos = _at(view, view.cell_item(5))
    enter = QDragEnterEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(view.viewport(), enter)
    assert not enter.isAccepted() and view.pin_drops.last_hint == ""


def test_a_hybrid_cores_kind_strip_drags_the_core(view):
    from PySide6.QtCore import QPointF
    topo = _topology("20em64t-hybrid-1p6c2t+2ca4co1t")
    view.set_topology(topo)
    core = next(c for c in topo.cores if c.kind == "P" and len(c.cpus) == 2)
    box = view.core_item(core.index)
    strip = view.mapFromScene(box.mapToScene(QPointF(6.0, box.rect.height() / 2)))
    assert view.gestures.drag_source_at(strip) is box
    assert _payload(view.gestures.cpu_mime_for(view.gestures.drag_source_at(strip))) == tuple(sorted(core.cpus))
    # on one of its cells: the cell; Shift makes it the core
    cell = view.cell_item(core.cpus[0])
    on_cell = view.mapFromScene(cell.sceneBoundingRect().center())
    assert view.gestures.drag_source_at(on_cell) is cell
    assert view.gestures.drag_source_at(on_cell, Qt.KeyboardModifier.ShiftModifier) is box
