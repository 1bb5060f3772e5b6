"""CpuGestures: the grid's mouse and keys, apart from what it shows (TopologyView, view.py, which holds
one and hands it its mouse, wheel, key and context-menu events).

Gestures (left button unless said otherwise; issue 5, "drag a CPU cell onto the probe panel"):
- click a cell: select it and emit cpu_selected; Ctrl+click toggles it in the selection.
- drag from a cell: a CPU drag (widgets/topology/drag.py) carrying that CPU, or the whole selection
  when the cell is one of several selected cells; Shift+drag from a cell carries its core's CPUs.
- drag from a box's header band (the "package 0" / "node 1" / "L3 2" label line) or from a core box's
  frame around its cells (the P/E strip of a hybrid core): a CPU drag carrying the box's CPUs.
- drag from anywhere else (a box's body between its children, the margin): rubber-band selection;
  middle-drag pans; Ctrl+wheel, +, - and 0 zoom (TopologyView.zoom_by, zoom_fit).
- right-click a cell (or a box's header or frame) or press the Menu key: cpu_menu_requested(CPUs, where)
  for the context menu (widgets/topology/cpu_menu.py). As in a file manager, a right-click on a CPU that
  is not selected selects it (its box's CPUs on a header or frame; Ctrl adds them to the selection); on
  a selected one it keeps the selection. It never clears the selection (issue 28: it did, and Make
  quiet… then said "select CPUs in the grid first").
A drag starts only once the press has moved QApplication.startDragDistance(); offline CPUs are never
in a payload (a box or cell with no online CPU starts no drag).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsView

from widgets.topology.drag import DragSource, cpu_mime_data, drag_cpus, drag_label, exec_cpu_drag
from widgets.topology.items import CoreBoxItem, CpuCellItem, GroupBoxItem
from widgets.topology.layout import HEADER_H


class CpuGestures:
    """The gestures of the module docstring on `view`, a TopologyView whose cells (CPU id -> CpuCellItem
    in CoreBoxItem in GroupBoxItem) `cells()` returns. Each event handler returns whether it took the
    event; the view passes what it did not take to QGraphicsView (the scene: a cell selects itself, a
    press on empty space rubber-bands)."""

    def __init__(self, view: QGraphicsView, cells: Callable[[], Mapping[int, CpuCellItem]]):
        self._view = view
        self._cells = cells
        self._pan_from = None
        self._press_pos = None
        self._drag_from: tuple[QPointF, QGraphicsItem] | None = None   # press point, drag source
        self._press_swallowed = False     # the press was on a box handle and never reached the scene

    # -- zoom: the view's (TopologyView.zoom_by, zoom_fit) ---------------------------------------------
    def wheel(self, event) -> bool:
        if not event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            return False
        dy = event.angleDelta().y()
        if dy:
            self._view.zoom_by(1.15 if dy > 0 else 1 / 1.15)
        event.accept()
        return True

    def key(self, event) -> bool:
        k = event.key()
        if k in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self._view.zoom_by(1.25)
        elif k == Qt.Key.Key_Minus:
            self._view.zoom_by(1 / 1.25)
        elif k == Qt.Key.Key_0:
            self._view.zoom_fit()
        else:
            return False
        return True

    # -- mouse: click, select, pan, and the start of a CPU drag --------------------------------------------
    def press(self, event) -> bool:
        view = self._view
        if event.button() == Qt.MouseButton.RightButton:
            # Never to the scene: an item ignores a right press and the scene then clears the selection.
            # The menu opens on the press, as on every Linux desktop (Qt's context menu trigger there).
            event.accept()
            cpus = self.select_for_menu(event.position().toPoint(), event.modifiers())
            if cpus:
                view.cpu_menu_requested.emit(cpus, event.globalPosition().toPoint())
            return True
        if event.button() == Qt.MouseButton.MiddleButton:
            self._pan_from = event.position()
            view.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return True
        self._press_pos = event.position()
        self._drag_from = None
        self._press_swallowed = False
        if event.button() == Qt.MouseButton.LeftButton and self._pan_from is None:
            source = self.drag_source_at(event.position().toPoint(), event.modifiers())
            if source is not None:
                self._drag_from = (event.position(), source)
                if self.cell_at(event.position().toPoint()) is None:
                    # A box's header or frame: the press is ours, so QGraphicsView starts no rubber band.
                    self._press_swallowed = True
                    event.accept()
                    return True
        # On a cell the scene still gets the press: the cell selects itself as before (and keeps a
        # multi-selection it belongs to, so the drag can carry all of it).
        return False

    def move(self, event) -> bool:
        if self._pan_from is not None:
            d = event.position() - self._pan_from
            self._pan_from = event.position()
            bars = (self._view.horizontalScrollBar(), self._view.verticalScrollBar())
            bars[0].setValue(bars[0].value() - int(d.x()))
            bars[1].setValue(bars[1].value() - int(d.y()))
            event.accept()
            return True
        if self._drag_from is not None and event.buttons() & Qt.MouseButton.LeftButton:
            start, source = self._drag_from
            if (event.position() - start).manhattanLength() >= QApplication.startDragDistance():
                self._drag_from = None
                self._press_swallowed = False
                self._press_pos = None           # not a click: no cpu_selected on release
                self._start_cpu_drag(source)
                event.accept()
                return True
            if self._press_swallowed:
                event.accept()                   # a box handle: the scene never saw the press
                return True
        return False

    def release(self, event) -> bool:
        """The release before the scene sees it; `clicked` after, when this returned False."""
        if event.button() == Qt.MouseButton.RightButton:
            event.accept()
            return True
        if event.button() == Qt.MouseButton.MiddleButton and self._pan_from is not None:
            self._pan_from = None
            self._view.viewport().unsetCursor()
            event.accept()
            return True
        swallowed, self._press_swallowed = self._press_swallowed, False
        self._drag_from = None
        if event.button() == Qt.MouseButton.LeftButton and swallowed:
            # A click on a box header or frame: what a click on empty space did before those were
            # drag handles (a zero-size rubber band) - clear the selection, unless Ctrl extends it.
            self._press_pos = None
            if not event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                self._view.scene().clearSelection()
            event.accept()
            return True
        return False

    def clicked(self, event) -> None:
        """After the scene saw the release: a left press that barely moved selects its online cell."""
        if event.button() == Qt.MouseButton.LeftButton and self._press_pos is not None:
            moved = (event.position() - self._press_pos).manhattanLength()
            self._press_pos = None
            if moved < 4:
                cell = self.cell_at(event.position().toPoint())
                if cell is not None and cell.online:
                    self._view.cpu_selected.emit(cell.cpu_id)

    # -- the context menu: what it acts on (the menu itself: widgets/topology/cpu_menu.py) ------------------
    def select_for_menu(self, pos: QPoint, modifiers=Qt.KeyboardModifier.NoModifier) -> list[int]:
        """Select what a right-click at viewport point `pos` acts on (module docstring); the CPUs
        selected after. A click where no online CPU is (the margin, an offline cell) changes nothing."""
        view = self._view
        source = self.drag_source_at(pos)
        cpus = self._drag_cpus_for(source) if source is not None else ()
        selected = view.selected_cpus()
        if cpus and not set(cpus) <= set(selected):
            extend = bool(modifiers & Qt.KeyboardModifier.ControlModifier)
            view.select_cpus(sorted(set(cpus) | (set(selected) if extend else set())))
        return view.selected_cpus()

    def context_menu(self, event) -> None:
        event.accept()
        if event.reason() == event.Reason.Mouse:
            return                      # the right press opened it (press)
        # The Menu key (or Shift+F10): the selection's menu, under its first cell.
        view = self._view
        cpus = view.selected_cpus()
        if cpus:
            cell = self._cells()[cpus[0]]
            where = view.viewport().mapToGlobal(view.mapFromScene(cell.sceneBoundingRect().center()))
            view.cpu_menu_requested.emit(cpus, where)

    def cell_at(self, pos: QPoint) -> CpuCellItem | None:
        """The cell at viewport point `pos`, or None."""
        for it in self._view.items(pos):
            if isinstance(it, CpuCellItem):
                return it
        return None

    # -- CPU drags (to the probe panel): gestures in the module docstring, payload in drag.py -------------
    def drag_source_at(self, pos: QPoint, modifiers=Qt.KeyboardModifier.NoModifier) -> QGraphicsItem | None:
        """The item a left-button drag from viewport point `pos` would carry, or None (then the press
        rubber-bands): an online cell (its core's box with Shift), a core box's frame, a group box's
        header band. Only sources with an online CPU count."""
        source = None
        for it in self._view.items(pos):
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
                if it.framed and it.mapFromScene(self._view.mapToScene(pos)).y() - it.rect.y() <= HEADER_H:
                    source = it
                break
        return source if source is not None and self._drag_cpus_for(source) else None

    def _drag_cpus_for(self, source: DragSource) -> tuple[int, ...]:
        """The online CPUs a drag of `source` carries (drag.drag_cpus)."""
        return drag_cpus(source, self._cells(), self._view.selected_cpus)

    def drag_label_for(self, source: DragSource) -> str:
        """What the drag pixmap says (drag.drag_label); "" when the drag would carry no CPU."""
        return drag_label(source, self._drag_cpus_for(source))

    def cpu_mime_for(self, source: DragSource) -> QMimeData | None:
        """The drag's MIME data, or None when it would carry no online CPU."""
        return cpu_mime_data(self._drag_cpus_for(source))

    def _start_cpu_drag(self, source: DragSource) -> Qt.DropAction:
        """Drag the CPUs of `source` (blocks in QDrag.exec until the drop or Escape)."""
        cpus = self._drag_cpus_for(source)
        if not cpus:
            return Qt.DropAction.IgnoreAction
        action = exec_cpu_drag(self._view, cpus, drag_label(source, cpus))
        # The drag's own event loop ate the button release: let go of the cell that grabbed the mouse
        # on press, or it would take the next click.
        grabber = self._view.scene().mouseGrabberItem()
        if grabber is not None:
            grabber.ungrabMouse()
        return action
