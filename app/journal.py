"""The pin journal: an append-only JSON-lines file, one line fsync'ed before each write it describes.

Every pin is journalled *before* the kernel is asked (state "pending": target, before, requested), and
marked "done" or "failed" after the read-back. A crash or `kill -9` between the two leaves a pending
line, which still counts as a change to restore: the write may have happened. Nothing is ever
rewritten in place, so the worst a crash can do is leave a truncated last line, which is skipped with a
note.

Lines are events: {"ev": "record", ...} starts an entry, {"ev": "mark", "id": N, ...} finishes it.
`entries()` folds them into JournalEntry values. Several coremap processes may share the file (the
window and a `coremap pin` in a terminal): appends take an exclusive flock so ids stay unique, and each
reader picks up what others appended since its last read.
"""
from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from dataclasses import MISSING, dataclass, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from app.errors import CoremapError
from app.parse.cpulist import MAX_CPU

STATES = ("pending", "done", "failed")
KINDS = ("thread", "irq")
# Bounds of a valid line. The journal is input like any other (a hand edit, a torn write, a file
# someone else put there): a line outside them is skipped with a note, as a torn line is.
MAX_ID = 1 << 53                   # ids count up from 1; beyond this a float would have stood in
MAX_TARGET = 1 << 22               # PID_MAX_LIMIT (include/linux/threads.h); IRQ numbers are far lower
MAX_TIME = 1e11                    # seconds since 1970: year 5138
MAX_TEXT = 4096
MAX_LINE = 1 << 20                 # a record with 65,536 CPUs in two lists is ~800 kB
MAX_JOURNAL = 256 << 20
MAX_STARTTIME = (1 << 63) - 1      # ticks after boot; msgspec's bounds must fit in an int64
_ORIGIN = r"^(?:(?:undo|redo):[1-9][0-9]{0,15}|[a-z][a-z0-9_-]{0,31})$"


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

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.root, self.kind, self.target_id)


def _tuple(v):
    return None if v is None else tuple(int(x) for x in v)


class _BadLine(ValueError):
    """A journal line that is well formed but cannot be taken (a reused id, a mark for no entry)."""


# The shape of a valid line, checked by msgspec as it parses (in C: 20,000 entries read in a fifth of
# the time Python checks took, issue 12). A line outside it is skipped with a note naming the field.
_Id = Annotated[int, Meta(ge=1, le=MAX_ID)]
_Target = Annotated[int, Meta(ge=0, le=MAX_TARGET)]
_Cpus = Annotated[tuple[Annotated[int, Meta(ge=0, lt=MAX_CPU)], ...], Meta(max_length=MAX_CPU)]
_Text = Annotated[str, Meta(max_length=MAX_TEXT)]


class _Record(msgspec.Struct, tag_field="ev", tag="record", kw_only=True, gc=False):
    """{"ev": "record", ...}: an entry, journalled before the write it describes."""
    id: _Id
    session: Annotated[str, Meta(max_length=64)]
    batch: _Id
    origin: Annotated[str, Meta(pattern=_ORIGIN)]
    root: _Text
    kind: Literal["thread", "irq"]
    target_id: _Target = msgspec.field(name="target")
    pid: Annotated[int, Meta(ge=1, le=MAX_TARGET)] | None = None
    label: Annotated[str, Meta(max_length=256)]
    starttime: Annotated[int, Meta(ge=0, le=MAX_STARTTIME)] | None = None
    before: _Cpus | None = None
    requested: _Cpus
    time: Annotated[float, Meta(ge=0, le=MAX_TIME)]


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
_LINE = _Record | _Mark
_DECODER = msgspec.json.Decoder(_LINE)


def _decode_line(raw: bytes) -> _Record | _Mark:
    """One line as a checked record or mark; a ValueError says why not."""
    try:
        return _DECODER.decode(raw)
    except msgspec.ValidationError:
        raise
    except (msgspec.DecodeError, UnicodeDecodeError):
        # Not JSON to msgspec, which is strict (a BOM, NaN, a lone surrogate such as \udcff from a
        # name that was not UTF-8): the standard library reads that superset, as the journal always
        # did, and the same shape checks what it read.
        return msgspec.convert(json.loads(raw), _LINE)


def entry_from_line(obj) -> JournalEntry:
    """A "record" line (a parsed object) as an entry; a ValueError when it is not a valid record."""
    rec = msgspec.convert(obj, _Record)
    return JournalEntry(**msgspec.structs.asdict(rec))


def _new_entry(record: _Record) -> JournalEntry:
    """The JournalEntry of a checked record, not yet marked, built without __init__: a frozen
    dataclass's __init__ sets each of its 18 fields through object.__setattr__, which was a third of
    reading a 20,000-entry journal. Every field is set (the record's and _UNMARKED's), so the entry is
    the one __init__ would make. Until the read that makes it ends, it is private to that read, and
    its mark is written into it (`_mark_new`)."""
    entry = object.__new__(JournalEntry)
    fields = entry.__dict__
    fields.update(_UNMARKED)
    fields.update(msgspec.structs.asdict(record))
    return entry


def _mark_new(entry: JournalEntry, mark: _Mark) -> None:
    """A mark into an entry still private to the read that made it (its keys are all entry fields)."""
    entry.__dict__.update(msgspec.structs.asdict(mark))


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


