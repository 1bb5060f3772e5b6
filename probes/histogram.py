"""Probe buckets -> HdrHistogram, percentiles, gaps per CPU-hour; .hlog, CSV and cyclictest-style
text writers; readers for .hlog (jHiccup-style too), cyclictest --json and oslat --json.

A bucket is (lo_ns, hi_ns, count): `count` samples fell in [lo_ns, hi_ns). Each bucket is recorded
into the HdrHistogram ONCE, at its midpoint, with its count (never sample by sample), so percentiles
carry the bucket's own resolution (12.5% above the jitter threshold, an octave below it; see
probes/_loops.h).

Gaps: a jitter run's buckets hold every read-to-read interval, as oslat's histogram does, nearly all
of them the loop's own period (~12 ns). A gap is an interval of at least the run's threshold (1 µs by
default): the loop was held off. What a jitter user reads (MicroJitterSampler, oslat) is about gaps
only: how many per second and per CPU-hour at 2, 10, 100 µs and 1 ms, the time lost in them, the
longest, and the percentiles of their lengths (gap_figures). Percentiles of every read would be the
loop period at every rank.
"""
from __future__ import annotations

import csv
import io
import os
import re
import time
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram

from app.atomic import write_atomic
from app.errors import ParseError
from app.inputs import MiB, read_input_text
from app.parse.json_text import JsonInputError, load_json
from probes.common import host_facts, run_lines

LOWEST_NS = 1
HIGHEST_NS = 3_600_000_000_000  # one hour
SIG_DIGITS = 3
HLOG_LIMIT = 256 * MiB     # a day of one-second intervals of a full histogram is ~50 MB
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))

# Gap lengths for the per-CPU-hour table: 1-2-5 steps from 2 us to 100 ms (each row is [edge, next)).
GAP_EDGES_NS = (2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000,
                2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000, 100_000_000)

NS_PER_HOUR = 3_600_000_000_000
# The gap lengths jitter users read: MicroJitterSampler prints its per-hour counts from 2 us, oslat's
# histogram is in whole us and its users quote 10 and 100 us, and a 1 ms gap is a dropped tick of a
# trading loop. The jitter and wakeup loops count these four exactly (probes/_loops.h LP_STEP_NS).
GAP_STEPS_NS = (2_000, 10_000, 100_000, 1_000_000)
DEFAULT_GAP_NS = 1_000      # the jitter probe's default threshold, and oslat's first bucket edge


def new_histogram() -> HdrHistogram:
    # Imported here, not at the top: the window imports this module at start and needs hdrh only
    # when a probe result arrives (issue 12: start-up imports only what the first frame needs).
    from hdrh.histogram import HdrHistogram
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, SIG_DIGITS)


