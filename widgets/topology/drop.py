"""The grid as a drop target: what lies under the cursor, lit while dragging, with a hint beside it.

The grid does not know what a drag carries: a `DropPolicy` (the pinning side's PinDropPolicy, set
with TopologyView.set_drop_policy) reads the MIME data and judges each target; the grid finds the
target, lights it (blue: a drop here goes ahead, red: refused, with the reason) and, on a drop the
policy accepts, hands the policy's PinRequest to the view to emit as `pin_requested`. Without a
policy every drag is refused.

Targets: a CPU cell (or, when it is one of several selected cells, every selected CPU), a core box,
and the package / die / node / L3 / cluster boxes; the machine box and the offline box take nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import shiboken6
from PySide6.QtCore import QMimeData, QObject, QPoint, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QGraphicsView

from app.pinning.service import PinRequest
from app.parse.cpulist import format_cpulist
from widgets.topology.items import CoreBoxItem, CpuCellItem, GroupBoxItem

# Boxes of the grid that take a drop as "all of its CPUs" (the machine box and the offline box do not).
_DROP_GROUP_KINDS = ("package", "die", "node", "l3", "cluster")

_ACCEPT_PEN = QColor(25, 118, 210)
_ACCEPT_FILL = QColor(25, 118, 210, 45)
_REJECT_PEN = QColor(198, 40, 40)
_REJECT_FILL = QColor(198, 40, 40, 40)


@dataclass(frozen=True)
class DropTarget:
    """What a drop at one point of the grid pins to."""
    items: tuple                    # the graphics items to light up
    cpus: tuple[int, ...]           # online CPUs of the target (a lone cell: its CPU, online or not)
    what: str                       # "CPU 3", "core 1 (CPUs 1,5)", "package 0 (CPUs 0-7)"
    reason: str = ""                # why it takes nothing whatever is dropped (no online CPU)


@dataclass(frozen=True)
class DropVerdict:
    """A policy's answer for one drag over one point."""
    ours: bool                          # the drag carries what the grid takes; else the event is refused
    hint: str = ""                      # what a drop here does, or why not ("" says nothing)
    request: PinRequest | None = None   # what a drop here asks for; None when it is refused


class DropPolicy(Protocol):
    def begin(self) -> None:
        """A new drag entered the grid: forget what was judged for the last one."""

    def judge(self, mime: QMimeData, target: DropTarget | None) -> DropVerdict:
        """The verdict for a drag of `mime` over `target` (None: over empty space)."""


class HintItem(QGraphicsItem):
    """A tooltip-like label near the cursor while dragging.

    Contract: ignores the view's transformation (always readable, in device pixels); boundingRect
    covers the text box, drawn below and to the right of the item's position (the cursor) where
    `room` lets it, else flipped left or above, never under the drag chip (above and to the right of
    the cursor, widgets/topology/drag.py chip_hotspot); set_text calls prepareGeometryChange because
    the box follows the text."""

    OFFSET = 14.0
    MAX_W = 420.0

    def __init__(self):
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, True)
        self.setZValue(1e6 + 1)
        self.text = ""
        self.ok = True
        self._font = QFont()
        self._font.setPixelSize(12)
        self._rect = QRectF()

    def set_text(self, text: str, ok: bool, room: QRectF | None = None) -> None:
        """`room`: the visible area, in device pixels from the cursor, that the box must stay within."""
        self.prepareGeometryChange()
        self.text, self.ok = text, ok
        width = self.MAX_W if room is None else max(120.0, min(self.MAX_W, room.width() - 2 * self.OFFSET))
        fm = QFontMetricsF(self._font)
        r = fm.boundingRect(QRectF(0, 0, width, 1000), int(Qt.TextFlag.TextWordWrap), text)
        self._rect = self._placed(r.width() + 12, r.height() + 8, room)
        self.update()

    def _placed(self, w: float, h: float, room: QRectF | None) -> QRectF:
        """Below and to the right of the cursor; where that leaves `room`, to the left, and where the
        bottom is too near, above and to the left (the chip holds above-right); clamped into `room`."""
        x, y = self.OFFSET, self.OFFSET
        if room is not None:
            if y + h > room.bottom():
                x, y = -self.OFFSET - w, -self.OFFSET - h
            elif x + w > room.right():
                x = -self.OFFSET - w
            x = max(room.left(), min(x, room.right() - w))
            y = max(room.top(), min(y, room.bottom() - h))
        return QRectF(x, y, w, h)

    @property
    def box(self) -> QRectF:
        """The text box, in device pixels from the item's position."""
        return QRectF(self._rect)

    def boundingRect(self) -> QRectF:
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        if not self.text:
            return
        painter.setPen(QPen(_ACCEPT_PEN if self.ok else _REJECT_PEN, 1))
        painter.setBrush(QColor(255, 255, 240) if self.ok else QColor(255, 240, 240))
        painter.drawRoundedRect(self._rect, 4, 4)
        painter.setPen(QColor(30, 30, 30))
        painter.setFont(self._font)
        painter.drawText(self._rect.adjusted(6, 4, -6, -4), int(Qt.TextFlag.TextWordWrap), self.text)


