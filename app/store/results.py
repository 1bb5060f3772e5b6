"""What a stored verification, history and journal must look like before the report or the window reads
them, and the records a probe result and a verification's side share (gap rows, attribution, buckets).

They come back from files: a saved session (which passed the session checks but may hold anything inside
its JSON), `report --verify FILE`. A field of the wrong type (a history tick `{"irq": [1, 2]}`), a number
that is nan, inf or negative where a count belongs, or a list longer than any real run is left out with a
note, so the rest still shows; nothing downstream has to guess. One pass at the door, instead of a check
at every use. A verification's parts are typed definitions checked by app/parse/json_text.py convert,
field by field (fields_checked). A stored probe result's definition is beside its probe (probes/results.py
check_result), which the model's readers of a session take from their caller (app/store sits below probes/).
"""
from __future__ import annotations

import functools
import math
from typing import Annotated, Literal

import msgspec.structs
from msgspec import NODEFAULT, UNSET, Meta, Struct, UnsetType

from app.format import printable
from app.parse.json_text import convert, Count, CpuId, JsonInputError, MAX_FLOAT, NonNegative
from app.pinning.journal import KINDS as JOURNAL_KINDS

MAX_ITEMS = 1 << 16          # buckets, gaps, causes, rows: a real result holds hundreds at most
MAX_TEXT = 4096
MAX_TICKS = 1 << 20          # a day at 0.25 s is 345,600 ticks
U63 = (1 << 63) - 1


def text(limit: int = MAX_TEXT):
    return Annotated[str, Meta(max_length=limit)]


def list_of(item, limit: int = MAX_ITEMS):
    return Annotated[list[item], Meta(max_length=limit)]


def whole(lo: int = 0, hi: int = U63):
    return Annotated[int, Meta(ge=lo, le=hi)]


def number(lo: float = 0, hi: float = MAX_FLOAT):
    return Annotated[float, Meta(ge=lo, le=hi)]


Text = text()
Absent = UnsetType          # a field that may be missing but not null: `x: T | Absent = UNSET`
PercentileMap = Annotated[dict[str, NonNegative | None], Meta(max_length=64)]     # "p99": ns, null: no sample


# -- the records a jitter run and a verification's side share (probes/result.py: every probe's) ----------
class GapRow(Struct, kw_only=True):
    lo_ns: whole(1)                     # its log10 is drawn (widgets/pictures.py)
    hi_ns: Count | None = None          # null: the open last row
    count: Count
    per_hour: number(0, 3_600_000_000_000)     # at most one gap per ns of the hour


class Cause(Struct, kw_only=True):
    cause: Text
    gaps: Count
    ns: NonNegative


class GapCause(Struct, kw_only=True):
    name: Text
    ns: NonNegative


class AttributedGap(Struct, kw_only=True):
    t_ns: NonNegative
    gap_ns: NonNegative
    unexplained_ns: NonNegative
    traced: bool | Absent = UNSET
    verdict: Text | Absent = UNSET
    causes: list_of(GapCause)


class Attribution(Struct, kw_only=True):
    """What ran in a jitter run's largest gaps (probes/trace.py attribution). The text, the report and
    the window read every count of an available one."""
    available: bool
    reason: Text | Absent = UNSET
    attributed_gaps: Count | None = None
    cpu_events: Count | None = None
    untraced_gaps: Count | None = None
    by_cause: list_of(Cause) | None = None
    gaps: list_of(AttributedGap, 1024) | None = None

    def __post_init__(self):
        if self.available and None in (self.attributed_gaps, self.cpu_events, self.untraced_gaps, self.by_cause,
                                       self.gaps):
            raise ValueError("an available attribution holds attributed_gaps, cpu_events, untraced_gaps, "
                             "by_cause and gaps")


class BucketSpan(Struct, kw_only=True):
    lo_ns: Count
    hi_ns: Count
    count: Count


# A bucket as a probe writes it ({lo_ns, hi_ns, count}) or as older results kept it ([lo, hi, count]
# or [edge, count]): probes/histogram.py bucket_rows reads all three.
Bucket = BucketSpan | Annotated[list[Count], Meta(min_length=2, max_length=3)]


# msgspec's fields() evaluates the type's annotations again on each call (about 1 ms): every stored result
# and verification checked asks for the same few types; a type's fields never change.
fields = functools.cache(msgspec.structs.fields)


def fields_checked(obj: dict, type_, what: str, names=None) -> list[str]:
    """Each field of `type_` (of `names`, when given) that `obj` holds, checked alone against `type_` (all
    of whose fields have defaults): one out of its definition is left out of `obj`, with a note naming
    it, so the rest still shows. The notes."""
    notes = []
    for f in fields(type_):
        if f.name in obj and (names is None or f.name in names):
            try:
                convert({f.name: obj[f.name]}, type_, what=what)
            except JsonInputError as e:
                why = printable(str(e).removeprefix(f"{what}: "))
                notes.append(f"{what}: {f.name!r} has the wrong type or a value out of range ({why}); left out")
                del obj[f.name]
    return notes


