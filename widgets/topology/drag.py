"""The grid as a drag source: CPU drags to the probe panel (issue 5, "drag a CPU cell onto the
probe panel").

What a CPU drag carries is CPU_MIME, `{"cpus": [ids]}`, made by `cpu_mime_data` and read back by
the probe panel with `cpus_from_mime`. Not text/plain: a CPU list pasted as text into another
application means nothing there. Offline CPUs are never in a payload (a probe cannot run on them).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping

from PySide6.QtCore import QMimeData, QPoint, QRectF, Qt
from PySide6.QtGui import QColor, QDrag, QFontMetricsF, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QWidget

from app.errors import CoremapError
from app.parse.cpulist import format_cpulist
from app.parse.json_text import load_json
from widgets.topology.items import BOLD_FONT, SELECT_COLOR, CoreBoxItem, CpuCellItem, GroupBoxItem

CPU_MIME = "application/x-coremap-cpu+json"

# What a drag starts from: a cell, a core or group box, or CPU ids.
DragSource = CpuCellItem | CoreBoxItem | GroupBoxItem | Iterable[int]


def cpus_from_mime(data: bytes) -> tuple[int, ...]:
    """CPU ids from a CPU_MIME payload {"cpus": [...]}; CoremapError if it is not one."""
    try:
        # Any application can drop anything: the one decoder, bounded (a CPU list of the largest
        # machine is ~400 kB).
        d = load_json(bytes(data), what=CPU_MIME, limit=1 << 20)
        cpus = d["cpus"]
        if not isinstance(cpus, list) or not all(isinstance(c, int) and c >= 0 for c in cpus):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise CoremapError(f"the dropped {CPU_MIME} data is not {{\"cpus\": [ids]}}") from None
    return tuple(sorted(set(cpus)))


def cpu_mime_data(cpus: tuple[int, ...]) -> QMimeData | None:
    """CPU_MIME with {"cpus": [...]}, or None when there is no CPU to carry."""
    if not cpus:
        return None
    mime = QMimeData()
    mime.setData(CPU_MIME, json.dumps({"cpus": list(cpus)}).encode("utf-8"))
    return mime


def drag_cpus(source: DragSource, cells: Mapping[int, CpuCellItem],
              selected_cpus: Callable[[], list[int]]) -> tuple[int, ...]:
    """The online CPUs a drag of `source` carries: a cell -> that CPU, or every selected CPU when it
    is one of several selected cells; a core or group box -> its CPUs; CPU ids -> those. Offline
    CPUs and CPUs without a cell in `cells` are left out."""
    if isinstance(source, CpuCellItem):
        selected = selected_cpus() if source.isSelected() else []
        cpus = selected if len(selected) > 1 else [source.cpu_id]
    elif isinstance(source, (CoreBoxItem, GroupBoxItem)):
        cpus = source.cpus
    else:
        cpus = source
    return tuple(sorted({int(c) for c in cpus if c in cells and cells[c].online}))


def drag_label(source: DragSource, cpus: tuple[int, ...]) -> str:
    """What the drag pixmap says for `source` carrying `cpus`: "CPU 5", "core 3 (CPU 3,7)",
    "package 0 (CPU 0-27,56-83)", "3 selected CPUs (1,3,5)", "package 0 (56 CPUs)" when the list is
    long; "" when the drag carries no CPU."""
    if not cpus:
        return ""
    listed = format_cpulist(cpus)
    if len(listed) > 24:
        # An interleaved package (0,2,4,...,110) would be elided to nothing useful: a count reads.
        listed = f"{len(cpus)} CPUs"
        if isinstance(source, (CoreBoxItem, GroupBoxItem)) and source.label:
            return f"{source.label} ({listed})"
        return listed
    if isinstance(source, CpuCellItem) and len(cpus) > 1:
        return f"{len(cpus)} selected CPUs ({listed})"
    if isinstance(source, CoreBoxItem) and source.core_index >= 0:
        return f"core {source.core_index} (CPU {listed})"
    if isinstance(source, GroupBoxItem) and source.label:
        return f"{source.label} (CPU {listed})"
    return f"CPU {listed}" if len(cpus) == 1 else f"CPUs {listed}"


CHIP_MAX_W = 360            # a chip's text, elided in the middle beyond this (device-independent pixels)
CHIP_PAD_X, CHIP_PAD_Y = 7, 4
_CHIP_GAP = 6                # between the cursor and the chip's bottom edge


def drag_pixmap(text: str, device_pixel_ratio: float) -> QPixmap:
    """A small label for the cursor to carry: `text` on a light chip with the grid's select colour.

    The text is measured by a painter on a pixmap of the same ratio, the device it is drawn on, and
    drawn from the left margin: measured without a device, a desktop's hinted glyphs came out wider than
    measured and a centred name lost its first letters (issue 28: "read 28206 market-data-fe")."""
    dpr = device_pixel_ratio
    probe = QPixmap(1, 1)
    probe.setDevicePixelRatio(dpr)
    p = QPainter(probe)
    p.setFont(BOLD_FONT)
    fm = QFontMetricsF(p.fontMetrics())
    p.end()
    text = fm.elidedText(text, Qt.TextElideMode.ElideMiddle, CHIP_MAX_W)
    w = math.ceil(fm.horizontalAdvance(text)) + 2 * CHIP_PAD_X
    h = math.ceil(fm.height()) + 2 * CHIP_PAD_Y
    pm = QPixmap(round(w * dpr), round(h * dpr))
    pm.setDevicePixelRatio(dpr)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    p.setPen(QPen(SELECT_COLOR, 1))
    p.setBrush(QColor(255, 255, 240, 235))
    p.drawRoundedRect(QRectF(0.5, 0.5, w - 1, h - 1), 4, 4)
    p.setFont(BOLD_FONT)
    p.setPen(QColor(30, 30, 30))
    p.drawText(QRectF(CHIP_PAD_X, 0, w - CHIP_PAD_X, h), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
               text)
    p.end()
    return pm


def chip_hotspot(pm: QPixmap) -> QPoint:
    """Where the cursor holds a chip: the chip sits above and to the right of it, so it covers neither
    the target under the cursor nor the grid's drop hint, which is drawn below it
    (widgets/topology/drop.py HintItem)."""
    return QPoint(-12, math.ceil(pm.height() / pm.devicePixelRatio()) + _CHIP_GAP)


def exec_cpu_drag(source: QWidget, cpus: tuple[int, ...], label: str) -> Qt.DropAction:
    """Drag `cpus` out of `source` with `label` beside the cursor; blocks in QDrag.exec until the
    drop or Escape. IgnoreAction at once when there is no CPU to carry."""
    mime = cpu_mime_data(cpus)
    if mime is None:
        return Qt.DropAction.IgnoreAction
    drag = QDrag(source)
    drag.setMimeData(mime)
    drag.setPixmap(drag_pixmap(label, source.devicePixelRatioF()))
    drag.setHotSpot(chip_hotspot(drag.pixmap()))
    return drag.exec(Qt.DropAction.CopyAction)
