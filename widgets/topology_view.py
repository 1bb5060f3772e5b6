"""TopologyView: the machine as nested boxes (node -> package -> die / L3 -> core -> hardware thread),
each hardware-thread cell coloured by one metric.

The scene is built once per topology from `app.machine.topology.layout()`; a tick only recolours the
cells whose colour or figure changed (`set_state`). Layout is a flow of boxes: a core box holds its
threads side by side, cores wrap into rows, groups flow in a grid; the row width of every level is
chosen so that the whole machine fills the viewport's aspect (so a 2-socket server, a 256-CPU POWER7
and a 1152-CPU machine all fit at a glance). Labels and figures are painted at a fixed size in scene
units and hidden (level of detail from the view's scale) once they would be too small to read.

Mouse gestures (left button unless said otherwise; issue 5, "drag a CPU cell onto the probe panel"):
- click a cell: select it and emit cpu_selected; Ctrl+click toggles it in the selection.
- drag from a cell: a CPU drag (CPU_MIME) carrying that CPU, or the whole selection when the cell is
  one of several selected cells; Shift+drag from a cell carries its core's CPUs.
- drag from a box's header band (the "package 0" / "node 1" / "L3 2" label line) or from a core box's
  frame around its cells (the P/E strip of a hybrid core): a CPU drag carrying the box's CPUs.
- drag from anywhere else (a box's body between its children, the margin): rubber-band selection, as
  before; middle-drag pans; Ctrl+wheel, +, - and 0 zoom.
A drag starts only once the press has moved QApplication.startDragDistance(); offline CPUs are never
in a payload (a box or cell with no online CPU starts no drag). The grid itself refuses a CPU drag
(its drop target, widgets/pinning.py, takes only PIN_MIME).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from PySide6.QtCore import QEvent, QMimeData, QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (QBrush, QColor, QDrag, QFont, QFontMetricsF, QLinearGradient, QPainter,
                           QPen, QPixmap, QPolygonF)
from PySide6.QtWidgets import (QApplication, QGraphicsItem, QGraphicsScene, QGraphicsView, QSizePolicy,
                               QStyleOptionGraphicsItem, QToolTip, QWidget)

from app.errors import CoremapError
from app.parse.cpulist import format_cpulist

from widgets.colors import (LUT, NO_DATA_COLOR, OFFLINE_COLOR, ColorScale, Metric, MetricValues,
                            format_value, metric_values, parse_metric, scale_for, text_color_for)
from widgets.pinning import TopologyDropHandler

# What a CPU drag carries: {"cpus": [ids]}, made by cpu_mime_for and read by the probe panel with
# cpus_from_mime. Not text/plain: a CPU list pasted as text into another application means nothing there.
CPU_MIME = "application/x-coremap-cpu+json"


def cpus_from_mime(data: bytes) -> tuple[int, ...]:
    """CPU ids from a CPU_MIME payload {"cpus": [...]}; CoremapError if it is not one."""
    try:
        d = json.loads(bytes(data).decode("utf-8"))
        cpus = d["cpus"]
        if not isinstance(cpus, list) or not all(isinstance(c, int) and c >= 0 for c in cpus):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise CoremapError(f"the dropped {CPU_MIME} data is not {{\"cpus\": [ids]}}") from None
    return tuple(sorted(set(cpus)))

# -- geometry (scene units: one unit is one pixel at zoom 1) ---------------------------------------
CELL_W, CELL_H = 60.0, 36.0       # one hardware thread
CELL_GAP = 2.0                    # between threads of one core
CORE_PAD = 3.0
KIND_STRIP = 12.0                 # left strip of a hybrid core box holding "P" / "E"
GROUP_PAD = 5.0
GROUP_GAP = 6.0                   # between children of a group
HEADER_H = 17.0                   # group label band
MIN_READABLE_PX = 6.5
MAX_FIT_SCALE = 2.0             # a label painted smaller than this on screen is hidden

ISO_COLOR = QColor(232, 89, 12)       # outside viridis's hues: an isolated CPU never looks "hot"
NOHZ_COLOR = QColor(214, 51, 108)
SELECT_COLOR = QColor(0, 0, 0)
P_TINT = QColor(222, 232, 247)
E_TINT = QColor(226, 242, 226)
CORE_BG = QColor(236, 236, 236)
GROUP_BG = {
    "machine": QColor(255, 255, 255, 0),
    "node": QColor(226, 233, 243),
    "package": QColor(244, 244, 244),
    "die": QColor(250, 250, 250),
    "l3": QColor(255, 255, 255),
    "cluster": QColor(248, 248, 252),
    "offline": QColor(250, 250, 250),
}
GROUP_BORDER = {"node": QColor(110, 140, 180), "package": QColor(120, 120, 120)}

_LABEL_FONT = QFont()
_LABEL_FONT.setPixelSize(11)
_BOLD_FONT = QFont(_LABEL_FONT)
_BOLD_FONT.setBold(True)
_SMALL_FONT = QFont()
_SMALL_FONT.setPixelSize(9)
_HEADER_FONT = QFont()
_HEADER_FONT.setPixelSize(12)
_HEADER_FONT.setBold(True)


def _lod(painter: QPainter) -> float:
    return QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())


def _hatch_brush() -> QBrush:
    b = QBrush(OFFLINE_COLOR, Qt.BrushStyle.BDiagPattern)
    return b


# -- items -------------------------------------------------------------------------------------------
class CpuCellItem(QGraphicsItem):
    """One hardware thread.

    Contract: boundingRect is the cell rectangle (0, 0, CELL_W, CELL_H) grown by the widest border
    (the selection outline, 2.5 units) so no outline pixel is left behind. Everything painted depends
    on `color_index`, `figure`, the flags (online / isolated / nohz_full) and selection; `recolor()`
    calls update() only when index or figure changed, which is the whole per-tick cost.
    """

    _MARGIN = 2.5

    def __init__(self, cpu_id: int, cpu, parent=None):
        super().__init__(parent)
        self.cpu_id = cpu_id
        self.cpus = (cpu_id,)
        self.online = bool(getattr(cpu, "online", True)) if cpu is not None else True
        self.isolated = bool(getattr(cpu, "isolated", False)) if cpu is not None else False
        self.nohz_full = bool(getattr(cpu, "nohz_full", False)) if cpu is not None else False
        self.color_index: int | None = None
        self.figure = ""
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, self.online)
        self.setAcceptHoverEvents(False)   # tooltips come from the view (figures change every tick)

    def boundingRect(self) -> QRectF:
        m = self._MARGIN
        return QRectF(-m, -m, CELL_W + 2 * m, CELL_H + 2 * m)

    def brush_color(self) -> QColor:
        """The fill this cell paints (grey when it has no figure or is offline)."""
        if not self.online:
            return OFFLINE_COLOR
        return NO_DATA_COLOR if self.color_index is None else LUT[self.color_index]

    def recolor(self, index: int | None, figure: str) -> bool:
        if index == self.color_index and figure == self.figure:
            return False
        self.color_index, self.figure = index, figure
        self.update()
        return True

    def paint(self, painter: QPainter, option, widget=None) -> None:
        lod = _lod(painter)
        r = QRectF(0, 0, CELL_W, CELL_H)
        if not self.online:
            painter.fillRect(r, QColor(225, 225, 225))
            painter.fillRect(r, _hatch_brush())
            fg = QColor(60, 60, 60)
        elif self.color_index is None:
            painter.fillRect(r, NO_DATA_COLOR)
            fg = QColor(60, 60, 60)
        else:
            painter.fillRect(r, LUT[self.color_index])
            fg = text_color_for(self.color_index)
        if self.isolated:
            # At least 1.5 device pixels wide, so the border survives zooming out to a 1000-CPU fit.
            w = max(2.5, 1.5 / max(lod, 1e-3))
            painter.setPen(QPen(ISO_COLOR, w))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(r.adjusted(w / 2, w / 2, -w / 2, -w / 2))
        if self.nohz_full:
            # A corner flag stays visible when the letters are too small to read.
            s = 11.0
            tri = QPolygonF([QPointF(CELL_W - s, 0), QPointF(CELL_W, 0), QPointF(CELL_W, s)])
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(NOHZ_COLOR)
            painter.drawPolygon(tri)
        if self.isSelected():
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(255, 255, 255), 1.5))
            painter.drawRect(r.adjusted(-0.5, -0.5, 0.5, 0.5))
            painter.setPen(QPen(SELECT_COLOR, 2.5))
            painter.drawRect(r.adjusted(-2, -2, 2, 2))
        if 11 * lod < MIN_READABLE_PX:
            return
        painter.setPen(fg)
        painter.setFont(_BOLD_FONT)
        painter.drawText(QRectF(4, 2, CELL_W - 8, 14), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         str(self.cpu_id))
        if not self.online:
            painter.setFont(_LABEL_FONT)
            painter.drawText(QRectF(4, 18, CELL_W - 8, 14), Qt.AlignmentFlag.AlignLeft, "off")
            return
        if self.figure:
            painter.setFont(_LABEL_FONT)
            painter.drawText(QRectF(4, 18, CELL_W - 8, 14),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.figure)
        if 9 * lod >= MIN_READABLE_PX and (self.isolated or self.nohz_full):
            painter.setFont(_SMALL_FONT)
            badges = []
            if self.isolated:
                badges.append(("iso", ISO_COLOR))
            if self.nohz_full:
                badges.append(("nohz", NOHZ_COLOR))
            # Badges sit at the right edge, below the nohz corner flag, on a white chip so they read
            # on any cell colour.
            y = 12.0 if self.nohz_full else 3.0
            for text, color in badges:
                w = QFontMetricsF(_SMALL_FONT).horizontalAdvance(text) + 4
                chip = QRectF(CELL_W - w - 3, y, w, 10)
                painter.fillRect(chip, QColor(255, 255, 255, 225))
                painter.setPen(color)
                painter.drawText(chip, Qt.AlignmentFlag.AlignCenter, text)
                y += 11


class CoreBoxItem(QGraphicsItem):
    """A core: its hardware threads side by side.

    Contract: boundingRect is exactly `rect` (children draw themselves); the box repaints only when
    the layout moves it (set_rect calls prepareGeometryChange).
    """

    def __init__(self, index: int, cpus: tuple[int, ...], kind: str | None, label: str, parent=None):
        super().__init__(parent)
        self.core_index = index
        self.cpus = tuple(cpus)
        self.kind = kind           # "P", "E" or None
        self.label = label
        self.rect = QRectF()

    def boundingRect(self) -> QRectF:
        return self.rect

    def set_rect(self, r: QRectF) -> None:
        self.prepareGeometryChange()
        self.rect = r

    def paint(self, painter: QPainter, option, widget=None) -> None:
        bg = P_TINT if self.kind == "P" else E_TINT if self.kind == "E" else CORE_BG
        painter.setPen(QPen(QColor(150, 150, 150), 0))
        painter.setBrush(bg)
        painter.drawRect(self.rect)
        if self.kind and 11 * _lod(painter) >= MIN_READABLE_PX:
            painter.setPen(QColor(40, 70, 130) if self.kind == "P" else QColor(40, 110, 40))
            painter.setFont(_BOLD_FONT)
            painter.drawText(QRectF(self.rect.x(), self.rect.y(), KIND_STRIP + 1, self.rect.height()),
                             Qt.AlignmentFlag.AlignCenter, self.kind)


class GroupBoxItem(QGraphicsItem):
    """A node, package, die, L3 group or cluster: a framed box with a header label.

    Contract: boundingRect is exactly `rect`; the header text is elided to the box width and hidden
    when the view's scale makes it unreadable (nothing cached, so no invalidation beyond set_rect).
    """

    def __init__(self, kind: str, gid, label: str, cpus: tuple[int, ...], parent=None):
        super().__init__(parent)
        self.kind = kind
        self.group_id = gid
        self.label = label
        self.cpus = tuple(cpus)
        self.rect = QRectF()
        self.framed = kind != "machine"

    def boundingRect(self) -> QRectF:
        return self.rect

    def set_rect(self, r: QRectF) -> None:
        self.prepareGeometryChange()
        self.rect = r

    def paint(self, painter: QPainter, option, widget=None) -> None:
        if not self.framed:
            return
        border = GROUP_BORDER.get(self.kind, QColor(175, 175, 175))
        painter.setPen(QPen(border, 1.5 if self.kind in GROUP_BORDER else 1.0))
        painter.setBrush(GROUP_BG.get(self.kind, QColor(250, 250, 250)))
        painter.drawRoundedRect(self.rect, 3, 3)
        if 12 * _lod(painter) < MIN_READABLE_PX:
            return
        painter.setFont(_HEADER_FONT)
        painter.setPen(QColor(40, 40, 40))
        tr = QRectF(self.rect.x() + GROUP_PAD, self.rect.y(), self.rect.width() - 2 * GROUP_PAD, HEADER_H)
        text = QFontMetricsF(_HEADER_FONT).elidedText(self.label, Qt.TextElideMode.ElideRight, tr.width())
        painter.drawText(tr, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)


# -- layout ------------------------------------------------------------------------------------------
@dataclass
class _Node:
    """A box to place: a group (children are _Node) or a core (threads are CPU ids)."""
    kind: str
    gid: object
    label: str
    cpus: tuple
    children: list = field(default_factory=list)
    threads: tuple = ()
    core_kind: str | None = None
    core_index: int = -1
    # filled by the layout pass
    w: float = 0.0
    h: float = 0.0
    positions: list = field(default_factory=list)   # child offsets, same order as children


def _core_size(n: _Node, hybrid: bool) -> tuple[float, float]:
    t = max(1, len(n.threads))
    w = 2 * CORE_PAD + t * CELL_W + (t - 1) * CELL_GAP + (KIND_STRIP if hybrid else 0)
    return w, 2 * CORE_PAD + CELL_H


def _flow(sizes: list[tuple[float, float]], width: float) -> tuple[list[tuple[float, float]], float, float]:
    """Place boxes left to right, wrapping at `width`; rows top-aligned. -> offsets, w, h."""
    pos, x, y, row_h, w_max = [], 0.0, 0.0, 0.0, 0.0
    for w, h in sizes:
        if x > 0 and x + w > width + 1e-6:
            y += row_h + GROUP_GAP
            x, row_h = 0.0, 0.0
        pos.append((x, y))
        x += w + GROUP_GAP
        row_h = max(row_h, h)
        w_max = max(w_max, x - GROUP_GAP)
    return pos, w_max, y + row_h


def _best_flow(sizes, aspect: float):
    """The wrap width (a whole number of boxes in the first row) whose result is closest to `aspect`."""
    n = len(sizes)
    # Candidate widths: the first k boxes on one row. The result's aspect rises with k, so a binary
    # search finds the crossing; compare the two neighbours.
    widths = []
    x = 0.0
    for w, _ in sizes:
        x = w if x == 0 else x + GROUP_GAP + w
        widths.append(x)

    def trial(k):
        pos, w, h = _flow(sizes, widths[k])
        return pos, w, h

    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        _, w, h = trial(mid)
        if w / max(h, 1e-6) < aspect:
            lo = mid + 1
        else:
            hi = mid
    best = None
    for k in {max(0, lo - 1), lo}:
        pos, w, h = trial(k)
        score = abs(math.log((w / max(h, 1e-6)) / aspect))
        if best is None or score < best[0]:
            best = (score, pos, w, h)
    return best[1], best[2], best[3]


_HEADER_WIDTHS: dict[str, float] = {}


def _header_width(label: str) -> float:
    w = _HEADER_WIDTHS.get(label)
    if w is None:
        w = _HEADER_WIDTHS[label] = QFontMetricsF(_HEADER_FONT).horizontalAdvance(label) + 2 * GROUP_PAD + 4
    return w


def _place(n: _Node, aspect: float, hybrid: bool, sizes_of: dict | None = None,
           seen: dict | None = None) -> None:
    """Size `n` and its subtree so that each box's shape is near `aspect` (width / height).

    `seen` collects the largest size of each (kind, CPU count) box; given back as `sizes_of` in a
    second pass, every such box takes that size, so that like groups (the 32 clusters of a Kunpeng,
    whose labels "cluster 3" and "cluster 13" differ in width) wrap into the same grid.
    """
    if n.kind == "core":
        n.w, n.h = _core_size(n, hybrid)
        return
    for c in n.children:
        _place(c, aspect, hybrid, sizes_of, seen)
    sizes = [(c.w, c.h) for c in n.children]
    if not sizes:
        n.w, n.h, n.positions = CELL_W, CELL_H, []
        return
    pos, w, h = _best_flow(sizes, aspect)
    header = HEADER_H if n.kind != "machine" else 0.0
    pad = GROUP_PAD if n.kind != "machine" else 0.0
    n.positions = [(x + pad, y + header + (pad if n.kind != "machine" else 0.0)) for x, y in pos]
    n.w = w + 2 * pad
    if n.kind != "machine":
        # Never narrower than its own label: an elided "packag..." names nothing.
        n.w = max(n.w, _header_width(n.label))
    n.h = h + header + 2 * pad
    key = (n.kind, len(n.cpus))
    if sizes_of is not None and key in sizes_of:
        n.w, n.h = max(n.w, sizes_of[key][0]), max(n.h, sizes_of[key][1])
    if seen is not None:
        w0, h0 = seen.get(key, (0.0, 0.0))
        seen[key] = (max(w0, n.w), max(h0, n.h))


# -- the view -------------------------------------------------------------------------------------------
class ColorLegend(QWidget):
    """Colour bar with the metric's name, unit, scale kind and min/max, then a key for the marks."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.title = ""
        self.scale: ColorScale | None = None
        self.unit = ""
        self.note = ""
        self.hybrid = False
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(38)

    def sizeHint(self) -> QSize:
        return QSize(600, 38)

    def set_scale(self, title: str, scale: ColorScale | None, unit: str, note: str, hybrid: bool) -> None:
        if (title, scale, unit, note, hybrid) == (self.title, self.scale, self.unit, self.note, self.hybrid):
            return
        self.title, self.scale, self.unit, self.note, self.hybrid = title, scale, unit, note, hybrid
        self.setToolTip(f"{title}: {note}" if note else title)
        self.update()

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        f = QFont(self.font())
        fm = QFontMetricsF(f)
        h = self.height()
        x = 4.0
        p.setPen(self.palette().windowText().color())
        title = self.title + (f" ({self.unit}{', log scale' if self.scale and self.scale.log else ''})"
                              if self.unit else (" (log scale)" if self.scale and self.scale.log else ""))
        p.drawText(QRectF(x, 0, fm.horizontalAdvance(title) + 4, h / 2), Qt.AlignmentFlag.AlignVCenter, title)
        bar_x = x
        bar_w = max(160.0, min(320.0, self.width() * 0.22))
        bar = QRectF(bar_x, h / 2 + 1, bar_w, h / 2 - 5)
        if self.scale is not None:
            lo = format_value(self.scale.vmin, self.unit)
            hi = format_value(self.scale.vmax, self.unit)
            lw = fm.horizontalAdvance(lo) + 6
            p.drawText(QRectF(bar_x, bar.y(), lw, bar.height()), Qt.AlignmentFlag.AlignVCenter, lo)
            bar.moveLeft(bar_x + lw)
            g = QLinearGradient(bar.topLeft(), bar.topRight())
            for i, c in enumerate(LUT):
                g.setColorAt(i / (len(LUT) - 1), c)
            p.fillRect(bar, g)
            p.setPen(QColor(120, 120, 120))
            p.drawRect(bar)
            if self.scale.log:
                # Decade ticks so a reader can tell 100/s from 10,000/s on a log bar.
                p.setPen(QColor(255, 255, 255, 170))
                d = 10.0
                while d < self.scale.vmax:
                    tx = bar.x() + self.scale.fraction(d) * bar.width()
                    p.drawLine(QPointF(tx, bar.y() + 2), QPointF(tx, bar.bottom() - 2))
                    d *= 10
            p.setPen(self.palette().windowText().color())
            p.drawText(QRectF(bar.right() + 6, bar.y(), fm.horizontalAdvance(hi) + 6, bar.height()),
                       Qt.AlignmentFlag.AlignVCenter, hi)
            x = bar.right() + 6 + fm.horizontalAdvance(hi) + 14
        else:
            x = bar_x
        if self.note:
            nf = QFont(f)
            nf.setBold(True)
            p.setFont(nf)
            p.setPen(QColor(170, 60, 0))
            p.drawText(QRectF(x, bar.y(), QFontMetricsF(nf).horizontalAdvance(self.note) + 6, bar.height()),
                       Qt.AlignmentFlag.AlignVCenter, self.note)
            x += QFontMetricsF(nf).horizontalAdvance(self.note) + 16
            p.setFont(f)
        # Key for the marks, right-aligned on the top line.
        keys = [("iso", "isolated"), ("nohz", "nohz_full"), ("off", "offline")]
        if self.hybrid:
            keys += [("P", "performance core"), ("E", "efficient core")]
        kx = self.width() - 6.0
        items = []
        for mark, text in reversed(keys):
            tw = fm.horizontalAdvance(text)
            kx -= tw
            items.append((mark, kx - 18, kx, text, tw))
            kx -= 18 + 12
        for mark, sx, tx, text, tw in items:
            sw = QRectF(sx, 4, 14, 12)
            if mark == "iso":
                p.fillRect(sw, QColor(200, 200, 200))
                p.setPen(QPen(ISO_COLOR, 2.5))
                p.drawRect(sw.adjusted(1, 1, -1, -1))
            elif mark == "nohz":
                p.fillRect(sw, QColor(200, 200, 200))
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(NOHZ_COLOR)
                p.drawPolygon(QPolygonF([QPointF(sw.right() - 7, sw.top()), sw.topRight(),
                                         QPointF(sw.right(), sw.top() + 7)]))
                p.setBrush(Qt.BrushStyle.NoBrush)
            elif mark == "off":
                p.fillRect(sw, QColor(225, 225, 225))
                p.fillRect(sw, _hatch_brush())
            else:
                p.fillRect(sw, P_TINT if mark == "P" else E_TINT)
                p.setPen(QColor(40, 40, 40))
                p.drawText(sw, Qt.AlignmentFlag.AlignCenter, mark)
            p.setPen(self.palette().windowText().color())
            p.drawText(QRectF(tx, 0, tw + 2, 20), Qt.AlignmentFlag.AlignVCenter, text)
        p.end()


