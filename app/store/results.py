"""What a stored verification, history and journal must look like before the report or the window reads
them.

History ticks, journal rows and verifications come back from files: a saved session (which passed the
session checks but may hold anything inside its JSON), `report --verify FILE`. A field of the wrong type
(a history tick `{"irq": [1, 2]}`), a number that is nan, inf or negative where a count belongs, or a
list longer than any real run is left out with a note, so the rest still shows; nothing downstream has
to guess. One pass here, at the door, instead of a check at every use. A stored probe result has its
own typed definition, beside its probe: probes/results.py check_result, which the model's readers of a
session take from their caller (app/store sits below probes/).
"""
from __future__ import annotations

import math

from app.format import printable
from app.pinning.journal import KINDS as JOURNAL_KINDS

MAX_ITEMS = 1 << 16          # buckets, gaps, causes, rows: a real result holds hundreds at most
MAX_TEXT = 4096
MAX_TICKS = 1 << 20          # a day at 0.25 s is 345,600 ticks


def _finite(v, *, lo: float = 0.0) -> float | int | None:
    """`v` itself when it is a finite number >= lo (an int stays an int: it prints as one). A JSON
    whole number may have 400 digits, which isfinite() and float() overflow on: past 2**63, refused."""
    if (type(v) is int and lo <= v < 1 << 63) or (type(v) is float and math.isfinite(v) and v >= lo):
        return v
    return None


def _count(v) -> int | None:
    return v if type(v) is int and 0 <= v < 1 << 63 else None


def _text(v, limit: int = MAX_TEXT) -> str | None:
    return printable(v[:limit]) if type(v) is str else None


def results_in(value) -> list:
    """The results a `coremap probe --json` document holds: one result object, the object of several
    CPUs' (`{"schema_version": 2, "results": [...]}`, app/cli/common.py SCHEMA_VERSION), or a bare list
    of them (the same before schema_version 2). Anything else is one value, for the caller to refuse."""
    if type(value) is dict and "probe" not in value and type(value.get("results")) is list:
        return value["results"]
    return value if type(value) is list else [value]


def _percentiles(v):
    if type(v) is not dict or len(v) > 64:
        return None
    for k, x in v.items():
        if type(k) is not str or (x is not None and _finite(x) is None):
            return None
    return v


def _buckets(v):
    """A verification side's buckets, merged from its runs' (whose edges may differ: they may overlap,
    and are drawn as gap rows): {lo_ns, hi_ns, count} or [lo, hi, count] or [edge, count], every
    number a whole, non-negative count."""
    if type(v) is not list or len(v) > MAX_ITEMS:
        return None
    for b in v:
        if type(b) is dict:
            nums = [b.get("lo_ns"), b.get("hi_ns"), b.get("count")]
        elif type(b) is list and len(b) in (2, 3):
            nums = b
        else:
            return None
        if any(_count(x) is None for x in nums):
            return None
    return v


def _gap_rows(v):
    if type(v) is not list or len(v) > MAX_ITEMS:
        return None
    out = []
    for r in v:
        if type(r) is not dict:
            return None
        lo, count, per_hour = _count(r.get("lo_ns")), _count(r.get("count")), _finite(r.get("per_hour"))
        hi = r.get("hi_ns")
        if lo is None or count is None or per_hour is None or not (hi is None or _count(hi) is not None):
            return None
        out.append({**r, "lo_ns": lo, "hi_ns": hi, "count": count, "per_hour": per_hour})
    return out


