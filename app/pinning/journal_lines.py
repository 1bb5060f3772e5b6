"""The pin journal's lines: the events it holds (JournalEntry, QuietEvent, FollowRule, GuardPolicy,
GuardEvent), and each line's typed definition with its bounds, checked by msgspec as it parses.

The journal is input like any other (a hand edit, a torn write, a file someone else put there): a line
outside its definition is skipped with a note, as a torn line is. A read of records and marks, nearly
every line, is parsed and checked in one call (`decode_records`); anything else goes line by line
through `read_event`, which names the line and the field. app/pinning/journal.py holds the file.
"""
from __future__ import annotations

import json
import re
from dataclasses import MISSING, dataclass
from dataclasses import fields as dataclass_fields
from typing import Annotated, Literal

try:
    import msgspec
except ImportError:
    # The agent coremap ships to a server runs on its standard library alone (app/remote/ship.py): it
    # reads its own journal as written (_read_unchecked).
    msgspec = None

from app.parse.cpulist import MAX_CPU
from app.parse.json_text import CpuId, JsonInputError, Meta, decode_json
from app.pinning.kinds import KINDS, NAMED_KINDS, valid_name

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


# A line outside its definition below is skipped, named, with the one error of what comes in.
BadLine = JsonInputError


def _netdev_field(v, kind: str) -> None:
    """A named kind's target carries its checked name (a network device for rps/xps, a workqueue for wq:
    app/pinning/kinds.py); every other kind carries none."""
    if kind in NAMED_KINDS:
        if not valid_name(kind, v):
            raise ValueError(f"netdev {str(v)[:20]!r}: expected a {'workqueue' if kind == 'wq' else 'network device'} name")
    elif v is not None:
        raise ValueError(f"netdev given for a {kind} entry")


_ORIGINS_SEEN: set[str] = set()


def _origin(v: str) -> None:
    # A journal holds a handful of origins (pin, restore, undo:N ...): matching each record's against
    # _ORIGIN in msgspec was a fifth of decoding a 20,000-entry journal.
    if v in _ORIGINS_SEEN:
        return
    if not _ORIGIN_RE.fullmatch(v):
        raise ValueError(f"origin {v[:40]!r}: expected pin, undo:N, redo:N, restore or a short word")
    if len(_ORIGINS_SEEN) >= 4096:
        _ORIGINS_SEEN.clear()
    _ORIGINS_SEEN.add(v)


