"""A probe's result object as text: what `coremap probe` prints, the window's Summary tab shows and a
report prints under a run's picture.

Each probe lays out its own figures (text_lines in probes/<name>.py, found through its record,
probes/catalog.py); this module puts the verdict under them and holds what the layouts share: the
percentiles line, counts and shares that may be unknown, and what ran in a jitter run's largest gaps.
Every figure is spelled by app/format.py (format_ns, format_cpus); the layouts only place them.
"""
from __future__ import annotations

import importlib

from app.format import format_count, format_ns, format_percent
from probes.catalog import RECORDS

PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")


def format_result(r: dict, *, verdict: bool = True) -> str:
    """A result object (probes/<probe>.py summarize) as the lines the CLI prints; without the verdict
    line where it is shown apart (a report prints it above the text). A result of no probe this
    coremap knows (a newer one's) shows its percentiles, if it has any."""
    record = RECORDS.get(r.get("probe"))
    lines = (list(importlib.import_module(record.module_name).text_lines(r)) if record is not None
             else percentiles_lines(r))
    if verdict and r.get("verdict"):
        lines.append(f"  verdict: {r['verdict']}")
    return "\n".join(lines)


def percentiles_lines(r: dict) -> list[str]:
    """`  p50 1.2 µs  p90 ...` for a result with latency percentiles, else nothing."""
    p = r.get("percentiles")
    return ["  " + "  ".join(f"{k} {format_ns(p[k])}" for k in PERCENTILES)] if p else []


def count_text(v) -> str:
    """A count that may be unknown (None: the kernel did not say)."""
    return "n/a" if v is None else format_count(round(v))


def share_text(share) -> str:
    """A share (0 to 1) as a percentage, or "-" where there is none."""
    return format_percent(100 * share) if share is not None else "-"


def format_attribution(a: dict | None, *, longest: int = 10) -> list[str]:
    """What ran during the largest gaps of a jitter run (probes/trace.py attribute_run)."""
    if a is None:
        return []
    if not a.get("available"):
        return [f"  gaps not attributed: {a.get('reason')}"]
    out = [f"  what ran in the {a['attributed_gaps']} largest gaps ({format_count(a['cpu_events'])} events traced"
           + (f", {a['untraced_gaps']} gaps before the trace buffer's oldest event" if a["untraced_gaps"] else "")
           + "):"]
    out.append(f"    {'cause':<40}{'gaps':>6}{'time':>12}")
    for row in a["by_cause"][:12]:
        out.append(f"    {row['cause'][:39]:<40}{row['gaps']:>6}{format_ns(row['ns']):>12}")
    out.append(f"  the {min(longest, len(a['gaps']))} longest:")
    for g in a["gaps"][:longest]:
        out.append(f"    {format_ns(g['gap_ns']):>9} at {g['t_ns'] / 1e9:8.4f} s  {g['verdict']}")
    return out
