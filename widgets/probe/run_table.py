"""RunTable: under the probe plots, one row per finished run with a histogram, leading with what its
users read. A jitter run (or an oslat file): its longest gap, then gaps per second and per CPU-hour
at 2, 10, 100 µs and 1 ms, the time lost in gaps, and the percentiles of the gap lengths
(probes/histogram.py gap_figures). A wakeup run (or a cyclictest file): its longest latency and
the latency percentiles. The longest comes right after the run's name, so it shows however narrow
the table is (1600x1000: the panel gives the table ~900 px)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from app.format import format_compact, format_count, format_ns, format_share
from probes.histogram import GAP_STEPS_NS, bucket_rows, step_row
from probes.text import per_second_text, step_label
from widgets.probe.runs import RunRecord

PERCENTILES = ("p50", "p99", "p99.9")
COLUMNS = ("run", "max", *(step_label(ns) for ns in GAP_STEPS_NS), "time lost", *PERCENTILES, "count")
_TIPS = {
    "max": "the longest gap (jitter) or the latest wakeup (wakeup)",
    "time lost": "the share of the sampled time spent in gaps of 2 µs or more",
    "count": "gaps (jitter: intervals of at least the threshold) or wakeups",
    **{k: "percentile of the gap lengths (jitter) or of the wakeup latencies (wakeup)" for k in PERCENTILES},
    **{step_label(ns): f"gaps of {format_ns(ns)} or more: per second and per CPU-hour (~: read from the "
                       "histogram's buckets, not counted one by one)" for ns in GAP_STEPS_NS},
}


def row_cells(r: RunRecord) -> list[str]:
    """The cells of one finished run's row."""
    s = r.summary or {}
    gaps = s.get("gaps")
    p = s.get("percentiles") or {}
    pct = [format_ns(round(p[k], 1)) if p.get(k) is not None else "-" for k in PERCENTILES]
    if gaps:
        steps = []
        for ns in GAP_STEPS_NS:
            row = step_row(gaps, ns)
            per_h = row["per_cpu_hour"] if row else None
            steps.append("-" if per_h is None else f"{per_second_text(row)} · {format_compact(per_h)}/h")
        return [r.label, format_ns(gaps.get("max_ns")), *steps, format_share(gaps.get("lost_share")) or "-", *pct,
                format_count(gaps.get("count"))]
    total = s.get("total")
    if total is None:
        total = s.get("wakeups")
    if total is None:
        total = sum(int(c) for _lo, _hi, c in bucket_rows(r.buckets))
    mx = p.get("max")
    return [r.label, format_ns(round(mx, 1)) if mx is not None else "-", *("-" for _ in GAP_STEPS_NS), "-", *pct,
            format_count(total)]


class RunTable(QTableWidget):
    def __init__(self, parent=None):
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(COLUMNS))
        for i, name in enumerate(COLUMNS):
            if name in _TIPS:
                self.horizontalHeaderItem(i).setToolTip(_TIPS[name])
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        # every column as wide as its figures, the name first and the longest right after it: the
        # columns past the view scroll, the name and the longest never do at the window's size
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        # three runs without scrolling, however the panel's splitter starts
        rows = 3 * self.verticalHeader().defaultSectionSize()
        self.setMinimumHeight(header.sizeHint().height() + rows + 2 * self.frameWidth() + 4)

    def set_runs(self, records: list[RunRecord]) -> None:
        """Rows for the finished runs with a histogram among `records`, in their order."""
        recs = [r for r in records if r.has_histogram and r.finished and r.summary]
        self.setRowCount(len(recs))
        for row, r in enumerate(recs):
            for col, text in enumerate(row_cells(r)):
                it = QTableWidgetItem(text)
                if col:
                    it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.setItem(row, col, it)
