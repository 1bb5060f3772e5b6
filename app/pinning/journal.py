"""The pin journal: an append-only JSON-lines file, one line fsync'ed before each write it describes.

Every pin is journalled *before* the kernel is asked (state "pending": target, before, requested), and
marked "done" or "failed" after the read-back. A crash or `kill -9` between the two leaves a pending
line, which still counts as a change to restore: the write may have happened. Nothing is ever
rewritten in place, so the worst a crash can do is leave a truncated last line, which is skipped with a
note.

Lines are events: {"ev": "record", ...} starts an entry, {"ev": "mark", "id": N, ...} finishes it.
`entries()` folds them into JournalEntry values. Four more say what a batch of writes was for
(issue 13): "quiet" (an isolate or include: which CPUs; its id is the batch id of the writes that
follow it), "follow" (a process or a Java thread name pinned: new threads get the same pin), "policy"
(re-apply a pin someone else changed, or only report it) and "guard" (a pin found changed by someone
else, and what was done about it). Every field of every line is checked and bounded on reading. Several coremap processes may share the file (the
window and a `coremap pin` in a terminal): appends take an exclusive flock so ids stay unique, and each
reader picks up what others appended since its last read.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import re
import stat
import time
from dataclasses import MISSING, dataclass, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Annotated, Literal

try:
    import msgspec
    from msgspec import Meta
except ImportError:
    # The agent coremap ships to a server runs on its standard library alone (app/remote/ship.py): there
    # the journal is read line by line through the checks below, as it always could be.
    msgspec = None

from app.errors import CoremapError
from app.pinning.masks import MASK_KINDS, NET_KINDS
from app.parse.cpulist import MAX_CPU
from app.sysroot import valid_netdev

STATES = ("pending", "done", "failed")
# What a write changes: a thread's affinity, an IRQ's smp_affinity_list, and the masks an isolate
# moves off quiet CPUs (app/pinning/masks.py; for rps/xps, target = the queue number, netdev = the device).
KINDS = ("thread", "irq", *MASK_KINDS)
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


class JournalError(CoremapError):
    """The journal file cannot be opened or written."""


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
    who: str                           # "irqbalance (pid 812)", "a cpuset change ...", "another process"
    action: str                        # GUARD_ACTIONS
    count: int                         # re-applies of this target so far
    message: str = ""

    @property
    def key(self) -> tuple[str, str, str | None, int]:
        return (self.root, self.kind, self.netdev, self.target_id)


def _tuple(v):
    return None if v is None else tuple(int(x) for x in v)


class _BadLine(ValueError):
    """A journal line whose fields are out of range or of the wrong type."""


def _int(v, name: str, lo: int, hi: int) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise _BadLine(f"{name} {str(v)[:40]}: expected a whole number {lo}-{hi}")
    return v


def _opt_int(v, name: str, lo: int, hi: int) -> int | None:
    return None if v is None else _int(v, name, lo, hi)


def _text(v, name: str, limit: int = MAX_TEXT) -> str:
    if type(v) is not str or len(v) > limit:
        raise _BadLine(f"{name}: expected text of at most {limit} characters")
    return v


def _cpus(v, name: str, *, optional: bool) -> tuple[int, ...] | None:
    if v is None and optional:
        return None
    if type(v) is not list or len(v) > MAX_CPU:
        raise _BadLine(f"{name}: expected a list of CPU numbers")
    return tuple(_int(c, name, 0, MAX_CPU - 1) for c in v)


def _time(v) -> float:
    if type(v) not in (int, float) or not math.isfinite(v) or not 0 <= v <= MAX_TIME:
        raise _BadLine(f"time {str(v)[:40]}: expected seconds since 1970")
    return float(v)


def _netdev_field(v, kind: str) -> str | None:
    """A record's netdev: a checked device name for rps/xps entries, absent for every other kind."""
    if kind in NET_KINDS:
        if not valid_netdev(v):
            raise _BadLine(f"netdev {str(v)[:20]!r}: expected a network device name")
        return v
    if v is not None:
        raise _BadLine(f"netdev given for a {kind} entry")
    return None


def _choice(v, name: str, allowed: tuple[str, ...]) -> str:
    if v not in allowed:
        raise _BadLine(f"{name} {str(v)[:20]!r}: expected one of {', '.join(allowed)}")
    return v


