"""TopologyView: the machine as nested boxes (node -> package -> die / L3 -> core -> hardware thread),
each hardware-thread cell coloured by one metric.

The scene is built once per topology from `app.machine.topology.layout()` (boxes placed by
widgets/topology/layout.py); a tick only recolours the cells whose colour or figure changed
(`set_state`).

Mouse and keys (click, select, CPU drags, pan, zoom) are its `gestures`' (CpuGestures,
widgets/topology/gestures.py). Drops on the grid go to `pin_drops` (widgets/topology/drop.py), judged
by the drop policy given with `set_drop_policy`; the grid refuses its own CPU drags.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QPoint, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QToolTip, QWidget

from app.machine.topology import Topology, layout
from app.sampling.machine_state import MachineState
from widgets.colors import ColorScale, Metric, MetricValues, format_value, metric_values, parse_metric, scale_for
from widgets.topology.drop import DropPolicy, GridDropTarget
from widgets.topology.gestures import CpuGestures
from widgets.topology.items import (
    CoreBoxItem,
    CpuCellItem,
    GridItems,
    GroupBoxItem,
    build_items,
    header_width,
    mark_managed_irqs,
    place_items,
)
from widgets.topology.layout import LayoutNode, arrange, cpu_map, tree_from_group
from widgets.topology.legend import ColorLegend
from widgets.topology.probe_heat import ProbeHeat
from widgets.topology.tooltip import cpu_tooltip

_SCENE_MARGIN = 8.0
_MAX_FIT_SCALE = 2.0             # zoom_fit never magnifies more than this


class TopologyView(QGraphicsView):
    """The machine's CPUs as nested boxes, coloured by one metric (module docstring). `legend` is the
    ColorLegend the owner places under the view; `pin_drops` handles drops, `gestures` mouse and keys."""

    cpu_selected = Signal(int)
    cpu_menu_requested = Signal(list, QPoint)     # the CPUs the context menu acts on, global position
    selection_changed = Signal(list)
    metric_changed = Signal(str)
    pin_requested = Signal(object)    # app.pinning.service.PinRequest of a drop the drop policy accepted
    drop_hint = Signal(str)           # while dragging: what a drop here does, or why not; "" after

    def __init__(self, parent: QWidget | None = None, *, metric: Metric | str | None = None):
        super().__init__(parent)
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.ItemSelectionMode.IntersectsItemShape)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        self.setBackgroundBrush(QColor(252, 252, 252))
        self.legend = ColorLegend()
        self.color_metric: Metric = metric if isinstance(metric, Metric) else parse_metric(metric)
        self._cells: dict[int, CpuCellItem] = {}
        self._fitted = False              # the view shows the whole grid (kept so on resize)
        self._topology: Topology | None = None
        self._state: MachineState | None = None
        self._quiet: frozenset[int] = frozenset()
        self._partial: frozenset[int] = frozenset()
        self._compared: dict[int, str] = {}                  # set_compared
        self.refused_managed: frozenset[int] = frozenset()   # set_refused_managed
        self._cores: list[CoreBoxItem] = []
        self._groups: dict[tuple[str, object], GroupBoxItem] = {}
        self._root: LayoutNode | None = None
        self._items: GridItems | None = None
        self._scale: ColorScale | None = None
        self._fixed_scale: ColorScale | None = None
        self._values: MetricValues | None = None
        self._layout_aspect = 0.0
        self.scene().selectionChanged.connect(self._on_scene_selection_changed)
        self.setAcceptDrops(True)
        self.pin_drops = GridDropTarget(self)
        self.pin_drops.hint_changed.connect(self.drop_hint)
        self.probe_heat = ProbeHeat(lambda: self._cells, self.legend)    # the last jitter/wakeup run's heat
        self.gestures = CpuGestures(self, lambda: self._cells)

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

    @property
    def color_scale(self) -> ColorScale | None:
        return self._scale

    # -- model in -----------------------------------------------------------------------------------------
    def set_quiet_cpus(self, cpus, partial=()) -> None:
        """Mark the CPUs an isolate in effect made quiet (kept across a rebuilt scene); `partial`: those
        of an isolate a crash cut short, badged "partial" until it is finished or rolled back."""
        self._quiet, self._partial = frozenset(cpus), frozenset(partial)
        for cpu, cell in self._cells.items():
            cell.set_quiet(cpu in self._quiet, cpu in self._partial)

    @property
    def quiet_cpus(self) -> tuple[int, ...]:
        return tuple(sorted(self._quiet))

    def set_compared(self, marks: dict[int, str]) -> None:
        """Mark the CPUs whose IRQ load or placement differs on a compared machine (CPU -> how, from
        app/store/diff.py); {} clears the marks. Kept across a rebuilt scene."""
        self._compared = dict(marks)
        for cpu, cell in self._cells.items():
            cell.set_compared(self._compared.get(cpu, ""))
        self.legend.set_compared(bool(self.compared_cpus))

    @property
    def compared_cpus(self) -> tuple[int, ...]:
        return tuple(sorted(c for c, cell in self._cells.items() if cell.compared_tip))

    def set_refused_managed(self, irqs) -> None:
        """IRQs a Make quiet could not move, the kernel managing them: marked on the quiet cells they are
        still delivered on where debugfs cannot say which IRQs are managed. Shown from the next state on."""
        self.refused_managed = frozenset(irqs)

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
        self.probe_heat.reattach()
        self._relayout(force=True)
        self._fitted = False
        if self.isVisible():
            self.zoom_fit()

    def set_state(self, state: MachineState) -> None:
        if state.topology is not self._topology:
            self.set_topology(state.topology)
        self._state = state
        self._recolor(state)
        mark_managed_irqs(self._cells, state, self.refused_managed)

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
        self._items = build_items(self._root, cpu_map(self._topology))
        self._cells, self._cores, self._groups = self._items.cells, self._items.cores, self._items.groups
        for cpu, cell in self._cells.items():
            cell.quiet, cell.partial = cpu in self._quiet, cpu in self._partial
            cell.compared_tip = self._compared.get(cpu, "")
        sc.addItem(self._items.top)

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
        place_items(self._root, self._items, hybrid)
        m = _SCENE_MARGIN
        self.scene().setSceneRect(QRectF(-m, -m, self._root.w + 2 * m, self._root.h + 2 * m))

    # -- selection and zoom -------------------------------------------------------------------------------
    def selected_cpus(self) -> list[int]:
        return sorted(it.cpu_id for it in self.scene().selectedItems() if isinstance(it, CpuCellItem))

    def select_cpus(self, cpus) -> None:
        """Select exactly these (online) CPUs' cells; the scene's selectionChanged comes once, after."""
        want = set(cpus)
        self.scene().blockSignals(True)
        try:
            for cpu, it in self._cells.items():
                it.setSelected(cpu in want and it.online)
        finally:
            self.scene().blockSignals(False)
        self.scene().selectionChanged.emit()

    def zoom_fit(self) -> None:
        r = self.scene().sceneRect()
        if r.isEmpty():
            return
        self.fitInView(r, Qt.AspectRatioMode.KeepAspectRatio)
        # A laptop's 8 CPUs would otherwise fill the screen with 40-pixel digits.
        if self.transform().m11() > _MAX_FIT_SCALE:
            self.resetTransform()
            self.scale(_MAX_FIT_SCALE, _MAX_FIT_SCALE)
            self.centerOn(r.center())
        self._fitted = True

    def zoom_by(self, factor: float) -> None:
        s = self.transform().m11() * factor
        if not (0.05 <= s <= 8.0):
            return
        self.scale(factor, factor)
        self._fitted = False

    # -- fitted to the viewport while it shows the whole grid ---------------------------------------------
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

    def _on_scene_selection_changed(self) -> None:
        self.selection_changed.emit(self.selected_cpus())

    # -- mouse and keys: what the gestures do not take goes on to the scene --------------------------------
    def mousePressEvent(self, event) -> None:
        if not self.gestures.press(event):
            super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:
        if not self.gestures.move(event):
            super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        if not self.gestures.release(event):
            super().mouseReleaseEvent(event)
            self.gestures.clicked(event)

    def wheelEvent(self, event) -> None:
        if not self.gestures.wheel(event):
            super().wheelEvent(event)

    def keyPressEvent(self, event) -> None:
        if not self.gestures.key(event):
            super().keyPressEvent(event)

    def contextMenuEvent(self, event) -> None:
        self.gestures.context_menu(event)

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

    # -- tooltips: composed on demand from the newest state (figures change every tick) ----------------
    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            cell = self.gestures.cell_at(event.pos())
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
        heat = self.probe_heat.tooltip(cpu_id)
        return cpu_tooltip(cpu_id, self._topology, self._state, self._values, self._cells.get(cpu_id)) + \
            (f"<br>{heat}" if heat else "")
