"""The grid's graphics items: a hardware-thread cell, a core box, a group box (node, package, die,
L3, cluster), and the palette and fonts they paint with.

Labels and figures are painted at a fixed size in scene units and hidden (level of detail from the
view's scale) once they would be too small to read.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from app.format import format_compact, plural
from app.machine.topology import Cpu
from app.sampling.intruders import ManagedIrq, managed_by_cpu, managed_on_quiet, managed_sentence
from app.sampling.machine_state import MachineState
from widgets.colors import LUT, NO_DATA_COLOR, OFFLINE_COLOR, text_color_for
from widgets.topology.layout import CELL_H, CELL_W, GROUP_PAD, HEADER_H, KIND_STRIP, LayoutNode, cell_offset

_MIN_READABLE_PX = 6.5             # a label painted smaller than this on screen is hidden

ISO_COLOR = QColor(232, 89, 12)       # outside viridis's hues: an isolated CPU never looks "hot"
NOHZ_COLOR = QColor(214, 51, 108)
QUIET_COLOR = QColor(0, 121, 191)     # made quiet at run time by coremap (isolate), apart from isolcpus
LEAK_COLOR = QColor(200, 30, 30)      # a managed IRQ still delivered on a quiet CPU: the quiet is not whole
DIFF_COLOR = QColor(110, 40, 190)     # File → Compare with…: this CPU's IRQs differ on the other machine
SELECT_COLOR = QColor(0, 0, 0)
P_TINT = QColor(222, 232, 247)
E_TINT = QColor(226, 242, 226)
_CORE_BG = QColor(236, 236, 236)
_GROUP_BG = {
    "machine": QColor(255, 255, 255, 0),
    "node": QColor(226, 233, 243),
    "package": QColor(244, 244, 244),
    "die": QColor(250, 250, 250),
    "l3": QColor(255, 255, 255),
    "cluster": QColor(248, 248, 252),
    "offline": QColor(250, 250, 250),
}
_GROUP_BORDER = {"node": QColor(110, 140, 180), "package": QColor(120, 120, 120)}

_LABEL_FONT = QFont()
_LABEL_FONT.setPixelSize(11)
BOLD_FONT = QFont(_LABEL_FONT)
BOLD_FONT.setBold(True)
_SMALL_FONT = QFont()
_SMALL_FONT.setPixelSize(9)
_TINY_FONT = QFont()
_TINY_FONT.setPixelSize(7)
_HEADER_FONT = QFont()
_HEADER_FONT.setPixelSize(12)
_HEADER_FONT.setBold(True)


def _level_of_detail(painter: QPainter) -> float:
    return QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())


def hatch_brush() -> QBrush:
    """The pattern an offline CPU is painted with (the legend's "off" swatch too)."""
    return QBrush(OFFLINE_COLOR, Qt.BrushStyle.BDiagPattern)


@functools.cache
def header_width(label: str) -> float:
    """The width a group box needs to show `label` whole in its header band (layout.place)."""
    return QFontMetricsF(_HEADER_FONT).horizontalAdvance(label) + 2 * GROUP_PAD + 4


class CpuCellItem(QGraphicsItem):
    """One hardware thread.

    Contract: boundingRect is the cell rectangle (0, 0, CELL_W, CELL_H) grown by the widest border
    (the selection outline, 2.5 units) so no outline pixel is left behind. Everything painted depends
    on `color_index`, `figure`, the flags (online / isolated / nohz_full / quiet), the managed-IRQ
    mark, the compared mark and selection; `recolor()` calls update() only when index or figure changed, which is the
    whole per-tick cost, `set_quiet()` only when the quiet flag changed, `set_managed()` only when the
    mark's text changed.
    """

    _MARGIN = 2.5

    def __init__(self, cpu_id: int, cpu: Cpu | None, parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.cpu_id = cpu_id
        self.cpus = (cpu_id,)
        self.online = cpu.online if cpu is not None else True
        self.isolated = cpu.isolated if cpu is not None else False
        self.nohz_full = cpu.nohz_full if cpu is not None else False
        self.quiet = False                 # made quiet by an isolate in effect (app/pinning/ledger.py)
        self.partial = False               # ... by one a crash cut short (badged "partial")
        self.color_index: int | None = None
        self.figure = ""
        self.managed_mark = ""             # "IRQ 36 9.4k/s": managed IRQs still delivered here while quiet
        self.managed_tip = ""              # why, for the tooltip
        self.compared_tip = ""             # how its IRQs differ on a compared machine (widgets/compare.py)
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

    def set_quiet(self, quiet: bool, partial: bool = False) -> None:
        if (quiet, partial) != (self.quiet, self.partial):
            self.quiet, self.partial = quiet, partial
            self.update()

    def set_managed(self, irqs: list[ManagedIrq]) -> None:
        """The managed IRQs still delivered on this quiet CPU (app/sampling/intruders.py), marked with
        their rate here."""
        if not irqs:
            mark, tip = "", ""
        else:
            rates = [v for m in irqs for v in (m.per_s.get(self.cpu_id),) if v is not None]
            rate = f" {format_compact(sum(rates))}/s" if rates else ""
            mark = (f"IRQ {irqs[0].irq}" if len(irqs) == 1 else plural(len(irqs), "IRQ")) + rate
            tip = managed_sentence(irqs, self.cpu_id)
        if (mark, tip) != (self.managed_mark, self.managed_tip):
            self.managed_mark, self.managed_tip = mark, tip
            self.update()

    def set_compared(self, tip: str) -> None:
        """Mark this CPU as one whose IRQ load or placement differs on the compared machine (`tip`: how;
        "" clears the mark)."""
        if tip != self.compared_tip:
            self.compared_tip = tip
            self.update()

    def paint(self, painter: QPainter, option, widget=None) -> None:
        lod = _level_of_detail(painter)
        fg = self._paint_fill(painter)
        self._paint_marks(painter, lod)
        if 11 * lod >= _MIN_READABLE_PX:
            self._paint_text(painter, lod, fg)

    def _paint_fill(self, painter: QPainter) -> QColor:
        """The cell's colour (hatched when offline); returns the text colour that reads on it."""
        r = QRectF(0, 0, CELL_W, CELL_H)
        if not self.online:
            painter.fillRect(r, QColor(225, 225, 225))
            painter.fillRect(r, hatch_brush())
            return QColor(60, 60, 60)
        if self.color_index is None:
            painter.fillRect(r, NO_DATA_COLOR)
            return QColor(60, 60, 60)
        painter.fillRect(r, LUT[self.color_index])
        return text_color_for(self.color_index)

    def _paint_marks(self, painter: QPainter, lod: float) -> None:
        """The isolated border, the quiet band, the nohz_full corner and the selection outline."""
        r = QRectF(0, 0, CELL_W, CELL_H)
        if self.quiet:
            # A band along the bottom, solid and at least 2 device pixels high: it reads at any zoom
            # and never hides the isolated border, which a CPU can have as well.
            h = max(5.0, 2.0 / max(lod, 1e-3))
            painter.fillRect(QRectF(0, CELL_H - h, CELL_W, h), QUIET_COLOR)
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
        if self.compared_tip:
            # The opposite corner from nohz_full's flag, so both read at any zoom.
            s = 11.0
            tri = QPolygonF([QPointF(0, CELL_H - s), QPointF(0, CELL_H), QPointF(s, CELL_H)])
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(DIFF_COLOR)
            painter.drawPolygon(tri)
        if self.isSelected():
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.setPen(QPen(QColor(255, 255, 255), 1.5))
            painter.drawRect(r.adjusted(-0.5, -0.5, 0.5, 0.5))
            painter.setPen(QPen(SELECT_COLOR, 2.5))
            painter.drawRect(r.adjusted(-2, -2, 2, 2))

    def badges(self) -> list[tuple[str, QColor]]:
        """The badges the cell shows, in order, with their colours: "quiet" (or "partial"), "iso" for
        a CPU the scheduler leaves alone (Cpu.isolated: isolcpus= with domain, not managed_irq alone,
        issue 30) and "nohz" for nohz_full."""
        badges = []
        if self.quiet:
            badges.append(("partial" if self.partial else "quiet", QUIET_COLOR))
        if self.isolated:
            badges.append(("iso", ISO_COLOR))
        if self.nohz_full:
            badges.append(("nohz", NOHZ_COLOR))
        return badges

    def _paint_text(self, painter: QPainter, lod: float, fg: QColor) -> None:
        """The CPU number, its figure (or "off"), and the iso / nohz badges."""
        painter.setPen(fg)
        painter.setFont(BOLD_FONT)
        painter.drawText(QRectF(4, 2, CELL_W - 8, 14), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         str(self.cpu_id))
        if not self.online:
            painter.setFont(_LABEL_FONT)
            painter.drawText(QRectF(4, 18, CELL_W - 8, 14), Qt.AlignmentFlag.AlignLeft, "off")
            return
        if self.figure:
            painter.setFont(_LABEL_FONT)
            # up a little over a managed-IRQ mark, which takes the cell's bottom
            painter.drawText(QRectF(4, 15 if self.managed_mark else 18, CELL_W - 8, 14),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.figure)
        if self.managed_mark and 7 * lod >= _MIN_READABLE_PX:
            # Over the quiet band, in red, below the figure: what spoils the quiet. The cell has no
            # other free row (number and badges, figure, band).
            painter.setFont(_TINY_FONT)
            chip = QRectF(0, CELL_H - 8, CELL_W, 8)
            painter.fillRect(chip, LEAK_COLOR)
            painter.setPen(QColor(255, 255, 255))
            text = QFontMetricsF(_TINY_FONT).elidedText(self.managed_mark, Qt.TextElideMode.ElideRight, CELL_W - 2)
            painter.drawText(chip, Qt.AlignmentFlag.AlignCenter, text)
        badges = self.badges()
        if 9 * lod >= _MIN_READABLE_PX and badges:
            painter.setFont(_SMALL_FONT)
            # Badges sit at the right edge on a white chip so they read on any cell colour.
            # Below the nohz corner flag; with three badges the first moves left of the flag instead,
            # so the third still ends inside the cell.
            y = 3.0 if not self.nohz_full or len(badges) > 2 else 12.0
            for text, color in badges:
                w = QFontMetricsF(_SMALL_FONT).horizontalAdvance(text) + 4
                beside_flag = self.nohz_full and y < 11.0
                chip = QRectF(CELL_W - w - (14 if beside_flag else 3), y, w, 10)
                painter.fillRect(chip, QColor(255, 255, 255, 225))
                painter.setPen(color)
                painter.drawText(chip, Qt.AlignmentFlag.AlignCenter, text)
                y += 11


class _BoxItem(QGraphicsItem):
    """A box the layout sizes and places: a core or a group.

    Contract: boundingRect is exactly `rect` (children draw themselves); the box repaints only when
    the layout moves it (set_rect calls prepareGeometryChange).
    """

    def __init__(self, parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.rect = QRectF()

    def boundingRect(self) -> QRectF:
        return self.rect

    def set_rect(self, r: QRectF) -> None:
        self.prepareGeometryChange()
        self.rect = r


class CoreBoxItem(_BoxItem):
    """A core: its hardware threads side by side, after a P / E strip on a hybrid machine."""

    def __init__(self, index: int, cpus: tuple[int, ...], kind: str | None, label: str,
                 parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.core_index = index
        self.cpus = tuple(cpus)
        self.kind = kind           # "P", "E" or None
        self.label = label

    def paint(self, painter: QPainter, option, widget=None) -> None:
        bg = P_TINT if self.kind == "P" else E_TINT if self.kind == "E" else _CORE_BG
        painter.setPen(QPen(QColor(150, 150, 150), 0))
        painter.setBrush(bg)
        painter.drawRect(self.rect)
        if self.kind and 11 * _level_of_detail(painter) >= _MIN_READABLE_PX:
            painter.setPen(QColor(40, 70, 130) if self.kind == "P" else QColor(40, 110, 40))
            painter.setFont(BOLD_FONT)
            painter.drawText(QRectF(self.rect.x(), self.rect.y(), KIND_STRIP + 1, self.rect.height()),
                             Qt.AlignmentFlag.AlignCenter, self.kind)


class GroupBoxItem(_BoxItem):
    """A node, package, die, L3 group or cluster: a framed box with a header label.

    The header text is elided to the box width and hidden when the view's scale makes it unreadable
    (nothing cached, so no invalidation beyond set_rect).
    """

    def __init__(self, kind: str, gid, label: str, cpus: tuple[int, ...], parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.kind = kind
        self.group_id = gid
        self.label = label
        self.cpus = tuple(cpus)
        self.framed = kind != "machine"

    def paint(self, painter: QPainter, option, widget=None) -> None:
        if not self.framed:
            return
        border = _GROUP_BORDER.get(self.kind, QColor(175, 175, 175))
        painter.setPen(QPen(border, 1.5 if self.kind in _GROUP_BORDER else 1.0))
        painter.setBrush(_GROUP_BG.get(self.kind, QColor(250, 250, 250)))
        painter.drawRoundedRect(self.rect, 3, 3)
        if 12 * _level_of_detail(painter) < _MIN_READABLE_PX:
            return
        painter.setFont(_HEADER_FONT)
        painter.setPen(QColor(40, 40, 40))
        tr = QRectF(self.rect.x() + GROUP_PAD, self.rect.y(), self.rect.width() - 2 * GROUP_PAD, HEADER_H)
        text = QFontMetricsF(_HEADER_FONT).elidedText(self.label, Qt.TextElideMode.ElideRight, tr.width())
        painter.drawText(tr, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)


@dataclass
class GridItems:
    """A layout tree's items (`build_items`): cells by CPU, core boxes by core index, group boxes by
    (kind, id) and alias, and each node's item by id(node)."""
    top: QGraphicsItem
    cells: dict[int, CpuCellItem]
    cores: list[CoreBoxItem | None]
    groups: dict[tuple[str, object], GroupBoxItem]
    by_node: dict[int, QGraphicsItem]


def build_items(root: LayoutNode, cpus: dict[int, Cpu]) -> GridItems:
    """An item for every node of the layout tree `root`, each in its parent's; placed by `place_items`."""
    cells: dict[int, CpuCellItem] = {}
    cores: list[CoreBoxItem | None] = []
    groups: dict[tuple[str, object], GroupBoxItem] = {}
    by_node: dict[int, QGraphicsItem] = {}

    def build(n: LayoutNode, parent_item):
        if n.kind == "core":
            item = CoreBoxItem(n.core_index, n.cpus, n.core_kind, n.label, parent_item)
            if n.core_index >= 0:
                while len(cores) <= n.core_index:
                    cores.append(None)
                cores[n.core_index] = item
            for cpu in n.threads:
                cells[cpu] = CpuCellItem(cpu, cpus.get(cpu), item)
        else:
            item = GroupBoxItem(n.kind, n.gid, n.label, n.cpus, parent_item)
            groups.setdefault((n.kind, n.gid), item)
            for alias in n.aliases:
                groups.setdefault(alias, item)
            for c in n.children:
                build(c, item)
        by_node[id(n)] = item
        return item
    return GridItems(build(root, None), cells, cores, groups, by_node)


def place_items(root: LayoutNode, items: GridItems, hybrid: bool) -> None:
    """Move and size every item as the arranged tree `root` says (layout.arrange); none is rebuilt."""
    def apply(n: LayoutNode, x: float, y: float):
        item = items.by_node[id(n)]
        item.setPos(x, y)
        item.set_rect(QRectF(0, 0, n.w, n.h))
        if n.kind == "core":
            for i, cpu in enumerate(n.threads):
                items.cells[cpu].setPos(*cell_offset(i, hybrid))
            return
        for c, (cx, cy) in zip(n.children, n.positions):
            apply(c, cx, cy)
    apply(root, 0.0, 0.0)


def mark_managed_irqs(cells: dict[int, CpuCellItem], state: MachineState, refused=frozenset()) -> None:
    """Give each quiet cell the managed IRQs still delivered on it (none to the others): the grid's
    per-state call, after recolouring. `refused`: app/sampling/intruders.py managed_on_quiet."""
    quiet = [cpu for cpu, cell in cells.items() if cell.quiet]
    by_cpu = managed_by_cpu(managed_on_quiet(state.irqs, state.rates, quiet, refused)) if quiet else {}
    for cpu, cell in cells.items():
        cell.set_managed(by_cpu.get(cpu, []))