def bucket_mid(lo: int, hi: int) -> int:
    return max(LOWEST_NS, (int(lo) + int(hi)) // 2)


def buckets_to_histogram(buckets, hist: HdrHistogram | None = None) -> HdrHistogram:
    """Record each [lo, hi, count] once at its midpoint (clamped to the histogram's range)."""
    h = hist if hist is not None else new_histogram()
    for lo, hi, count in bucket_rows(buckets):
        if count:
            h.record_value(min(bucket_mid(lo, hi), HIGHEST_NS), int(count))
    return h


def merge_buckets(*bucket_lists) -> list[list[int]]:
    """Sum counts of identical [lo, hi) buckets across intervals; sorted by lo, then hi."""
    acc: dict[tuple[int, int], int] = {}
    for bl in bucket_lists:
        for lo, hi, count in bucket_rows(bl):
            key = (int(lo), int(hi))
            acc[key] = acc.get(key, 0) + int(count)
    return [[lo, hi, c] for (lo, hi), c in sorted(acc.items()) if c]


def bucket_rows(buckets):
    """(lo_ns, hi_ns, count) of each bucket, given as [lo, hi, count] (the probes' interval lines),
    as {"lo_ns", "hi_ns", "count"} (result objects, sessions) or as [edge, count] (older results, which
    app/store/results.py takes at the door: the bucket [edge, edge]): the one bucket reader."""
    for b in buckets:
        if isinstance(b, dict):
            yield b["lo_ns"], b["hi_ns"], b["count"]
        elif len(b) == 2:
            yield b[0], b[0], b[1]
        else:
            yield b[0], b[1], b[2]


def percentiles(hist: HdrHistogram) -> dict:
    """p50, p90, p99, p99.9 and max in ns (None for an empty histogram)."""
    if hist.get_total_count() == 0:
        return {k: None for k, _ in PERCENTILES} | {"max": None}
    # One walk of the counts for all four (hdrh's dict), not one per percentile: 2.2 ms against 8.5 ms for
    # a histogram of 100k values here, paid by each run the probe panel shows and each report.
    values = hist.get_percentile_to_value_dict([p for _k, p in PERCENTILES])
    out = {k: int(values[p]) for k, p in PERCENTILES}
    out["max"] = int(hist.get_max_value())
    return out


def gaps_per_hour(buckets, sampled_ns: float, edges=GAP_EDGES_NS) -> dict:
    """Gaps per CPU-hour of sampled time, by length, and the share of sampled time lost in gaps.

    A bucket is counted in the row its midpoint falls in; gaps from the first edge up count as
    lost time (their midpoint length times their count).
    """
    rows = [{"lo_ns": lo, "hi_ns": hi, "count": 0, "per_hour": 0.0}
            for lo, hi in zip(edges, list(edges[1:]) + [None])]
    lost = 0.0
    for lo, hi, count in bucket_rows(buckets):
        mid = bucket_mid(lo, hi)
        if mid < edges[0]:
            continue
        lost += mid * count
        for r in rows:
            if mid >= r["lo_ns"] and (r["hi_ns"] is None or mid < r["hi_ns"]):
                r["count"] += int(count)
                break
    scale = NS_PER_HOUR / sampled_ns if sampled_ns > 0 else 0.0
    for r in rows:
        r["per_hour"] = r["count"] * scale
    return {"rows": rows, "lost_ns": lost, "lost_share": lost / sampled_ns if sampled_ns > 0 else None}


def gap_buckets(buckets, from_ns: int) -> list[list[int]]:
    """The buckets of gaps: intervals of at least `from_ns`, a bucket counted by its midpoint (the
    jitter loop's fine buckets start at its threshold, oslat's at whole microseconds, so none
    straddles the edge)."""
    return [[int(lo), int(hi), int(c)] for lo, hi, c in bucket_rows(buckets)
            if c and bucket_mid(lo, hi) >= from_ns]


def gap_figures(buckets, sampled_ns: float, *, from_ns: int = DEFAULT_GAP_NS, max_ns: float | None = None,
                exact: dict | None = None) -> dict:
    """What a jitter user reads of a run, from its buckets (every interval) and sampled time.

    `exact`: {step_ns: (gaps, ns lost)} as the loop counted them (probes/jitter/_loop.c at_least); a step
    it did not count (below the threshold, or a file) is read from the buckets by midpoint, which
    can be off by one bucket's width (12.5%), and says so (`exact` False). `max_ns`: the loop's exact
    longest gap (the buckets know only its bucket).
    """
    exact = exact or {}
    gaps = gap_buckets(buckets, from_ns)
    seconds = sampled_ns / 1e9 if sampled_ns and sampled_ns > 0 else None
    rows = []
    for step in GAP_STEPS_NS:
        if step in exact:
            n, lost = exact[step]
        else:
            picked = [(bucket_mid(lo, hi), c) for lo, hi, c in bucket_rows(buckets) if c and bucket_mid(lo, hi) >= step]
            n, lost = sum(c for _, c in picked), sum(m * c for m, c in picked)
        rows.append({"ns": step, "count": int(n), "lost_ns": float(lost), "exact": step in exact,
                     "per_second": n / seconds if seconds else None,
                     "per_cpu_hour": n * 3600 / seconds if seconds else None})
    pct = percentiles(buckets_to_histogram(gaps))
    if max_ns is not None and pct["max"] is not None:
        # the exact longest gap, where the histogram has only its bucket's midpoint (which can lie
        # above it); no percentile reads longer than the longest
        pct = {k: min(v, int(max_ns)) for k, v in pct.items()} | {"max": int(max_ns)}
    lost = rows[0]["lost_ns"]
    return {"from_ns": int(from_ns), "count": sum(c for *_, c in gaps), "at_least": rows, "lost_ns": lost,
            "lost_share": lost / sampled_ns if seconds else None, "max_ns": pct["max"], "percentiles": pct}


def step_row(gaps: dict | None, step_ns: int) -> dict | None:
    """The at_least row of gap_figures for `step_ns`, None when there is none."""
    return next((r for r in (gaps or {}).get("at_least", []) if r["ns"] == step_ns), None)


def buckets_as_dicts(buckets) -> list[dict]:
    return [{"lo_ns": int(lo), "hi_ns": int(hi), "count": int(c)} for lo, hi, c in bucket_rows(buckets)]


# -------------------------------------------------------------------------------------- .hlog
# HdrHistogram log format v1.2 (HdrHistogram/HdrHistogram HistogramLogWriter.java): comment lines
# start with '#', then a CSV legend, then one interval per line:
#   [Tag=NAME,]start_seconds,length_seconds,max_in_units,BASE64(compressed histogram)
# The Java writer divides Interval_Max by maxValueUnitRatio (1e6 by default: ns -> ms), so we do too.
# hdrh 0.10's own HistogramLogWriter.output_start_time calls a non-existent datetime.iso_format, so the
# lines are written here; the payload comes from hdrh's encoder.
MAX_VALUE_UNIT_RATIO = 1e6


@dataclass
class HlogInterval:
    start_s: float           # absolute (StartTime/BaseTime already added) when the log had a base
    length_s: float
    max_units: float         # as written (max / MAX_VALUE_UNIT_RATIO)
    histogram: HdrHistogram
    tag: str | None = None


@dataclass
class HlogData:
    start_time_s: float | None = None
    base_time_s: float | None = None
    intervals: list[HlogInterval] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)

    def merged(self, tag: str | None = ...) -> HdrHistogram:
        """All intervals (of one tag, if given) added into one histogram."""
        h = new_histogram()
        for iv in self.intervals:
            if tag is ... or iv.tag == tag:
                h.add(iv.histogram)
        return h


