"""The pin journal's lines: the events it holds (JournalEntry, QuietEvent, FollowRule, GuardPolicy,
GuardEvent), the bounds of a valid line, and the checks every field passes on reading.

The journal is input like any other (a hand edit, a torn write, a file someone else put there): a line
outside these bounds is skipped with a note, as a torn line is. Records and marks, nearly every line,
are parsed and checked in one msgspec call (in C) to the same bounds as entry_from_line and
mark_fields (`decode_records`); anything else goes line by line through `read_event`, which names the
line it skips. app/pinning/journal.py holds the file these lines are in.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, dataclass
from dataclasses import fields as dataclass_fields
from typing import Annotated, Literal

try:
    import msgspec
    from msgspec import Meta
except ImportError:
    # The agent coremap ships to a server runs on its standard library alone (app/remote/ship.py): there
    # the journal is read line by line through the checks below, as it always could be.
    msgspec = None

from app.pinning.kinds import KINDS, NAMED_KINDS, valid_name
from app.parse.cpulist import MAX_CPU

STATES = ("pending", "done", "failed")
# What a write changes: app/pinning/kinds.py (KINDS), each value a tuple of small integers; for a named
# kind, netdev holds the name (rps/xps: target = the queue number, netdev = the device).
QUIET_ACTIONS = ("isolate", "include")
GUARD_ACTIONS = ("reported", "reapplied", "limited", "failed")
# Bounds of a valid line. The journal is input like any other (a hand edit, a torn write, a file
# someone else put there): a line outside them is skipped with a note, as a torn line is.
MAX_ID = 1 << 53                   # ids count up from 1; beyond this a float would have stood in
MAX_TARGET = 1 << 22               # PID_MAX_LIMIT (include/linux/threads.h); IRQ numbers are far lower
MAX_TIME = 1e11                    # seconds since 1970: year 5138
MAX_TEXT = 4096
MAX_LINE = 1 << 20                 # a record with 65,536 CPUs in two lists is ~800 kB
MAX_JOURNAL = 256 << 20
MAX_STARTTIME = (1 << 63) - 1      # ticks after boot; msgspec's bounds must fit in an int64
_ORIGIN = r"(?:undo|redo):[1-9][0-9]{0,15}|[a-z][a-z0-9_-]{0,31}"
_ORIGIN_RE = re.compile(_ORIGIN)


@dataclass(frozen=True)
class JournalEntry:
    id: int
    session: str                       # the process that wrote it (Journal.session_id)
    batch: int                         # id of the first entry of the same apply()/undo/redo/restore
    origin: str                        # "pin", "undo:B", "redo:B", "restore", or what the caller said
    root: str                          # the SysRoot the write went to ("/" for the live machine)
    kind: str                          # "thread" | "irq"
    target_id: int                     # tid or IRQ number
    pid: int | None
    label: str
    starttime: int | None              # a thread's starttime (stat field 22): tells a reused tid apart
    before: tuple[int, ...] | None
    requested: tuple[int, ...]
    time: float
    state: str = "pending"             # pending | done | failed
    after: tuple[int, ...] | None = None
    effective: tuple[int, ...] | None = None
    code: str = ""
    message: str = ""
    netdev: str | None = None          # the network device of an rps/xps entry

    @property
    def key(self) -> tuple[str, str, str | None, int]:
        return (self.root, self.kind, self.netdev, self.target_id)


@dataclass(frozen=True)
class QuietEvent:
    """An isolate or include: the CPUs made quiet (or given back). `id` is the batch id of its writes."""
    id: int
    session: str
    root: str
    action: str                        # "isolate" | "include"
    cpus: tuple[int, ...]
    time: float
    planned: int = 0                   # the writes it set out to make (0: not said; older journals)


@dataclass(frozen=True)
class FollowRule:
    """New threads of process `pid` (only those called `name`, when given) get batch `batch`'s pin."""
    batch: int
    root: str
    pid: int
    starttime: int | None              # the process's starttime: a reused pid is another process
    cpus: tuple[int, ...]
    name: str                          # "" = every new thread; else a (Java) thread name
    time: float


