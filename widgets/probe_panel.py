"""ProbePanel: choose a probe, its CPUs and options, run it, watch it, overlay and compare runs.

- CPUs come from the validated CPU-list line edit (app.parse.cpulist), from a CPU cell dropped on
  the panel (MIME type CPU_MIME, `{"cpus": [...]}`) or from the grid's cpu_selected (`set_cpu`).
- Run builds the same child arguments as `coremap probe` (app.cli.probe) and hands one job per
  CPU (jitter, wakeup, counters) or one job for the list (sweep, c2c) to a ProbeController, which
  polls the child from a QTimer and moves coremap's own threads off the probed CPUs meanwhile.
- Each `interval` line updates the run's curve in place (HistogramPlot, PercentilePlot), the sweep
  bars or the c2c matrix, and the progress bar (elapsed / duration). An `error` line lands on the
  status line, never in a dialog.
- Runs (this session's and files opened with "Open Probe Result…": .hlog, cyclictest --json,
  oslat --json) are listed with a check box (shown/hidden), can be removed, and a finished one can be
  saved as .hlog, CSV, cyclictest-style histogram text, or (sweep, c2c, counters) JSON.
"""
from __future__ import annotations

from app.format import format_ns, offline_sentence

import importlib
import json
import os
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QValidator
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog,
                               QFormLayout, QHBoxLayout, QHeaderView, QLabel, QLayout, QLineEdit, QListWidget,
                               QListWidgetItem, QMenu, QPlainTextEdit, QProgressBar, QPushButton,
                               QSpinBox, QSplitter, QStackedWidget, QTableWidget, QTableWidgetItem,
                               QTabWidget, QToolButton, QVBoxLayout, QWidget)

from app.errors import CoremapError, CpuListError
from app.parse.cpulist import format_cpulist, parse_cpulist
from probes import histogram, trace
from widgets.c2c_heatmap import C2CHeatmap
from widgets.gap_attribution import GapAttributionView
from widgets.histogram_plot import HistogramPlot
from widgets.percentile_plot import PercentilePlot
from widgets.probe_controller import ProbeController, ProbeJob
from widgets.sweep_plot import SweepPlot
from widgets.topology.drag import CPU_MIME, cpus_from_mime  # noqa: F401  (the grid's CPU drags)

PROBES = (("jitter", "Jitter (gaps in a busy loop)"), ("wakeup", "Wakeup latency (timer sleep)"),
          ("sweep", "Sweep (same work on each CPU)"), ("c2c", "Core to core (cache-line ping-pong)"),
          ("counters", "Counters (perf events, pinned vs not)"))
HISTOGRAM_PROBES = ("jitter", "wakeup")
LIVE_REDRAW_S = 0.25
SCHED_PROBES = ("jitter", "wakeup", "sweep")
TABLE_COLUMNS = ("run", "p50", "p90", "p99", "p99.9", "max", "samples")
# cyclictest's default period when its command line gives none (src/cyclictest/cyclictest.c: interval = DEFAULT_INTERVAL, 1000 us)
CYCLICTEST_DEFAULT_INTERVAL_US = 1000


class CpuListValidator(QValidator):
    """Acceptable: a CPU list parse_cpulist takes. Intermediate: on the way to one ("2-", "1,").
    Invalid: a character no CPU list holds ("2-x")."""

    _CHARS = re.compile(r"^[0-9,\-:/ ]*$")

    def validate(self, text: str, pos: int):
        if not self._CHARS.match(text):
            return QValidator.State.Invalid
        if not text.strip():
            return QValidator.State.Intermediate
        try:
            parse_cpulist(text)
        except CpuListError:
            return QValidator.State.Intermediate
        return QValidator.State.Acceptable


def topology_order(topology) -> list[int]:
    """CPU ids in the order the grid draws them (nested groups, siblings of a core together)."""
    from app.machine.topology import layout
    out: list[int] = []

    def walk(g):
        for ch in g.children:
            if isinstance(ch, int):
                out.append(ch)
            else:
                walk(ch)
    walk(layout(topology))
    seen = set(out)
    return out + [c for c in topology.online if c not in seen]


@dataclass
class RunRecord:
    """One run on the panel: a probe job of this session or one thread of an opened file."""
    key: int
    probe: str
    label: str
    source: str = "coremap"          # "coremap" or the path it was opened from
    cpus: tuple[int, ...] = ()
    buckets: list = field(default_factory=list)
    sampled_ns: float = 0.0
    lines: list = field(default_factory=list)
    summary: dict | None = None
    finished: bool = False
    failed: str | None = None
    attribution: dict | None = None  # a reopened jitter run's (a run of this session keeps it in summary)

    @property
    def has_histogram(self) -> bool:
        return self.probe in HISTOGRAM_PROBES or self.source != "coremap"


