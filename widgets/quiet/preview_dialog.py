"""QuietPreviewDialog: what "Make quiet…" (or "Give back…") would write, per target, before anything
is written (app/quiet/isolate.py QuietPreview): the moves grouped as IRQs, threads, kernel threads and masks,
each with its mask before -> after, then what cannot be moved and why. Apply writes it as one batch;
Cancel writes nothing."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QLabel, QLayout, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from app.format import cpus_word, format_change, format_cpus
from app.quiet.isolate import GROUPS, METHODS, STAY_WORDS, QuietPreview
from widgets.theme import status_color


class QuietPreviewDialog(QDialog):
    """The preview of an isolate or include; `accepted` when Apply is pressed (nothing written here).
    An isolate's preview names the method that keeps the CPUs quiet and offers PM QoS; `pm_qos_toggled(on)`
    asks the controller for the preview again with or without it."""

    COLUMNS = ("Target", "CPUs", "Why")
    pm_qos_toggled = Signal(bool)

    def __init__(self, preview: QuietPreview, parent: QWidget | None = None):
        super().__init__(parent)
        self.preview = preview
        isolate = preview.action == "isolate"
        self.setWindowTitle(f"Make {cpus_word(preview.cpus)} quiet" if isolate else
                            f"Give {cpus_word(preview.cpus) or 'CPUs'} back")
        self.summary = QLabel(self._summary(), self)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.method = QLabel(f"How: {METHODS.get(preview.method, preview.method)}." if isolate else "", self)
        self.method.setWordWrap(True)
        self.method.setVisible(isolate)
        self.pm_qos = QCheckBox("Also keep them out of deep idle states (PM QoS resume latency 0: they wake "
                                "faster and use more power)", self)
        self.pm_qos.setChecked(any(m.target.kind == "pmqos" for m in preview.moves))
        self.pm_qos.setVisible(isolate)
        self.pm_qos.toggled.connect(self.pm_qos_toggled)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setUniformRowHeights(True)
        for col, w in enumerate((300, 110)):
            self.tree.setColumnWidth(col, w)
        self._fill()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Apply | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        self.apply_button = self.buttons.button(QDialogButtonBox.StandardButton.Apply)
        self.apply_button.setText("Make quiet" if isolate else "Give back")
        self.apply_button.setEnabled(bool(preview.moves))
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addWidget(self.method)
        lay.addWidget(self.pm_qos)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.buttons)
        if QGuiApplication.platformName() == "offscreen":
            # As in MainWindow: the offscreen platform warns about a top-level window's minimum size.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.apply_button.clicked.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.resize(720, 520)

    def _summary(self) -> str:
        p = self.preview
        counts = p.counts()
        moved = ", ".join(f"{counts[g]} {title}" for g, title in GROUPS if counts[g]) or "nothing"
        s = (f"Moves {moved} off {cpus_word(p.cpus)}, onto the housekeeping {cpus_word(p.housekeeping)}."
             if p.action == "isolate" else f"Gives {cpus_word(p.cpus)} back to {moved}.")
        if p.stays:
            s += f" {len(p.stays)} cannot be moved (below). Nothing is written until you press the button; " \
                 "Edit → Undo reverts it all."
        notes = " ".join(p.notes)
        return s + (f"\n{notes}" if notes else "")

    def _fill(self) -> None:
        p = self.preview
        counts = p.counts()
        for group, title in GROUPS:
            rows = [m for m in p.moves if m.group == group]
            if not rows:
                continue
            top = QTreeWidgetItem([f"Move {counts[group]} {title}", "", ""])
            top.addChildren([QTreeWidgetItem([m.target.describe(), format_change(m.before, m.after, m.target.kind), m.note])
                             for m in rows])
            self.tree.addTopLevelItem(top)
        if p.stays:
            top = QTreeWidgetItem([f"Cannot move {len(p.stays)}", "", ""])
            for s in p.stays:
                where = format_cpus(s.cpus) if s.cpus is not None else STAY_WORDS.get(s.code, (s.code,))[0]
                item = QTreeWidgetItem([s.what or s.target.describe(), where, s.reason])
                item.setToolTip(2, s.reason)
                for c in range(len(self.COLUMNS)):
                    item.setForeground(c, status_color("warn", self))
                top.addChild(item)
            self.tree.addTopLevelItem(top)
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            top.setExpanded(top.childCount() <= 12 or top.text(0).startswith("Cannot"))

    def row_texts(self) -> list[tuple[str, ...]]:
        """Every row (groups and their children, in order), for tests."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            out.append(tuple(top.text(c) for c in range(len(self.COLUMNS))))
            for j in range(top.childCount()):
                out.append(tuple(top.child(j).text(c) for c in range(len(self.COLUMNS))))
        return out