@dataclass(frozen=True)
class GuardPolicy:
    """Whether a batch's pins are written again when someone else changes them (else only reported)."""
    batch: int
    reapply: bool
    time: float


@dataclass(frozen=True)
class GuardEvent:
    """A pin of batch `batch` found changed by someone else, and what the guard did."""
    time: float
    root: str
    batch: int
    kind: str
    target_id: int
    netdev: str | None
    pid: int | None
    label: str
    expected: tuple[int, ...]
    found: tuple[int, ...]
    who: str                           # "irqbalance (pid 812)", "a cpuset change ...", or that it cannot be told
    action: str                        # GUARD_ACTIONS
    count: int                         # re-applies of this target so far
    message: str = ""
    since: float = 0.0                 # when it was last seen as set (the change came after); 0: not known

    @property
    def key(self) -> tuple[str, str, str | None, int]:
        return (self.root, self.kind, self.netdev, self.target_id)


def as_cpus(v):
    """A CPU list as the journal keeps it (a tuple of ints), or None."""
    return None if v is None else tuple(int(x) for x in v)


class BadLine(ValueError):
    """A journal line whose fields are out of range or of the wrong type."""


def _int(v, name: str, lo: int, hi: int) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise BadLine(f"{name} {str(v)[:40]}: expected a whole number {lo}-{hi}")
    return v


def _opt_int(v, name: str, lo: int, hi: int) -> int | None:
    return None if v is None else _int(v, name, lo, hi)


def _text(v, name: str, limit: int = MAX_TEXT) -> str:
    if type(v) is not str or len(v) > limit:
        raise BadLine(f"{name}: expected text of at most {limit} characters")
    return v


def _cpus(v, name: str, *, optional: bool) -> tuple[int, ...] | None:
    if v is None and optional:
        return None
    if type(v) is not list or len(v) > MAX_CPU:
        raise BadLine(f"{name}: expected a list of CPU numbers")
    return tuple(_int(c, name, 0, MAX_CPU - 1) for c in v)


def _time(v) -> float:
    if type(v) not in (int, float) or not math.isfinite(v) or not 0 <= v <= MAX_TIME:
        raise BadLine(f"time {str(v)[:40]}: expected seconds since 1970")
    return float(v)


def _netdev_field(v, kind: str) -> str | None:
    """A record's netdev: the checked name of a named kind's target (a network device for rps/xps, a
    workqueue for wq: app/pinning/kinds.py), absent for every other kind."""
    if kind in NAMED_KINDS:
        if not valid_name(kind, v):
            raise BadLine(f"netdev {str(v)[:20]!r}: expected a {'workqueue' if kind == 'wq' else 'network device'} name")
        return v
    if v is not None:
        raise BadLine(f"netdev given for a {kind} entry")
    return None


def _choice(v, name: str, allowed: tuple[str, ...]) -> str:
    if v not in allowed:
        raise BadLine(f"{name} {str(v)[:20]!r}: expected one of {', '.join(allowed)}")
    return v


def _origin(v) -> str:
    if type(v) is not str or not _ORIGIN_RE.fullmatch(v):
        raise BadLine(f"origin {str(v)[:40]!r}: expected pin, undo:N, redo:N, restore or a short word")
    return v


