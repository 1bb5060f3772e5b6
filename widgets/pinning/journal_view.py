"""The "Pins" dock: the pin journal of the machine shown, newest first, one row per write (pin, undo,
redo, restore, isolate, include, a new thread of a pinned process) and per change the guard found
(app/quiet/guard.py).

JournalModel is a table model whose rows are the journal's entries and guard events, newest first.
The journal only grows and an isolate adds hundreds of rows at once, so `set_entries` inserts the new
rows at the top (one beginInsertRows), refreshes the rows whose state changed (a pending write
marked done) with dataChanged, and builds nothing for the rows already there; the view asks only for
the cells it paints. Anything else (a row gone, an older row arriving) resets the model.
"""
from __future__ import annotations

import time

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPoint, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QMenu, QToolButton, QTreeView, QVBoxLayout, QWidget

from app.format import format_change, target_name
from app.pinning.journal import GuardEvent, JournalEntry
from app.quiet.guard import event_line
from widgets.theme import status_color

COLUMNS = ("Time", "Action", "Target", "CPUs", "Result", "#", "Guard")
TARGET = COLUMNS.index("Target")
TARGET_WIDTH_MAX = 480      # pixels the Target column grows to for long names (a Java thread's full name)
FIT_ROWS = 500              # the newest rows whose targets the column is fitted to
_DONE = {"reapplied": "re-applied", "reported": "reported", "limited": "re-apply limited", "failed": "re-apply failed"}


def _row(e: JournalEntry | GuardEvent) -> tuple[tuple[str, ...], str, str | None]:
    """(the six texts before the Guard column, the tooltip, the status its colour says (widgets/theme.py
    status_color) or None) of one row."""
    when = time.strftime("%H:%M:%S", time.localtime(e.time))
    what = target_name(e.kind, e.target_id, e.label, e.netdev)
    if isinstance(e, GuardEvent):
        texts = (when, "changed", what, format_change(e.expected, e.found, e.kind), f"by {e.who}; {_DONE[e.action]}", "")
        return texts, event_line(e), "warn" if e.action != "reapplied" else "ok"
    if e.code in ("gone", "cancelled"):
        # An exited target is nothing to change, a cancelled one was never written: neither failed.
        result, colour = e.code, None
    else:
        result = e.state + (f" {e.code}" if e.code and e.code != "ok" else "")
        colour = "fail" if e.state == "failed" else None
    texts = (when, e.origin.split(":", 1)[0], what, format_change(e.before, e.requested, e.kind),
             result + (f": {e.message}" if e.message and e.state == "failed" else ""), str(e.id))
    return texts, e.message, colour


