"""CutShortBar: a non-modal bar at the top of the window when an isolate or include was cut short (a
crash, a kill -9: app/pinning/ledger.py CutShort), saying how far it got and offering one click to
finish it or to roll it back."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from app.pinning.ledger import CutShort
from widgets.notice_bar import NoticeBar


class CutShortBar(NoticeBar):
    """`offer(cut)` shows it; `finish_clicked(cut)` and `roll_back_clicked(cut)` ask the owner."""

    finish_clicked = Signal(object)
    roll_back_clicked = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__("cut-short-bar", parent)
        self.cut: CutShort | None = None
        self.finish_button = self.add_button("Finish", lambda: self.finish_clicked.emit(self.cut))
        self.roll_back_button = self.add_button("Roll back", lambda: self.roll_back_clicked.emit(self.cut))
        self.dismiss_button = self.add_button("Dismiss", self.hide)

    def offer(self, cut: CutShort | None) -> None:
        self.cut = cut
        if cut is None:
            self.hide()
            return
        finish = "Finish moves the rest" if cut.action == "isolate" else "Finish gives back the rest"
        self.label.setText(f"{cut.sentence()}. {finish}; Roll back puts back what it wrote.")
        self.finish_button.setToolTip(f"Preview {cut.action} of the same CPUs again and write what is left")
        self.roll_back_button.setToolTip(f"Write back the value each target had before #{cut.batch}")
        self.show()