def _origin(v) -> str:
    if type(v) is not str or not _ORIGIN_RE.fullmatch(v):
        raise _BadLine(f"origin {str(v)[:40]!r}: expected pin, undo:N, redo:N, restore or a short word")
    return v


def entry_from_line(obj) -> JournalEntry:
    """A "record" line as an entry; _BadLine when any field is out of range or of the wrong type."""
    if type(obj) is not dict:
        raise _BadLine("not an object")
    kind = obj.get("kind")
    if kind not in KINDS:
        raise _BadLine(f"kind {str(kind)[:20]!r}: expected thread or irq")
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
        raise _BadLine("cpus: an isolate or include names at least one CPU")
    return QuietEvent(id=_int(obj.get("id"), "id", 1, MAX_ID), session=_text(obj.get("session"), "session", 64),
                      root=_text(obj.get("root"), "root"), action=_choice(obj.get("action"), "action", QUIET_ACTIONS),
                      cpus=cpus, time=_time(obj.get("time")))


def follow_from_line(obj: dict) -> FollowRule:
    cpus = _cpus(obj.get("cpus"), "cpus", optional=False)
    if not cpus:
        raise _BadLine("cpus: a follow rule names at least one CPU")
    return FollowRule(batch=_int(obj.get("batch"), "batch", 1, MAX_ID), root=_text(obj.get("root"), "root"),
                      pid=_int(obj.get("pid"), "pid", 1, MAX_TARGET),
                      starttime=_opt_int(obj.get("starttime"), "starttime", 0, 1 << 63), cpus=cpus,
                      name=_text(obj.get("name"), "name", 256), time=_time(obj.get("time")))


def policy_from_line(obj: dict) -> GuardPolicy:
    reapply = obj.get("reapply")
    if type(reapply) is not bool:
        raise _BadLine("reapply: expected true or false")
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
                      count=_int(obj.get("count"), "count", 0, MAX_ID), message=_text(obj.get("message", ""), "message"))


def mark_fields(obj) -> dict:
    """The checked fields of a "mark" line."""
    state = obj.get("state")
    if state not in STATES:
        raise _BadLine(f"state {str(state)[:20]!r}: expected one of {', '.join(STATES)}")
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
            raise _BadLine(f"kind {record.kind[:20]!r}: expected one of {', '.join(KINDS)}")
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


def pinned_irqs(entries, unrestored, root: str) -> dict[int, tuple[int, ...]]:
    """IRQ -> the CPUs coremap last wrote to it under `root`, for IRQs a pin still holds (`unrestored`:
    Journal.unrestored(root)): the window compares them with the kernel's mask to show a pin changed back."""
    held = {e.target_id for e in unrestored if e.kind == "irq"}
    last: dict[int, tuple[int, ...]] = {}
    for e in entries:
        if e.kind == "irq" and e.root == str(root) and e.state == "done" and e.target_id in held:
            last[e.target_id] = e.requested
    return last


