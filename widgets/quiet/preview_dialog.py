"""QuietPreviewDialog: what "Make quiet…" (or "Give back…") would write, per target, before anything
is written (app/quiet/isolate.py QuietPreview): the moves grouped as IRQs, threads, kernel threads and masks,
each with its mask before -> after, then what is left where the user pinned it, and what cannot be
moved and why. Apply writes it as one batch; Cancel writes nothing. An isolate's preview offers
tuned's knobs as tick boxes (app/quiet/knobs.py KNOBS); each one ticked is a row of the kernel
settings, with tuned's reason.

The Target and CPUs columns take the width of their longest text, and Why wraps in what is left, so no
cell is cut short ("/ -> /coremap-…", "(PF_NO_SETAFFINITY…" in issue 28)."""
from __future__ import annotations

from PySide6.QtCore import QRect, QSize, QTimer, Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QGridLayout, QGroupBox, QHeaderView, QLabel,
                               QLayout, QStyledItemDelegate, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from app.format import cpus_word, format_change, format_cpus
from app.quiet.isolate import GROUPS, METHODS, STAY_WORDS, QuietPreview
from app.quiet.knobs import KNOBS
from app.quiet.preview import group_title
from widgets.theme import status_color


class _WrappingDelegate(QStyledItemDelegate):
    """The Why column's rows as tall as their text wrapped in the column's width: QTreeView asks a
    delegate for a row's height without the column's width, so the stock one answers one line."""

    def __init__(self, tree: QTreeWidget):
        super().__init__(tree)
        self._tree = tree

    def sizeHint(self, option, index) -> QSize:
        hint = super().sizeHint(option, index)
        text = index.data() or ""
        margin = 2 * (self._tree.style().pixelMetric(self._tree.style().PixelMetric.PM_FocusFrameHMargin, None,
                                                     self._tree) + 1)
        room = max(1, self._tree.header().sectionSize(index.column()) - margin)
        fm = option.fontMetrics
        lines = fm.boundingRect(QRect(0, 0, room, 1 << 20), int(Qt.TextFlag.TextWordWrap), text).height()
        return QSize(hint.width(), max(hint.height(), lines + 2))