class GridDropTarget(QObject):
    """The grid's drag-and-drop: TopologyView forwards its drag events here (`view.pin_drops`).

    `view` is that TopologyView (typed by its base class: view.py imports this module); targets are
    found among its items() and cells().

    `hint_changed(str)` says what a drop at the cursor would do, or why not; "" when the drag ends.
    `last_hint`, `highlight_path` and `highlight_accepts` show the state for tests.
    """

    hint_changed = Signal(str)

    def __init__(self, view: QGraphicsView):
        super().__init__(view)
        self.view = view
        self.policy: DropPolicy | None = None
        self._overlay: QGraphicsPathItem | None = None
        self._hint: HintItem | None = None
        self.last_hint = ""

    def set_policy(self, policy: DropPolicy | None) -> None:
        self.policy = policy

    # -- resolving the point under the cursor -----------------------------------------------------------
    def target_at(self, pos: QPoint) -> DropTarget | None:
        """The drop target at viewport position `pos`, or None over empty space."""
        v = self.view
        for it in v.items(pos):
            if isinstance(it, CpuCellItem):
                selected = [c for c in v.cells().values() if c.isSelected()]
                if it.isSelected() and len(selected) > 1:
                    cpus = tuple(sorted(c.cpu_id for c in selected if c.online))
                    return DropTarget(tuple(selected), cpus, f"the selected CPUs {format_cpulist(cpus)}")
                return DropTarget((it,), (it.cpu_id,), f"CPU {it.cpu_id}")
            if isinstance(it, CoreBoxItem):
                return self._box_target(it, f"core {it.core_index}" if it.core_index >= 0 else "this core")
            if isinstance(it, GroupBoxItem) and it.kind in _DROP_GROUP_KINDS:
                return self._box_target(it, it.label or f"{it.kind} {it.group_id}")
        return None

    def _box_target(self, item: CoreBoxItem | GroupBoxItem, name: str) -> DropTarget:
        cells = self.view.cells()
        online = tuple(sorted(c for c in item.cpus if c in cells and cells[c].online))
        if not online:
            return DropTarget((item,), (), name, f"{name} has no online CPU (CPUs {format_cpulist(item.cpus)})")
        return DropTarget((item,), online, f"{name} (CPUs {format_cpulist(online)})")

    # -- events -----------------------------------------------------------------------------------------
    def _judge(self, event) -> tuple[DropVerdict, DropTarget | None]:
        target = self.target_at(event.position().toPoint())
        verdict = self.policy.judge(event.mimeData(), target)
        if not verdict.ours and verdict.hint:
            self._say(verdict.hint, False, None)       # a malformed payload: say why, refuse
        return verdict, target

    def drag_enter(self, event) -> None:
        if self.policy is None:
            event.ignore()
            return
        self.policy.begin()
        verdict, target = self._judge(event)
        if not verdict.ours:
            # Not ours (plain text, files, a malformed pin): refused, so the drop never comes here.
            event.ignore()
            return
        event.acceptProposedAction()
        self._show(event, verdict, target)

    def drag_move(self, event) -> None:
        if self.policy is None:
            event.ignore()
            return
        verdict, target = self._judge(event)
        if not verdict.ours:
            event.ignore()
            return
        self._show(event, verdict, target)
        if verdict.request is None:
            event.ignore()
        else:
            event.acceptProposedAction()

    def drag_leave(self, event) -> None:
        self._clear()
        self._say("", True, None)
        event.accept()

    def drop(self, event) -> PinRequest | None:
        """The request of an accepted drop (the view emits it), or None when the drop is refused."""
        if self.policy is None:
            event.ignore()
            return None
        verdict, target = self._judge(event)
        if verdict.ours:
            self._show(event, verdict, target)
        self._clear()
        if verdict.request is None:
            event.ignore()
            return None
        event.acceptProposedAction()
        self._say("", True, None)
        return verdict.request

    def _show(self, event, verdict: DropVerdict, target: DropTarget | None) -> None:
        """Light the target under the cursor (none over empty space) and say what a drop would do."""
        ok = target is None or verdict.request is not None
        self._light(target.items if target is not None else (), ok)
        self._say(verdict.hint, ok, self.view.mapToScene(event.position().toPoint()))

    # -- highlight and hint -----------------------------------------------------------------------------
    def _items_alive(self) -> bool:
        # scene.clear() on a new topology deletes our overlay items with the rest.
        sc = self.view.scene()
        return (self._overlay is not None and shiboken6.isValid(self._overlay) and self._overlay.scene() is sc
                and self._hint is not None and shiboken6.isValid(self._hint) and self._hint.scene() is sc)

    def _ensure_items(self) -> None:
        if self._items_alive():
            return
        self._overlay = QGraphicsPathItem()
        self._overlay.setZValue(1e6)
        self._hint = HintItem()
        self.view.scene().addItem(self._overlay)
        self.view.scene().addItem(self._hint)

    def _light(self, items, ok: bool) -> None:
        self._ensure_items()
        path = QPainterPath()
        for it in items:
            path.addRoundedRect(it.sceneBoundingRect().adjusted(-1, -1, 1, 1), 3, 3)
        pen = QPen(_ACCEPT_PEN if ok else _REJECT_PEN, 3)
        pen.setCosmetic(True)              # the same width at any zoom
        if not ok:
            pen.setStyle(Qt.PenStyle.DashLine)
        self._overlay.setPen(pen)
        self._overlay.setBrush(QBrush(_ACCEPT_FILL if ok else _REJECT_FILL))
        self._overlay.setPath(path)

    def _say(self, text: str, ok: bool, scene_pos: QPointF | None) -> None:
        if scene_pos is not None:
            self._ensure_items()
            self._hint.setPos(scene_pos)
            at = QPointF(self.view.mapFromScene(scene_pos))
            self._hint.set_text(text, ok, QRectF(self.view.viewport().rect()).adjusted(2, 2, -2, -2).translated(-at))
        elif self._items_alive():
            self._hint.set_text("", ok)
        if text != self.last_hint:
            self.last_hint = text
            self.hint_changed.emit(text)

    def _clear(self) -> None:
        if self._items_alive():
            sc = self.view.scene()
            sc.removeItem(self._overlay)
            sc.removeItem(self._hint)
        self._overlay = None
        self._hint = None

    @property
    def highlight_path(self) -> QPainterPath | None:
        """The lit area in scene coordinates while dragging (None when nothing is lit); for tests."""
        return self._overlay.path() if self._items_alive() else None

    @property
    def hint_rect(self) -> QRect | None:
        """The hint's box in viewport coordinates while it says something (None when it does not); for
        tests."""
        if not self._items_alive() or not self._hint.text:
            return None
        at = self.view.mapFromScene(self._hint.pos())
        return self._hint.box.translated(QPointF(at)).toAlignedRect()

    @property
    def highlight_accepts(self) -> bool | None:
        if not self._items_alive() or self._overlay.path().isEmpty():
            return None
        return self._overlay.pen().color() == _ACCEPT_PEN
