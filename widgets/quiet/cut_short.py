"""CutShortBar: a non-modal bar at the top of the window when an isolate or include was cut short (a
crash, a kill -9: app/pinning/ledger.py CutShort), saying how far it got and offering one click to
finish it or to roll it back."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.pinning.ledger import CutShort


class CutShortBar(QFrame):
    """`offer(cut)` shows it; `finish_clicked(cut)` and `roll_back_clicked(cut)` ask the owner."""

    finish_clicked = Signal(object)
    roll_back_clicked = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("cut-short-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("QFrame#cut-short-bar { background: #fde8e4; border: 1px solid #d0705a; }")
        self.cut: CutShort | None = None
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.finish_button = QPushButton("Finish", self)
        self.roll_back_button = QPushButton("Roll back", self)
        self.dismiss_button = QPushButton("Dismiss", self)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(self.label, 1)
        for b in (self.finish_button, self.roll_back_button, self.dismiss_button):
            lay.addWidget(b)
        self.finish_button.clicked.connect(lambda: self.finish_clicked.emit(self.cut))
        self.roll_back_button.clicked.connect(lambda: self.roll_back_clicked.emit(self.cut))
        self.dismiss_button.clicked.connect(self.hide)
        self.hide()

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
