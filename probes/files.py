"""Probe runs and files: the runs a result file holds, and a run written to one.

Reading: an HdrHistogram log (ours, jHiccup's: one run per tag), a cyclictest --json or an oslat
--json file (one run per thread) becomes FileRuns of (label, cpu, buckets, sampled_ns); the
formats themselves are parsed by probes/histogram.py. Writing: a finished run as .hlog (one
interval per `interval` line, the way `coremap probe --hlog` writes them), .csv (its buckets), .txt
(cyclictest's histogram block) or .json (its result object). Errors name the file and what to do.
"""
from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from app.atomic import check_output_path, write_atomic
from app.errors import CoremapError
from app.inputs import MiB, read_input_text
from app.parse.json_text import JsonInputError, load_json
from probes import histogram
from probes.common import run_lines

# cyclictest's default period when its command line gives none (src/cyclictest/cyclictest.c:
# interval = DEFAULT_INTERVAL, 1000 us)
CYCLICTEST_DEFAULT_INTERVAL_US = 1000
HLOG_COMMENT = "coremap probe histogram log; values in ns"
# What a jitter run's .hlog says of its threshold, so the run read back counts the same gaps.
_GAPS_FROM = re.compile(r"gaps from (\d+) ns")


RESULT_FILE_LIMIT = 256 * MiB       # a day-long .hlog at 10 intervals/s is ~100 MB


class ResultFileError(CoremapError):
    """A probe result file that cannot be read, is in no format coremap knows, or cannot be written."""


@dataclass(frozen=True)
class FileRun:
    """One run read from a file (or a saved result object): what the panel plots and tabulates.
    `sampled_ns` is the measured time (0 when the file does not say). `gaps_from_ns`: for a run of
    read-to-read intervals (a jitter run, oslat), the shortest that counts as a gap: its figures and
    pictures are of gaps (probes/histogram.py gap_figures); None for latencies (wakeup, cyclictest)."""
    label: str
    cpu: int | None
    buckets: list
    sampled_ns: float
    attribution: dict | None = None
    gaps_from_ns: int | None = None

    def __post_init__(self):
        # one [lo, hi, count] per range, sorted, no empty ones: what the plots and the table take
        object.__setattr__(self, "buckets", histogram.merge_buckets(self.buckets))
        object.__setattr__(self, "sampled_ns", float(self.sampled_ns or 0.0))

    def result(self, label: str, source: str) -> dict:
        """The run's result object: percentiles, gaps per CPU-hour when the sampled time is known,
        and its buckets (the shape of the CLI's --json)."""
        s = histogram.summary_from_buckets(self.buckets, self.sampled_ns or None)
        if self.gaps_from_ns is not None:
            s["gaps"] = histogram.gap_figures(self.buckets, self.sampled_ns, from_ns=self.gaps_from_ns)
            s["percentiles"] = s["gaps"]["percentiles"]
        return {"probe": "file", "source": source, "label": label, **s,
                "buckets": histogram.buckets_as_dicts(self.buckets)}


# -- reading ---------------------------------------------------------------------------------------
def load_runs(path) -> list[FileRun]:
    """The runs of an .hlog, cyclictest --json or oslat --json file."""
    path = str(path)
    try:
        text = read_input_text(path, what="", limit=RESULT_FILE_LIMIT, stream=True,
                               hint="open an .hlog, cyclictest --json or oslat --json file")
    except CoremapError as e:
        raise ResultFileError(str(e)) from None
    return parse_runs(text, name=os.path.basename(path), what=path)


def parse_runs(text: str, *, name: str, what: str) -> list[FileRun]:
    """Runs of a result file's text; `name` starts their labels, `what` names the file in errors."""
    if text.lstrip().startswith("{"):
        return list(_rt_tests_runs(text, name, what))
    data = histogram.parse_hlog(text, what=what)
    if not data.intervals:
        raise ResultFileError(f"{what}: an HdrHistogram log with no intervals; nothing to plot")
    tags = sorted({iv.tag for iv in data.intervals}, key=lambda t: (t is not None, t or ""))
    m = next((m for c in data.comments if (m := _GAPS_FROM.search(c))), None)
    runs = []
    for tag in tags:
        ivs = [iv for iv in data.intervals if iv.tag == tag]
        # per-CPU-hour needs the measured time; a log holds interval lengths (elapsed time)
        sampled_ns = sum(iv.length_s for iv in ivs) * 1e9
        runs.append(FileRun(f"{name} {tag}" if tag else name, None,
                            histogram.histogram_to_buckets(data.merged(tag)), sampled_ns,
                            gaps_from_ns=int(m.group(1)) if m else None))
    return runs


