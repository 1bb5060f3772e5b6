"""Dragging table rows onto the grid: the pin payload (widgets/pinning/mime.py) under a compact chip
("thread 22877 python3", "IRQ 42 virtio3-tx", "3 threads of process 77") beside the cursor, the
grid's own drag chip (widgets/topology/drag.py), instead of Qt's picture of the whole selected row
stretched across the window (issue 12).

The table views are PinDragTableView / PinDragTreeView; a view that cannot be one (a QTableWidget)
calls `pin_drag(...).exec(...)` from its own startDrag.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QDrag
from PySide6.QtWidgets import QAbstractItemView, QTableView, QTreeView

from widgets.pinning.mime import PinPayload, decode_pin_mime
from widgets.topology.drag import chip_hotspot, drag_pixmap


def chip_text(payload: PinPayload, name: str | None) -> str:
    """"thread 22877 python3", "IRQ 42 virtio3-tx", "process 77 java"; for several targets what
    PinPayload.describe says ("3 threads of process 77")."""
    text = payload.describe()
    if len(payload.ids) == 1:
        # A Java thread by the full name its payload carries, the name its pin is journalled by; the
        # tree's cell adds the cut kernel name, which made the chip long enough to be elided in the
        # middle ("market-data-f…andler-0 (market-data-fee)", issue 28).
        full = dict(payload.names).get(payload.ids[0])
        if full or name:
            text += f" {full or name}"
    return text


def pin_drag(view: QAbstractItemView, name_column: int) -> QDrag | None:
    """The drag of `view`'s selected rows (or its current row): their pin payload and a chip naming
    them; None when they carry nothing to pin (LOC, NMI, softirqs)."""
    rows = view.selectionModel().selectedRows(0) if view.selectionModel() is not None else []
    if not rows and view.currentIndex().isValid():
        rows = [view.currentIndex().siblingAtColumn(0)]
    if not rows:
        return None
    mime = view.model().mimeData(rows)
    payload = decode_pin_mime(mime)
    if payload is None:
        return None
    name = rows[0].siblingAtColumn(name_column).data()
    drag = QDrag(view)
    drag.setMimeData(mime)
    drag.setPixmap(drag_pixmap(chip_text(payload, name if isinstance(name, str) else None),
                               view.devicePixelRatioF()))
    drag.setHotSpot(chip_hotspot(drag.pixmap()))
    return drag


def _start(view: QAbstractItemView, name_column: int, actions) -> None:
    drag = pin_drag(view, name_column)
    if drag is not None:
        drag.exec(actions, Qt.DropAction.CopyAction)


class PinDragTableView(QTableView):
    """A QTableView whose row drags carry a chip naming the rows (`name_column` holds their name)."""

    def __init__(self, parent=None, *, name_column: int = 0):
        super().__init__(parent)
        self.name_column = name_column

    def startDrag(self, supportedActions) -> None:
        _start(self, self.name_column, supportedActions)


class PinDragTreeView(QTreeView):
    """A QTreeView whose row drags carry a chip naming the rows (`name_column` holds their name)."""

    def __init__(self, parent=None, *, name_column: int = 0):
        super().__init__(parent)
        self.name_column = name_column

    def startDrag(self, supportedActions) -> None:
        _start(self, self.name_column, supportedActions)