def _filled(obj: dict, type_) -> dict:
    """`obj` with the default of each field of `type_` it lacks (none for UNSET: a field that may be absent)."""
    for f in fields(type_):
        if f.name in obj:
            continue
        if callable(f.default_factory):
            obj[f.name] = f.default_factory()
        elif f.default is not UNSET and f.default is not NODEFAULT:
            obj[f.name] = f.default
    return obj


def _finite(v, *, lo: float = 0.0) -> float | int | None:
    """`v` itself when it is a finite number >= lo (an int stays an int: it prints as one). A JSON
    whole number may have 400 digits, which isfinite() and float() overflow on: past 2**63, refused."""
    if (type(v) is int and lo <= v < 1 << 63) or (type(v) is float and math.isfinite(v) and v >= lo):
        return v
    return None


def _count(v) -> int | None:
    return v if type(v) is int and 0 <= v < 1 << 63 else None


def results_in(value) -> list:
    """The results a `coremap probe --json` document holds: one result object, the object of several
    CPUs' (`{"schema_version": 2, "results": [...]}`, app/cli/common.py SCHEMA_VERSION), or a bare list
    of them (the same before schema_version 2). Anything else is one value, for the caller to refuse."""
    if type(value) is dict and "probe" not in value and type(value.get("results")) is list:
        return value["results"]
    return value if type(value) is list else [value]


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
class VerifyRun(Struct, kw_only=True):
    pair: Count
    quiet: bool
    cpu: CpuId | None = None
    gaps10_per_s: NonNegative | None = None
    lost_share: NonNegative | None = None
    max_ns: NonNegative | None = None
    sampled_seconds: NonNegative | None = None


class Side(Struct, kw_only=True):
    """One side (before or after): its runs' figures, merged buckets (whose edges may differ: they may
    overlap, and are drawn as gap rows), gap rows, percentiles and attribution."""
    probe: Literal["jitter"] = "jitter"
    label: Text = ""
    runs: Count = 0
    cpu: CpuId | None = None
    gaps10_per_s: NonNegative | None = None
    lost_share: NonNegative | None = None
    sampled_seconds: NonNegative | None = None
    buckets: list_of(Bucket) = []
    gaps_per_cpu_hour: list_of(GapRow) = []
    percentiles: PercentileMap = {}
    attribution: Attribution | None = None


class Ratios(Struct, kw_only=True):
    """After / before of each figure (null: no run had it before)."""
    gaps10_per_s: NonNegative | None = None
    lost_share: NonNegative | None = None
    sampled_seconds: NonNegative | None = None


class Verification(Struct, kw_only=True):
    kind: Literal["verify"] | Absent = UNSET
    cpus: Annotated[list[CpuId], Meta(min_length=1, max_length=MAX_ITEMS)] | Absent = UNSET
    before: dict | Absent = UNSET
    after: dict | Absent = UNSET
    seconds: NonNegative | None = None
    pairs: Count = 0
    time: NonNegative | None = None
    runs: list_of(dict) = []
    ratio: dict = {}
    outcomes: Annotated[dict[str, Text], Meta(max_length=64)] = {}      # "isolate", "stopped": its sentence


def clean_verification(obj, what: str = "verification") -> tuple[dict | None, list[str]]:
    """(the verification with only parts in their definition, notes on what was left out); None when
    `obj` is not one at all (not an object, not "kind": "verify", no CPU list, no before and after)."""
    out = {k: v for k, v in obj.items() if k != "schema_version"} if type(obj) is dict else {}   # the --out document's
    notes = fields_checked(out, Verification, what)
    if any(k not in out for k in ("kind", "cpus", "before", "after")):
        return None, [f"{what}: not a verification of quiet CPUs; left out"]
    _filled(out, Verification)
    runs = [_filled(dict(r), VerifyRun) for r in out["runs"] if _fits(r, VerifyRun, what)]
    if len(runs) < len(out["runs"]):
        notes.append(f"{what}: malformed runs left out")
    out["runs"] = runs
    for key in ("before", "after"):
        out[key] = side = dict(out[key])
        notes += fields_checked(side, Side, f"{what} {key}")
        _filled(side, Side)
    out["ratio"] = ratio = {k: v for k, v in out["ratio"].items() if k in {f.name for f in fields(Ratios)}}
    notes += fields_checked(ratio, Ratios, f"{what} ratio")
    return out, notes


def _fits(value, type_, what: str) -> bool:
    try:
        convert(value, type_, what=what)
        return True
    except JsonInputError:
        return False