def _rt_tests_runs(text: str, name: str, what: str):
    """One FileRun per thread of a cyclictest or oslat --json file."""
    try:
        d = load_json(text, what=what, limit=RESULT_FILE_LIMIT)
    except JsonInputError as e:
        raise ResultFileError(f"{e}; open an .hlog or rt-tests --json file") from None
    # rt-tests (src/lib/rt-utils.c rt_write_json) spells the key "cmdline:" with the colon
    cmdline = str(d.get("cmdline:", d.get("cmdline", ""))) if isinstance(d, dict) else ""
    threads = d.get("thread") if isinstance(d, dict) else None
    is_oslat = "oslat" in cmdline or (isinstance(threads, dict) and
                                      any(isinstance(t, dict) and "duration" in t for t in threads.values()))
    if is_oslat:
        for _k, t in sorted(histogram.read_oslat_json(text, what=what).items()):
            # oslat's first bucket, [0, 1) us, holds the loop's own reads: a gap is 1 us or more
            yield FileRun(_thread_label(name, t["cpu"]), t["cpu"], t["buckets"], (t.get("duration_s") or 0.0) * 1e9,
                          gaps_from_ns=histogram.DEFAULT_GAP_NS)
        return
    interval_us = CYCLICTEST_DEFAULT_INTERVAL_US
    m = re.search(r"(?:^|\s)(?:-i\s*|--interval[= ])(\d+)", cmdline)
    if m:
        interval_us = int(m.group(1))
    for _k, t in sorted(histogram.read_cyclictest_json(text, what=what).items()):
        # cyclictest measures one wakeup per interval: its measured span is cycles x interval
        sampled = (t["cycles"] or 0) * interval_us * 1000.0
        yield FileRun(_thread_label(name, t["cpu"]), t["cpu"], t["buckets"], sampled)


def _thread_label(name: str, cpu) -> str:
    return f"{name} CPU {cpu}" if cpu is not None else name


def result_run(result: dict) -> FileRun | None:
    """A result object (the CLI's --json shape, as a session stores it) as a run; None for results
    without buckets (sweep, c2c, counters): their figures stay in the object."""
    buckets = [[int(lo), int(hi), int(c)] for lo, hi, c in histogram.bucket_rows(result.get("buckets") or ())]
    if not buckets:
        return None
    cpu = result.get("cpu")
    label = result.get("label") or f"{result.get('probe', 'probe')} CPU {cpu}"
    attribution = result.get("attribution")
    return FileRun(label, cpu if isinstance(cpu, int) else None, buckets,
                   float(result.get("sampled_seconds") or 0.0) * 1e9,
                   attribution if isinstance(attribution, dict) else None, gaps_from(result))


def gaps_from(result: dict) -> int | None:
    """The gap threshold of a jitter result (its own, or the probe's default for one stored before
    results said it); None for any other result."""
    if result.get("probe") != "jitter":
        gaps = result.get("gaps")
        return int(gaps["from_ns"]) if isinstance(gaps, dict) and isinstance(gaps.get("from_ns"), int) else None
    t = result.get("threshold_ns")
    return int(t) if isinstance(t, int) and t > 0 else histogram.DEFAULT_GAP_NS


# -- writing ---------------------------------------------------------------------------------------
# What a log of gaps holds, and why (issue 30, wrong answer 3). A jitter run's buckets hold every
# read-to-read interval, nearly all of them the loop's own period: a log of those read back with any
# HdrHistogram tool (HistogramLogProcessor, HistogramLogAnalyzer, hdrh) gave p50 12 ns and min 4 ns per
# interval under a header saying "gaps from 1000 ns", where coremap printed a gap p50 of 2.07 us. Those
# tools read percentiles and maxima over time and know nothing of a threshold, so the log holds only
# the gaps: what they compute from it is what coremap printed. How many reads there were is in the
# run's JSON result (iterations, loop_ns), not in a histogram of a hundred million equal values.
def _gaps_comment(from_ns: int) -> str:
    return (f"gaps from {from_ns} ns: only read-to-read intervals of at least {from_ns} ns are recorded "
            "(the loop's own reads are not; their count is the run's iterations)")


