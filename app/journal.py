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
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from app.errors import CoremapError

STATES = ("pending", "done", "failed")


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


class Journal:
    """`Journal(path)`: open (creating) the journal file at `path`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.session_id = uuid.uuid4().hex[:12]
        self.notes: list[str] = []         # corrupt lines skipped, for the log/status line
        self._entries: dict[int, JournalEntry] = {}
        self._offset = 0
        self._line_no = 0
        self._max_id = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise JournalError(f"{self.path}: cannot open the pin journal ({e.strerror}); "
                               "set COREMAP_STATE_DIR to a folder you may write") from None
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
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            new_id = self._max_id + 1
            entry = JournalEntry(
                id=new_id, session=self.session_id, batch=new_id if batch is None else batch,
                origin=origin, root=str(root), kind=kind, target_id=int(target_id), pid=pid,
                label=label, starttime=starttime, before=_tuple(before),
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
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            if entry_id not in self._entries:
                raise JournalError(f"{self.path}: no journal entry {entry_id} to mark")
            line = {"ev": "mark", "id": entry_id, "state": state, "after": _tuple(after),
                    "effective": _tuple(effective), "code": code, "message": message}
            # No fsync: a mark lost to a power cut leaves the entry "pending", which restore already
            # treats as changed (the conservative reading), and it halves the cost of a pin.
            self._append(line, sync=False)
            self._apply_mark(line)

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

    def _catch_up(self) -> None:
        size = os.fstat(self._fd).st_size
        if size <= self._offset:
            return
        data = os.pread(self._fd, size - self._offset, self._offset)
        # Only whole lines: a line still being written (or torn by a crash) stays for later.
        end = data.rfind(b"\n")
        if end < 0:
            return
        for raw in data[: end + 1].split(b"\n")[:-1]:
            self._line_no += 1
            self._parse_line(raw)
        self._offset += end + 1

    def _parse_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            obj = json.loads(raw)
            if obj["ev"] == "record":
                e = JournalEntry(
                    id=int(obj["id"]), session=str(obj["session"]), batch=int(obj["batch"]),
                    origin=str(obj["origin"]), root=str(obj["root"]), kind=str(obj["kind"]),
                    target_id=int(obj["target"]), pid=obj["pid"], label=str(obj["label"]),
                    starttime=obj["starttime"], before=_tuple(obj["before"]),
                    requested=_tuple(obj["requested"]), time=float(obj["time"]))
                self._entries[e.id] = e
                self._max_id = max(self._max_id, e.id)
            elif obj["ev"] == "mark":
                if int(obj["id"]) not in self._entries:
                    raise KeyError("mark for an unknown entry")
                self._apply_mark(obj)
            else:
                raise KeyError(f"unknown event {obj['ev']!r}")
        except (ValueError, KeyError, TypeError) as e:
            # A torn last line after a crash, or a hand edit: skip it, keep everything else.
            self.notes.append(f"{self.path}: line {self._line_no} skipped ({type(e).__name__}: "
                              f"{str(e)[:80]})")

    def _apply_mark(self, obj: dict) -> None:
        entry_id = int(obj["id"])
        state = str(obj["state"])
        if state not in STATES:
            raise ValueError(f"state {state!r}")
        self._entries[entry_id] = replace(
            self._entries[entry_id], state=state, after=_tuple(obj.get("after")),
            effective=_tuple(obj.get("effective")), code=str(obj.get("code", "")),
            message=str(obj.get("message", "")))

    def _locked(self, how: int):
        return _Flock(self._fd, how)


class _Flock:
    def __init__(self, fd: int, how: int):
        self.fd, self.how = fd, how

    def __enter__(self):
        fcntl.flock(self.fd, self.how)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
