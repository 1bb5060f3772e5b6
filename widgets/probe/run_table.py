"""RunTable: the Figures tab of the probe panel: a column per finished run with a histogram, side by
side for comparing them, and a row per figure its users read first. A jitter run (or an oslat file):
its longest gap, gaps per second and per CPU-hour at 2, 10, 100 µs and 1 ms, the time lost in gaps,
and the percentiles of the gap lengths (probes/histogram.py gap_figures). A wakeup run (or a
cyclictest file) fills the same rows with its own figures: its latest wakeup, the wakeups at least 2,
10, 100 µs and 1 ms late, its mean latency where a jitter run has its time lost, and the latency
percentiles (issue 28: they read "-").

Figures are rows and runs columns (issue 28: as a row per run, "≥ 1 ms", "time lost" and the
percentiles were off the table's right edge at the window's default size): every figure of a run is
in view at once, a run's figures scroll as one column, and 4 runs fit the ~430 px the panel gives
its tabs at 1600x1000.

A click on a column says which run (`run_clicked`), for the panel to show its tabs."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from app.format import format_compact, format_count, format_ns, format_share
from probes.histogram import GAP_STEPS_NS, bucket_mid, bucket_rows, gap_figures, step_row
from probes.text import per_second_text, step_label
from widgets.probe.runs import RunRecord

PERCENTILES = ("p50", "p99", "p99.9")
FIGURES = ("max", *(step_label(ns) for ns in GAP_STEPS_NS), "time lost", *PERCENTILES, "count")
ROW_TIME_LOST = FIGURES.index("time lost")
_TIPS = {
    "max": "the longest gap (jitter) or the latest wakeup (wakeup)",
    "time lost": "jitter: the share of the sampled time spent in gaps of 2 µs or more; wakeup: the mean "
                 "wake-up latency",
    "count": "gaps (jitter: intervals of at least the threshold) or wakeups",
    **{k: "percentile of the gap lengths (jitter) or of the wakeup latencies (wakeup)" for k in PERCENTILES},
    **{step_label(ns): f"jitter: gaps of {format_ns(ns)} or more; wakeup: wakeups {format_ns(ns)} late or more. "
                       "Per second over per CPU-hour (~: read from the histogram's buckets, not counted one "
                       "by one)" for ns in GAP_STEPS_NS},
}


def _step_cells(gaps: dict) -> list[str]:
    cells = []
    for ns in GAP_STEPS_NS:
        row = step_row(gaps, ns)
        per_h = row["per_cpu_hour"] if row else None
        cells.append("-" if per_h is None else f"{per_second_text(row)}\n{format_compact(per_h)}/h")
    return cells


def row_cells(r: RunRecord) -> list[str]:
    """The cells of one finished run's row."""
    s = r.summary or {}
    gaps = s.get("gaps")
    p = s.get("percentiles") or {}
    pct = [format_ns(round(p[k], 1)) if p.get(k) is not None else "-" for k in PERCENTILES]
    if gaps:
        return [r.label, format_ns(gaps.get("max_ns")), *_step_cells(gaps), format_share(gaps.get("lost_share")) or "-",
                *pct, format_count(gaps.get("count"))]
    # A run of latencies: every sample counts, so its "gaps" from 0 ns are its wakeups by how late
    late = gap_figures(r.buckets, r.sampled_ns, from_ns=0)
    total = s.get("total")
    if total is None:
        total = s.get("wakeups")
    if total is None:
        total = late["count"]
    mx = p.get("max")
    mean = s.get("mean_ns")
    if mean is None and late["count"]:         # a file's run: its buckets' midpoints
        mean = sum(bucket_mid(lo, hi) * c for lo, hi, c in bucket_rows(r.buckets)) / late["count"]
    return [r.label, format_ns(round(mx, 1)) if mx is not None else "-", *_step_cells(late),
            f"mean {format_ns(round(mean, 1))}" if mean is not None else "-", *pct, format_count(total)]


def _two_lines(label: str) -> str:
    """A run's name on two lines, broken at the space nearest its middle: a column is as wide as its
    figures, not as its name."""
    spaces = [i for i, ch in enumerate(label) if ch == " "]
    if not spaces:
        return label
    at = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return label[:at] + "\n" + label[at + 1:]


class RunTable(QTableWidget):
    """The finished histogram runs' figures, a column each; `run_clicked(key)` when a column is clicked,
    `select(key)`, `cell_text(figure, key)`."""

    run_clicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(len(FIGURES), 0, parent)
        self._keys: list[int] = []
        self.setVerticalHeaderLabels(list(FIGURES))
        for i, name in enumerate(FIGURES):
            if name in _TIPS:
                self.verticalHeaderItem(i).setToolTip(_TIPS[name])
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectColumns)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setWordWrap(False)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.cellClicked.connect(self._on_cell_clicked)
        self.horizontalHeader().sectionClicked.connect(lambda col: self._on_cell_clicked(0, col))

    def set_runs(self, records: list[RunRecord]) -> None:
        """A column for each finished run with a histogram among `records`, in their order."""
        recs = [r for r in records if r.has_histogram and r.finished and r.summary]
        self._keys = [r.key for r in recs]
        self.setColumnCount(len(recs))
        for col, r in enumerate(recs):
            cells = row_cells(r)
            head = QTableWidgetItem(_two_lines(cells[0]))
            head.setToolTip(f"{cells[0]} ({r.source})")
            self.setHorizontalHeaderItem(col, head)
            for row, text in enumerate(cells[1:]):
                it = QTableWidgetItem(text)
                it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.setItem(row, col, it)

    @property
    def keys(self) -> list[int]:
        """The runs shown, a column each, in order."""
        return list(self._keys)

    def cell_text(self, figure: str, key: int) -> str:
        """What run `key`'s column shows for `figure` (a name of FIGURES)."""
        return self.item(FIGURES.index(figure), self._keys.index(key)).text()

    def key_at(self, column: int) -> int | None:
        return self._keys[column] if 0 <= column < len(self._keys) else None

    def select(self, key: int) -> None:
        """Select run `key`'s column (none when it has none: a run without a histogram)."""
        if key in self._keys:
            col = self._keys.index(key)
            if self.currentColumn() != col:
                self.selectColumn(col)
            self.scrollTo(self.model().index(0, col))
        else:
            self.clearSelection()

    def _on_cell_clicked(self, _row: int, column: int) -> None:
        key = self.key_at(column)
        if key is not None:
            self.run_clicked.emit(key)