def _logged(buckets, from_ns: int | None):
    """The buckets a log records: a run's gaps (from `from_ns`), or every value of a latency run."""
    return buckets if from_ns is None else histogram.gap_buckets(buckets, from_ns)


def hlog_intervals(lines, *, tag: str | None = None, from_ns: int | None = None) -> list[tuple]:
    """(start_s, length_s, HdrHistogram, tag) per `interval` line of a run, timed by its elapsed_ns:
    what histogram.write_hlog takes. `from_ns`: record only the gaps from it (a jitter run's)."""
    out, prev = [], 0
    for line in lines:
        if line.get("type") == "interval" and "buckets" in line:
            out.append((prev / 1e9, (line["elapsed_ns"] - prev) / 1e9,
                        histogram.buckets_to_histogram(_logged(line["buckets"], from_ns)), tag))
            prev = line["elapsed_ns"]
    return out


def write_runs_hlog(path, runs) -> None:
    """Several runs' lines (one per CPU of `coremap probe --hlog`) as one log, each tagged `cpuN`
    when there are several; a jitter run's intervals hold its gaps only (_gaps_comment)."""
    intervals, gaps = [], ""
    for lines in runs:
        hello, _ = run_lines(lines)
        from_ns = (hello.get("threshold_ns") or histogram.DEFAULT_GAP_NS) if hello.get("probe") == "jitter" else None
        intervals += hlog_intervals(lines, tag=f"cpu{hello.get('cpu')}" if len(runs) > 1 else None, from_ns=from_ns)
        if from_ns is not None:
            gaps = f"; {_gaps_comment(from_ns)}"
    out = io.StringIO()
    histogram.write_hlog(out, intervals, comment=HLOG_COMMENT + gaps)
    _write(path, out.getvalue())


def write_run(path, *, label: str, result: dict, buckets=None, sampled_ns: float = 0.0, lines=()) -> None:
    """Write a finished run by the path's suffix: .json (its result object, any probe), or for a run
    with buckets .hlog (one interval per interval line; a run read from a file, which has none, as
    one interval of its whole time), .csv or .txt (cyclictest-style histogram)."""
    path = str(path)
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        _write(path, json.dumps(result, indent=1, default=str))
        return
    if buckets is None:
        raise ResultFileError(f"run {label!r} ({result.get('probe')}) has no histogram; save it as .json")
    out = io.StringIO(newline="")
    if suffix == ".hlog":
        from_ns = gaps_from(result)
        intervals = hlog_intervals(lines, from_ns=from_ns) or [
            (0.0, sampled_ns / 1e9, histogram.buckets_to_histogram(_logged(buckets, from_ns)))]
        gaps = f"; {_gaps_comment(from_ns)}" if from_ns is not None else ""
        histogram.write_hlog(out, intervals, comment=f"{HLOG_COMMENT}; {label}{gaps}")
    elif suffix == ".csv":
        histogram.write_csv(out, buckets)
    elif suffix == ".txt":
        out.write(histogram.cyclictest_text(buckets))
    else:
        raise ResultFileError(f"{path}: name a .hlog, .csv, .txt (cyclictest-style) or .json file")
    _write(path, out.getvalue())


def check_result_path(path, what: str = "") -> None:
    """Refuse, before a probe runs, an output path that could not take its result (app/atomic.py:
    devices, FIFOs, sockets, folders, symlinks, names too long, missing folders)."""
    try:
        check_output_path(path, what)
    except CoremapError as e:
        raise ResultFileError(str(e)) from None


def _write(path, text: str) -> None:
    # Atomic, and never into a device or through a link (app/atomic.py refuses both).
    try:
        write_atomic(path, text.encode("utf-8"))
    except CoremapError as e:
        raise ResultFileError(str(e)) from None
