"""What pins did, shown without a modal dialog: the status bar's result line and the bar that offers
to restore what an earlier session left pinned. (The journal of every pin, the "Pins" dock, is
widgets/pinning/journal_view.py.)"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from app.format import format_value, plural, target_name
from app.pinning.journal import JournalEntry
from app.pinning.targets import PinResult, summarize
from widgets.notice_bar import NoticeBar
from widgets.theme import status_style


class PinResultLine(QWidget):
    """The status bar's line for the last pin: per-target text, an irqbalance warning, and
    "Retry with privileges" when a write was denied. The full list is in the tooltip. While a batch
    runs it shows how far it is ("isolate CPU 1: 14 of 100…") and a Cancel button."""

    retry_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.warning_label = QLabel(self)
        self.warning_label.setTextFormat(Qt.TextFormat.PlainText)
        for label in (self.label, self.warning_label):
            # Their text's width when there is room, less when not: a long failure sentence must not
            # widen the window (the tooltip has all of it).
            label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
            label.setMinimumWidth(40)
        self.warning_label.setStyleSheet(status_style("warn", self))
        self.warning_label.hide()
        self.retry_button = QPushButton("Retry with privileges", self)
        self.retry_button.setToolTip("Ask for administrator rights (pkexec) and write the denied pins "
                                     "through coremap-helper")
        self.retry_button.hide()
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop the batch between two writes; what was written stays journalled "
                                      "(Edit → Undo reverts it)")
        self.cancel_button.hide()
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.label)
        lay.addWidget(self.warning_label)
        lay.addWidget(self.retry_button)
        lay.addWidget(self.cancel_button)
        lay.addStretch(1)
        self.retry_button.clicked.connect(self.retry_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)

    def text(self) -> str:
        return self.label.text()

    def show_results(self, results: list[PinResult], what: str = "", warning: str = "",
                     can_retry: bool = False, summary: str = "", ok: bool | None = None) -> None:
        """`summary` replaces the line's own count of the results (an isolate says what moved and why
        the rest could not); `ok` its colour, when not every result being ok is the measure."""
        self.show_message(summary or summarize(results, what),
                          ok=not any(r.failed for r in results) if ok is None else ok)
        self.label.setToolTip("\n".join(r.line() for r in results))
        self.warning_label.setText(warning)
        self.warning_label.setToolTip(warning)
        self.warning_label.setVisible(bool(warning))
        self.retry_button.setVisible(can_retry and any(r.code == "denied" for r in results))

    def show_message(self, text: str, ok: bool = True) -> None:
        self.label.setText(text)
        self.label.setToolTip(text)
        self.label.setStyleSheet(status_style("ok" if ok else "fail", self))
        self.warning_label.hide()
        self.retry_button.hide()
        self.cancel_button.hide()

    def show_progress(self, what: str, done: int = 0, total: int = 0, last: PinResult | None = None) -> None:
        """A batch under way: "undo: 14 of 100…" (or "undo…" before its first result), with Cancel."""
        text = f"{what}: {done:,} of {total:,}…" if total else f"{what}…"
        self.label.setText(text)
        self.label.setToolTip(last.line() if last is not None else text)
        self.label.setStyleSheet("")
        self.warning_label.hide()
        self.retry_button.hide()
        self.cancel_button.show()


class RestoreBar(NoticeBar):
    """A notice at the top of the window: pins a previous run left in place, Restore / Dismiss."""

    restore_clicked = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("restore-bar", parent)
        self.restore_button = self.add_button("Restore", self.restore_clicked.emit)
        self.dismiss_button = self.add_button("Dismiss", self.hide)

    def offer(self, entries: list[JournalEntry]) -> None:
        n = len(entries)
        shown = [f"{target_name(e.kind, e.target_id, e.label, e.netdev)} was {format_value(e.kind, e.before)}"
                 for e in entries[:4]]
        more = f", and {n - 4} more" if n > 4 else ""
        self.label.setText(f"{plural(n, 'pin')} from an earlier coremap session "
                           f"{'are' if n > 1 else 'is'} still in place ({'; '.join(shown)}{more}). "
                           "Restore puts back what each had before.")
        self.show()