class ProbePanel(QWidget):
    run_added = Signal(object)      # RunRecord
    run_finished = Signal(object)   # RunRecord
    busy_changed = Signal(bool)
    status_changed = Signal(str)

    def __init__(self, parent=None, *, controller: ProbeController | None = None):
        super().__init__(parent)
        self.setObjectName("probe-panel")
        self.setAcceptDrops(True)
        self.controller = controller or ProbeController(self)
        self._runs: dict[int, RunRecord] = {}
        self._live = True               # False while the window shows a capture (set_state)
        self._next_key = 1
        self._order: list[int] = []
        self._topology = None
        self._total_s = 0.0
        self._done_s = 0.0
        self._job_units = 1
        self._job_record: RunRecord | None = None
        self._last_live_draw = 0.0

        # -- the form -------------------------------------------------------------------------------
        self.probe_combo = QComboBox(self)
        for key, text in PROBES:
            self.probe_combo.addItem(text, key)
        self.cpu_edit = QLineEdit(self)
        self.cpu_edit.setPlaceholderText("e.g. 1 or 2-3,5 — or drop a CPU here")
        self.cpu_edit.setValidator(CpuListValidator(self.cpu_edit))
        self.cpu_edit.setToolTip("CPUs to probe; drop a CPU cell from the grid or click one")
        self.unbound_check = QCheckBox("unbound", self)
        self.unbound_check.setToolTip("Do not pin the probe; let the scheduler place it")
        self.seconds_spin = QDoubleSpinBox(self)
        self.seconds_spin.setRange(0.1, 3600.0)
        self.seconds_spin.setDecimals(1)
        self.seconds_spin.setValue(1.0)
        self.seconds_spin.setSuffix(" s")
        self.seconds_spin.setToolTip("How long to measure, per CPU")

        # jitter
        self.duty_combo = QComboBox(self)
        for text, val in (("100%", 100.0), ("50%", 50.0), ("10%", 10.0), ("custom", None)):
            self.duty_combo.addItem(text, val)
        self.duty_spin = QDoubleSpinBox(self)
        self.duty_spin.setRange(0.1, 100.0)
        self.duty_spin.setValue(25.0)
        self.duty_spin.setSuffix(" %")
        self.duty_spin.setEnabled(False)
        self.attribute_check = QCheckBox("attribute gaps (tracefs)", self)
        why = trace.unavailable_reason()
        self.attribute_check.setEnabled(why is None)
        self.attribute_check.setChecked(why is None)
        self.attribute_check.setToolTip(
            why or "Record interrupts, softirqs, NMIs and task switches on the probed CPU while it runs "
                   "and say what ran during each large gap (Gaps tab). Tracing adds a little work to "
                   "every interrupt on that CPU.")
        jitter_page = self._page(("duty cycle", self._row(self.duty_combo, self.duty_spin)),
                                 ("", self.attribute_check))
        # wakeup
        self.interval_spin = QSpinBox(self)
        self.interval_spin.setRange(1, 10_000_000)
        self.interval_spin.setValue(1000)
        self.interval_spin.setSuffix(" µs")
        self.dma_check = QCheckBox("hold /dev/cpu_dma_latency at 0", self)
        wakeup_page = self._page(("interval", self.interval_spin), ("", self.dma_check))
        # sweep
        self.rounds_spin = QSpinBox(self)
        self.rounds_spin.setRange(2, 100_000)
        self.rounds_spin.setValue(120)   # probes/sweep.py: fewer rounds cannot flag a 10% loss in 1 ms bursts
        sweep_page = self._page(("rounds", self.rounds_spin))
        # c2c
        self.pairs_edit = QLineEdit(self)
        self.pairs_edit.setPlaceholderText("every pair of the CPUs, or e.g. 0:1,0:2")
        c2c_page = self._page(("pairs", self.pairs_edit))
        # counters
        self.command_edit = QLineEdit(self)
        self.command_edit.setPlaceholderText("default: a jitter probe of the duration")
        counters_page = self._page(("command", self.command_edit))
        self.options_stack = QStackedWidget(self)
        for page in (jitter_page, wakeup_page, sweep_page, c2c_page, counters_page):
            self.options_stack.addWidget(page)
        # scheduling (jitter, wakeup, sweep)
        self.policy_combo = QComboBox(self)
        self.policy_combo.addItem("SCHED_OTHER", "other")
        self.policy_combo.addItem("SCHED_FIFO", "fifo")
        self.priority_spin = QSpinBox(self)
        self.priority_spin.setRange(1, 99)
        self.priority_spin.setValue(80)
        self.priority_spin.setPrefix("prio ")
        self.priority_spin.setEnabled(False)
        self.slack_spin = QSpinBox(self)
        self.slack_spin.setRange(-1, 1_000_000_000)
        self.slack_spin.setValue(-1)
        self.slack_spin.setSpecialValueText("inherited")
        self.slack_spin.setSuffix(" ns")
        self.slack_spin.setToolTip("Timer slack of the probe (prctl PR_SET_TIMERSLACK)")
        self.sched_row = self._row(self.policy_combo, self.priority_spin)

        self.run_button = QPushButton("Run", self)
        self.run_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        self.file_button = QToolButton(self)
        self.file_button.setText("File")
        self.file_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)

        self.run_action = QAction("Run Probe", self)
        self.cancel_action = QAction("Cancel Probe", self)
        self.cancel_action.setEnabled(False)
        self.open_action = QAction("Open Probe Result…", self)
        self.save_action = QAction("Save Run As…", self)
        self.save_action.setEnabled(False)
        file_menu = QMenu("File", self)
        file_menu.addAction(self.open_action)
        file_menu.addAction(self.save_action)
        self.file_button.setMenu(file_menu)
        self.menu = QMenu("&Probes", self)
        for a in (self.run_action, self.cancel_action, None, self.open_action, self.save_action):
            self.menu.addSeparator() if a is None else self.menu.addAction(a)

        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("probe", self.probe_combo)
        form.addRow("CPUs", self._row(self.cpu_edit, self.unbound_check))
        form.addRow("duration", self.seconds_spin)
        form.addRow("scheduling", self.sched_row)
        form.addRow("timer slack", self.slack_spin)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setFormat("idle")
        self.progress.setTextVisible(True)
        self.status_label = QLabel(self)
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        controls = QWidget(self)
        cl = QVBoxLayout(controls)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addLayout(form)
        cl.addWidget(self.options_stack)
        cl.addLayout(self._hbox(self.run_button, self.cancel_button, self.file_button))
        cl.addWidget(self.progress)
        cl.addWidget(self.status_label)

        # -- runs ---------------------------------------------------------------------------------
        self.runs_list = QListWidget(self)
        self.runs_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.setEnabled(False)
        self.save_button = QPushButton("Save…", self)
        self.save_button.setEnabled(False)
        self.table = QTableWidget(0, len(TABLE_COLUMNS), self)
        self.table.setHorizontalHeaderLabels(list(TABLE_COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        cl.addWidget(QLabel("Runs (check to show):", self))
        cl.addWidget(self.runs_list, 1)
        cl.addLayout(self._hbox(self.remove_button, self.save_button))

        # -- plots --------------------------------------------------------------------------------
        self.histogram_plot = HistogramPlot(self)
        self.percentile_plot = PercentilePlot(self)
        self.sweep_plot = SweepPlot(self)
        self.c2c_heatmap = C2CHeatmap(self)
        self.summary_text = QPlainTextEdit(self)
        self.summary_text.setReadOnly(True)
        self.summary_text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.histogram_plot, "Histogram")
        self.tabs.addTab(self.percentile_plot, "Percentiles")
        self.tabs.addTab(self.sweep_plot, "Sweep")
        self.tabs.addTab(self.c2c_heatmap, "Core to core")
        self.tabs.addTab(self.summary_text, "Summary")
        self.gap_view = GapAttributionView(self)
        self.tabs.addTab(self.gap_view, "Gaps")
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(self.tabs)
        right.addWidget(self.table)
        right.setStretchFactor(0, 4)
        right.setStretchFactor(1, 1)

        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(controls)
        split.addWidget(right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        # the form needs ~300 px; the plots take whatever the dock has beyond it
        split.setSizes([300, 900])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(split)
        self._on_probe_combo_changed(0)
        if QGuiApplication.platformName() == "offscreen":
            # As in MainWindow: the offscreen platform warns "does not support propagateSizeHints()"
            # when a top-level window takes a minimum size from its layout (the panel is top-level in
            # tests and screenshots); nobody resizes an offscreen window, so it needs none.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)

        # -- wiring -------------------------------------------------------------------------------
        self.probe_combo.currentIndexChanged.connect(self._on_probe_combo_changed)
        self.duty_combo.currentIndexChanged.connect(self._on_duty_combo_changed)
        self.policy_combo.currentIndexChanged.connect(self._on_policy_combo_changed)
        self.cpu_edit.textChanged.connect(self._on_cpu_edit_text_changed)
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)
        self.run_action.triggered.connect(self.run)
        self.cancel_action.triggered.connect(self.cancel)
        self.open_action.triggered.connect(self._on_open_action_triggered)
        self.save_action.triggered.connect(self._on_save_action_triggered)
        self.save_button.clicked.connect(self._on_save_action_triggered)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.runs_list.itemChanged.connect(self._on_runs_list_item_changed)
        self.runs_list.itemSelectionChanged.connect(self._on_runs_list_selection_changed)
        self.controller.job_started.connect(self._on_controller_job_started)
        self.controller.line_received.connect(self._on_controller_line_received)
        self.controller.job_finished.connect(self._on_controller_job_finished)
        self.controller.job_failed.connect(self._on_controller_job_failed)
        self.controller.finished.connect(self._on_controller_finished)
        self.controller.affinity_note.connect(self._on_controller_affinity_note)

    # -- layout helpers ---------------------------------------------------------------------------
    def _row(self, *widgets) -> QWidget:
        w = QWidget(self)
        lay = QHBoxLayout(w)
        lay.setContentsMargins(0, 0, 0, 0)
        for x in widgets:
            lay.addWidget(x)
        return w

    @staticmethod
    def _hbox(*widgets) -> QHBoxLayout:
        lay = QHBoxLayout()
        for x in widgets:
            lay.addWidget(x)
        lay.addStretch(1)
        return lay

    def _page(self, *rows) -> QWidget:
        w = QWidget(self)
        f = QFormLayout(w)
        f.setContentsMargins(0, 0, 0, 0)
        for label, widget in rows:
            f.addRow(label, widget)
        return w

    # -- public -----------------------------------------------------------------------------------
    @property
    def probe(self) -> str:
        return self.probe_combo.currentData()

    def set_probe(self, name: str) -> None:
        i = self.probe_combo.findData(name)
        if i < 0:
            raise CoremapError(f"no probe named {name!r}; choose one of {', '.join(k for k, _ in PROBES)}")
        self.probe_combo.setCurrentIndex(i)

    def set_cpus(self, cpus) -> None:
        self.cpu_edit.setText(format_cpulist(sorted(set(cpus))))

    def set_cpu(self, cpu: int) -> None:
        """The grid's cpu_selected: probe this CPU next."""
        self.set_cpus([cpu])

    def cpus(self) -> tuple[int, ...]:
        return parse_cpulist(self.cpu_edit.text(), what="CPUs")

    def set_topology(self, topology) -> None:
        if topology is self._topology:
            return
        self._topology = topology
        self._order = topology_order(topology)

    def set_state(self, state) -> None:
        self.set_topology(state.topology)
        live = bool(state.live)
        if live != self._live:
            # Probes run on this machine; a capture of another one cannot be probed from here.
            self._live = live
            self._set_busy(self.controller.running)
            if not live:
                host = state.topology.hostname or "another machine"
                self._status(f"this window shows a capture of {host}; probes measure the machine coremap "
                             "runs on, so run coremap there to probe it (opening result files still works)")

    @property
    def runs(self) -> list[RunRecord]:
        return list(self._runs.values())

    def run_record(self, key: int) -> RunRecord:
        return self._runs[key]

    @property
    def status_text(self) -> str:
        return self.status_label.text()

    @property
    def busy(self) -> bool:
        return self.controller.running

    def build_jobs(self) -> list[ProbeJob]:
        """The jobs the form asks for; CoremapError (shown on the status line) when it asks for
        something that cannot run."""
        from app.cli.probe import PER_CPU, _child_args
        probe = self.probe
        unbound = self.unbound_check.isChecked()
        text = self.cpu_edit.text().strip()
        if self.cpu_edit.validator().validate(text, 0) != QValidator.State.Acceptable and text:
            parse_cpulist(text, what="CPUs")          # raises the parser's own message
        cpus = parse_cpulist(text, what="CPUs") if text else ()
        if not cpus and not (unbound and probe in ("jitter", "wakeup", "counters")):
            raise CoremapError("choose CPUs: type a list such as 1 or 2-3, drop a CPU cell here, or click "
                               "one in the grid" + (" (or tick unbound)" if probe in ("jitter", "wakeup") else ""))
        sched = probe in SCHED_PROBES
        fifo = sched and self.policy_combo.currentData() == "fifo"
        duty = None
        if probe == "jitter":
            duty = self.duty_combo.currentData()
            duty = self.duty_spin.value() if duty is None else duty
        command = []
        if probe == "counters" and self.command_edit.text().strip():
            try:
                command = shlex.split(self.command_edit.text())
            except ValueError as e:
                raise CoremapError(f"command {self.command_edit.text()!r}: {e}; check the quotes") from None
        ns = SimpleNamespace(
            name=probe, unbound=unbound, seconds=self.seconds_spin.value(),
            duty=duty, threshold_ns=None,
            interval_us=self.interval_spin.value() if probe == "wakeup" else None,
            policy="fifo" if fifo else None, priority=self.priority_spin.value() if fifo else None,
            slack_ns=self.slack_spin.value() if sched and self.slack_spin.value() >= 0 else None,
            dma_latency=probe == "wakeup" and self.dma_check.isChecked(),
            attribute=probe == "jitter" and self.attribute_check.isEnabled() and self.attribute_check.isChecked(),
            rounds=self.rounds_spin.value() if probe == "sweep" else None,
            pairs=(self.pairs_edit.text().strip() or None) if probe == "c2c" else None,
            command=command)
        suffix = ""
        if probe == "jitter" and duty != 100.0:
            suffix = f" {duty:g}%"
        if fifo:
            suffix += f" fifo {ns.priority}"
        if probe in PER_CPU and cpus:
            groups = [(c,) for c in cpus]
        else:
            groups = [cpus]
        jobs = []
        for g in groups:
            cpu_text = format_cpulist(g) if g else None
            where = f"CPU {cpu_text}" if cpu_text else "unbound"
            if unbound and cpu_text:
                where += " unbound"
            # an unbound run measures wherever the scheduler puts it: no CPU to keep free
            keep_free = () if unbound else g
            jobs.append(ProbeJob(probe, _child_args(ns, cpu_text), keep_free, f"{probe} {where}{suffix}",
                                 ns.seconds))
        return jobs

    def run(self) -> bool:
        """Start the probe the form describes; False (and why on the status line) if it cannot."""
        if self.controller.running:
            self._status("a probe is already running; cancel it first", error=True)
            return False
        if not self._live:
            self._status("this window shows a capture of another machine; probes run only on the "
                         "machine coremap runs on", error=True)
            return False
        try:
            jobs = self.build_jobs()
            self._total_s = sum(j.seconds or 0.0 for j in jobs)
            self._done_s = 0.0
            self.controller.start(jobs)
        except CoremapError as e:
            self._status(str(e), error=True)
            return False
        self._set_busy(True)
        return True

    def cancel(self) -> None:
        if self.controller.running:
            pid = self.controller.pid
            self.controller.cancel()
            self._status(f"cancelled (probe process {pid} stopped)")

    # -- opening and saving ------------------------------------------------------------------------
    def open_result(self, path) -> list[RunRecord]:
        """Add the runs of an .hlog, cyclictest --json or oslat --json file; CoremapError if it is none."""
        path = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise CoremapError(f"{path}: cannot read it ({e.strerror}); check the name and permissions") from None
        name = os.path.basename(path)
        added = []
        if text.lstrip().startswith("{"):
            for label, cpu, buckets, sampled_ns in _rt_tests_runs(text, path):
                added.append(self._add_file_run(f"{name} CPU {cpu}" if cpu is not None else name, path,
                                                buckets, sampled_ns, cpu))
        else:
            data = histogram.parse_hlog(text, what=path)
            if not data.intervals:
                raise CoremapError(f"{path}: an HdrHistogram log with no intervals; nothing to plot")
            tags = sorted({iv.tag for iv in data.intervals}, key=lambda t: (t is not None, t or ""))
            for tag in tags:
                ivs = [iv for iv in data.intervals if iv.tag == tag]
                h = histogram.new_histogram()
                for iv in ivs:
                    h.add(iv.histogram)
                # per-CPU-hour needs the measured time; a log holds interval lengths (elapsed time)
                sampled_ns = sum(iv.length_s for iv in ivs) * 1e9
                label = f"{name} {tag}" if tag else name
                added.append(self._add_file_run(label, path, histogram.histogram_to_buckets(h), sampled_ns, None))
        self._status(f"opened {name}: {len(added)} run{'s' if len(added) != 1 else ''}")
        self.tabs.setCurrentWidget(self.histogram_plot)
        return added

    def save_run(self, key: int, path) -> None:
        """Write a finished run: .hlog, .csv, .txt (cyclictest-style histogram) or .json (any probe)."""
        rec = self._runs[key]
        path = str(path)
        suffix = Path(path).suffix.lower()
        if not rec.finished:
            raise CoremapError(f"run {rec.label!r} has not finished; wait for it or cancel it first")
        try:
            if suffix == ".json":
                with open(path, "w") as f:
                    json.dump(rec.summary if rec.summary is not None else {"label": rec.label, "buckets": rec.buckets},
                              f, indent=1, default=str)
                return
            if not rec.has_histogram:
                raise CoremapError(f"run {rec.label!r} ({rec.probe}) has no histogram; save it as .json")
            if suffix == ".hlog":
                histogram.write_hlog(path, self._hlog_intervals(rec),
                                     comment=f"coremap probe histogram log; values in ns; {rec.label}")
            elif suffix == ".csv":
                with open(path, "w", newline="") as f:
                    histogram.write_csv(f, rec.buckets)
            elif suffix == ".txt":
                Path(path).write_text(histogram.cyclictest_text(rec.buckets))
            else:
                raise CoremapError(f"{path}: name a .hlog, .csv, .txt (cyclictest-style) or .json file")
        except OSError as e:
            raise CoremapError(f"{path}: cannot write it ({e.strerror})") from None
        self._status(f"saved {rec.label} to {path}")

    def _hlog_intervals(self, rec: RunRecord) -> list:
        ivs = [l for l in rec.lines if l.get("type") == "interval" and "buckets" in l]
        if not ivs:
            return [(0.0, rec.sampled_ns / 1e9, histogram.buckets_to_histogram(rec.buckets))]
        out, prev = [], 0
        for l in ivs:
            out.append((prev / 1e9, (l["elapsed_ns"] - prev) / 1e9, histogram.buckets_to_histogram(l["buckets"])))
            prev = l["elapsed_ns"]
        return out

    def remove_run(self, key: int) -> None:
        if self._job_record is not None and self._job_record.key == key:
            self._status("that run is still going; cancel it before removing it", error=True)
            return
        rec = self._runs.pop(key, None)
        if rec is None:
            return
        self.histogram_plot.remove_run(key)
        self.percentile_plot.remove_run(key)
        for i in range(self.runs_list.count()):
            if self.runs_list.item(i).data(Qt.ItemDataRole.UserRole) == key:
                self.runs_list.takeItem(i)
                break
        self._rebuild_table()

    def set_run_visible(self, key: int, visible: bool) -> None:
        self.histogram_plot.set_run_visible(key, visible)
        self.percentile_plot.set_run_visible(key, visible)
        item = self._list_item(key)
        if item is not None:
            self.runs_list.blockSignals(True)
            item.setCheckState(Qt.CheckState.Checked if visible else Qt.CheckState.Unchecked)
            self.runs_list.blockSignals(False)

    # -- records ----------------------------------------------------------------------------------
    def _new_record(self, probe: str, label: str, source: str = "coremap", cpus=()) -> RunRecord:
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
        self.run_added.emit(rec)
        return rec

    def add_result(self, result: dict, source: str) -> RunRecord | None:
        """Show a probe result object (the CLI's `--json` shape, as a session stores it) as a run;
        None for results without a histogram (sweep, c2c, counters): their figures stay in the file."""
        buckets = [[int(b["lo_ns"]), int(b["hi_ns"]), int(b["count"])] for b in result.get("buckets") or ()]
        if not buckets:
            return None
        cpu = result.get("cpu")
        label = result.get("label") or f"{result.get('probe', 'probe')} CPU {cpu}"
        sampled_ns = float(result.get("sampled_seconds") or 0.0) * 1e9
        rec = self._add_file_run(label, source, buckets, sampled_ns, cpu if isinstance(cpu, int) else None)
        if isinstance(result.get("attribution"), dict):
            rec.attribution = result["attribution"]
        return rec

    def _add_file_run(self, label, path, buckets, sampled_ns, cpu) -> RunRecord:
        rec = self._new_record("file", label, path, () if cpu is None else (cpu,))
        rec.buckets = histogram.merge_buckets(buckets)
        rec.sampled_ns = float(sampled_ns or 0.0)
        rec.finished = True
        s = histogram.summary_from_buckets(rec.buckets, rec.sampled_ns or None)
        rec.summary = {"probe": "file", "source": path, "label": rec.label, **s,
                       "buckets": histogram.buckets_as_dicts(rec.buckets)}
        self._draw_histogram(rec)
        self._rebuild_table()
        return rec

    def _list_item(self, key: int) -> QListWidgetItem | None:
        for i in range(self.runs_list.count()):
            it = self.runs_list.item(i)
            if it.data(Qt.ItemDataRole.UserRole) == key:
                return it
        return None

    def _draw_histogram(self, rec: RunRecord) -> None:
        self.histogram_plot.set_run(rec.key, rec.label, rec.buckets, rec.sampled_ns)
        self.percentile_plot.set_run(rec.key, rec.label, rec.buckets)

    def _rebuild_table(self) -> None:
        recs = [r for r in self._runs.values() if r.has_histogram and r.finished and r.summary]
        self.table.setRowCount(len(recs))
        for row, r in enumerate(recs):
            p = r.summary.get("percentiles") or {}
            total = r.summary.get("total")
            if total is None:
                total = sum(int(b[2]) for b in r.buckets)
            cells = [r.label] + [format_ns(round(p[k], 1)) if p.get(k) is not None else "-"
                                 for k in TABLE_COLUMNS[1:6]] + [f"{total:,}"]
            for col, text in enumerate(cells):
                it = QTableWidgetItem(text)
                if col:
                    it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, col, it)

    # -- status -----------------------------------------------------------------------------------
    def _status(self, text: str, *, error: bool = False) -> None:
        self.status_label.setStyleSheet("color: #b00020;" if error else "")
        self.status_label.setText(("error: " if error else "") + text)
        self.status_changed.emit(self.status_label.text())

    def _set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy and self._live)
        self.run_action.setEnabled(not busy and self._live)
        self.cancel_button.setEnabled(busy)
        self.cancel_action.setEnabled(busy)
        if not busy:
            self.progress.setFormat("idle")
            self.progress.setValue(0)
        self.busy_changed.emit(busy)

    def _set_progress(self, fraction: float, text: str) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        self.progress.setFormat(text)

    # -- handlers ---------------------------------------------------------------------------------
    def _on_probe_combo_changed(self, _index: int) -> None:
        probe = self.probe
        self.options_stack.setCurrentIndex([k for k, _ in PROBES].index(probe))
        self.sched_row.setEnabled(probe in SCHED_PROBES)
        self.slack_spin.setEnabled(probe in SCHED_PROBES)
        self.unbound_check.setEnabled(probe in ("jitter", "wakeup", "counters"))
        self.seconds_spin.setEnabled(probe in ("jitter", "wakeup", "counters"))

    def _on_duty_combo_changed(self, _index: int) -> None:
        self.duty_spin.setEnabled(self.duty_combo.currentData() is None)

    def _on_policy_combo_changed(self, _index: int) -> None:
        self.priority_spin.setEnabled(self.policy_combo.currentData() == "fifo")

    def _on_cpu_edit_text_changed(self, text: str) -> None:
        ok = not text.strip() or self.cpu_edit.hasAcceptableInput()
        self.cpu_edit.setStyleSheet("" if ok else "color: #b00020;")

    def _on_controller_job_started(self, job: ProbeJob) -> None:
        rec = self._new_record(job.probe, job.label, "coremap", job.cpus)
        self._job_record = rec
        rec.lines = job.lines
        if job.probe == "sweep":
            self._job_units = max(1, self.rounds_spin.value())
        elif job.probe == "c2c":
            n = len(cpus_of_job(job))
            pairs = self.pairs_edit.text().strip()
            self._job_units = max(1, len(pairs.split(",")) if pairs else n * (n - 1) // 2)
        else:
            self._job_units = 1
        tab = {"sweep": self.sweep_plot, "c2c": self.c2c_heatmap, "counters": self.summary_text}.get(
            job.probe, self.histogram_plot)
        self.tabs.setCurrentWidget(tab)
        where = f" on CPUs {format_cpulist(job.cpus)}" if job.cpus else ""
        others = ""
        if job.cpus and self.controller.guard.active:
            others = "; coremap's threads kept off them"
        self._status(f"running {job.probe}{where} (pid {self.controller.pid}){others}")
        self._set_progress(self._done_s / self._total_s if self._total_s else 0.0, f"{job.label}: starting")

    def _on_controller_line_received(self, job: ProbeJob, line: dict) -> None:
        rec = self._job_record
        if rec is None:
            return
        kind = line.get("type")
        if kind == "error":
            self._status(line.get("message", "the probe failed"), error=True)
            return
        if kind != "interval":
            return
        elapsed_s = float(line.get("elapsed_ns", 0)) / 1e9
        if job.probe in HISTOGRAM_PROBES:
            rec.buckets = histogram.merge_buckets(rec.buckets, line.get("buckets", []))
            rec.sampled_ns += float(line.get("sampled_ns", 0))
            # redraw at most every LIVE_REDRAW_S while running (the finished run is drawn in full):
            # a plot per 100 ms chunk is work the window does while a probe measures its neighbour
            now = time.monotonic()
            if now - self._last_live_draw >= LIVE_REDRAW_S:
                self._last_live_draw = now
                self._draw_histogram(rec)
            total = self._total_s or (job.seconds or 1.0)
            self._set_progress((self._done_s + min(elapsed_s, job.seconds or elapsed_s)) / total,
                               f"{job.label}: {elapsed_s:.1f} / {job.seconds:g} s")
        elif job.probe == "sweep":
            from probes import sweep
            self.sweep_plot.set_result(sweep.summarize(job.lines)["cpus"], self._order)
            r = int(line.get("round", 0)) + 1
            self._set_progress(r / self._job_units, f"{job.label}: round {r} / {self._job_units}")
        elif job.probe == "c2c":
            from probes import c2c
            s = c2c.summarize(job.lines)
            self.c2c_heatmap.set_matrix(s["matrix_cpus"], s["matrix_ns"], self._order)
            done = sum(1 for l in job.lines if l.get("type") == "interval")
            self._set_progress(done / self._job_units, f"{job.label}: pair {done} / {self._job_units}")
        else:
            self._set_progress(0.5, f"{job.label}: {line.get('mode', '')} done")

    def _on_controller_job_finished(self, job: ProbeJob, _rc: int) -> None:
        rec = self._job_record
        self._job_record = None
        if rec is None:
            return
        mod = importlib.import_module(f"probes.{job.probe}")
        rec.summary = mod.summarize(job.lines)
        rec.finished = True
        self._done_s += job.seconds or 0.0
        if job.probe in HISTOGRAM_PROBES:
            self._draw_histogram(rec)
            self._rebuild_table()
        elif job.probe == "sweep":
            self.sweep_plot.set_result(rec.summary["cpus"], self._order)
        elif job.probe == "c2c":
            self.c2c_heatmap.set_matrix(rec.summary["matrix_cpus"], rec.summary["matrix_ns"], self._order)
        from app.cli.probe import format_result
        self.summary_text.setPlainText(format_result(rec.summary))
        if job.probe == "jitter":
            self.gap_view.set_attribution(rec.summary.get("attribution"), rec.label)
        self._on_runs_list_selection_changed()
        self.run_finished.emit(rec)

    def _on_controller_job_failed(self, job: ProbeJob, message: str) -> None:
        rec = self._job_record
        self._job_record = None
        if rec is not None:
            rec.failed = message
            self.remove_run(rec.key)
        self._status(message, error=True)

    def _on_controller_finished(self, how: str) -> None:
        rec = self._job_record
        self._job_record = None
        if how == "cancelled" and rec is not None:
            rec.failed = "cancelled"
            self.remove_run(rec.key)
        self._set_busy(False)
        if how == "done":
            last = [r.label for r in self._runs.values() if r.finished and r.source == "coremap"][-1:]
            self._status("done" + (f": {last[0]}" if last else ""))

    def _on_controller_affinity_note(self, note: str) -> None:
        self._status(note)

    def _on_runs_list_item_changed(self, item: QListWidgetItem) -> None:
        key = item.data(Qt.ItemDataRole.UserRole)
        if key in self._runs:
            visible = item.checkState() == Qt.CheckState.Checked
            self.histogram_plot.set_run_visible(key, visible)
            self.percentile_plot.set_run_visible(key, visible)

    def _selected_keys(self) -> list[int]:
        return [it.data(Qt.ItemDataRole.UserRole) for it in self.runs_list.selectedItems()]

    def _on_runs_list_selection_changed(self) -> None:
        keys = self._selected_keys()
        self.remove_button.setEnabled(bool(keys))
        can_save = len(keys) == 1 and self._runs[keys[0]].finished
        self.save_button.setEnabled(can_save)
        self.save_action.setEnabled(can_save)
        if len(keys) == 1 and self._runs[keys[0]].summary and self._runs[keys[0]].source == "coremap":
            from app.cli.probe import format_result
            self.summary_text.setPlainText(format_result(self._runs[keys[0]].summary))
            if self._runs[keys[0]].probe == "jitter":
                self.gap_view.set_attribution(self._runs[keys[0]].summary.get("attribution"),
                                              self._runs[keys[0]].label)
        elif len(keys) == 1 and self._runs[keys[0]].attribution is not None:
            self.gap_view.set_attribution(self._runs[keys[0]].attribution, self._runs[keys[0]].label)

    def _on_remove_button_clicked(self) -> None:
        for key in self._selected_keys():
            self.remove_run(key)

    def _on_open_action_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open Probe Result", "",
                                              "Probe results (*.hlog *.json);;All files (*)")
        if not path:
            return
        try:
            self.open_result(path)
        except CoremapError as e:
            self._status(str(e), error=True)

    def _on_save_action_triggered(self) -> None:
        keys = self._selected_keys()
        if len(keys) != 1:
            self._status("select one finished run to save", error=True)
            return
        rec = self._runs[keys[0]]
        filters = ("HdrHistogram log (*.hlog);;CSV buckets (*.csv);;cyclictest-style histogram (*.txt);;"
                   "JSON result (*.json)") if rec.has_histogram else "JSON result (*.json)"
        path, _ = QFileDialog.getSaveFileName(self, "Save Run", re.sub(r"[^\w.-]+", "_", rec.label), filters)
        if not path:
            return
        try:
            self.save_run(rec.key, path)
        except CoremapError as e:
            self._status(str(e), error=True)

    # -- drops ------------------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasFormat(CPU_MIME):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:
        if event.mimeData().hasFormat(CPU_MIME):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        if not event.mimeData().hasFormat(CPU_MIME):
            event.ignore()
            return
        try:
            cpus = cpus_from_mime(event.mimeData().data(CPU_MIME).data())
        except CoremapError as e:
            self._status(str(e), error=True)
            event.ignore()
            return
        why = self._refused_drop(cpus)
        if why:
            self._status(why, error=True)
            event.ignore()
            return
        self.set_cpus(cpus)
        self._status(f"CPUs {format_cpulist(cpus)} from the drop")
        event.acceptProposedAction()

    def _refused_drop(self, cpus: tuple[int, ...]) -> str | None:
        """Why dropped CPUs cannot be probed here (the CPU field then stays as it was), or None.

        Online: against the shown topology (none yet: the probe child checks, probes/common.py
        check_cpus). Allowed: against this process's affinity on a live window - skipped while a run
        has moved coremap's own threads off the probed CPUs (OwnAffinityGuard), when that mask is not
        what the next child would inherit."""
        if not cpus:
            return "the drop holds no CPU; drag an online CPU, core or package from the grid"
        if self._topology is None:
            return None
        online = set(self._topology.online)
        offline = [c for c in cpus if c not in online]
        if offline:
            return offline_sentence(offline, online)
        guard = getattr(self.controller, "guard", None)
        if self._live and not (guard is not None and guard.active):
            allowed = online & set(os.sched_getaffinity(0))
            barred = [c for c in cpus if c not in allowed]
            if barred:
                are = "CPUs {} are" if len(barred) > 1 else "CPU {} is"
                return (f"{are.format(format_cpulist(barred))} not in coremap's allowed CPUs "
                        f"({format_cpulist(sorted(allowed))}); a probe could not run there")
        return None