def entry_from_line(obj) -> JournalEntry:
    """A "record" line as an entry; BadLine when any field is out of range or of the wrong type."""
    if type(obj) is not dict:
        raise BadLine("not an object")
    kind = obj.get("kind")
    if kind not in KINDS:
        raise BadLine(f"kind {str(kind)[:20]!r}: expected thread or irq")
    return JournalEntry(
        id=_int(obj.get("id"), "id", 1, MAX_ID), session=_text(obj.get("session"), "session", 64),
        batch=_int(obj.get("batch"), "batch", 1, MAX_ID), origin=_origin(obj.get("origin")),
        root=_text(obj.get("root"), "root"), kind=kind,
        target_id=_int(obj.get("target"), "target", 0, MAX_TARGET),
        pid=_opt_int(obj.get("pid"), "pid", 1, MAX_TARGET), label=_text(obj.get("label"), "label", 256),
        starttime=_opt_int(obj.get("starttime"), "starttime", 0, 1 << 63),
        before=_cpus(obj.get("before"), "before", optional=True),
        requested=_cpus(obj.get("requested"), "requested", optional=False), time=_time(obj.get("time")),
        netdev=_netdev_field(obj.get("netdev"), kind))


def quiet_from_line(obj: dict) -> QuietEvent:
    cpus = _cpus(obj.get("cpus"), "cpus", optional=False)
    if not cpus:
        raise BadLine("cpus: an isolate or include names at least one CPU")
    return QuietEvent(id=_int(obj.get("id"), "id", 1, MAX_ID), session=_text(obj.get("session"), "session", 64),
                      root=_text(obj.get("root"), "root"), action=_choice(obj.get("action"), "action", QUIET_ACTIONS),
                      cpus=cpus, time=_time(obj.get("time")), planned=_int(obj.get("planned", 0), "planned", 0, MAX_ID))


def follow_from_line(obj: dict) -> FollowRule:
    cpus = _cpus(obj.get("cpus"), "cpus", optional=False)
    if not cpus:
        raise BadLine("cpus: a follow rule names at least one CPU")
    return FollowRule(batch=_int(obj.get("batch"), "batch", 1, MAX_ID), root=_text(obj.get("root"), "root"),
                      pid=_int(obj.get("pid"), "pid", 1, MAX_TARGET),
                      starttime=_opt_int(obj.get("starttime"), "starttime", 0, 1 << 63), cpus=cpus,
                      name=_text(obj.get("name"), "name", 256), time=_time(obj.get("time")))


def policy_from_line(obj: dict) -> GuardPolicy:
    reapply = obj.get("reapply")
    if type(reapply) is not bool:
        raise BadLine("reapply: expected true or false")
    return GuardPolicy(_int(obj.get("batch"), "batch", 1, MAX_ID), reapply, _time(obj.get("time")))


def guard_from_line(obj: dict) -> GuardEvent:
    kind = _choice(obj.get("kind"), "kind", KINDS)
    return GuardEvent(time=_time(obj.get("time")), root=_text(obj.get("root"), "root"),
                      batch=_int(obj.get("batch"), "batch", 1, MAX_ID), kind=kind,
                      target_id=_int(obj.get("target"), "target", 0, MAX_TARGET),
                      netdev=_netdev_field(obj.get("netdev"), kind),
                      pid=_opt_int(obj.get("pid"), "pid", 1, MAX_TARGET), label=_text(obj.get("label"), "label", 256),
                      expected=_cpus(obj.get("expected"), "expected", optional=False),
                      found=_cpus(obj.get("found"), "found", optional=False), who=_text(obj.get("who"), "who", 256),
                      action=_choice(obj.get("action"), "action", GUARD_ACTIONS),
                      count=_int(obj.get("count"), "count", 0, MAX_ID), message=_text(obj.get("message", ""), "message"),
                      since=_time(obj.get("since", 0.0)))


def mark_fields(obj) -> dict:
    """The checked fields of a "mark" line."""
    state = obj.get("state")
    if state not in STATES:
        raise BadLine(f"state {str(state)[:20]!r}: expected one of {', '.join(STATES)}")
    return {"state": state, "after": _cpus(obj.get("after"), "after", optional=True),
            "effective": _cpus(obj.get("effective"), "effective", optional=True),
            "code": _text(obj.get("code", ""), "code", 32), "message": _text(obj.get("message", ""), "message")}


