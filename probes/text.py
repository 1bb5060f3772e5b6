"""A probe's result object as text: what `coremap probe` prints, the window's Summary tab shows and a
report prints under a run's picture.

Each probe lays out its own figures (text_lines in probes/<name>/measure.py, found through its
record, probes/catalog.py); this module puts the verdict under them and holds what the layouts share: the
percentiles line, counts and shares that may be unknown, and what ran in a jitter run's largest gaps.
Every figure is spelled by app/format.py (format_ns, format_cpus); the layouts only place them.
"""
from __future__ import annotations

from app.format import format_count, format_ns, format_percent, format_rate, format_share
from probes.catalog import RECORDS

PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")


def format_result(r: dict, *, verdict: bool = True) -> str:
    """A result object (probes/<probe>/measure.py summarize) as the lines the CLI prints; without the verdict
    line where it is shown apart (a report prints it above the text). A result of no probe this
    coremap knows (a newer one's) shows its percentiles, if it has any."""
    record = RECORDS.get(r.get("probe"))
    lines = (list(record.measure.text_lines(r)) if record is not None
             else percentiles_lines(r))
    if verdict and r.get("verdict"):
        lines.append(f"  verdict: {r['verdict']}")
    return "\n".join(lines)


def percentiles_lines(r: dict) -> list[str]:
    """`  p50 1.2 µs  p90 ...` for a result with latency percentiles, else nothing."""
    p = r.get("percentiles")
    return ["  " + "  ".join(f"{k} {format_ns(p[k])}" for k in PERCENTILES)] if p else []


def step_label(ns: float) -> str:
    """`≥ 10 µs`: a gap step as the tables and the text head it."""
    return f"≥ {format_ns(ns)}"


def per_second_text(row: dict | None) -> str:
    """A gap step's rate as the run table and the fleet show it: `12/s`, `~12/s` where it was read
    from the buckets rather than counted, `-` without one."""
    if row is None or row.get("per_second") is None:
        return "-"
    return ("" if row.get("exact", True) else "~") + format_rate(row["per_second"])


def gap_lines(g: dict | None) -> list[str]:
    """What a jitter user reads first (probes/histogram.py gap_figures): the longest gap, the time
    lost, gaps per second and per CPU-hour at 2, 10, 100 µs and 1 ms, then the gap lengths'
    percentiles. A count read from the buckets (not counted by the loop) is marked ~."""
    if not g:
        return []
    lines = [f"  longest gap {format_ns(g['max_ns'])}, time lost {format_share(g['lost_share'])} "
             f"(in gaps ≥ 2 µs), {format_count(g['count'])} gaps ≥ {format_ns(g['from_ns'])}",
             f"    {'gaps':<12}{'per second':>12}{'per CPU-hour':>15}{'count':>10}"]
    for row in g["at_least"]:
        mark = "" if row["exact"] else "~"
        per_h = "-" if row["per_cpu_hour"] is None else f"{row['per_cpu_hour']:,.0f}"
        lines.append(f"    {step_label(row['ns']):<12}{mark + format_rate(row['per_second']):>12}"
                     f"{mark + per_h:>15}{format_count(row['count']):>10}")
    if any(not row["exact"] for row in g["at_least"]):
        lines.append("    ~ read from the histogram's buckets (within a bucket's width), not counted one by one")
    p = g.get("percentiles") or {}
    if p.get("p50") is not None:
        lines.append("  gap lengths: " + "  ".join(f"{k} {format_ns(p[k])}" for k in PERCENTILES))
    return lines


def lead_figures(r: dict) -> tuple[tuple[tuple[str, str, str], ...], str]:
    """What a run with a histogram leads with in a report, (heading, value side by side with other
    runs, value in its own table) in order, and what its percentiles are of: a run of gaps (jitter,
    oslat) its longest gap, gaps per second (and per CPU-hour in its own table) at each step and the
    time lost; any other its latest sample."""
    g = r.get("gaps")
    if not g:
        mx = format_ns((r.get("percentiles") or {}).get("max"))
        return (("max", mx, mx),), ("wakeup latencies" if r.get("probe") == "wakeup" else "")
    mx = format_ns(g["max_ns"])
    out = [("max", mx, mx)]
    for row in g["at_least"]:
        per_h = "-" if row["per_cpu_hour"] is None else f"{row['per_cpu_hour']:,.0f} per CPU-hour"
        out.append((f"gaps {step_label(row['ns'])}", per_second_text(row), f"{per_second_text(row)}\n{per_h}"))
    lost = format_share(g["lost_share"]) or "-"
    out.append(("time lost", lost, lost))
    return tuple(out), f"gap lengths (gaps ≥ {format_ns(g['from_ns'])})"


def count_text(v) -> str:
    """A count that may be unknown (None: the kernel did not say)."""
    return "n/a" if v is None else format_count(round(v))


def share_text(share) -> str:
    """A share (0 to 1) as a percentage, or "-" where there is none."""
    return format_percent(100 * share) if share is not None else "-"


def format_attribution(a: dict | None, *, longest: int = 10, what: str = "gaps") -> list[str]:
    """What ran during the largest gaps of a jitter run, or the latest wakeups of a wakeup run (`what`
    names them; probes/trace.py attribute_run)."""
    if a is None:
        return []
    if not a.get("available"):
        return [f"  {what} not attributed: {a.get('reason')}"]
    out = [f"  what ran in the {a['attributed_gaps']} largest {what} ({format_count(a['cpu_events'])} events traced"
           + (f", {a['untraced_gaps']} {what} before the trace buffer's oldest event" if a["untraced_gaps"] else "")
           + "):"]
    rows = a["by_cause"][:12]
    # As wide as the longest cause: a thread is named by its full name ("market-data-feed-handler-0/
    # 28206"), whose end is what tells it from its namesakes, so it is never cut.
    width = max([39] + [len(row["cause"]) for row in rows]) + 1
    out.append(f"    {'cause':<{width}}{what.split()[-1]:>6}{'time':>12}")
    for row in rows:
        out.append(f"    {row['cause']:<{width}}{row['gaps']:>6}{format_ns(row['ns']):>12}")
    out.append(f"  the {min(longest, len(a['gaps']))} longest:")
    for g in a["gaps"][:longest]:
        out.append(f"    {format_ns(g['gap_ns']):>9} at {g['t_ns'] / 1e9:8.4f} s  {g['verdict']}")
    return out
