"""SessionBar: the notice above the grid while a saved session is shown, which is read-only, with the
way back to the machine shown before it (issue 23: "Reopen it" replaced the live window with a
session and offered no way back to live). File → Back to Live does the same.
"""
from __future__ import annotations

from PySide6.QtCore import Signal

from widgets.notice_bar import NoticeBar


class SessionBar(NoticeBar):
    """Hidden until `show_session`; `back_requested` when its button is clicked."""
    back_requested = Signal()

    def __init__(self, parent=None):
        super().__init__("session-bar", parent)
        self.back_button = self.add_button("Back to live", self.back_requested.emit)

    def show_session(self, path: str, host: str, back_to: str) -> None:
        """Say which session is shown, read-only, and what the button goes back to ("live", a folder)."""
        self.label.setText(f"Showing the saved session {path} ({host or 'machine'}), read-only: "
                           "pins and probes are off.")
        self.back_button.setText(f"Back to {back_to}")
        self.back_button.setToolTip(f"Show {back_to} again, as before the session was opened (File → Back to Live)")
        self.show()
