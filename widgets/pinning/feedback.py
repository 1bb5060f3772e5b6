"""What pins did, shown without a modal dialog: the status bar's result line, the journal of every
pin (the "Pins" dock), and the bar that offers to restore what an earlier session left pinned."""
from __future__ import annotations

import time

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QAction, QColor
from PySide6.QtWidgets import (QAbstractItemView, QFrame, QHBoxLayout, QLabel, QMenu, QPushButton, QSizePolicy,
                               QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from app.format import format_change, format_cpus, target_name
from app.pinning.journal import GuardEvent, JournalEntry
from app.pinning.targets import PinResult, summarize
from app.quiet.guard import event_line

OK_COLOR = "#1b5e20"
FAIL_COLOR = "#b71c1c"
WARN_COLOR = "#a04a00"


def _target_text(e: JournalEntry | GuardEvent) -> str:
    """"IRQ 24 (eth0-rx-0)", "thread 1234 (java)", "RPS eth0 rx-0": a journal line's target."""
    return target_name(e.kind, e.target_id, e.label, e.netdev)


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
        self.warning_label.setStyleSheet(f"color: {WARN_COLOR};")
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
        self.label.setStyleSheet(f"color: {OK_COLOR if ok else FAIL_COLOR};")
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


class PinJournalWidget(QWidget):
    """The pin journal of this machine, newest first: one row per write (pin, undo, redo, restore,
    isolate, include, a new thread of a pinned process) and per change the guard found (app/quiet/guard.py).
    The "Guard" column says, for a pin in effect, whether the guard re-applies it or only reports a
    change; a row's context menu sets that for its batch, which `policy_requested(batch, reapply)`
    asks the owner to journal."""

    COLUMNS = ("Time", "Action", "Target", "CPUs", "Result", "#", "Guard")
    policy_requested = Signal(int, bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.tree = QTreeWidget(self)
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._on_tree_context_menu)
        for col, w in enumerate((70, 60, 220, 110, 260, 50)):
            self.tree.setColumnWidth(col, w)
        self.buttons = QHBoxLayout()
        self.buttons.setContentsMargins(0, 0, 0, 0)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(self.buttons)
        lay.addWidget(self.tree)
        self._signature: tuple = ()
        self._policies: dict[int, bool] = {}
        self._in_effect: frozenset[int] = frozenset()

    def add_action_button(self, action: QAction) -> None:
        b = QToolButton(self)
        b.setDefaultAction(action)
        self.buttons.addWidget(b)

    def finish_buttons(self) -> None:
        self.buttons.addStretch(1)

    def set_entries(self, entries: list[JournalEntry], events: list[GuardEvent] = (),
                    policies: dict[int, bool] | None = None, in_effect=()) -> bool:
        """Show `entries` and the guard's `events` (any order); `policies` (batch -> re-apply) and the
        batches `in_effect` (the user's batch ids whose pins are guarded) mark the "#" column. False
        when nothing changed since the last call."""
        policies = dict(policies or {})
        sig = (tuple((e.id, e.state, e.code) for e in entries), len(events), tuple(sorted(policies.items())),
               tuple(sorted(in_effect)))
        if sig == self._signature:
            return False
        self._signature = sig
        self._policies, self._in_effect = policies, frozenset(in_effect)
        self.tree.clear()
        rows = [(e.time, 0, e.id, self._entry_item(e)) for e in entries]
        rows += [(ev.time, 1, i, self._event_item(ev)) for i, ev in enumerate(events)]
        self.tree.addTopLevelItems([item for *_, item in sorted(rows, key=lambda r: r[:3], reverse=True)])
        return True

    def _guard_text(self, batch: int) -> str:
        if batch not in self._in_effect:
            return ""
        return f"#{batch}: {'re-apply' if self._policies.get(batch) else 'report'}"

    def _entry_item(self, e: JournalEntry) -> QTreeWidgetItem:
        action = e.origin.split(":", 1)[0]
        result = e.state + (f" {e.code}" if e.code and e.code != "ok" else "")
        item = QTreeWidgetItem([time.strftime("%H:%M:%S", time.localtime(e.time)), action, _target_text(e),
                                format_change(e.before, e.requested),
                                result + (f": {e.message}" if e.message and e.state == "failed" else ""),
                                str(e.id), self._guard_text(e.batch)])
        item.setData(6, Qt.ItemDataRole.UserRole, e.batch)
        if e.message:
            for c in range(len(self.COLUMNS)):
                item.setToolTip(c, e.message)
        if e.state == "failed":
            item.setForeground(4, QColor(FAIL_COLOR))
        return item

    def _event_item(self, ev: GuardEvent) -> QTreeWidgetItem:
        """A change someone else made to a guarded pin: what was set -> what was found, by whom."""
        done = {"reapplied": "re-applied", "reported": "reported", "limited": "re-apply limited",
                "failed": "re-apply failed"}[ev.action]
        item = QTreeWidgetItem([time.strftime("%H:%M:%S", time.localtime(ev.time)), "changed", _target_text(ev),
                                format_change(ev.expected, ev.found), f"by {ev.who}; {done}", "",
                                self._guard_text(ev.batch)])
        item.setData(6, Qt.ItemDataRole.UserRole, ev.batch)
        line = event_line(ev)
        for c in range(len(self.COLUMNS)):
            item.setToolTip(c, line)
            item.setForeground(c, QColor(WARN_COLOR if ev.action != "reapplied" else OK_COLOR))
        return item

    def policy_menu(self, batch: int) -> QMenu:
        """The context menu of a row of batch `batch`: re-apply its pins when changed, or only report."""
        menu = QMenu(self.tree)
        act = menu.addAction(f"Re-apply pin #{batch} when someone changes it")
        act.setCheckable(True)
        act.setChecked(bool(self._policies.get(batch)))
        act.setEnabled(batch in self._in_effect)
        if batch not in self._in_effect:
            act.setText(f"Pin #{batch} is not in effect (undone or restored): nothing is guarded")
        act.toggled.connect(lambda on, b=batch: self.policy_requested.emit(b, on))
        return menu

    def _on_tree_context_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        if item is None:
            return
        self.policy_menu(int(item.data(6, Qt.ItemDataRole.UserRole))).popup(self.tree.viewport().mapToGlobal(pos))

    def row_texts(self) -> list[tuple[str, ...]]:
        out = []
        for i in range(self.tree.topLevelItemCount()):
            it = self.tree.topLevelItem(i)
            out.append(tuple(it.text(c) for c in range(len(self.COLUMNS))))
        return out


class RestoreBar(QFrame):
    """A non-modal bar at the top of the window: pins a previous run left in place, Restore / Dismiss."""

    restore_clicked = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("restore-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("QFrame#restore-bar { background: #fff4d6; border: 1px solid #e0b040; }")
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.restore_button = QPushButton("Restore", self)
        self.dismiss_button = QPushButton("Dismiss", self)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.restore_button)
        lay.addWidget(self.dismiss_button)
        self.restore_button.clicked.connect(self.restore_clicked)
        self.dismiss_button.clicked.connect(self.hide)
        self.hide()

    def offer(self, entries: list[JournalEntry]) -> None:
        n = len(entries)
        shown = [f"{_target_text(e)} was {format_cpus(e.before) if e.before is not None else '?'}"
                 for e in entries[:4]]
        more = f", and {n - 4} more" if n > 4 else ""
        self.label.setText(f"{n} pin{'s' if n > 1 else ''} from an earlier coremap session "
                           f"{'are' if n > 1 else 'is'} still in place ({'; '.join(shown)}{more}). "
                           "Restore puts back the affinity each had before.")
        self.show()
