"""WindowStatusBar: the main window's status bar: a line for a note or the selection, the timed
messages of the status sink (QStatusBar.showMessage), and at the right coremap's own CPU and memory
and how long the last tick took."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from app.machine.usage import OwnUsage
from widgets.text_line import TextLine


class WindowStatusBar(QStatusBar):
    """Attributes: status_label (the note or selection), tick_label (own usage and tick time)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        # A note or the selection, rewritten as they change ("2,110 threads: ..."): a TextLine, which
        # repaints itself only (widgets/text_line.py).
        self.status_label = TextLine(self)
        self.addWidget(self.status_label, 1)
        # coremap's own CPU and memory, and how long the last tick took, rewritten every tick: a fixed
        # size (the widest such line) so the new text repaints this label only, not the status bar and
        # the window under it (issue 12: no repaint of what did not change).
        self._own_usage = OwnUsage()
        self.tick_label = QLabel(self)
        self.tick_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        # Fixed in both directions: only then does QLabel.setText skip updateGeometry, whose layout
        # request makes QStatusBar lay out and repaint all of itself.
        self.tick_label.setFixedSize(self.tick_label.fontMetrics().horizontalAdvance(
            "coremap 100% CPU · 1023.99 MiB · tick 999 ms") + 12, self.tick_label.sizeHint().height())
        self.tick_label.setToolTip("coremap's own use of one CPU since the last tick (every thread), its "
                                   "memory (RSS), and how long the last sample took to read")
        self.addPermanentWidget(self.tick_label)

    def show_tick(self, seconds: float, *, ticking: bool = True) -> None:
        """coremap's own usage since the last tick, and that the tick took `seconds` to read; its CPU
        share only where ticks follow (`ticking`): a capture is read once, and a share spanning the
        window's start would stay on screen as coremap's use."""
        self.tick_label.setText(self._own_usage.text(seconds, cpu=ticking))