def _mark_fields(mark: _Mark) -> dict:
    return {"state": mark.state, "after": mark.after, "effective": mark.effective, "code": mark.code,
            "message": mark.message}


class Journal:
    """`Journal(path)`: open (creating) the journal file at `path`. With `readonly`, only read it
    (a missing file is an empty journal; a read-only file or folder is fine): `coremap journal`."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False):
        self.path = Path(path)
        self.session_id = os.urandom(6).hex()     # 48 random bits, as uuid4().hex[:12] gave
        self.notes: list[str] = []         # corrupt lines skipped, for the log/status line
        self._entries: dict[int, JournalEntry] = {}
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
               starttime: int | None = None) -> int:
        """Append a pending entry and fsync it; returns its id. `batch` None starts a new batch."""
        self._writable()
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            new_id = self._max_id + 1
            entry = JournalEntry(
                id=new_id, session=self.session_id, batch=new_id if batch is None else batch,
                origin=origin, root=str(root), kind=kind, target_id=int(target_id), pid=pid,
                label=label[:256], starttime=starttime, before=_tuple(before),
                requested=tuple(requested), time=time.time())
            line = {"ev": "record", "id": entry.id, "session": entry.session, "batch": entry.batch,
                    "origin": entry.origin, "root": entry.root, "kind": entry.kind,
                    "target": entry.target_id, "pid": entry.pid, "label": entry.label,
                    "starttime": entry.starttime, "before": entry.before,
                    "requested": entry.requested, "time": entry.time}
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

    def pinned_irqs(self, root: str) -> dict[int, tuple[int, ...]]:
        """IRQ -> the CPUs coremap last wrote to it under `root`, for IRQs a pin still holds (not undone
        or restored): the window compares them with the kernel's mask to show a pin changed back.
        Worked out again only when the file has grown (the window asks every tick)."""
        with self._locked(fcntl.LOCK_SH):
            self._catch_up()
        key = (str(root), self._offset)
        if self._pinned_key != key:
            held = {e.target_id for e in self.unrestored(root) if e.kind == "irq"}
            last: dict[int, tuple[int, ...]] = {}
            for e in self.entries():
                if e.kind == "irq" and e.root == str(root) and e.state == "done" and e.target_id in held:
                    last[e.target_id] = e.requested
            self._pinned, self._pinned_key = last, key
        return dict(self._pinned)

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
        # Entries first met in this read stay private to it until its end, so a record and its mark
        # make one JournalEntry, not two (building them is a large part of reading a long journal).
        fresh: dict[int, JournalEntry] = {}
        if not self._take_all(chunk, fresh):
            fresh.clear()
            for raw in chunk.split(b"\n")[:-1]:
                self._line_no += 1
                self._parse_line(raw, fresh)
        self._entries.update(fresh)
        self._offset += end + 1

    def _take_all(self, chunk: bytes, fresh: dict[int, JournalEntry]) -> bool:
        """The common case in one msgspec call: every line valid. False (nothing taken) when any line
        is not, or is blank, and the caller goes line by line to skip and name the bad ones."""
        if _has_long_line(chunk):
            return False
        try:
            parsed = _DECODER.decode_lines(chunk)
        except (ValueError, RecursionError):     # msgspec's errors are ValueErrors
            return False
        lines = chunk.count(b"\n")
        if len(parsed) != lines:                 # decode_lines passes over blank lines
            return False
        earlier: list[_Mark] = []       # marks for entries of an earlier read (the window's catch-ups)
        entries = self._entries
        for item in parsed:
            i = item.id
            if type(item) is _Record:
                if i in entries or i in fresh:
                    return False
                fresh[i] = _new_entry(item)
            elif i in fresh:
                _mark_new(fresh[i], item)
            elif i in entries:
                earlier.append(item)
            else:
                return False         # a mark for no entry: the slow path names its line
        for mark in earlier:
            self._apply_mark(mark.id, _mark_fields(mark))
        self._max_id = max(self._max_id, max(fresh, default=0))
        self._line_no += lines
        return True

    def _parse_line(self, raw: bytes, fresh: dict[int, JournalEntry]) -> None:
        if not raw.strip():
            return
        try:
            if len(raw) > MAX_LINE:
                raise _BadLine(f"{len(raw):,} bytes long")
            item = _decode_line(raw)
            if type(item) is _Record:
                if item.id in self._entries or item.id in fresh:
                    raise _BadLine(f"id {item.id} used twice")
                fresh[item.id] = _new_entry(item)
                self._max_id = max(self._max_id, item.id)
            elif item.id in fresh:
                _mark_new(fresh[item.id], item)
            elif item.id in self._entries:
                self._apply_mark(item.id, _mark_fields(item))
            else:
                raise _BadLine("mark for an unknown entry")
        except (ValueError, RecursionError) as e:
            # A torn last line after a crash, a hand edit, or a line someone else wrote: skip it,
            # keep everything else. (msgspec's and json's errors and _BadLine are ValueErrors.)
            why = str(e)[:80] if isinstance(e, (_BadLine, msgspec.ValidationError)) \
                else f"{type(e).__name__}: {str(e)[:80]}"
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