def write_hlog(out, intervals, *, start_time_s: float | None = None, comment: str | None = None,
               tag: str | None = None) -> None:
    """Write intervals [(start_s relative to start_time_s, length_s, HdrHistogram[, tag])] as a v1.2
    .hlog. A 4th element tags that interval (jHiccup-style "Tag=NAME,"); else `tag` applies.

    `out` is a path or a text file object.
    """
    if isinstance(out, (str, bytes)) or hasattr(out, "__fspath__"):
        # A path: through the one writer (app/atomic.py: atomic, never through a link or into a device).
        text = io.StringIO()
        write_hlog(text, intervals, start_time_s=start_time_s, comment=comment, tag=tag)
        return write_atomic(os.fsdecode(out), text.getvalue().encode("utf-8"))
    st = time.time() if start_time_s is None else start_time_s
    if comment:
        out.write(f"#{comment}\n")
    out.write("#[Histogram log format version 1.2]\n")
    out.write(f"#[StartTime: {st:.3f} (seconds since epoch), "
              f"{time.strftime('%a %b %d %H:%M:%S %Z %Y', time.localtime(st))}]\n")
    out.write('"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n')
    for item in intervals:
        start_s, length_s, h = item[:3]
        t = item[3] if len(item) > 3 else tag
        payload = h.encode().decode("ascii")
        prefix = f"Tag={t}," if t else ""
        out.write(f"{prefix}{start_s:.3f},{length_s:.3f},{h.get_max_value() / MAX_VALUE_UNIT_RATIO:.3f},"
                  f"{payload}\n")


_START = re.compile(r"#\[StartTime:\s*([\d.]+)")
_BASE = re.compile(r"#\[BaseTime:\s*([\d.]+)")
_LINE = re.compile(r"^(?:Tag=([^,]*),)?([\d.]+),([\d.]+),([\d.]+),(\S+)$")


