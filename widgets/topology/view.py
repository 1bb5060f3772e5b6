"""TopologyView: the machine as nested boxes (node -> package -> die / L3 -> core -> hardware thread),
each hardware-thread cell coloured by one metric.

The scene is built once per topology from `app.machine.topology.layout()` (boxes placed by
widgets/topology/layout.py); a tick only recolours the cells whose colour or figure changed
(`set_state`).

Mouse gestures (left button unless said otherwise; issue 5, "drag a CPU cell onto the probe panel"):
- click a cell: select it and emit cpu_selected; Ctrl+click toggles it in the selection.
- drag from a cell: a CPU drag (widgets/topology/drag.py) carrying that CPU, or the whole selection
  when the cell is one of several selected cells; Shift+drag from a cell carries its core's CPUs.
- drag from a box's header band (the "package 0" / "node 1" / "L3 2" label line) or from a core box's
  frame around its cells (the P/E strip of a hybrid core): a CPU drag carrying the box's CPUs.
- drag from anywhere else (a box's body between its children, the margin): rubber-band selection, as
  before; middle-drag pans; Ctrl+wheel, +, - and 0 zoom.
A drag starts only once the press has moved QApplication.startDragDistance(); offline CPUs are never
in a payload (a box or cell with no online CPU starts no drag). Drops on the grid go to `pin_drops`
(widgets/topology/drop.py), judged by the drop policy given with `set_drop_policy`; the grid refuses
its own CPU drags.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QMimeData, QPoint, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsScene, QGraphicsView, QToolTip, QWidget

from app.machine.topology import Topology, layout
from app.sampling.machine_state import MachineState
from widgets.colors import ColorScale, Metric, MetricValues, format_value, metric_values, parse_metric, scale_for
from widgets.topology.drag import DragSource, cpu_mime_data, drag_cpus, drag_label, exec_cpu_drag
from widgets.topology.drop import DropPolicy, GridDropTarget
from widgets.topology.items import CoreBoxItem, CpuCellItem, GroupBoxItem, header_width
from widgets.topology.layout import HEADER_H, LayoutNode, arrange, cell_offset, cpu_map, tree_from_group
from widgets.topology.legend import ColorLegend
from widgets.topology.tooltip import cpu_tooltip

MAX_FIT_SCALE = 2.0             # zoom_fit never magnifies more than this
SCENE_MARGIN = 8.0


class TopologyView(QGraphicsView):
    """The machine's CPUs as nested boxes, coloured by one metric. See the module docstring.

    `legend` is the ColorLegend the owner places under the view; `pin_drops` handles drops.
    """

    cpu_selected = Signal(int)
    selection_changed = Signal(list)
    metric_changed = Signal(str)
    pin_requested = Signal(object)    # app.pinning.service.PinRequest of a drop the drop policy accepted
    drop_hint = Signal(str)           # while dragging: what a drop here does, or why not; "" after

    def __init__(self, parent: QWidget | None = None, *, metric: Metric | str | None = None):
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.ItemSelectionMode.IntersectsItemShape)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setBackgroundBrush(QColor(252, 252, 252))
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.legend = ColorLegend()
        self.color_metric: Metric = metric if isinstance(metric, Metric) else parse_metric(metric)
        self._topology: Topology | None = None
        self._state: MachineState | None = None
        self._cells: dict[int, CpuCellItem] = {}
        self._quiet: frozenset[int] = frozenset()
        self._cores: list[CoreBoxItem] = []
        self._groups: dict[tuple[str, object], GroupBoxItem] = {}
        self._root: LayoutNode | None = None
        self._items_by_node: dict[int, QGraphicsItem] = {}
        self._scale: ColorScale | None = None
        self._fixed_scale: ColorScale | None = None
        self._values: MetricValues | None = None
        self._fitted = False
        self._layout_aspect = 0.0
        self._pan_from = None
        self._press_pos = None
        self._drag_from: tuple[QPointF, QGraphicsItem] | None = None   # press point, drag source
        self._press_swallowed = False     # the press was on a box handle and never reached the scene
        self.scene().selectionChanged.connect(self._on_scene_selection_changed)
        self.setAcceptDrops(True)
        self.pin_drops = GridDropTarget(self)
        self.pin_drops.hint_changed.connect(self.drop_hint)

    def set_drop_policy(self, policy: DropPolicy | None) -> None:
        """Who judges what is dragged over the grid (None: every drag is refused)."""
        self.pin_drops.set_policy(policy)

    # -- accessors (drop targets are found among these items) ---------------------------------------
    def cell_item(self, cpu: int) -> CpuCellItem | None:
        return self._cells.get(cpu)

    def core_item(self, core_index: int) -> CoreBoxItem | None:
        return self._cores[core_index] if 0 <= core_index < len(self._cores) else None

    def group_item(self, kind: str, gid) -> GroupBoxItem | None:
        return self._groups.get((kind, gid))

    def cells(self) -> dict[int, CpuCellItem]:
        return dict(self._cells)

    def core_items(self) -> list[CoreBoxItem]:
        return list(self._cores)

    def selected_cpus(self) -> list[int]:
        return sorted(it.cpu_id for it in self.scene().selectedItems() if isinstance(it, CpuCellItem))

    def select_cpus(self, cpus) -> None:
        want = set(cpus)
        self.scene().blockSignals(True)
        try:
            for cpu, it in self._cells.items():
                it.setSelected(cpu in want and it.online)
        finally:
            self.scene().blockSignals(False)
        self._on_scene_selection_changed()

    @property
    def color_scale(self) -> ColorScale | None:
        return self._scale

    # -- model in -----------------------------------------------------------------------------------------
    def set_quiet_cpus(self, cpus) -> None:
        """Mark the CPUs an isolate in effect made quiet (kept across a rebuilt scene)."""
        self._quiet = frozenset(cpus)
        for cpu, cell in self._cells.items():
            cell.set_quiet(cpu in self._quiet)

    @property
    def quiet_cpus(self) -> tuple[int, ...]:
        return tuple(sorted(self._quiet))

    def set_metric(self, metric: Metric | str) -> None:
        m = metric if isinstance(metric, Metric) else parse_metric(metric)
        if m == self.color_metric:
            return
        self.color_metric = m
        self._scale = None
        if self._state is not None:
            self._recolor(self._state)
        self.metric_changed.emit(m.key)

    def fix_scale(self, scale: ColorScale | None) -> None:
        """Colour by `scale` whatever this state's values (small multiples share one, so a colour means
        the same in each: widgets/fleet/); None: the view's own scale again."""
        self._fixed_scale = scale
        if self._state is not None:
            self._recolor(self._state)

    def set_topology(self, topology: Topology) -> None:
        """Build the scene for `topology` (once; ticks only recolour)."""
        self._topology = topology
        self._root = tree_from_group(layout(topology), topology)
        self._build_items()
        self._relayout(force=True)
        self._fitted = False
        if self.isVisible():
            self.zoom_fit()

    def set_state(self, state: MachineState) -> None:
        if state.topology is not self._topology:
            self.set_topology(state.topology)
        self._state = state
        self._recolor(state)

    def _recolor(self, state: MachineState) -> int:
        """Recolour cells from `state`; returns how many cells changed."""
        vals = metric_values(state, self.color_metric)
        self._values = vals
        scale = self._fixed_scale or (scale_for(vals.values, self.color_metric, vals.totals, self._scale)
                                      if vals.values else None)
        self._scale = scale
        changed = 0
        get = vals.values.get
        for cpu, cell in self._cells.items():
            v = get(cpu)
            if v is None or not cell.online:
                changed += cell.recolor(None, "")
                continue
            changed += cell.recolor(scale.index(v), format_value(v, vals.unit))
        if vals.empty_reason:
            note = vals.empty_reason
        elif vals.totals:
            note = "totals since boot, not rates (one capture)"
        else:
            note = ""
        self.legend.set_scale(vals.label, scale, vals.unit, note, self._hybrid())
        return changed

    def _hybrid(self) -> bool:
        return any(c.kind for c in self._cores)

    # -- scene construction -------------------------------------------------------------------------------
    def _build_items(self) -> None:
        sc = self.scene()
        sc.blockSignals(True)
        sc.clear()
        sc.blockSignals(False)
        self._cells, self._cores, self._groups, self._items_by_node = {}, [], {}, {}
        cpus = cpu_map(self._topology)

        def build(n: LayoutNode, parent_item):
            if n.kind == "core":
                item = CoreBoxItem(n.core_index, n.cpus, n.core_kind, n.label, parent_item)
                if n.core_index >= 0:
                    while len(self._cores) <= n.core_index:
                        self._cores.append(None)
                    self._cores[n.core_index] = item
                for cpu in n.threads:
                    self._cells[cpu] = CpuCellItem(cpu, cpus.get(cpu), item)
                    self._cells[cpu].quiet = cpu in self._quiet
            else:
                item = GroupBoxItem(n.kind, n.gid, n.label, n.cpus, parent_item)
                self._groups.setdefault((n.kind, n.gid), item)
                for alias in n.aliases:
                    self._groups.setdefault(alias, item)
                for c in n.children:
                    build(c, item)
            self._items_by_node[id(n)] = item
            if parent_item is None:
                sc.addItem(item)
        build(self._root, None)

    def _relayout(self, force: bool = False) -> None:
        """Place every box for the viewport's current aspect; items move, none is rebuilt."""
        if self._root is None:
            return
        vw, vh = max(200, self.viewport().width()), max(150, self.viewport().height())
        aspect = vw / vh
        if not force and abs(math.log(aspect / self._layout_aspect)) < 0.15:
            return
        self._layout_aspect = aspect
        hybrid = self._hybrid()
        arrange(self._root, vw, vh, hybrid, header_width)

        def apply(n: LayoutNode, x: float, y: float):
            item = self._items_by_node[id(n)]
            item.setPos(x, y)
            item.set_rect(QRectF(0, 0, n.w, n.h))
            if n.kind == "core":
                for i, cpu in enumerate(n.threads):
                    self._cells[cpu].setPos(*cell_offset(i, hybrid))
                return
            for c, (cx, cy) in zip(n.children, n.positions):
                apply(c, cx, cy)
        apply(self._root, 0.0, 0.0)
        m = SCENE_MARGIN
        self.scene().setSceneRect(QRectF(-m, -m, self._root.w + 2 * m, self._root.h + 2 * m))

    # -- zoom and pan -----------------------------------------------------------------------------------
    def zoom_fit(self) -> None:
        r = self.scene().sceneRect()
        if r.isEmpty():
            return
        self.fitInView(r, Qt.AspectRatioMode.KeepAspectRatio)
        # A laptop's 8 CPUs would otherwise fill the screen with 40-pixel digits.
        if self.transform().m11() > MAX_FIT_SCALE:
            self.resetTransform()
            self.scale(MAX_FIT_SCALE, MAX_FIT_SCALE)
            self.centerOn(r.center())
        self._fitted = True

    def zoom_by(self, factor: float) -> None:
        s = self.transform().m11() * factor
        if not (0.05 <= s <= 8.0):
            return
        self.scale(factor, factor)
        self._fitted = False

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._fitted:
            self._relayout()
            self.zoom_fit()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._fitted or not self.isVisible():
            self._relayout()
            self.zoom_fit()

    def wheelEvent(self, event) -> None:
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            dy = event.angleDelta().y()
            if dy:
                self.zoom_by(1.15 if dy > 0 else 1 / 1.15)
            event.accept()
            return
        super().wheelEvent(event)

    def keyPressEvent(self, event) -> None:
        k = event.key()
        if k in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_by(1.25)
        elif k == Qt.Key.Key_Minus:
            self.zoom_by(1 / 1.25)
        elif k == Qt.Key.Key_0:
            self.zoom_fit()
        else:
            super().keyPressEvent(event)

    # -- mouse: click, select, pan, and the start of a CPU drag --------------------------------------------
    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.MiddleButton:
            self._pan_from = event.position()
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return
        self._press_pos = event.position()
        self._drag_from = None
        self._press_swallowed = False
        if event.button() == Qt.MouseButton.LeftButton and self._pan_from is None:
            source = self.drag_source_at(event.position().toPoint(), event.modifiers())
            if source is not None:
                self._drag_from = (event.position(), source)
                if self._cell_at(event.position().toPoint()) is None:
                    # A box's header or frame: the press is ours, so QGraphicsView starts no rubber band.
                    self._press_swallowed = True
                    event.accept()
                    return
        # On a cell the scene still gets the press: the cell selects itself as before (and keeps a
        # multi-selection it belongs to, so the drag can carry all of it).
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:
        if self._pan_from is not None:
            d = event.position() - self._pan_from
            self._pan_from = event.position()
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - int(d.x()))
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - int(d.y()))
            event.accept()
            return
        if self._drag_from is not None and event.buttons() & Qt.MouseButton.LeftButton:
            start, source = self._drag_from
            if self.drag_distance_reached(start, event.position()):
                self._drag_from = None
                self._press_swallowed = False
                self._press_pos = None           # not a click: no cpu_selected on release
                self.start_cpu_drag(source)
                event.accept()
                return
            if self._press_swallowed:
                event.accept()                   # a box handle: the scene never saw the press
                return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.MiddleButton and self._pan_from is not None:
            self._pan_from = None
            self.viewport().unsetCursor()
            event.accept()
            return
        swallowed, self._press_swallowed = self._press_swallowed, False
        self._drag_from = None
        if event.button() == Qt.MouseButton.LeftButton and swallowed:
            # A click on a box header or frame: what a click on empty space did before those were
            # drag handles (a zero-size rubber band) - clear the selection, unless Ctrl extends it.
            self._press_pos = None
            if not event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                self.scene().clearSelection()
            event.accept()
            return
        super().mouseReleaseEvent(event)
        if event.button() == Qt.MouseButton.LeftButton and self._press_pos is not None:
            moved = (event.position() - self._press_pos).manhattanLength()
            self._press_pos = None
            if moved < 4:
                cell = self._cell_at(event.position().toPoint())
                if cell is not None and cell.online:
                    self.cpu_selected.emit(cell.cpu_id)

    def _cell_at(self, pos: QPoint) -> CpuCellItem | None:
        for it in self.items(pos):
            if isinstance(it, CpuCellItem):
                return it
        return None

    def _on_scene_selection_changed(self) -> None:
        self.selection_changed.emit(self.selected_cpus())

    # -- drops (pins): widgets/topology/drop.py -----------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        self.pin_drops.drag_enter(event)

    def dragMoveEvent(self, event) -> None:
        self.pin_drops.drag_move(event)

    def dragLeaveEvent(self, event) -> None:
        self.pin_drops.drag_leave(event)

    def dropEvent(self, event) -> None:
        request = self.pin_drops.drop(event)
        if request is not None:
            self.pin_requested.emit(request)

    # -- CPU drags (to the probe panel): gestures in the module docstring, payload in drag.py -------------
    def drag_source_at(self, pos: QPoint, modifiers=Qt.KeyboardModifier.NoModifier) -> QGraphicsItem | None:
        """The item a left-button drag from viewport point `pos` would carry, or None (then the press
        rubber-bands): an online cell (its core's box with Shift), a core box's frame, a group box's
        header band. Only sources with an online CPU count."""
        source = None
        for it in self.items(pos):
            if isinstance(it, CpuCellItem):
                if not it.online:
                    return None
                core = it.parentItem()
                shift = bool(modifiers & Qt.KeyboardModifier.ShiftModifier)
                source = core if shift and isinstance(core, CoreBoxItem) else it
                break
            if isinstance(it, CoreBoxItem):
                source = it
                break
            if isinstance(it, GroupBoxItem):
                if it.framed and it.mapFromScene(self.mapToScene(pos)).y() - it.rect.y() <= HEADER_H:
                    source = it
                break
        return source if source is not None and self.drag_cpus_for(source) else None

    @staticmethod
    def drag_distance_reached(start: QPointF, now: QPointF) -> bool:
        """True once a press at `start` has moved far enough to be a drag, not a shaky click."""
        return (now - start).manhattanLength() >= QApplication.startDragDistance()

    def drag_cpus_for(self, source: DragSource) -> tuple[int, ...]:
        """The online CPUs a drag of `source` carries (drag.drag_cpus)."""
        return drag_cpus(source, self._cells, self.selected_cpus)

    def drag_label_for(self, source: DragSource) -> str:
        """What the drag pixmap says (drag.drag_label); "" when the drag would carry no CPU."""
        return drag_label(source, self.drag_cpus_for(source))

    def cpu_mime_for(self, source: DragSource) -> QMimeData | None:
        """The drag's MIME data, or None when it would carry no online CPU."""
        return cpu_mime_data(self.drag_cpus_for(source))

    def start_cpu_drag(self, source: DragSource) -> Qt.DropAction:
        """Drag the CPUs of `source` (blocks in QDrag.exec until the drop or Escape)."""
        cpus = self.drag_cpus_for(source)
        if not cpus:
            return Qt.DropAction.IgnoreAction
        action = exec_cpu_drag(self, cpus, drag_label(source, cpus))
        # The drag's own event loop ate the button release: let go of the cell that grabbed the mouse
        # on press, or it would take the next click.
        grabber = self.scene().mouseGrabberItem()
        if grabber is not None:
            grabber.ungrabMouse()
        return action

    # -- tooltips: composed on demand from the newest state (figures change every tick) ----------------
    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            cell = self._cell_at(event.pos())
            text = self.tooltip_for(cell.cpu_id) if cell is not None else ""
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)

    def tooltip_for(self, cpu_id: int) -> str:
        """Rich text: CPU identity, flags, current figures, top IRQs and threads on it."""
        return cpu_tooltip(cpu_id, self._topology, self._core_of(cpu_id), self._state, self._values)

    def _core_of(self, cpu_id: int) -> CoreBoxItem | None:
        cell = self._cells.get(cpu_id)
        parent = cell.parentItem() if cell is not None else None
        return parent if isinstance(parent, CoreBoxItem) else None
