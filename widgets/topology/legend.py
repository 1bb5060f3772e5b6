"""ColorLegend: the strip under the grid that says what a cell's colour means."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QLinearGradient, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from widgets.colors import LUT, ColorScale, format_value
from widgets.topology.items import DIFF_COLOR, E_TINT, ISO_COLOR, NOHZ_COLOR, P_TINT, QUIET_COLOR, hatch_brush
from widgets.topology.probe_heat import LEVELS


class ColorLegend(QWidget):
    """Colour bar with the metric's name, unit, scale kind and min/max, then a key for the marks."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = ""
        self.scale: ColorScale | None = None
        self.unit = ""
        self.note = ""
        self.hybrid = False
        self.heat = ""                    # the probe whose per-CPU heat the grid shows (probe_heat.py)
        self.compared = False             # the grid marks CPUs whose IRQs differ (widgets/compare.py)
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

    def set_heat(self, probe: str) -> None:
        """Key the grid's probe heat band ("" when the grid shows none)."""
        if probe != self.heat:
            self.heat = probe
            self.update()

    def set_compared(self, on: bool) -> None:
        """Key the grid's compared mark (File → Compare with…) while it marks CPUs."""
        if on != self.compared:
            self.compared = on
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
        # never under the key of marks on the right: elided there, the whole title is the tooltip
        room = max(40.0, self.width() - self._key_width(fm) - x - 16)
        title = fm.elidedText(title, Qt.TextElideMode.ElideRight, room)
        p.drawText(QRectF(x, 0, fm.horizontalAdvance(title) + 4, h / 2), Qt.AlignmentFlag.AlignVCenter, title)
        bar_w = max(160.0, min(320.0, self.width() * 0.22))
        bar = QRectF(x, h / 2 + 1, bar_w, h / 2 - 5)
        x = self._paint_bar(p, fm, bar) if self.scale is not None else x
        if self.note:
            nf = QFont(f)
            nf.setBold(True)
            p.setFont(nf)
            p.setPen(QColor(170, 60, 0))
            p.drawText(QRectF(x, bar.y(), QFontMetricsF(nf).horizontalAdvance(self.note) + 6, bar.height()),
                       Qt.AlignmentFlag.AlignVCenter, self.note)
            p.setFont(f)
        self._paint_key(p, fm)
        p.end()

    def _paint_bar(self, p: QPainter, fm: QFontMetricsF, bar: QRectF) -> float:
        """The scale's minimum, the colour bar (decade ticks on a log scale) and its maximum, from
        bar's left edge; returns where the next text may start."""
        bar_x = bar.x()
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
        return bar.right() + 6 + fm.horizontalAdvance(hi) + 14

    def _keys(self) -> list[tuple[str, str]]:
        keys = [("quiet", "quiet (coremap)"), ("iso", "isolated"), ("nohz", "nohz_full"), ("off", "offline")]
        if self.hybrid:
            keys += [("P", "performance core"), ("E", "efficient core")]
        if self.heat:
            keys.insert(0, ("heat", f"{self.heat}: longest {'gap' if self.heat == 'jitter' else 'wakeup'}, "
                                    "10 µs · 100 µs · 1 ms"))
        if self.compared:
            keys.insert(0, ("diff", "IRQs differ (compared)"))
        return keys

    def _key_width(self, fm: QFontMetricsF) -> float:
        """How much of the top line, from the right, the key of marks takes (as _paint_key lays it)."""
        return sum(fm.horizontalAdvance(text) + 30 for _mark, text in self._keys())

    def _paint_key(self, p: QPainter, fm: QFontMetricsF) -> None:
        """A swatch and a word for each mark a cell can carry, right-aligned on the top line."""
        keys = self._keys()
        kx = self.width() - 6.0
        items = []
        for mark, text in reversed(keys):
            tw = fm.horizontalAdvance(text)
            kx -= tw
            items.append((mark, kx - 18, kx, text, tw))
            kx -= 18 + 12
        for mark, sx, tx, text, tw in items:
            sw = QRectF(sx, 4, 14, 12)
            if mark == "quiet":
                p.fillRect(sw, QColor(200, 200, 200))
                p.fillRect(QRectF(sw.x(), sw.bottom() - 4, sw.width(), 4), QUIET_COLOR)
            elif mark == "iso":
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
            elif mark == "heat":
                # the band's four colours, shortest to longest (LEVELS), along the swatch's top
                for i, (_upto, color, _words) in enumerate(LEVELS):
                    p.fillRect(QRectF(sw.x() + i * sw.width() / len(LEVELS), sw.y(), sw.width() / len(LEVELS), 5),
                               color)
                p.fillRect(QRectF(sw.x(), sw.y() + 5, sw.width(), sw.height() - 5), QColor(200, 200, 200))
            elif mark == "diff":
                p.fillRect(sw, QColor(200, 200, 200))
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(DIFF_COLOR)
                p.drawPolygon(QPolygonF([QPointF(sw.left(), sw.bottom() - 7), sw.bottomLeft(),
                                         QPointF(sw.left() + 7, sw.bottom())]))
                p.setBrush(Qt.BrushStyle.NoBrush)
            elif mark == "off":
                p.fillRect(sw, QColor(225, 225, 225))
                p.fillRect(sw, hatch_brush())
            else:
                p.fillRect(sw, P_TINT if mark == "P" else E_TINT)
                p.setPen(QColor(40, 40, 40))
                p.drawText(sw, Qt.AlignmentFlag.AlignCenter, mark)
            p.setPen(self.palette().windowText().color())
            p.drawText(QRectF(tx, 0, tw + 2, 20), Qt.AlignmentFlag.AlignVCenter, text)