def _attribution(v):
    if v is None:
        return None
    if type(v) is not dict:
        return None
    if not v.get("available"):
        return {"available": False, "reason": _text(v.get("reason")) or "not attributed"}
    by_cause, gaps = v.get("by_cause"), v.get("gaps")
    if type(by_cause) is not list or type(gaps) is not list or len(by_cause) > MAX_ITEMS or len(gaps) > MAX_ITEMS:
        return None
    causes = []
    for c in by_cause:
        if type(c) is not dict or _text(c.get("cause")) is None or _count(c.get("gaps")) is None \
                or _finite(c.get("ns")) is None:
            return None
        causes.append({"cause": _text(c["cause"]), "gaps": c["gaps"], "ns": float(c["ns"])})
    rows = []
    for g in gaps:
        if type(g) is not dict or _finite(g.get("gap_ns")) is None or _finite(g.get("t_ns")) is None:
            return None
        rows.append({**g, "gap_ns": float(g["gap_ns"]), "t_ns": float(g["t_ns"]),
                     "verdict": _text(g.get("verdict")) or "", "causes": _causes(g.get("causes"))})
    return {**v, "available": True, "by_cause": causes, "gaps": rows,
            "attributed_gaps": _count(v.get("attributed_gaps")) or len(rows),
            "cpu_events": _count(v.get("cpu_events")) or 0, "untraced_gaps": _count(v.get("untraced_gaps")) or 0}


def _causes(v) -> list[dict]:
    if type(v) is not list:
        return []
    return [{"name": _text(c.get("name")) or "?", "ns": _finite(c.get("ns")) or 0.0}
            for c in v[:MAX_ITEMS] if type(c) is dict]


def clean_history(ticks, what: str = "history") -> tuple[list[dict], list[str]]:
    """History ticks (app.store.session.history_tick) with well-formed figures only; a malformed tick is
    left out with one note for all of them."""
    if type(ticks) is not list:
        return [], [f"{what}: not a list of ticks; left out"]
    out, bad = [], 0
    for tick in ticks[:MAX_TICKS]:
        clean = _tick(tick)
        if clean is None:
            bad += 1
        else:
            out.append(clean)
    notes = [f"{what}: {bad} malformed tick{'s' if bad != 1 else ''} left out"] if bad else []
    return out, notes


def _tick(tick) -> dict | None:
    if type(tick) is not dict or _finite(tick.get("t")) is None:
        return None
    out: dict = {"t": float(tick["t"])}
    for key in ("cpu", "irq"):
        table = tick.get(key)
        if table is None:
            continue
        if type(table) is not dict:
            return None
        clean = {}
        for name, per in table.items():
            # "cpu": {CPU id: {metric: value}}; "irq": {IRQ name: {CPU id: rate}}
            if type(name) is not str or type(per) is not dict or (key == "cpu" and not _cpu_id(name)):
                return None
            row = {}
            for k, x in per.items():
                f = _finite(x)
                if type(k) is not str or f is None or (key == "irq" and not _cpu_id(k)):
                    return None
                row[k] = f
            clean[name] = row
        out[key] = clean
    return out


