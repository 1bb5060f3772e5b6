"""RunTable: under the probe plots, one row per finished run with a histogram: its percentiles
(probes/histogram.py, as the run's summary holds them) and how many samples it counted."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from app.format import format_count, format_ns
from probes.histogram import bucket_rows
from widgets.probe.runs import RunRecord

COLUMNS = ("run", "p50", "p90", "p99", "p99.9", "max", "samples")


class RunTable(QTableWidget):
    def __init__(self, parent=None):
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)

    def set_runs(self, records: list[RunRecord]) -> None:
        """Rows for the finished runs with a histogram among `records`, in their order."""
        recs = [r for r in records if r.has_histogram and r.finished and r.summary]
        self.setRowCount(len(recs))
        for row, r in enumerate(recs):
            p = r.summary.get("percentiles") or {}
            total = r.summary.get("total")
            if total is None:
                total = sum(int(c) for _lo, _hi, c in bucket_rows(r.buckets))
            cells = [r.label] + [format_ns(round(p[k], 1)) if p.get(k) is not None else "-"
                                 for k in COLUMNS[1:6]] + [format_count(total)]
            for col, text in enumerate(cells):
                it = QTableWidgetItem(text)
                if col:
                    it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.setItem(row, col, it)
