"""What a long run reports as it goes, and what the grid's per-CPU heat shows: the figures of some
interval lines of a jitter or wakeup run (the longest gap or wakeup, how many reached 10 µs, per
second measured), and the `period` line a child sends every `--every` seconds (issue 30: a
`--seconds 3600` run said nothing for an hour; oslat and cyclictest print as they go).

One reading of the lines for the child's period lines, the CLI's `--every` output and the window's
heat, so the three never disagree. Standard library only: the child (python -m probes) imports it,
on a server that may have nothing but Python 3.
"""
from __future__ import annotations

HEAT_STEP_NS = 10_000       # a gap or a late wakeup of 10 µs: what a latency budget is usually written in


class Tally:
    """The figures of interval lines added one by one (a long run's heat is updated per line, never
    re-read from its first line): `figures()` is {sampled_s, max_ns, at_least_ns, count, per_s}, the
    longest gap (jitter: its exact top gaps; wakeup: the loop's exact max), and the gaps or wakeups
    of at least HEAT_STEP_NS, counted exactly where a line counted that step (`at_least`, the loops'
    own counters), else read from its buckets by their midpoints (probes/histogram.py's rule)."""

    def __init__(self):
        self.sampled_ns = 0.0
        self.max_ns: int | None = None
        self.count = 0
        self.exact_only = True        # every line counted the step itself

    def add(self, iv: dict) -> None:
        if iv.get("type", "interval") != "interval":
            return
        self.sampled_ns += float(iv.get("sampled_ns") or 0)
        longest = [int(g[1]) for g in iv.get("top_gaps") or ()]
        if iv.get("max_ns") is not None:
            longest.append(int(iv["max_ns"]))
        if longest:
            self.max_ns = max(longest + ([self.max_ns] if self.max_ns is not None else []))
        n = _step_count(iv)
        if n is None:
            from probes.histogram import bucket_mid, bucket_rows    # the child's loops count 10 µs exactly unless --threshold-ns is above it
            self.exact_only = False
            n = sum(int(c) for lo, hi, c in bucket_rows(iv.get("buckets") or ()) if bucket_mid(lo, hi) >= HEAT_STEP_NS)
        self.count += n

    def figures(self) -> dict:
        seconds = self.sampled_ns / 1e9
        return {"sampled_s": seconds, "max_ns": self.max_ns, "at_least_ns": HEAT_STEP_NS, "count": self.count,
                "exact": self.exact_only, "per_s": self.count / seconds if seconds else None}


def figures(intervals) -> dict:
    """Tally.figures() of some lines (those that are not interval lines are passed over)."""
    t = Tally()
    for iv in intervals:
        t.add(iv)
    return t.figures()


def result_figures(result: dict) -> dict | None:
    """figures() of a finished run's result object (a session's, a file's): a jitter run's gaps as its
    loop counted them, a wakeup run's exact max and its buckets by the same rule; None for a run of
    another probe or one without what it takes."""
    from probes.histogram import bucket_mid, bucket_rows, step_row
    seconds = result.get("sampled_seconds")
    if not seconds:
        return None
    gaps = result.get("gaps")
    if result.get("probe") == "jitter" and isinstance(gaps, dict):
        row = step_row(gaps, HEAT_STEP_NS)
        if row is None:
            return None
        count, max_ns, exact = int(row["count"]), gaps.get("max_ns"), bool(row.get("exact"))
    elif result.get("probe") == "wakeup":
        count = sum(int(c) for lo, hi, c in bucket_rows(result.get("buckets") or ()) if bucket_mid(lo, hi) >= HEAT_STEP_NS)
        max_ns, exact = (result.get("percentiles") or {}).get("max"), False
    else:
        return None
    return {"sampled_s": float(seconds), "max_ns": max_ns, "at_least_ns": HEAT_STEP_NS, "count": count,
            "exact": exact, "per_s": count / float(seconds)}


def _step_count(interval: dict) -> int | None:
    for step, n, _lost in interval.get("at_least") or ():
        if int(step) == HEAT_STEP_NS:
            return int(n)
    return None


class Periods:
    """Cuts a child's interval lines into `every`-second periods by their `elapsed_ns` (the child's
    own clock from its start: CPUs started together close their periods within a chunk of each other):
    `add(line)` gives the `period` line of a
    period it closes, or None; `end(elapsed_ns)` the line of the last, shorter one (None if empty)."""

    def __init__(self, every_s: float | None, cpu):
        self.every_ns = int(every_s * 1e9) if every_s else 0
        self.cpu = cpu
        self._lines: list[dict] = []
        self._from_ns = 0

    def add(self, line: dict) -> dict | None:
        if not self.every_ns:
            return None
        self._lines.append(line)
        if int(line["elapsed_ns"]) < self._from_ns + self.every_ns:
            return None
        return self._close(int(line["elapsed_ns"]))

    def end(self, elapsed_ns: int) -> dict | None:
        return self._close(elapsed_ns) if self.every_ns and self._lines else None

    def _close(self, to_ns: int) -> dict:
        out = {"type": "period", "cpu": self.cpu, "from_s": self._from_ns / 1e9, "to_s": to_ns / 1e9,
               **figures(self._lines)}
        self._lines = []
        self._from_ns = to_ns
        return out


def period_text(probe: str, line: dict) -> str:
    """`jitter CPU 1, 10.0-20.0 s: longest 23.1 µs, 42 of at least 10 µs (4.20/s)`."""
    from app.format import format_ns
    where = f"CPU {line['cpu']}" if line.get("cpu") is not None else "unbound"
    per_s = line.get("per_s")
    rate = f" ({per_s:.2f}/s)" if per_s is not None else ""
    what = "gap" if probe == "jitter" else "wakeup"
    return (f"{probe} {where}, {line['from_s']:.1f}-{line['to_s']:.1f} s: longest {what} "
            f"{format_ns(line.get('max_ns'))}, {line['count']} of at least {format_ns(line['at_least_ns'])}{rate}")


def add_every_argument(p) -> None:
    """The child's --every, with its record's bounds and help (probes/record.py EVERY)."""
    from app.parse.number import bounded
    from probes.record import EVERY
    p.add_argument("--every", type=bounded(EVERY.low, EVERY.high, EVERY.unit), default=None, metavar=EVERY.metavar,
                   help=EVERY.help)