class QuietPreviewDialog(QDialog):
    """The preview of an isolate or include; `accepted` when Apply is pressed (nothing written here).
    An isolate's preview names the method that keeps the CPUs quiet and offers PM QoS and moving the
    tasks the user pinned there; a give-back's offers keeping the pins made while quiet.
    `options_changed(dict)` asks the controller for the preview again with the tick boxes' options
    (pm_qos, move_pinned, keep_pins, knobs: the ticked words of app/quiet/knobs.py KNOBS)."""

    COLUMNS = ("Target", "CPUs", "Why")
    options_changed = Signal(object)

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
        self.move_pinned = QCheckBox("Also move tasks you pinned onto these CPUs yourself (taskset); they are "
                                     "left there otherwise", self)
        self.move_pinned.setChecked("move_pinned" in preview.options)
        self.move_pinned.setVisible(isolate)
        self.keep_pins = QCheckBox("Keep the pins made onto these CPUs while they were quiet (they are undone with "
                                   "the rest otherwise)", self)
        self.keep_pins.setChecked("keep_pins" in preview.options)
        self.keep_pins.setVisible(not isolate)
        self.knobs = self._knob_boxes(preview)
        for box in (self.pm_qos, self.move_pinned, self.keep_pins, *self.knob_boxes.values()):
            box.toggled.connect(self._on_option_toggled)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setWordWrap(True)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideNone)
        header = self.tree.header()
        header.setStretchLastSection(False)
        for col, mode in enumerate((QHeaderView.ResizeMode.ResizeToContents, QHeaderView.ResizeMode.ResizeToContents,
                                    QHeaderView.ResizeMode.Stretch)):
            header.setSectionResizeMode(col, mode)
        # QTreeView keeps a row's height from its first layout: when Why gets narrower or wider (the
        # dialog resized, Target sized to its contents) the rows are laid out again, once per burst.
        self._relayout = QTimer(self)
        self._relayout.setSingleShot(True)
        self._relayout.setInterval(0)
        self._relayout.timeout.connect(self.tree.doItemsLayout)
        self.tree.setItemDelegateForColumn(len(self.COLUMNS) - 1, _WrappingDelegate(self.tree))
        header.sectionResized.connect(self._on_header_section_resized)
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
        lay.addWidget(self.move_pinned)
        lay.addWidget(self.keep_pins)
        lay.addWidget(self.knobs)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.buttons)
        if QGuiApplication.platformName() == "offscreen":
            # As in MainWindow: the offscreen platform warns about a top-level window's minimum size.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.apply_button.clicked.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.resize(960, 560)

    def _on_header_section_resized(self, column: int, _old: int, _new: int) -> None:
        if column == len(self.COLUMNS) - 1:
            self._relayout.start()

    def _knob_boxes(self, preview: QuietPreview) -> QGroupBox:
        """tuned's knobs, two columns of tick boxes, each ticked as the preview was asked."""
        group = QGroupBox("Also set tuned's knobs (each one a step of the batch, given back with it)", self)
        grid = QGridLayout(group)
        self.knob_boxes: dict[str, QCheckBox] = {}
        for i, knob in enumerate(KNOBS):
            box = QCheckBox(knob.label, group)
            box.setToolTip(knob.why)
            box.setChecked(knob.word in preview.options)
            grid.addWidget(box, i // 2, i % 2)
            self.knob_boxes[knob.word] = box
        group.setVisible(preview.action == "isolate")
        return group

    def _on_option_toggled(self, on: bool) -> None:
        thp = {"thp_never": "thp_madvise", "thp_madvise": "thp_never"}
        sender = self.sender()
        for word, other in thp.items():
            if on and sender is self.knob_boxes[word]:
                # never or madvise, not both: ticking one unticks the other (one preview, not two)
                self.knob_boxes[other].blockSignals(True)
                self.knob_boxes[other].setChecked(False)
                self.knob_boxes[other].blockSignals(False)
        self.options_changed.emit({"pm_qos": self.pm_qos.isChecked(), "move_pinned": self.move_pinned.isChecked(),
                                   "keep_pins": self.keep_pins.isChecked(),
                                   "knobs": tuple(w for w, box in self.knob_boxes.items() if box.isChecked())})

    def _summary(self) -> str:
        p = self.preview
        counts = p.counts()
        moved = ", ".join(f"{counts[g]} {group_title(g, p.action, counts[g])}" for g, _ in GROUPS if counts[g]) or "nothing"
        s = (f"Moves {moved} off {cpus_word(p.cpus)}, onto the housekeeping {cpus_word(p.housekeeping)}."
             if p.action == "isolate" else f"Gives {cpus_word(p.cpus)} back: {moved}.")
        placed = sum(1 for x in p.stays if x.code == "placed")
        if placed:
            s += f" {placed} you pinned there stay{'s' if placed == 1 else ''} (below)."
        if len(p.stays) > placed:
            s += f" {len(p.stays) - placed} cannot be moved (below)."
        s += " Nothing is written until you press the button; Edit → Undo reverts it all."
        notes = "\n".join(p.notes)          # one a line: several knobs' notes run together otherwise
        return s + (f"\n{notes}" if notes else "")

    def _fill(self) -> None:
        p = self.preview
        counts = p.counts()
        for group, _ in GROUPS:
            rows = [m for m in p.moves if m.group == group]
            if not rows:
                continue
            verb = "Undo" if group == "pin" else "Move"
            top = QTreeWidgetItem([f"{verb} {counts[group]} {group_title(group, p.action, counts[group])}", "", ""])
            top.addChildren([QTreeWidgetItem([m.target.describe(), format_change(m.before, m.after, m.target.kind), m.note])
                             for m in rows])
            self.tree.addTopLevelItem(top)
            top.setFirstColumnSpanned(True)          # (only once in a tree)
        placed = [x for x in p.stays if x.code == "placed"]
        for title, stays, warn in ((f"Left where you pinned them: {len(placed)}", placed, False),
                                   (f"Cannot move {len(p.stays) - len(placed)}", [x for x in p.stays if x.code != "placed"],
                                    True)):
            if not stays:
                continue
            top = QTreeWidgetItem([title, "", ""])
            for s in stays:
                where = format_cpus(s.cpus) if s.cpus is not None else STAY_WORDS.get(s.code, (s.code,))[0]
                item = QTreeWidgetItem([s.what or s.target.describe(), where, s.reason])
                item.setToolTip(2, s.reason)
                if warn:
                    for c in range(len(self.COLUMNS)):
                        item.setForeground(c, status_color("warn", self))
                top.addChild(item)
            self.tree.addTopLevelItem(top)
            top.setFirstColumnSpanned(True)
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            top.setExpanded(top.childCount() <= 12 or top.text(0).startswith(("Cannot", "Left", "Undo")))

    def row_texts(self) -> list[tuple[str, ...]]:
        """Every row (groups and their children, in order), for tests."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            out.append(tuple(top.text(c) for c in range(len(self.COLUMNS))))
            for j in range(top.childCount()):
                out.append(tuple(top.child(j).text(c) for c in range(len(self.COLUMNS))))
        return out
