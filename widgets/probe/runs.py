"""The runs on the probe panel: RunRecord (one probe job of this session, or one run read from a file
or a session) and RunStore, which keeps them in order under keys and lists them, each with a check
box (shown on the plots or not), with Remove and Save buttons for the selected ones.

RunStore only keeps the books and the list; what a run looks like on the plots is the panel's
business: it listens to `visibility_changed` and `selection_changed`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QPushButton, QVBoxLayout, QWidget)

from probes import histogram
from probes.catalog import RECORDS

SOURCE_HERE = "coremap"      # RunRecord.source of a run this session measured


@dataclass
class RunRecord:
    """One run on the panel. A run of this session fills in as its lines arrive (`lines` is the
    controller's list for its job) and gets `summary` when it finishes; a run read from a file or a
    session arrives finished."""
    key: int
    probe: str                       # a probe name, or "file" (a run read from a result file)
    label: str
    source: str = SOURCE_HERE        # SOURCE_HERE or the path it was opened from
    cpus: tuple[int, ...] = ()
    buckets: list = field(default_factory=list)
    sampled_ns: float = 0.0
    lines: list = field(default_factory=list)
    summary: dict | None = None
    finished: bool = False
    attribution: dict | None = None  # a reopened jitter run's (a run of this session keeps it in summary)
    # A run of read-to-read intervals (jitter, oslat): the shortest that counts as a gap. Its plots
    # draw only gaps (probes/histogram.py gap_buckets): every read would put the loop's own period
    # at 100G per CPU-hour on the histogram and at every percentile.
    gaps_from_ns: int | None = None
    # A stored result opened (a session's run): the result as its probe wrote it, which a report holds
    # whole; `summary` is what the panel's views read of it.
    stored: dict | None = None

    @property
    def has_histogram(self) -> bool:
        """A run of a probe whose record says `histogram`, or a run read from a result file (which
        holds a histogram)."""
        return self.probe == "file" or RECORDS[self.probe].histogram

    @property
    def drawn_buckets(self) -> list:
        """What the histogram and percentile plots draw: the gaps of a run of intervals, else every
        sample (a wakeup latency is a sample in its own right)."""
        if self.gaps_from_ns is None:
            return self.buckets
        return histogram.gap_buckets(self.buckets, self.gaps_from_ns)

    @property
    def measured_here(self) -> bool:
        return self.source == SOURCE_HERE


class RunStore(QWidget):
    """The panel's runs, keyed, in the order they came, and their list."""

    visibility_changed = Signal(int, bool)   # key, shown
    selection_changed = Signal()
    run_clicked = Signal(int)                # key: a user clicked the run in the list

    def __init__(self, parent=None):
        super().__init__(parent)
        self._runs: dict[int, RunRecord] = {}
        self._next_key = 1
        self.runs_list = QListWidget(self)
        self.runs_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.setEnabled(False)
        self.save_button = QPushButton("Save…", self)
        self.save_button.setEnabled(False)
        buttons = QHBoxLayout()
        buttons.addWidget(self.remove_button)
        buttons.addWidget(self.save_button)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("Runs (check to show):", self))
        lay.addWidget(self.runs_list, 1)
        lay.addLayout(buttons)
        self.runs_list.itemChanged.connect(self._on_runs_list_item_changed)
        self.runs_list.itemSelectionChanged.connect(self._on_runs_list_selection_changed)
        self.runs_list.itemClicked.connect(self._on_runs_list_item_clicked)

    # -- records ---------------------------------------------------------------------------------
    @property
    def records(self) -> list[RunRecord]:
        return list(self._runs.values())

    def get(self, key: int) -> RunRecord:
        return self._runs[key]

    def add(self, probe: str, label: str, source: str = SOURCE_HERE, cpus=()) -> RunRecord:
        """A new run, listed (shown) under the label `#key label`."""
        key = self._next_key
        self._next_key += 1
        rec = RunRecord(key, probe, f"#{key} {label}", source, tuple(cpus))
        self._runs[key] = rec
        item = QListWidgetItem(rec.label)
        item.setData(Qt.ItemDataRole.UserRole, key)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked)
        item.setToolTip(source)
        self.runs_list.blockSignals(True)
        self.runs_list.addItem(item)
        self.runs_list.blockSignals(False)
        return rec

    def remove(self, key: int) -> RunRecord | None:
        rec = self._runs.pop(key, None)
        item = self.item(key)
        if item is not None:
            self.runs_list.takeItem(self.runs_list.row(item))
        return rec

    # -- the list --------------------------------------------------------------------------------
    def item(self, key: int) -> QListWidgetItem | None:
        for i in range(self.runs_list.count()):
            it = self.runs_list.item(i)
            if it.data(Qt.ItemDataRole.UserRole) == key:
                return it
        return None

    def select(self, key: int) -> None:
        """Make run `key` the one selected (a click on it in the run table), unless it already is among
        the selected (a multiple selection is kept)."""
        item = self.item(key)
        if item is not None and not item.isSelected():
            self.runs_list.setCurrentItem(item)
        if item is not None:
            self.runs_list.scrollToItem(item)

    def selected(self) -> list[RunRecord]:
        keys = [it.data(Qt.ItemDataRole.UserRole) for it in self.runs_list.selectedItems()]
        return [self._runs[k] for k in keys if k in self._runs]

    def _on_runs_list_item_changed(self, item: QListWidgetItem) -> None:
        key = item.data(Qt.ItemDataRole.UserRole)
        if key in self._runs:
            self.visibility_changed.emit(key, item.checkState() == Qt.CheckState.Checked)

    @property
    def can_save(self) -> bool:
        """One finished run is selected."""
        selected = self.selected()
        return len(selected) == 1 and selected[0].finished

    def update_buttons(self) -> None:
        """Remove for any selection, Save for one finished run (call it when a selected run finishes)."""
        self.remove_button.setEnabled(bool(self.selected()))
        self.save_button.setEnabled(self.can_save)

    def _on_runs_list_item_clicked(self, item: QListWidgetItem) -> None:
        key = item.data(Qt.ItemDataRole.UserRole)
        if key in self._runs:
            self.run_clicked.emit(key)

    def _on_runs_list_selection_changed(self) -> None:
        self.update_buttons()
        self.selection_changed.emit()