def cpus_of_job(job: ProbeJob) -> tuple[int, ...]:
    from widgets.probe_controller import cpus_of_args
    return cpus_of_args(job.args)


def _rt_tests_runs(text: str, path: str):
    """(label, cpu, buckets, sampled_ns) per thread of a cyclictest or oslat --json file."""
    try:
        d = json.loads(text)
    except ValueError as e:
        raise CoremapError(f"{path}: not JSON ({e}); open an .hlog or rt-tests --json file") from None
    # rt-tests (src/lib/rt-utils.c rt_write_json) spells the key "cmdline:" with the colon
    cmdline = str(d.get("cmdline:", d.get("cmdline", ""))) if isinstance(d, dict) else ""
    threads = d.get("thread") if isinstance(d, dict) else None
    is_oslat = "oslat" in cmdline or (isinstance(threads, dict) and
                                      any(isinstance(t, dict) and "duration" in t for t in threads.values()))
    if is_oslat:
        for _k, t in sorted(histogram.read_oslat_json(text, what=path).items()):
            yield "oslat", t["cpu"], t["buckets"], (t.get("duration_s") or 0.0) * 1e9
        return
    interval_us = CYCLICTEST_DEFAULT_INTERVAL_US
    m = re.search(r"(?:^|\s)(?:-i\s*|--interval[= ])(\d+)", cmdline)
    if m:
        interval_us = int(m.group(1))
    for _k, t in sorted(histogram.read_cyclictest_json(text, what=path).items()):
        # cyclictest measures one wakeup per interval: its measured span is cycles x interval
        sampled = (t["cycles"] or 0) * interval_us * 1000.0
        yield "cyclictest", t["cpu"], t["buckets"], sampled