# -- what each line holds: one typed definition per event, checked by msgspec as it parses --------------
# Records and marks are nearly every line: a read is parsed and checked in one msgspec call (in C: 20,000
# entries in a fifth of the time hand checks took, issue 12); a read with a bad line goes line by line
# through the same definitions, which name the line and the field it skips.
if msgspec is not None:
    _Id = Annotated[int, Meta(ge=1, le=MAX_ID)]
    _Target = Annotated[int, Meta(ge=0, le=MAX_TARGET)]
    _Pid = Annotated[int, Meta(ge=1, le=MAX_TARGET)]
    _Cpus = Annotated[tuple[CpuId, ...], Meta(max_length=MAX_CPU)]
    _SomeCpus = Annotated[tuple[CpuId, ...], Meta(min_length=1, max_length=MAX_CPU)]
    _Text = Annotated[str, Meta(max_length=MAX_TEXT)]
    _Name = Annotated[str, Meta(max_length=256)]
    _Time = Annotated[float, Meta(ge=0, le=MAX_TIME)]
    _Start = Annotated[int, Meta(ge=0, le=MAX_STARTTIME)]

    class _Record(msgspec.Struct, tag_field="ev", tag="record", kw_only=True, gc=False):
        """{"ev": "record", ...}: an entry, journalled before the write it describes."""
        id: _Id
        session: Annotated[str, Meta(max_length=64)]
        batch: _Id
        origin: Annotated[str, Meta(max_length=32)]
        root: _Text
        kind: Annotated[str, Meta(max_length=32)]
        target_id: _Target = msgspec.field(name="target")
        pid: _Pid | None = None
        label: _Name
        starttime: _Start | None = None
        before: _Cpus | None = None
        requested: _Cpus
        time: _Time
        netdev: Annotated[str, Meta(max_length=64)] | None = None

        def __post_init__(self):
            if self.kind not in KINDS:
                raise ValueError(f"kind {self.kind[:20]!r}: expected one of {', '.join(KINDS)}")
            _netdev_field(self.netdev, self.kind)
            _origin(self.origin)

    class _Mark(msgspec.Struct, tag_field="ev", tag="mark", kw_only=True, gc=False):
        """{"ev": "mark", "id": N, ...}: entry N finished, with what was read back."""
        id: _Id
        state: Literal[STATES]
        after: _Cpus | None = None
        effective: _Cpus | None = None
        code: Annotated[str, Meta(max_length=32)] = ""
        message: _Text = ""

    class _Quiet(msgspec.Struct, tag_field="ev", tag="quiet", kw_only=True):
        id: _Id
        session: Annotated[str, Meta(max_length=64)]
        root: _Text
        action: Literal[QUIET_ACTIONS]
        cpus: _SomeCpus
        time: _Time
        planned: Annotated[int, Meta(ge=0, le=MAX_ID)] = 0

    class _Follow(msgspec.Struct, tag_field="ev", tag="follow", kw_only=True):
        batch: _Id
        root: _Text
        pid: _Pid
        starttime: _Start | None = None
        cpus: _SomeCpus
        name: _Name
        time: _Time

    class _Policy(msgspec.Struct, tag_field="ev", tag="policy", kw_only=True):
        batch: _Id
        reapply: bool
        time: _Time

    class _Guard(msgspec.Struct, tag_field="ev", tag="guard", kw_only=True):
        time: _Time
        root: _Text
        batch: _Id
        kind: Literal[KINDS]
        target_id: _Target = msgspec.field(name="target")
        netdev: Annotated[str, Meta(max_length=64)] | None = None
        pid: _Pid | None = None
        label: _Name
        expected: _Cpus
        found: _Cpus
        who: _Name
        action: Literal[GUARD_ACTIONS]
        count: Annotated[int, Meta(ge=0, le=MAX_ID)]
        message: _Text = ""
        since: _Time = 0.0

        def __post_init__(self):
            _netdev_field(self.netdev, self.kind)

    _LINE = _Record | _Mark | _Quiet | _Follow | _Policy | _Guard
    # Bytes only lines other than records and marks hold: a read with any of them goes line by line.
    _OTHER_EVENTS = (b'"ev":"quiet"', b'"ev":"follow"', b'"ev":"policy"', b'"ev":"guard"')
    _DECODER = msgspec.json.Decoder(_LINE)
    # An entry's fields until its mark arrives: JournalEntry's own defaults.
    _UNMARKED = {f.name: f.default for f in dataclass_fields(JournalEntry) if f.default is not MISSING}

    def _new_entry(record: _Record) -> JournalEntry:
        """The JournalEntry of a checked record, not yet marked, built without __init__: a frozen
        dataclass's __init__ sets each of its fields through object.__setattr__, which was a third of
        reading a 20,000-entry journal. Every field is set (the record's and _UNMARKED's), so the entry is
        the one __init__ would make; until the read that makes it ends, it is private to that read, and
        its mark is written into it (`_mark_new`)."""
        entry = object.__new__(JournalEntry)
        fields = entry.__dict__
        fields.update(_UNMARKED)
        fields.update(msgspec.structs.asdict(record))
        return entry

    def _mark_new(entry: JournalEntry, mark: _Mark) -> None:
        """A mark into an entry still private to the read that made it (its keys are all entry fields)."""
        entry.__dict__.update(_mark_dict(mark))


def _mark_dict(mark) -> dict:
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
    BadLine (naming the field) when the line is none of these."""
    if msgspec is None:
        return _read_unchecked(raw)
    line = decode_json(raw, _LINE, what="journal line", limit=MAX_LINE)
    ev = type(line).__struct_config__.tag
    if ev == "record":
        return ev, _new_entry(line)
    if ev == "mark":
        return ev, (line.id, _mark_dict(line))
    return ev, _VALUES[ev](**msgspec.structs.asdict(line))


_VALUES = {"quiet": QuietEvent, "follow": FollowRule, "policy": GuardPolicy, "guard": GuardEvent}


def _read_unchecked(raw: bytes) -> tuple[str, object]:
    """The agent's reading (app/remote/ship.py: a server's Python has no msgspec): its own journal, made
    as written by the classes' constructors. It checks no bound (they are the definitions above, run
    where coremap is installed); what it reads goes to the client as JournalEntry values, checked
    there by their types, and an undo's CPUs go through the pin flow's checks."""
    obj = json.loads(raw)
    ev = obj.pop("ev", None) if type(obj) is dict else None
    if "target" in obj:
        obj["target_id"] = obj.pop("target")
    fields = {k: tuple(v) if type(v) is list else v for k, v in obj.items()}
    try:
        if ev == "record":
            return ev, JournalEntry(**fields)
        if ev == "mark":
            return ev, (fields.pop("id"), {**dict.fromkeys(("after", "effective")), "code": "", "message": "",
                                           **fields})
        return ev, _VALUES[ev](**fields)
    except (TypeError, KeyError) as e:
        raise BadLine(f"not a journal line ({str(e)[:60]})") from None


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
    for item in parsed:
        t = type(item)
        if t is _Record:
            i = item.id
            if i in known_ids or i in fresh:
                return None
            fresh[i] = _new_entry(item)
        elif t is _Mark:
            i = item.id
            if i in fresh:
                _mark_new(fresh[i], item)
            elif i in known_ids:
                earlier.append((i, _mark_dict(item)))
            else:
                return None          # a mark for no entry: the slow path names its line
        else:
            return None              # another event: the line-by-line path takes it in its order
    return fresh, earlier, lines
