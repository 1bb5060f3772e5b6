"""SessionBar: the notice above the grid while a saved session is shown, which is read-only, with the
way back to the machine shown before it (issue 23: "Reopen it" replaced the live window with a
session and offered no way back to live). File → Back to Live does the same.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton

from widgets.theme import apply_notice_style

NAME = "session-bar"


class SessionBar(QFrame):
    """Hidden until `show_session`; `back_requested` when its button is clicked."""
    back_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName(NAME)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        apply_notice_style(self, NAME)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 2, 8, 2)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.back_button = QPushButton("Back to live", self)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.back_button)
        self.back_button.clicked.connect(self.back_requested)
        self.hide()

    def show_session(self, path: str, host: str, back_to: str) -> None:
        """Say which session is shown, read-only, and what the button goes back to ("live", a folder)."""
        self.label.setText(f"Showing the saved session {path} ({host or 'machine'}), read-only: "
                           "pins and probes are off.")
        self.back_button.setText(f"Back to {back_to}")
        self.back_button.setToolTip(f"Show {back_to} again, as before the session was opened (File → Back to Live)")
        self.show()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            apply_notice_style(self, NAME)