class TopologyView(QGraphicsView):
    """The machine's CPUs as nested boxes, coloured by one metric. See the module docstring."""

    cpu_selected = Signal(int)
    selection_changed = Signal(list)
    metric_changed = Signal(str)
    pin_requested = Signal(object)    # app.affinity.PinRequest from a drop (widgets/pinning.py)
    drop_hint = Signal(str)           # while dragging: what a drop here does, or why not; "" after

    def __init__(self, parent=None, *, metric: Metric | str | None = None):
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
        self._topology = None
        self._state = None
        self._cells: dict[int, CpuCellItem] = {}
        self._cores: list[CoreBoxItem] = []
        self._groups: dict[tuple[str, object], GroupBoxItem] = {}
        self._root: _Node | None = None
        self._items_by_node: dict[int, QGraphicsItem] = {}
        self._scale: ColorScale | None = None
        self._values: MetricValues | None = None
        self._fitted = False
        self._layout_aspect = 0.0
        self._pan_from = None
        self._press_pos = None
        self._drag_from: tuple[QPointF, QGraphicsItem] | None = None   # press point, drag source
        self._press_swallowed = False     # the press was on a box handle and never reached the scene
        self.scene().selectionChanged.connect(self._on_scene_selection_changed)
        # Pinning by drag and drop: targets, highlight and checks live in widgets/pinning.py.
        self.setAcceptDrops(True)
        self.pin_drops = TopologyDropHandler(self)

    # -- accessors (drop targets are added onto these items) ---------------------------------------
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
    def set_metric(self, metric: Metric | str) -> None:
        m = metric if isinstance(metric, Metric) else parse_metric(metric)
        if m == self.color_metric:
            return
        self.color_metric = m
        self._scale = None
        if self._state is not None:
            self._recolor(self._state)
        self.metric_changed.emit(m.key)

    def set_topology(self, topology) -> None:
        """Build the scene for `topology` (once; ticks only recolour)."""
        from app.machine.topology import layout
        self._topology = topology
        self._root = _tree_from_group(layout(topology), topology)
        self._build_items()
        self._relayout(force=True)
        self._fitted = False
        if self.isVisible():
            self.zoom_fit()

    def set_state(self, state) -> None:
        if state.topology is not self._topology:
            self.set_topology(state.topology)
        self._state = state
        self._recolor(state)

    def _recolor(self, state) -> int:
        """Recolour cells from `state`; returns how many cells changed."""
        vals = metric_values(state, self.color_metric)
        self._values = vals
        self._scale = scale = scale_for(vals.values, self.color_metric, vals.totals, self._scale) if vals.values else None
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
        self.legend.set_scale(vals.label, scale, vals.unit, note,
                              any(c.kind for c in self._cores))
        return changed

    # -- scene construction -------------------------------------------------------------------------------
    def _build_items(self) -> None:
        sc = self.scene()
        sc.blockSignals(True)
        sc.clear()
        sc.blockSignals(False)
        self._cells, self._cores, self._groups, self._items_by_node = {}, [], {}, {}
        cpus = _cpu_map(self._topology)

        def build(n: _Node, parent_item):
            if n.kind == "core":
                item = CoreBoxItem(n.core_index, n.cpus, n.core_kind, n.label, parent_item)
                if n.core_index >= 0:
                    while len(self._cores) <= n.core_index:
                        self._cores.append(None)
                    self._cores[n.core_index] = item
                for cpu in n.threads:
                    self._cells[cpu] = CpuCellItem(cpu, cpus.get(cpu), item)
            else:
                item = GroupBoxItem(n.kind, n.gid, n.label, n.cpus, parent_item)
                self._groups.setdefault((n.kind, n.gid), item)
                for alias in getattr(n, "aliases", ()):
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
        hybrid = any(c.kind for c in self._cores)
        best = None
        for inner in (0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0, 5.6, 8.0, 12.0):
            _place_with_top(self._root, inner, aspect, hybrid)
            fit = min(vw / self._root.w, vh / self._root.h)
            if best is None or fit > best[0] * 1.02:
                best = (fit, inner)
        _place_with_top(self._root, best[1], aspect, hybrid)

        def apply(n: _Node, x: float, y: float):
            item = self._items_by_node[id(n)]
            item.setPos(x, y)
            if n.kind == "core":
                item.set_rect(QRectF(0, 0, n.w, n.h))
                x0 = CORE_PAD + (KIND_STRIP if hybrid else 0)
                for i, cpu in enumerate(n.threads):
                    self._cells[cpu].setPos(x0 + i * (CELL_W + CELL_GAP), CORE_PAD)
                return
            item.set_rect(QRectF(0, 0, n.w, n.h))
            for c, (cx, cy) in zip(n.children, n.positions):
                apply(c, cx, cy)
        apply(self._root, 0.0, 0.0)
        m = 8.0
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

    def dragEnterEvent(self, event) -> None:
        self.pin_drops.drag_enter(event)

    def dragMoveEvent(self, event) -> None:
        self.pin_drops.drag_move(event)

    def dragLeaveEvent(self, event) -> None:
        self.pin_drops.drag_leave(event)

    def dropEvent(self, event) -> None:
        self.pin_drops.drop(event)

    def _cell_at(self, pos) -> CpuCellItem | None:
        for it in self.items(pos):
            if isinstance(it, CpuCellItem):
                return it
        return None

    # -- CPU drags (to the probe panel): gestures in the module docstring -------------------------------
    def drag_source_at(self, pos, modifiers=Qt.KeyboardModifier.NoModifier) -> QGraphicsItem | None:
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

    def drag_cpus_for(self, item_or_cpus) -> tuple[int, ...]:
        """The online CPUs a drag of `item_or_cpus` carries: a cell -> that CPU, or every selected CPU
        when it is one of several selected cells; a core or group box -> its CPUs; CPU ids -> those.
        Offline and unknown CPUs are left out (a probe cannot run on them)."""
        if isinstance(item_or_cpus, CpuCellItem):
            selected = self.selected_cpus() if item_or_cpus.isSelected() else []
            cpus = selected if len(selected) > 1 else [item_or_cpus.cpu_id]
        elif isinstance(item_or_cpus, (CoreBoxItem, GroupBoxItem)):
            cpus = item_or_cpus.cpus
        else:
            cpus = item_or_cpus
        cells = self._cells
        return tuple(sorted({int(c) for c in cpus if c in cells and cells[c].online}))

    def drag_label_for(self, item_or_cpus) -> str:
        """What the drag pixmap says: "CPU 5", "core 3 (CPU 3,7)", "package 0 (CPU 0-27,56-83)",
        "3 selected CPUs (1,3,5)", "package 0 (56 CPUs)" when the list is long; "" when the drag
        would carry no CPU."""
        cpus = self.drag_cpus_for(item_or_cpus)
        if not cpus:
            return ""
        listed = format_cpulist(cpus)
        if len(listed) > 24:
            # An interleaved package (0,2,4,...,110) would be elided to nothing useful: a count reads.
            listed = f"{len(cpus)} CPUs"
            if isinstance(item_or_cpus, (CoreBoxItem, GroupBoxItem)) and getattr(item_or_cpus, "label", ""):
                return f"{item_or_cpus.label} ({listed})"
            return listed
        if isinstance(item_or_cpus, CpuCellItem) and len(cpus) > 1:
            return f"{len(cpus)} selected CPUs ({listed})"
        if isinstance(item_or_cpus, CoreBoxItem) and item_or_cpus.core_index >= 0:
            return f"core {item_or_cpus.core_index} (CPU {listed})"
        if isinstance(item_or_cpus, GroupBoxItem) and item_or_cpus.label:
            return f"{item_or_cpus.label} (CPU {listed})"
        return f"CPU {listed}" if len(cpus) == 1 else f"CPUs {listed}"

    def cpu_mime_for(self, item_or_cpus) -> QMimeData | None:
        """The drag's MIME data: CPU_MIME with {"cpus": [...]} (drag_cpus_for), or None when it
        would carry no online CPU."""
        cpus = self.drag_cpus_for(item_or_cpus)
        if not cpus:
            return None
        mime = QMimeData()
        mime.setData(CPU_MIME, json.dumps({"cpus": list(cpus)}).encode("utf-8"))
        return mime

    def drag_pixmap(self, text: str) -> QPixmap:
        """A small label for the cursor to carry: `text` on a light chip with the grid's select colour."""
        fm = QFontMetricsF(_BOLD_FONT)
        text = fm.elidedText(text, Qt.TextElideMode.ElideMiddle, 360)
        w, h = math.ceil(fm.horizontalAdvance(text)) + 14, math.ceil(fm.height()) + 8
        dpr = self.devicePixelRatioF()
        pm = QPixmap(round(w * dpr), round(h * dpr))
        pm.setDevicePixelRatio(dpr)
        pm.fill(Qt.GlobalColor.transparent)
        p = QPainter(pm)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setPen(QPen(SELECT_COLOR, 1))
        p.setBrush(QColor(255, 255, 240, 235))
        p.drawRoundedRect(QRectF(0.5, 0.5, w - 1, h - 1), 4, 4)
        p.setFont(_BOLD_FONT)
        p.setPen(QColor(30, 30, 30))
        p.drawText(QRectF(0, 0, w, h), Qt.AlignmentFlag.AlignCenter, text)
        p.end()
        return pm

    def start_cpu_drag(self, item_or_cpus) -> Qt.DropAction:
        """Drag the CPUs of `item_or_cpus` (blocks in QDrag.exec until the drop or Escape)."""
        mime = self.cpu_mime_for(item_or_cpus)
        if mime is None:
            return Qt.DropAction.IgnoreAction
        drag = QDrag(self)
        drag.setMimeData(mime)
        drag.setPixmap(self.drag_pixmap(self.drag_label_for(item_or_cpus)))
        drag.setHotSpot(QPoint(-12, -4))     # the chip sits beside the cursor, not over the target
        action = drag.exec(Qt.DropAction.CopyAction)
        # The drag's own event loop ate the button release: let go of the cell that grabbed the mouse
        # on press, or it would take the next click.
        grabber = self.scene().mouseGrabberItem()
        if grabber is not None:
            grabber.ungrabMouse()
        return action

    def _on_scene_selection_changed(self) -> None:
        self.selection_changed.emit(self.selected_cpus())

    # -- tooltips: composed on demand from the newest state (figures change every tick) ----------------
    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            pos = event.pos()
            cell = self._cell_at(pos)
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
        topo = self._topology
        c = _cpu_map(topo).get(cpu_id) if topo is not None else None
        lines = [f"<b>CPU {cpu_id}</b>"]
        if c is not None:
            ident = []
            core = self._core_of(cpu_id)
            if core is not None:
                ident.append(f"core {core.core_index} ({', '.join(map(str, core.cpus))})")
            for attr, name in (("package_id", "package"), ("die_id", "die"), ("node", "node")):
                v = getattr(c, attr, None)
                if v is not None and v != -1:
                    ident.append(f"{name} {v}")
            if getattr(c, "kind", None):
                ident.append({"P": "performance core", "E": "efficient core"}.get(c.kind, c.kind))
            lines.append(", ".join(ident))
            flags = [f for f, on in (("offline", not getattr(c, "online", True)),
                                     ("isolated", getattr(c, "isolated", False)),
                                     ("nohz_full", getattr(c, "nohz_full", False))) if on]
            if flags:
                lines.append("<i>" + ", ".join(flags) + "</i>")
        st = self._state
        if st is not None and st.rates is not None:
            r = st.rates.per_cpu.get(cpu_id)
            if r is not None:
                lines.append(
                    f"IRQs {format_value(r.irq_per_s, '/s')}/s · softirqs "
                    f"{format_value(r.softirq_total_per_s, '/s')}/s · irq+softirq time "
                    f"{format_value(r.irq_softirq_pct, '%')} · busy {format_value(r.busy_pct, '%')}")
            top_irqs = _top_irqs(st, cpu_id)
            if top_irqs:
                lines.append("<u>top IRQs</u>: " + "; ".join(top_irqs))
            top_threads = _top_threads(st, cpu_id)
            if top_threads:
                lines.append("<u>top threads</u>: " + "; ".join(top_threads))
        elif st is not None and self._values is not None:
            v = self._values.values.get(cpu_id)
            if v is not None:
                lines.append(f"{self._values.label}: {format_value(v, self._values.unit)} (totals, not rates)")
        return "<br>".join(lines)

    def _core_of(self, cpu_id: int) -> CoreBoxItem | None:
        cell = self._cells.get(cpu_id)
        parent = cell.parentItem() if cell is not None else None
        return parent if isinstance(parent, CoreBoxItem) else None


