"""The pins of a report: which of a machine's journal rows it holds (its scope), and each as a row.

A report is of one job, not of the journal's whole history: `coremap report` (and the window's report)
hold the pins still in effect, plus every row written since the oldest Make quiet still in effect (for
the window: or since it opened, whichever is earlier). Older rows (earlier jobs, the "gone" rows of
their restores) are left out, and the report says how many; `coremap report --since TIME` chooses the
start instead, and `coremap journal` lists everything. A saved session holds the rows saved with it.

Each write is a row; a Make quiet or Give back (hundreds of writes) is one row with its counts.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from app.format import cpus_word, plural, target_name


@dataclass(frozen=True)
class PinLine:
    target: str                    # "thread 1234 (java)", "irq 24"
    before: tuple[int, ...] | None
    requested: tuple[int, ...]
    after: tuple[int, ...] | None
    result: str                    # journal state + code: "done", "failed: denied ..."
    time: float | None
    change: str = ""               # said instead of before -> after: what a batch (Make quiet) did
    kind: str = "thread"           # what the values mean (app/pinning/kinds.py): CPUs, a cpuset, a number



QUIET_ORIGINS = ("isolate", "include")


def pin_lines(journal: list[dict]) -> list[PinLine]:
    """A row per write; an isolate or include (hundreds of writes) is one row with its counts."""
    out = []
    quiet: dict[object, list[dict]] = {}
    for e in journal:
        if isinstance(e, dict) and e.get("origin") in QUIET_ORIGINS:
            quiet.setdefault(e.get("batch"), []).append(e)
    seen = set()
    for e in journal:
        if not isinstance(e, dict):
            continue
        if e.get("origin") in QUIET_ORIGINS:
            if e.get("batch") not in seen:
                seen.add(e.get("batch"))
                out.append(_quiet_line(quiet[e.get("batch")]))
            continue
        kind, tid = e.get("kind", "target"), e.get("target_id", e.get("target", "?"))
        label = e.get("label") or ""
        target = target_name(str(kind), tid, str(label), e.get("netdev") if isinstance(e.get("netdev"), str) else None)
        t = e.get("time")
        out.append(PinLine(target, _tuple(e.get("before")), _tuple(e.get("requested")) or (),
                           _tuple(e.get("after")), _result(e), float(t) if isinstance(t, (int, float)) else None,
                           kind=str(kind)))
    return out


def _result(e: dict) -> str:
    """A write's outcome: "done", "failed: denied — <why>"; a target that had exited is "gone", which
    is not a failure (app/pinning/targets.py), however the journal marked it."""
    state = str(e.get("state", "?"))
    code, msg = e.get("code") or "", e.get("message") or ""
    if code == "gone":
        return f"gone: {msg}" if msg else "gone: it had exited"
    return state + (f": {code}" if code and code != "ok" else "") + (f" — {msg}" if msg and state != "done" else "")


# Kinds whose before / after are CPU lists (app/pinning/kinds.py): what tells which CPUs a batch quieted.
_CPU_KINDS = ("thread", "process", "irq", "irqdefault", "workqueue", "watchdog", "wq", "rps", "xps")


def _quiet_line(entries: list[dict]) -> PinLine:
    """One row for a Make quiet (isolate) or Give back (include): "Make quiet CPU 1 (#12)", with what
    became of its targets ("86 targets: 63 moved, 20 already off, 3 gone") where a write's before
    -> after would be, and the housekeeping CPUs it asked for. The CPUs are read off its writes: the
    ones the targets left (an isolate) or were given back (an include)."""
    first = entries[0]
    isolate = first.get("origin") == "isolate"
    cpus: set[int] = set()
    moved = unchanged = gone = pending = 0
    failed: dict[str, int] = {}
    for e in entries:
        before, after, state = _tuple(e.get("before")), _tuple(e.get("after")), e.get("state")
        if e.get("code") == "gone":
            gone += 1
        elif state == "failed":
            failed[str(e.get("code") or "failed")] = failed.get(str(e.get("code") or "failed"), 0) + 1
        elif state != "done":
            pending += 1
        elif before is not None and after is not None and set(before) != set(after):
            moved += 1
            if e.get("kind") in _CPU_KINDS:
                cpus |= set(before) - set(after) if isolate else set(after) - set(before)
        else:
            unchanged += 1
    counts = [f"{moved} {'moved' if isolate else 'given back'}"]
    counts += [f"{unchanged} already {'off them' if isolate else 'on them'}"] if unchanged else []
    counts += [f"{n} {code}" for code, n in sorted(failed.items(), key=lambda x: -x[1])]
    counts += [f"{gone} gone (exited)"] if gone else []
    counts += [f"{pending} not written (cut short)"] if pending else []
    action = "Make quiet" if isolate else "Give back"
    what = f"{action} {cpus_word(sorted(cpus))}" if cpus else action
    asked = {c for e in entries if e.get("kind") in _CPU_KINDS for c in (_tuple(e.get("requested")) or ())}
    n_failed = sum(failed.values())
    t = first.get("time")
    return PinLine(f"{what} (#{first.get('batch')})", None, tuple(sorted(asked)), None,
                   f"{n_failed} failed" if n_failed else ("done" if not pending else "cut short"),
                   float(t) if isinstance(t, (int, float)) else None,
                   change=f"{plural(len(entries), 'target')}: " + ", ".join(counts))


def _tuple(v):
    if v is None:
        return None
    try:
        return tuple(int(x) for x in v)
    except (TypeError, ValueError):
        return None


def format_when(t: float | None) -> str:
    if t is None:
        return ""
    if t > 1e9:   # wall-clock seconds (the journal's time.time())
        return _dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    return f"{t:.1f} s"


@dataclass(frozen=True)
class PinScope:
    """The journal rows a report holds and the sentence that says which (module docstring)."""
    rows: list[dict]
    sentence: str


def pin_scope(ledger, *, since: float | None = None, opened: float | None = None) -> PinScope:
    """This job's rows of `ledger` (app/pinning/ledger.py, one machine's journal): the batches in effect
    (pins, and the Make quiet of the CPUs quiet now) and every batch written since the oldest such Make
    quiet, or since `opened` (the window's start) when that is earlier; with `since` (epoch seconds),
    the batches written since then and no others."""
    from app.store.session import journal_rows
    entries = list(ledger.entries)
    quiet = set(ledger.quiet_cpus)
    isolates = []                                     # (QuietEvent, the batch holding its writes)
    for b in ledger.undo:
        q = ledger.quiet_events.get(ledger.origin_of(b))
        if q is not None and q.action == "isolate" and set(q.cpus) & quiet:
            isolates.append((q, b))
    if since is not None:
        start, keep = since, set()
        said = f"Pins made since {format_when(since)}"
    else:
        keep = {e.batch for e in ledger.pinned.values()} | {b for _q, b in isolates}
        starts = [(q.time, f"Make quiet of {cpus_word(q.cpus)} (#{q.id})") for q, _b in isolates]
        starts += [(opened, "this window opened")] if opened is not None else []
        start, what = min(starts, key=lambda s: s[0]) if starts else (None, "")
        said = f"Pins in effect and those made since {what} at {format_when(start)}" if starts else "Pins in effect"
    if start is not None:
        keep |= {e.batch for e in entries if e.time >= start}
    rows = [e for e in entries if e.batch in keep]
    left = len(entries) - len(rows)
    if left:
        said += (f"; {plural(left, 'earlier journal row')} left out (coremap journal lists them, "
                 "coremap report --since TIME chooses the start)")
    now = ("no CPU is quiet" if not quiet else
           f"{cpus_word(sorted(quiet))} quiet" + "".join(f", Make quiet #{q.id} at {format_when(q.time)}"
                                                         for q, _b in isolates))
    return PinScope(journal_rows(rows), f"{said}. Now {now}.")