def parse_hlog(text: str, *, what: str = ".hlog") -> HlogData:
    """Read an HdrHistogram log (ours, jHiccup's, HdrHistogram's): StartTime/BaseTime headers, an
    optional legend, intervals with or without "Tag=" prefixes.

    As in HistogramLogReader.java: timestamps are relative to BaseTime if given, else to StartTime
    when they look relative (smaller than a year in seconds), else they are absolute.
    """
    data = HlogData()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = _START.match(line)
            if m:
                data.start_time_s = float(m.group(1))
                continue
            m = _BASE.match(line)
            if m:
                data.base_time_s = float(m.group(1))
                continue
            data.comments.append(line[1:])
            continue
        if line.startswith('"StartTimestamp"'):
            continue
        m = _LINE.match(line)
        if not m:
            raise ParseError(what, f"not an interval line: {line[:60]!r}", n)
        tag, start, length, mx, payload = m.groups()
        try:
            from hdrh.histogram import HdrHistogram          # here for start-up time, as in new_histogram
            h = HdrHistogram.decode(payload.encode("ascii"))
        except Exception as e:  # hdrh raises bare Exception/zlib/struct errors for bad payloads
            raise ParseError(what, f"histogram payload does not decode ({type(e).__name__}: {e})", n) from None
        t = float(start)
        if data.base_time_s is not None:
            t += data.base_time_s
        elif data.start_time_s is not None and t < 365 * 24 * 3600:
            t += data.start_time_s
        data.intervals.append(HlogInterval(t, float(length), float(mx), h, tag or None))
    return data


def read_hlog(path) -> HlogData:
    """An .hlog file a user names, read the one way such files are (app/inputs.py: a regular file or a
    pipe, bounded)."""
    return parse_hlog(read_input_text(path, what="", limit=HLOG_LIMIT, stream=True), what=str(path))


def histogram_to_buckets(h: HdrHistogram) -> list[list[int]]:
    """HdrHistogram -> [[lo, hi, count]] over its recorded value ranges (for plotting a read log)."""
    out = []
    for item in h.get_recorded_iterator():
        v = item.value_iterated_to
        lo = h.get_lowest_equivalent_value(v)
        hi = h.get_highest_equivalent_value(v) + 1
        out.append([int(lo), int(hi), int(item.count_at_value_iterated_to)])
    return out


# -------------------------------------------------------------------------------------- CSV, text
def write_csv(out, buckets) -> None:
    w = csv.writer(out)
    w.writerow(["lo_ns", "hi_ns", "count"])
    for lo, hi, c in bucket_rows(buckets):
        w.writerow([int(lo), int(hi), int(c)])


def cyclictest_text(buckets, *, max_us: int = 1000) -> str:
    """The histogram block cyclictest prints with -h (src/cyclictest/cyclictest.c print_hist):
    one "%06d %06d" line per microsecond 0..max_us-1 (a bucket goes to the microsecond of its
    midpoint), then Total / Min / Avg / Max / Overflows lines."""
    bins = [0] * max_us
    over = 0
    total = 0
    sum_us = 0.0
    mn = mx = None
    for lo, hi, c in bucket_rows(buckets):
        if not c:
            continue
        us = bucket_mid(lo, hi) // 1000
        total += c
        sum_us += us * c
        mn = us if mn is None else min(mn, us)
        mx = us if mx is None else max(mx, us)
        if us < max_us:
            bins[us] += c
        else:
            over += c
    lines = ["# Histogram"] + [f"{i:06d} {n:06d}" for i, n in enumerate(bins)]
    lines += [f"# Total: {total:09d}", f"# Min Latencies: {mn or 0:05d}",
              f"# Avg Latencies: {int(sum_us / total) if total else 0:05d}", f"# Max Latencies: {mx or 0:05d}",
              f"# Histogram Overflows: {over:05d}"]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------- rt-tests JSON
def _rt_json(text: str, what: str) -> dict:
    try:
        d = load_json(text, what=what, limit=HLOG_LIMIT)
    except JsonInputError as e:
        raise ParseError(what, f"not JSON ({str(e).removeprefix(what + ': ')})") from None
    if not isinstance(d, dict) or not isinstance(d.get("thread"), dict):
        raise ParseError(what, "no \"thread\" object; is this rt-tests --json output?")
    return d