# -- helpers ------------------------------------------------------------------------------------------
def _cpu_map(topology) -> dict:
    cpus = getattr(topology, "cpus", None) or {}
    if isinstance(cpus, dict):
        return cpus
    return {c.id: c for c in cpus}


def _place_with_top(root: _Node, inner: float, top: float, hybrid: bool) -> None:
    """Lay out every inner level at aspect `inner`, then the top level at the viewport's aspect."""
    seen: dict = {}
    for c in root.children:
        _place(c, inner, hybrid, None, seen)
    for c in root.children:
        _place(c, inner, hybrid, seen, None)
    if root.kind == "core":
        _place(root, top, hybrid)
        return
    sizes = [(c.w, c.h) for c in root.children]
    if not sizes:
        root.w, root.h, root.positions = CELL_W, CELL_H, []
        return
    pos, w, h = _best_flow(sizes, top)
    root.positions = list(pos)
    root.w, root.h = w, h


def _tree_from_group(group, topology) -> _Node:
    """Turn layout()'s Group tree into boxes to place.

    layout() already folds a level into its parent when both hold the same CPUs (Group.merged); the
    folded (kind, id) pairs stay reachable through group_item(). A core Group's id is its index in
    topology.cores; the boxes of offline CPUs (kind "offline") hold cores with no index.
    """
    cpus = _cpu_map(topology)

    def conv(g) -> _Node:
        if g.kind == "core":
            threads = tuple(int(c) for c in g.children)
            kinds = {getattr(cpus.get(t), "kind", None) for t in threads} - {None}
            return _Node("core", g.id, g.label, tuple(g.cpus), threads=threads,
                         core_kind=next(iter(kinds)) if len(kinds) == 1 else None,
                         core_index=g.id if g.id is not None else -1)
        n = _Node(g.kind, g.id, g.label, tuple(g.cpus), [])
        n.aliases = tuple(getattr(g, "merged", ()))
        for c in g.children:
            if not isinstance(c, int) and c.kind != "core" and not c.children:
                # A level that holds every CPU of its parent but was emitted as an empty sibling
                # (layout() does so for a package equal to the whole machine): no box of its own,
                # but group_item() still finds the parent under its name.
                n.aliases += ((c.kind, c.id), *getattr(c, "merged", ()))
                continue
            n.children.append(conv(c))
        return n

    root = conv(group)
    if root.kind != "machine":
        wrapper = _Node("machine", None, "", root.cpus, [root])
        wrapper.aliases = ()
        root = wrapper
    return root