# -- the fast path: records and marks checked by msgspec as it parses --------------------------------
# Records and marks are nearly every line. A read whose lines are all records and marks is parsed and
# checked in one msgspec call (in C: 20,000 entries in a fifth of the time the checks above take,
# issue 12), to the same bounds as entry_from_line and mark_fields; anything else (another event, a
# bad line) sends the read line by line through those, which name the line they skip.
if msgspec is not None:
    _Id = Annotated[int, Meta(ge=1, le=MAX_ID)]
    _Cpus = Annotated[tuple[Annotated[int, Meta(ge=0, lt=MAX_CPU)], ...], Meta(max_length=MAX_CPU)]
    _Text = Annotated[str, Meta(max_length=MAX_TEXT)]


    class _Record(msgspec.Struct, tag_field="ev", tag="record", kw_only=True, gc=False):
        """{"ev": "record", ...}: an entry, journalled before the write it describes."""
        id: _Id
        session: Annotated[str, Meta(max_length=64)]
        batch: _Id
        origin: Annotated[str, Meta(max_length=32)]           # its pattern checked once per value, below
        root: _Text
        kind: Annotated[str, Meta(max_length=32)]            # checked against KINDS with netdev, below
        target_id: Annotated[int, Meta(ge=0, le=MAX_TARGET)] = msgspec.field(name="target")
        pid: Annotated[int, Meta(ge=1, le=MAX_TARGET)] | None = None
        label: Annotated[str, Meta(max_length=256)]
        starttime: Annotated[int, Meta(ge=0, le=MAX_STARTTIME)] | None = None
        before: _Cpus | None = None
        requested: _Cpus
        time: Annotated[float, Meta(ge=0, le=MAX_TIME)]
        netdev: Annotated[str, Meta(max_length=64)] | None = None


    class _Mark(msgspec.Struct, tag_field="ev", tag="mark", kw_only=True, gc=False):
        """{"ev": "mark", "id": N, ...}: entry N finished, with what was read back."""
        id: _Id
        state: Literal["pending", "done", "failed"]
        after: _Cpus | None = None
        effective: _Cpus | None = None
        code: Annotated[str, Meta(max_length=32)] = ""
        message: _Text = ""


    # An entry's fields until its mark arrives: JournalEntry's own defaults.
    _UNMARKED = {f.name: f.default for f in dataclass_fields(JournalEntry) if f.default is not MISSING}
    _DECODER = msgspec.json.Decoder(_Record | _Mark)
    _ORIGINS_SEEN: set[str] = set()
    # Bytes only lines other than records and marks hold: a read with any of them goes line by line.
    _OTHER_EVENTS = (b'"ev":"quiet"', b'"ev":"follow"', b'"ev":"policy"', b'"ev":"guard"')


    def _new_entry(record: _Record) -> JournalEntry:
        """The JournalEntry of a checked record, not yet marked, built without __init__: a frozen
        dataclass's __init__ sets each of its fields through object.__setattr__, which was a third of
        reading a 20,000-entry journal. Every field is set (the record's and _UNMARKED's), so the entry is
        the one __init__ would make; until the read that makes it ends, it is private to that read, and
        its mark is written into it (`_mark_new`). ValueError when kind and netdev do not agree."""
        if record.kind not in KINDS:
            raise BadLine(f"kind {record.kind[:20]!r}: expected one of {', '.join(KINDS)}")
        _netdev_field(record.netdev, record.kind)
        if record.origin not in _ORIGINS_SEEN:
            # A journal holds a handful of origins (pin, restore, undo:N ...): matching each record's
            # against _ORIGIN in msgspec was a fifth of decoding a 20,000-entry journal.
            _origin(record.origin)
            if len(_ORIGINS_SEEN) >= 4096:
                _ORIGINS_SEEN.clear()
            _ORIGINS_SEEN.add(record.origin)
        entry = object.__new__(JournalEntry)
        fields = entry.__dict__
        fields.update(_UNMARKED)
        fields.update(msgspec.structs.asdict(record))
        return entry


    def _mark_new(entry: JournalEntry, mark: _Mark) -> None:
        """A mark into an entry still private to the read that made it (its keys are all entry fields)."""
        entry.__dict__.update(msgspec.structs.asdict(mark))


