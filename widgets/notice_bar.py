"""NoticeBar: the frame of every notice across the top of the window — pins an earlier session left, a
Make quiet cut short, a window that died, a saved session shown read-only. Each is the palette's
window tinted amber (widgets/theme.py notice_style), again when the desktop switches theme, with its
text (plain, wrapped: it holds paths and names from the machine) and its buttons in one row; a
non-modal line, never a dialog."""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from widgets.theme import apply_notice_style


class NoticeBar(QFrame):
    """`label`, then the buttons `add_button` puts after it; `hidden` until its owner shows it."""

    def __init__(self, name: str, parent: QWidget | None = None, *, hidden: bool = True):
        super().__init__(parent)
        self.setObjectName(name)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        apply_notice_style(self, name)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(8, 3, 8, 3)
        self._row.addWidget(self.label, 1)
        if hidden:
            self.hide()

    def add_button(self, text: str, clicked: Callable[[], object] | None = None) -> QPushButton:
        button = QPushButton(text, self)
        self._row.addWidget(button)
        if clicked is not None:
            button.clicked.connect(lambda _checked=False: clicked())
        return button

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            apply_notice_style(self, self.objectName())
