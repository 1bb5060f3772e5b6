"""TextLine: one line of plain text that changes often (a count, a note) without asking for room.

A QLabel's setText calls updateGeometry, and every layout above it (the table's, its dock's, the
window's dock area, the status bar) lays out again and repaints all it holds: with 2,000 threads the
thread count changed every 3 s and repainted the whole bottom of the window with it (issue 12: no
repaint of what did not change). A TextLine is one line high whatever its text, takes the width its
layout gives it (set a stretch), and elides what does not fit; setText repaints only itself.
"""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

PAD = 2


class TextLine(QWidget):
    def __init__(self, parent=None, text: str = ""):
        super().__init__(parent)
        self._text = text
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(self.fontMetrics().height() + 2 * PAD)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.update()

    def sizeHint(self) -> QSize:
        return QSize(0, self.height())

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        rect = self.rect().adjusted(PAD, 0, -PAD, 0)
        shown = self.fontMetrics().elidedText(self._text, Qt.TextElideMode.ElideRight, rect.width())
        p.drawText(rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), shown)
        p.end()