def _top_irqs(state, cpu_id: int, n: int = 3) -> list[str]:
    rates = state.rates
    try:
        col = rates.cpus.index(cpu_id)
    except ValueError:
        return []
    found = []
    for irq, r in rates.irqs.items():
        if len(r.per_cpu) > col and r.per_cpu[col] > 0:
            found.append((r.per_cpu[col], irq))
    found.sort(reverse=True)
    table = state.sample.interrupts
    out = []
    for v, irq in found[:n]:
        row = table.row(irq) if table is not None else None
        name = (row.name if row is not None else "")[:28]
        out.append(f"{irq}{' ' + name if name else ''} {format_value(v, '/s')}/s")
    return out


def _top_threads(state, cpu_id: int, n: int = 3) -> list[str]:
    rates = state.rates
    tasks = getattr(rates, "tasks", None) or {}
    sample = state.sample.tasks
    found = [(r.cpu_pct, tid) for tid, r in tasks.items() if r.last_cpu == cpu_id and r.cpu_pct]
    found.sort(reverse=True)
    out = []
    for pct, tid in found[:n]:
        t = sample.tasks.get(tid) if sample is not None else None
        name = t.comm if t is not None else "?"
        out.append(f"{name} ({tid}) {format_value(pct, '%')}")
    return out