def _cpu_id(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5


def clean_journal_rows(rows, what: str = "journal") -> tuple[list[dict], list[str]]:
    """Journal rows (app.store.session.journal_rows) whose fields, where present, have the journal's types:
    the pins table of a report reads kind, target, label, state, code, message, time and the CPU lists."""
    if type(rows) is not list:
        return [], [f"{what}: not a list of entries; left out"]
    out, bad = [], 0
    for r in rows[:MAX_ITEMS]:
        if _journal_row_ok(r):
            out.append(r)
        else:
            bad += 1
    notes = [f"{what}: {bad} malformed entr{'ies' if bad != 1 else 'y'} left out"] if bad else []
    return out, notes


def _journal_row_ok(r) -> bool:
    if type(r) is not dict or r.get("kind") not in (None, "process", *JOURNAL_KINDS):
        return False
    for key in ("id", "target_id", "target", "pid", "batch"):
        if r.get(key) is not None and _count(r.get(key)) is None:
            return False
    for key in ("label", "state", "code", "message", "origin", "root"):
        if r.get(key) is not None and (type(r[key]) is not str or len(r[key]) > MAX_TEXT):
            return False
    if r.get("time") is not None and _finite(r["time"]) is None:
        return False
    for key in ("before", "requested", "after", "effective"):
        v = r.get(key)
        if v is not None and (type(v) is not list or len(v) > MAX_ITEMS or any(_count(c) is None for c in v)):
            return False
    return True


# -- verifications of quiet CPUs (probes/verify.py VerifyPlan.result()) ------------------------------------
SIDE_NUMBERS = ("gaps10_per_s", "lost_share", "sampled_seconds")


def clean_verification(obj, what: str = "verification") -> tuple[dict | None, list[str]]:
    """(the verification with only well-formed parts, notes on what was left out); None when `obj`
    is not one at all (not an object, not "kind": "verify", no CPU list, no before and after)."""
    if (type(obj) is not dict or obj.get("kind") != "verify" or type(obj.get("cpus")) is not list
            or not 0 < len(obj["cpus"]) <= MAX_ITEMS or any(type(c) is not int or not 0 <= c < 1 << 16
                                                            for c in obj["cpus"])
            or type(obj.get("before")) is not dict or type(obj.get("after")) is not dict):
        return None, [f"{what}: not a verification of quiet CPUs; left out"]
    notes: list[str] = []
    runs = obj.get("runs") if type(obj.get("runs")) is list else []
    good_runs = [_verify_run(r) for r in runs[:MAX_ITEMS]]
    if None in good_runs or type(obj.get("runs")) is not list:
        notes.append(f"{what}: malformed runs left out")
    ratio = obj.get("ratio") if type(obj.get("ratio")) is dict else {}
    outcomes = obj.get("outcomes") if type(obj.get("outcomes")) is dict else {}
    out = {"kind": "verify", "cpus": list(obj["cpus"]), "seconds": _finite(obj.get("seconds")),
           "pairs": _count(obj.get("pairs")) or 0, "time": _finite(obj.get("time")),
           "runs": [r for r in good_runs if r is not None],
           "before": _verify_side(obj["before"], f"{what} before", notes),
           "after": _verify_side(obj["after"], f"{what} after", notes),
           "ratio": {k: _finite(v) for k, v in ratio.items() if k in SIDE_NUMBERS},
           "outcomes": {k: _text(v) for k, v in outcomes.items() if type(k) is str and _text(v) is not None}}
    return out, notes


def _verify_run(r) -> dict | None:
    if type(r) is not dict or _count(r.get("pair")) is None or type(r.get("quiet")) is not bool:
        return None
    cpu = r.get("cpu")
    return {"pair": r["pair"], "quiet": r["quiet"], "cpu": cpu if type(cpu) is int and 0 <= cpu < 1 << 16 else None,
            "gaps10_per_s": _finite(r.get("gaps10_per_s")), "lost_share": _finite(r.get("lost_share")),
            "max_ns": _finite(r.get("max_ns")), "sampled_seconds": _finite(r.get("sampled_seconds"))}


def _verify_side(d: dict, what: str, notes: list[str]) -> dict:
    """One side (before or after): its figures, merged buckets, gap rows, percentiles, attribution."""
    out = {"probe": "jitter", "label": _text(d.get("label")) or "", "runs": _count(d.get("runs")) or 0,
           "cpu": d.get("cpu") if type(d.get("cpu")) is int else None}
    for key in SIDE_NUMBERS:
        out[key] = _finite(d.get(key))
        if out[key] is None and d.get(key) is not None:
            notes.append(f"{what}: {key!r} has the wrong type or a value out of range; left out")
    for key, check, empty in (("buckets", _buckets, []), ("gaps_per_cpu_hour", _gap_rows, []),
                              ("percentiles", _percentiles, {}), ("attribution", _attribution, None)):
        v = check(d.get(key)) if d.get(key) is not None else None
        if v is None and d.get(key) is not None:
            notes.append(f"{what}: {key!r} has the wrong type or a value out of range; left out")
        out[key] = empty if v is None else v
    return out