class JournalModel(QAbstractTableModel):
    """Rows: entries and guard events, newest first (see the module docstring). `guard_text(batch)`
    fills the Guard column."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._keys: list[tuple] = []                    # row -> key, newest first
        self._rows: dict[tuple, tuple] = {}             # key -> (sort key, stamp, texts, tip, colour, batch)
        self._policies: dict[int, bool] = {}
        self._in_effect: frozenset[int] = frozenset()

    # -- Qt's interface ---------------------------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._keys)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole and 0 <= section < len(COLUMNS):
            return COLUMNS[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self._keys):
            return None
        _, _, texts, tip, colour, batch = self._rows[self._keys[index.row()]]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return texts[col] if col < len(texts) else self.guard_text(batch)
        if role == Qt.ItemDataRole.ToolTipRole:
            # The whole target where the column is too narrow for it, else the row's message.
            return texts[TARGET] if col == TARGET and not tip else tip or None
        if role == Qt.ItemDataRole.ForegroundRole and colour is not None and (col == 4 or colour != "fail"):
            return status_color(colour)
        if role == Qt.ItemDataRole.UserRole:
            return batch
        return None

    # -- what is shown ----------------------------------------------------------------------------------
    def guard_text(self, batch: int) -> str:
        if batch not in self._in_effect:
            return ""
        return f"#{batch}: {'re-apply' if self._policies.get(batch) else 'report'}"

    def policies(self) -> tuple[dict[int, bool], frozenset[int]]:
        return dict(self._policies), self._in_effect

    def set_entries(self, entries, events=(), policies=None, in_effect=()) -> bool:
        """Show `entries` and `events`; False when nothing changed (see the module docstring). One
        pass over them, comparing each row's state only: a journal of thousands of writes costs a
        millisecond here, and only new or changed rows are built."""
        guard = (dict(policies or {}), frozenset(in_effect))
        guard_changed = guard != (self._policies, self._in_effect)
        self._policies, self._in_effect = guard
        fresh, changed = [], []
        for e in entries:
            key, stamp = ("e", e.id), (e.state, e.code, e.message)
            row = self._rows.get(key)
            if row is None:
                fresh.append((key, (e.time, 0, e.id), stamp, e))
            elif row[1] != stamp:
                changed.append((key, row[0], stamp, e))
        events = list(events)
        for i, ev in enumerate(events):
            if ("g", i) not in self._rows:
                fresh.append((("g", i), (ev.time, 1, i), (), ev))
        top = self._rows[self._keys[0]][0] if self._keys else None
        if len(entries) + len(events) - len(fresh) != len(self._rows) or \
                (top is not None and any(f[1] < top for f in fresh)):
            return self._reset([(("e", e.id), (e.time, 0, e.id), (e.state, e.code, e.message), e) for e in entries]
                               + [(("g", i), (ev.time, 1, i), (), ev) for i, ev in enumerate(events)])
        for key, sort_key, stamp, e in changed:
            self._rows[key] = self._make(sort_key, stamp, e)
        if fresh:
            fresh.sort(key=lambda f: f[1], reverse=True)
            self.beginInsertRows(QModelIndex(), 0, len(fresh) - 1)
            self._keys[:0] = [f[0] for f in fresh]
            self._rows.update({key: self._make(sort_key, stamp, e) for key, sort_key, stamp, e in fresh})
            self.endInsertRows()
        if changed or guard_changed:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._keys) - 1, len(COLUMNS) - 1))
        return bool(fresh or changed or guard_changed)

    def _reset(self, rows: list[tuple]) -> bool:
        self.beginResetModel()
        rows.sort(key=lambda r: r[1], reverse=True)
        self._keys = [r[0] for r in rows]
        self._rows = {key: self._make(sort_key, stamp, e) for key, sort_key, stamp, e in rows}
        self.endResetModel()
        return True

    @staticmethod
    def _make(sort_key, stamp, e) -> tuple:
        texts, tip, colour = _row(e)
        return sort_key, stamp, texts, tip, colour, e.batch

    def row_texts(self) -> list[tuple[str, ...]]:
        return [tuple(self.data(self.index(r, c)) or "" for c in range(len(COLUMNS))) for r in range(len(self._keys))]


class PinJournalWidget(QWidget):
    """The Pins dock: the journal (JournalModel in a QTreeView) under the Undo/Redo/Restore buttons.
    The Guard column says, for a pin in effect, whether the guard re-applies it or only reports a
    change; a row's context menu sets that for its batch, which `policy_requested(batch, reapply)`
    asks the owner to journal."""

    COLUMNS = COLUMNS
    policy_requested = Signal(int, bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = JournalModel(self)
        self.tree = QTreeView(self)
        self.tree.setModel(self.model)
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._on_tree_context_menu)
        for col, w in enumerate((70, 60, 220, 110, 260, 50)):
            self.tree.setColumnWidth(col, w)
        # A target's end is what tells it apart ("market-data-feed-handler-0" from "-1"): the column
        # grows to the targets shown (_fit_targets), and what is still too long loses its middle.
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.buttons = QHBoxLayout()
        self.buttons.setContentsMargins(0, 0, 0, 0)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(self.buttons)
        lay.addWidget(self.tree)

    def add_action_button(self, action: QAction) -> None:
        b = QToolButton(self)
        b.setDefaultAction(action)
        self.buttons.addWidget(b)

    def finish_buttons(self) -> None:
        self.buttons.addStretch(1)

    def set_entries(self, entries: list[JournalEntry], events: list[GuardEvent] = (),
                    policies: dict[int, bool] | None = None, in_effect=()) -> bool:
        """Show `entries` and the guard's `events` (any order); `policies` (batch -> re-apply) and the
        batches `in_effect` (the user's batch ids whose pins are guarded) fill the Guard column. False
        when nothing changed since the last call."""
        changed = self.model.set_entries(entries, events, policies, in_effect)
        if changed:
            self._fit_targets()
        return changed

    def _fit_targets(self) -> None:
        """Widen the Target column to the newest rows' targets, up to TARGET_WIDTH_MAX; never narrower
        than it is (the user may have widened it)."""
        fm = self.tree.fontMetrics()
        n = min(self.model.rowCount(), FIT_ROWS)
        widest = max((fm.horizontalAdvance(self.model.data(self.model.index(r, TARGET)) or "") for r in range(n)),
                     default=0)
        want = min(TARGET_WIDTH_MAX, widest + 2 * fm.averageCharWidth())
        if want > self.tree.columnWidth(TARGET):
            self.tree.setColumnWidth(TARGET, want)

    def policy_menu(self, batch: int) -> QMenu:
        """The context menu of a row of batch `batch`: re-apply its pins when changed, or only report."""
        policies, in_effect = self.model.policies()
        menu = QMenu(self.tree)
        act = menu.addAction(f"Re-apply pin #{batch} when someone changes it")
        act.setCheckable(True)
        act.setChecked(bool(policies.get(batch)))
        act.setEnabled(batch in in_effect)
        if batch not in in_effect:
            act.setText(f"Pin #{batch} is not in effect (undone or restored): nothing is guarded")
        act.toggled.connect(lambda on, b=batch: self.policy_requested.emit(b, on))
        return menu

    def _on_tree_context_menu(self, pos: QPoint) -> None:
        index = self.tree.indexAt(pos)
        if index.isValid():
            batch = int(self.model.data(index, Qt.ItemDataRole.UserRole))
            self.policy_menu(batch).popup(self.tree.viewport().mapToGlobal(pos))

    def row_texts(self) -> list[tuple[str, ...]]:
        return self.model.row_texts()
