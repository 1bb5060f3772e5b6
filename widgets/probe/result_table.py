"""SeriesView, the frame of a series probe's tab (a probe whose result carries its own series, tables
and verdict): its plot and a ResultTable side by side, the verdict under them. ResultTable holds rows
of text the view spells with app/format.py, numbers right-aligned, and for each row the CPUs it ran
on, so selecting a row can light them up in the grid (`cpus_highlighted`)."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QSplitter, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)


class ResultTable(QTableWidget):
    cpus_highlighted = Signal(object)       # tuple of CPU ids of the selected row

    def __init__(self, columns: tuple[str, ...], parent=None):
        super().__init__(0, len(columns), parent)
        self.setHorizontalHeaderLabels(list(columns))
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)
        self._cpus: list[tuple[int, ...]] = []
        self.itemSelectionChanged.connect(self._on_self_item_selection_changed)

    def set_rows(self, rows: list[list[str]], cpus: list[tuple[int, ...]]) -> None:
        """One row of cells per entry (the first cell a name, the others figures) and its CPUs. The
        selected row stays selected when the rows are the same ones with new figures."""
        selected = self.currentRow()
        self.blockSignals(True)
        self.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for c, text in enumerate(cells):
                item = self.item(r, c)
                if item is None:
                    item = QTableWidgetItem()
                    if c:
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.setItem(r, c, item)
                item.setText(text)
        self.blockSignals(False)
        self._cpus = [tuple(c) for c in cpus]
        if 0 <= selected < len(rows):
            self.selectRow(selected)

    def cell_texts(self, row: int) -> list[str]:
        return [self.item(row, c).text() for c in range(self.columnCount())]

    def _on_self_item_selection_changed(self) -> None:
        row = self.currentRow()
        if 0 <= row < len(self._cpus) and self._cpus[row]:
            self.cpus_highlighted.emit(self._cpus[row])


class SeriesView(QWidget):
    """A series probe's tab: its plot and its ResultTable side by side, the verdict under them.
    Subclasses make the plot and fill all three in `set_result(summary)`."""

    cpus_highlighted = Signal(object)

    def __init__(self, plot: QWidget, columns: tuple[str, ...], placeholder: str, parent=None):
        super().__init__(parent)
        self.plot = plot
        self.table = ResultTable(columns, self)
        self.verdict_label = QLabel(placeholder, self)
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        # the plot first: the table scrolls sideways, a squeezed plot loses its axis labels
        split.setSizes([620, 380])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(split, 1)
        lay.addWidget(self.verdict_label)
        self.table.cpus_highlighted.connect(self.cpus_highlighted)

    def show_result(self, result: dict, order) -> None:
        """A run's result object, as the probe panel's tabs hand it to a record's view (probes/catalog.py);
        a series is drawn against its own axis, not the grid's CPU order."""
        self.set_result(result)

    def set_result(self, summary: dict) -> None:
        raise NotImplementedError