def _mark_dict(mark: _Mark) -> dict:
    return {"state": mark.state, "after": mark.after, "effective": mark.effective, "code": mark.code,
            "message": mark.message}


def _has_long_line(chunk: bytes) -> bool:
    """Whether a line of `chunk` is longer than MAX_LINE, looking at a few places rather than every
    line: from a line's start, the last newline within MAX_LINE + 1 bytes ends every line before it
    (each shorter than that); none there means the line starting here is too long."""
    pos, size = 0, len(chunk)
    while size - pos > MAX_LINE:
        nl = chunk.rfind(b"\n", pos, pos + MAX_LINE + 1)
        if nl < 0:
            return True
        pos = nl + 1
    return False


def read_event(raw: bytes) -> tuple[str, object]:
    """(event, its checked value) of one line: ("record", JournalEntry), ("mark", (id, fields)),
    ("quiet", QuietEvent), ("follow", FollowRule), ("policy", GuardPolicy), ("guard", GuardEvent).
    ValueError (a BadLine saying why, or json's) when the line is none of these."""
    if len(raw) > MAX_LINE:
        raise BadLine(f"{len(raw):,} bytes long")
    obj = json.loads(raw)
    ev = obj.get("ev") if type(obj) is dict else None
    if ev == "mark":
        return ev, (_int(obj.get("id"), "id", 1, MAX_ID), mark_fields(obj))
    reader = _READERS.get(ev)
    if reader is None:
        raise BadLine(f"unknown event {str(ev)[:20]!r}")
    return ev, reader(obj)


_READERS = {"record": entry_from_line, "quiet": quiet_from_line, "follow": follow_from_line,
            "policy": policy_from_line, "guard": guard_from_line}


def decode_records(chunk: bytes, known_ids) -> tuple[dict[int, JournalEntry], list[tuple[int, dict]], int] | None:
    """The common case of a read in one msgspec call: every line of `chunk` a valid record or mark.
    Returns (entries first met here, marks for entries of an earlier read as (id, fields), lines);
    None (nothing taken) otherwise: the caller then goes line by line, to take the other events and
    to skip and name the bad lines. `known_ids` answers `in` for ids already used (entries, quiet)."""
    if msgspec is None or _has_long_line(chunk) or any(t in chunk for t in _OTHER_EVENTS):
        return None
    try:
        parsed = _DECODER.decode_lines(chunk)
    except (ValueError, RecursionError):     # msgspec's errors are ValueErrors
        return None
    lines = chunk.count(b"\n")
    if len(parsed) != lines:                 # decode_lines passes over blank lines
        return None
    # Entries first met in this read stay private to it until its end, so a record and its mark
    # make one JournalEntry, not two (building them is a large part of reading a long journal).
    fresh: dict[int, JournalEntry] = {}
    earlier: list[tuple[int, dict]] = []     # marks for entries of an earlier read (the window's catch-ups)
    try:
        for item in parsed:
            i = item.id
            if type(item) is _Record:
                if i in known_ids or i in fresh:
                    return None
                fresh[i] = _new_entry(item)
            elif i in fresh:
                _mark_new(fresh[i], item)
            elif i in known_ids:
                earlier.append((i, _mark_dict(item)))
            else:
                return None          # a mark for no entry: the slow path names its line
    except ValueError:
        return None                  # kind and netdev disagree: the slow path names the line
    return fresh, earlier, lines
