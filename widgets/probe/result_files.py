"""ResultFiles: the probe panel's runs that come from files and go to them. Opening an .hlog,
cyclictest --json or oslat --json file adds its runs (probes/files.py); a result object a session
stores becomes a run of its own probe, drawn where the probe's record (probes/catalog.py) says, or a
histogram run; a finished run is saved as .hlog, CSV, cyclictest-style text or JSON. What happened
goes to the status line (`status`), never to a dialog.
"""
from __future__ import annotations

import os
import re

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from app.errors import CoremapError
from probes import files
from probes.catalog import RECORDS
from probes.files import FileRun
from widgets.probe.run_table import RunTable
from widgets.probe.runs import RunRecord, RunStore
from widgets.probe.tabs import ProbeTabs


class ResultFiles(QObject):
    """Opens files and results into `runs` (drawn on `plots`, tabulated in `table`) and saves them;
    the file dialogs open over `window`."""

    status = Signal(str, bool)          # a sentence for the status line, and whether it is an error

    def __init__(self, runs: RunStore, plots: ProbeTabs, table: RunTable, window: QWidget):
        super().__init__(window)
        self.runs, self.plots, self.table, self.window = runs, plots, table, window

    def open_result(self, path) -> list[RunRecord]:
        """Add the runs of an .hlog, cyclictest --json or oslat --json file; CoremapError if it is none."""
        path = str(path)
        added = [self._add_file_run(run, path) for run in files.load_runs(path)]
        self.status.emit(f"opened {os.path.basename(path)}: {len(added)} run{'s' if len(added) != 1 else ''}",
                         False)
        if added:
            self.plots.show_tab_for(added[0].probe, added[0])
        return added

    def add_result(self, result: dict, source: str) -> RunRecord | None:
        """Show a probe result object (the CLI's `--json` shape, as a session stores it) as a run: a
        histogram (the runs of a probe whose record says `histogram`, and of a probe this coremap does
        not know, when they hold buckets), or else a run of its own probe, on its view and Summary;
        None for a result with neither."""
        record = RECORDS.get(result.get("probe"))
        if record is not None and not record.histogram:
            rec = self.runs.add(record.name, result.get("title") or record.name, source)
            rec.summary = dict(result)
            rec.finished = True
            self.plots.show_result(rec)
            return rec
        run = files.result_run(result)
        if run is None:
            return None
        rec = self._add_file_run(run, source)
        if record is not None:
            # Its probe's result whole, for a report: a session reopened was reported as "1. file" runs
            # without their CPU or gap attribution (issue 28, found by the report engineer).
            rec.stored = dict(result)
        return rec

    def save_run(self, key: int, path) -> None:
        """Write a finished run: .hlog, .csv, .txt (cyclictest-style histogram) or .json (any probe)."""
        rec = self.runs.get(key)
        if not rec.finished:
            raise CoremapError(f"run {rec.label!r} has not finished; wait for it or cancel it first")
        files.write_run(path, label=rec.label, result=rec.summary,
                        buckets=rec.buckets if rec.has_histogram else None, sampled_ns=rec.sampled_ns,
                        lines=rec.lines)
        self.status.emit(f"saved {rec.label} to {path}", False)

    def _add_file_run(self, run: FileRun, source: str) -> RunRecord:
        rec = self.runs.add("file", run.label, source, () if run.cpu is None else (run.cpu,))
        rec.buckets = run.buckets
        rec.sampled_ns = run.sampled_ns
        rec.attribution = run.attribution
        rec.gaps_from_ns = run.gaps_from_ns
        rec.finished = True
        rec.summary = run.result(rec.label, source)
        self.plots.draw_histogram(rec)
        self.table.set_runs(self.runs.records)
        return rec

    # -- the File menu's dialogs ---------------------------------------------------------------------
    def ask_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open Probe Result", "",
                                              "Probe results (*.hlog *.json);;All files (*)")
        if not path:
            return
        try:
            self.open_result(path)
        except CoremapError as e:
            self.status.emit(str(e), True)

    def ask_save(self) -> None:
        selected = self.runs.selected()
        if len(selected) != 1:
            self.status.emit("select one finished run to save", True)
            return
        rec = selected[0]
        filters = ("HdrHistogram log (*.hlog);;CSV buckets (*.csv);;cyclictest-style histogram (*.txt);;"
                   "JSON result (*.json)") if rec.has_histogram else "JSON result (*.json)"
        path, _ = QFileDialog.getSaveFileName(self.window, "Save Run", re.sub(r"[^\w.-]+", "_", rec.label), filters)
        if not path:
            return
        try:
            self.save_run(rec.key, path)
        except CoremapError as e:
            self.status.emit(str(e), True)