class Journal:
    """`Journal(path)`: open (creating) the journal file at `path`. With `readonly`, only read it
    (a missing file is an empty journal; a read-only file or folder is fine): `coremap journal`."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False):
        self.path = Path(path)
        self.session_id = os.urandom(6).hex()        # not uuid: its import costs every command 3 ms
        self.notes: list[str] = []         # corrupt lines skipped, for the log/status line
        self._entries: dict[int, JournalEntry] = {}
        self._quiet: dict[int, QuietEvent] = {}
        self._follows: list[FollowRule] = []
        self._policies: dict[int, GuardPolicy] = {}
        self._guard: list[GuardEvent] = []
        self._offset = 0
        self._line_no = 0
        self._max_id = 0
        self._pinned: dict[int, tuple[int, ...]] = {}
        self._pinned_key: tuple | None = None
        self.readonly = readonly
        self._fd = -1
        try:
            if readonly:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                                   | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            if not readonly:
                raise JournalError(f"{self.path}: cannot create the pin journal; set COREMAP_STATE_DIR to "
                                   "a folder you may write") from None
            return                  # nothing journalled yet: an empty journal
        except OSError as e:
            raise JournalError(f"{self.path}: cannot open the pin journal ({os.strerror(e.errno or 0)}); "
                               "set COREMAP_STATE_DIR to a folder you may write") from None
        st = os.fstat(self._fd)
        if not stat.S_ISREG(st.st_mode):
            self.close()
            raise JournalError(f"{self.path} is not a regular file; move it aside (coremap keeps its pin "
                               "journal in a plain file)")
        if st.st_size > MAX_JOURNAL:
            self.close()
            raise JournalError(f"{self.path} is {st.st_size:,} bytes, more than a pin journal grows to; "
                               "move it aside")
        with self._locked(fcntl.LOCK_SH):
            self._catch_up()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- writing -------------------------------------------------------------------------------
    def record(self, *, kind: str, target_id: int, requested, before=None, pid: int | None = None,
               label: str = "", root: str = "/", origin: str = "pin", batch: int | None = None,
               starttime: int | None = None, netdev: str | None = None) -> int:
        """Append a pending entry and fsync it; returns its id. `batch` None starts a new batch."""
        if kind not in KINDS:
            raise ValueError(f"journal kind {kind!r}: expected one of {', '.join(KINDS)}")
        if (kind in NET_KINDS) != (netdev is not None) or (netdev is not None and not valid_netdev(netdev)):
            raise ValueError(f"journal {kind} entry with netdev {netdev!r}: rps and xps entries name a device, "
                             "no other kind does")
        self._writable()
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            new_id = self._max_id + 1
            entry = JournalEntry(
                id=new_id, session=self.session_id, batch=new_id if batch is None else batch,
                origin=origin, root=str(root), kind=kind, target_id=int(target_id), pid=pid,
                label=label[:256], starttime=starttime, before=_tuple(before),
                requested=tuple(requested), time=time.time(), netdev=netdev)
            line = {"ev": "record", "id": entry.id, "session": entry.session, "batch": entry.batch,
                    "origin": entry.origin, "root": entry.root, "kind": entry.kind,
                    "target": entry.target_id, "pid": entry.pid, "label": entry.label,
                    "starttime": entry.starttime, "before": entry.before,
                    "requested": entry.requested, "time": entry.time}
            if netdev is not None:
                line["netdev"] = netdev
            self._append(line)
            self._entries[new_id] = entry
            self._max_id = new_id
            return new_id

    def mark(self, entry_id: int, state: str, after=None, effective=None, *, code: str = "",
             message: str = "") -> None:
        """Finish entry `entry_id`: state "done" or "failed", with what was read back."""
        if state not in STATES:
            raise ValueError(f"journal state {state!r}: expected one of {', '.join(STATES)}")
        self._writable()
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            if entry_id not in self._entries:
                raise JournalError(f"{self.path}: no journal entry {entry_id} to mark")
            fields = {"state": state, "after": _tuple(after), "effective": _tuple(effective),
                      "code": code[:32], "message": message[:MAX_TEXT]}
            line = {"ev": "mark", "id": entry_id, **fields}
            # No fsync: a mark lost to a power cut leaves the entry "pending", which restore already
            # treats as changed (the conservative reading), and it halves the cost of a pin.
            self._append(line, sync=False)
            self._apply_mark(entry_id, fields)

    def quiet(self, action: str, cpus, root: str = "/") -> int:
        """Append an isolate or include of `cpus` (fsync'ed, before its writes); returns its id, which
        the writes of that isolate or include then carry as their batch."""
        if action not in QUIET_ACTIONS:
            raise ValueError(f"quiet action {action!r}: expected one of {', '.join(QUIET_ACTIONS)}")
        self._writable()
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            ev = QuietEvent(self._max_id + 1, self.session_id, str(root), action, tuple(sorted(set(cpus))),
                            time.time())
            self._append({"ev": "quiet", "id": ev.id, "session": ev.session, "root": ev.root,
                          "action": ev.action, "cpus": list(ev.cpus), "time": ev.time})
            self._quiet[ev.id] = ev
            self._max_id = ev.id
            return ev.id

    def follow(self, *, batch: int, pid: int, cpus, starttime: int | None = None, name: str = "",
               root: str = "/") -> FollowRule:
        """Append a follow rule: new threads of `pid` (called `name`, when given) get batch `batch`'s pin."""
        rule = FollowRule(int(batch), str(root), int(pid), starttime, tuple(sorted(set(cpus))), name[:256],
                          time.time())
        self._append_locked({"ev": "follow", "batch": rule.batch, "root": rule.root, "pid": rule.pid,
                             "starttime": rule.starttime, "cpus": list(rule.cpus), "name": rule.name,
                             "time": rule.time})
        self._follows.append(rule)
        return rule

    def set_policy(self, batch: int, reapply: bool) -> GuardPolicy:
        """Append the guard's policy for batch `batch`: re-apply its pins when changed, or only report."""
        pol = GuardPolicy(int(batch), bool(reapply), time.time())
        self._append_locked({"ev": "policy", "batch": pol.batch, "reapply": pol.reapply, "time": pol.time},
                            sync=False)
        self._policies[pol.batch] = pol
        return pol

    def guard_event(self, ev: GuardEvent) -> None:
        """Append what the guard found and did (no fsync: a lost line loses a report, never a pin)."""
        self._append_locked({"ev": "guard", "time": ev.time, "root": ev.root, "batch": ev.batch, "kind": ev.kind,
                             "target": ev.target_id, "netdev": ev.netdev, "pid": ev.pid, "label": ev.label[:256],
                             "expected": list(ev.expected), "found": list(ev.found), "who": ev.who[:256],
                             "action": ev.action, "count": ev.count, "message": ev.message[:MAX_TEXT]}, sync=False)
        self._guard.append(ev)

    def _append_locked(self, obj: dict, sync: bool = True) -> None:
        self._writable()
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            self._append(obj, sync)

    def _writable(self) -> None:
        if self.readonly or self._fd < 0:
            raise JournalError(f"{self.path}: the pin journal was opened read-only; nothing can be pinned")

    def _append(self, obj: dict, sync: bool = True) -> None:
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        # A crash can leave a last line without its newline; start ours on a fresh line so the
        # torn one stays a single corrupt line instead of swallowing this one.
        size = os.fstat(self._fd).st_size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(self._fd, data)
        if sync:
            os.fsync(self._fd)
        self._offset = os.fstat(self._fd).st_size

    # -- reading -------------------------------------------------------------------------------
    def entries(self) -> list[JournalEntry]:
        """Every entry, oldest first, including those other processes appended since."""
        with self._locked(fcntl.LOCK_SH):
            self._catch_up()
        return [self._entries[k] for k in sorted(self._entries)]

    def get(self, entry_id: int) -> JournalEntry:
        return self._entries[entry_id]

    def refresh(self) -> int:
        """Read what other processes appended; returns how far the journal has been read (it grows
        with every line, so an unchanged number means nothing new)."""
        with self._locked(fcntl.LOCK_SH):
            self._catch_up()
        return self._offset

    def quiet_events(self) -> list[QuietEvent]:
        """Every isolate and include, oldest first (call entries() or refresh() first for news)."""
        return [self._quiet[k] for k in sorted(self._quiet)]

    def follow_rules(self) -> list[FollowRule]:
        return list(self._follows)

    def policies(self) -> dict[int, bool]:
        """batch -> re-apply (the newest policy line of each batch)."""
        return {b: p.reapply for b, p in self._policies.items()}

    def guard_events(self) -> list[GuardEvent]:
        return list(self._guard)

    def pinned_irqs(self, root: str) -> dict[int, tuple[int, ...]]:
        """pinned_irqs() of this journal, worked out again only when the file has grown (the window
        asks every tick)."""
        with self._locked(fcntl.LOCK_SH):
            self._catch_up()
        key = (str(root), self._offset)
        if self._pinned_key != key:
            self._pinned, self._pinned_key = pinned_irqs(self.entries(), self.unrestored(root), root), key
        return dict(self._pinned)

    def unrestored(self, root: str | None = None) -> list[JournalEntry]:
        """For each target still changed from its original affinity, the first entry of that change
        (its `before` is what a restore writes back), oldest first.

        A target is changed from its first recorded entry until a "done" write puts its original
        `before` back (an undo or restore), or a write finds it gone. Failed writes changed nothing
        and are ignored; a pending entry (crash between journal and read-back) counts as changed.
        A thread whose tid reappears with a new starttime is a different thread: its run restarts.
        """
        open_runs: dict[tuple, JournalEntry] = {}
        for e in self.entries():
            if root is not None and e.root != str(root):
                continue
            k = e.key
            if e.code == "gone":
                open_runs.pop(k, None)
                continue
            if e.state == "failed":
                continue
            first = open_runs.get(k)
            if first is not None and e.starttime is not None and first.starttime != e.starttime:
                first = None
            if first is None:
                if e.before is None:
                    continue
                open_runs[k] = first = e
            if e.state == "done" and e.requested == first.before:
                open_runs.pop(k, None)
        return sorted(open_runs.values(), key=lambda e: e.id)

    def _catch_up(self) -> None:
        if self._fd < 0:
            return
        size = min(os.fstat(self._fd).st_size, MAX_JOURNAL)
        if size <= self._offset:
            return
        data = os.pread(self._fd, size - self._offset, self._offset)
        # Only whole lines: a line still being written (or torn by a crash) stays for later.
        end = data.rfind(b"\n")
        if end < 0:
            return
        chunk = data[: end + 1]
        if not self._take_all(chunk):
            for raw in chunk.split(b"\n")[:-1]:
                self._line_no += 1
                self._parse_line(raw)
        self._offset += end + 1

    def _take_all(self, chunk: bytes) -> bool:
        """The common case in one msgspec call: every line a valid record or mark. False (nothing
        taken) otherwise, and the caller goes line by line to take the other events and to skip and
        name the bad lines."""
        if msgspec is None or _has_long_line(chunk) or any(t in chunk for t in _OTHER_EVENTS):
            return False
        try:
            parsed = _DECODER.decode_lines(chunk)
        except (ValueError, RecursionError):     # msgspec's errors are ValueErrors
            return False
        lines = chunk.count(b"\n")
        if len(parsed) != lines:                 # decode_lines passes over blank lines
            return False
        # Entries first met in this read stay private to it until its end, so a record and its mark
        # make one JournalEntry, not two (building them is a large part of reading a long journal).
        fresh: dict[int, JournalEntry] = {}
        earlier: list[_Mark] = []       # marks for entries of an earlier read (the window's catch-ups)
        entries = self._entries
        try:
            for item in parsed:
                i = item.id
                if type(item) is _Record:
                    if i in entries or i in fresh or i in self._quiet:
                        return False
                    fresh[i] = _new_entry(item)
                elif i in fresh:
                    _mark_new(fresh[i], item)
                elif i in entries:
                    earlier.append(item)
                else:
                    return False         # a mark for no entry: the slow path names its line
        except ValueError:
            return False                 # kind and netdev disagree: the slow path names the line
        entries.update(fresh)
        for mark in earlier:
            self._apply_mark(mark.id, _mark_dict(mark))
        self._max_id = max(self._max_id, max(fresh, default=0))
        self._line_no += lines
        return True

    def _parse_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            if len(raw) > MAX_LINE:
                raise _BadLine(f"{len(raw):,} bytes long")
            obj = json.loads(raw)
            ev = obj.get("ev") if type(obj) is dict else None
            if ev == "record":
                e = entry_from_line(obj)
                if e.id in self._entries or e.id in self._quiet:
                    raise _BadLine(f"id {e.id} used twice")
                self._entries[e.id] = e
                self._max_id = max(self._max_id, e.id)
            elif ev == "quiet":
                q = quiet_from_line(obj)
                if q.id in self._entries or q.id in self._quiet:
                    raise _BadLine(f"id {q.id} used twice")
                self._quiet[q.id] = q
                self._max_id = max(self._max_id, q.id)
            elif ev == "follow":
                self._follows.append(follow_from_line(obj))
            elif ev == "policy":
                pol = policy_from_line(obj)
                self._policies[pol.batch] = pol
            elif ev == "guard":
                self._guard.append(guard_from_line(obj))
            elif ev == "mark":
                entry_id = _int(obj.get("id"), "id", 1, MAX_ID)
                if entry_id not in self._entries:
                    raise _BadLine("mark for an unknown entry")
                self._apply_mark(entry_id, mark_fields(obj))
            else:
                raise _BadLine(f"unknown event {str(ev)[:20]!r}")
        except (ValueError, RecursionError) as e:
            # A torn last line after a crash, a hand edit, or a line someone else wrote: skip it,
            # keep everything else. (json's errors and _BadLine are ValueErrors.)
            why = str(e)[:80] if isinstance(e, _BadLine) else f"{type(e).__name__}: {str(e)[:80]}"
            self.notes.append(f"{self.path}: line {self._line_no} skipped ({why})")

    def _apply_mark(self, entry_id: int, fields: dict) -> None:
        self._entries[entry_id] = replace(self._entries[entry_id], **fields)

    def _locked(self, how: int):
        return _Flock(self._fd, how)


class _Flock:
    def __init__(self, fd: int, how: int):
        self.fd, self.how = fd, how

    def __enter__(self):
        if self.fd >= 0:
            fcntl.flock(self.fd, self.how)

    def __exit__(self, *exc):
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