def read_cyclictest_json(text: str, *, what: str = "cyclictest --json") -> dict[int, dict]:
    """{thread number: {"cpu", "buckets", "min_ns", "avg_ns", "max_ns", "cycles", "overflows"}}.

    cyclictest (src/cyclictest/cyclictest.c write_stats via rt-utils.c rt_write_json) writes each
    thread's "histogram" as {"<us>": count} with latencies truncated to whole microseconds, so key k is
    the bucket [k, k+1) us. Only nonzero buckets are written. min/avg/max are in us.
    """
    d = _rt_json(text, what)
    out = {}
    for k, t in d["thread"].items():
        hist = t.get("histogram", {})
        buckets = sorted([int(us) * 1000, (int(us) + 1) * 1000, int(c)] for us, c in hist.items())
        counted = sum(b[2] for b in buckets)
        # latencies beyond the -h range are not in the JSON histogram (cyclictest counts them only
        # in its text output's "Histogram Overflows"); cycles - counted recovers how many.
        overflows = t["cycles"] - counted if isinstance(t.get("cycles"), int) else None
        out[int(k)] = {"cpu": t.get("cpu"), "buckets": buckets, "cycles": t.get("cycles"), "overflows": overflows,
                       "min_ns": _us(t.get("min")), "avg_ns": _us(t.get("avg")), "max_ns": _us(t.get("max"))}
    return out


def read_oslat_json(text: str, *, what: str = "oslat --json") -> dict[int, dict]:
    """{thread number: {"cpu", "buckets", "min_ns", "avg_ns", "max_ns", "duration_s"}}.

    oslat (src/oslat/oslat.c insert_bucket) puts a loop gap of `cycles` into index = cycles / MHz
    (whole us, rounded down) and labels it index + 1, so key k is the bucket [k-1, k) us. Its last
    bucket (default 32) also holds every overflow; we keep it as [k-1, max] us so the count is right
    and the width honest.
    """
    d = _rt_json(text, what)
    out = {}
    for k, t in d["thread"].items():
        hist = {int(us): int(c) for us, c in t.get("histogram", {}).items()}
        last = max(hist) if hist else 0
        mx = t.get("max")
        buckets = []
        for us in sorted(hist):
            hi = (us * 1000) if not (us == last and mx and mx > us) else int(mx * 1000) + 1
            buckets.append([(us - 1) * 1000, hi, hist[us]])
        out[int(k)] = {"cpu": t.get("cpu"), "buckets": buckets, "duration_s": t.get("duration"),
                       "min_ns": _us(t.get("min")), "avg_ns": _us(t.get("avg")), "max_ns": _us(mx)}
    return out


def _us(v):
    return None if v is None else float(v) * 1000.0


def intervals_histogram(intervals) -> tuple[list[list[int]], dict]:
    """The merged buckets of a run's interval lines and their percentiles."""
    buckets = merge_buckets(*(iv["buckets"] for iv in intervals))
    return buckets, percentiles(buckets_to_histogram(buckets))


@dataclass
class LatencyRun:
    """What a jitter or wakeup run's lines hold in common: its hello line, its interval lines, their
    merged buckets and percentiles (which the probe may still correct: the loop knows its exact max)."""
    hello: dict
    intervals: list[dict]
    buckets: list[list[int]]
    percentiles: dict

    @classmethod
    def of(cls, lines) -> LatencyRun:
        hello_line, ivs = run_lines(lines)
        return cls(hello_line, ivs, *intervals_histogram(ivs))

    def total(self, key: str) -> float:
        """`key` summed over the interval lines (chunk_ns, sampled_ns, iterations)."""
        return sum(iv[key] for iv in self.intervals)

    def result(self, probe: str, **figures) -> dict:
        """The result object: the probe's own figures between the parts every latency run has."""
        return {"probe": probe, "cpu": self.hello.get("cpu"), **figures,
                "buckets": buckets_as_dicts(self.buckets), "percentiles": self.percentiles,
                "intervals": len(self.intervals), "host": host_facts(self.hello)}


def summary_from_buckets(buckets, sampled_ns: float | None = None) -> dict:
    """Percentiles and, when the sampled time is known, gaps per CPU-hour and the share of time lost
    (the keys a jitter result has them under)."""
    h = buckets_to_histogram(buckets)
    out = {"percentiles": percentiles(h), "total": int(h.get_total_count())}
    if sampled_ns:
        g = gaps_per_hour(buckets, sampled_ns)
        out["gaps_per_cpu_hour"], out["lost_share"] = g["rows"], g["lost_share"]
    return out
