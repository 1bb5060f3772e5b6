"""The pin journal: an append-only JSON-lines file, one line fsync'ed before each write it describes.

Every pin is journalled *before* the kernel is asked (state "pending": target, before, requested), and
marked "done" or "failed" after the read-back. A crash or `kill -9` between the two leaves a pending
line, which still counts as a change to restore: the write may have happened. Nothing is ever
rewritten in place, so the worst a crash can do is leave a truncated last line, which is skipped with a
note.

Lines are events (app/pinning/journal_lines.py: what each holds and how it is checked): "record"
starts an entry, "mark" finishes it; "quiet" says what a batch of writes was for (an isolate or
include: which CPUs; its id is the batch id of the writes that follow it), "follow" (a process or a
Java thread name pinned: new threads get the same pin), "policy" (re-apply a pin someone else changed,
or only report it) and "guard" (a pin found changed by someone else, and what was done about it).
Several coremap processes may share the file (the window and a `coremap pin` in a terminal): appends
take an exclusive flock so ids stay unique, and each reader picks up what others appended since its
last read. What the entries add up to (undo and redo, what is quiet, what is left to restore) is
app/pinning/ledger.py's.
"""
from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

from app.errors import CoremapError
from app.inputs import not_private
from app.pinning.journal_lines import (GUARD_ACTIONS, KINDS, MAX_JOURNAL, MAX_TEXT, NAMED_KINDS, QUIET_ACTIONS,
                                       STATES, BadLine, FollowRule, GuardEvent, GuardPolicy, JournalEntry, QuietEvent,
                                       as_cpus, decode_records, read_event)
from app.pinning.kinds import valid_name

__all__ = ["GUARD_ACTIONS", "KINDS", "QUIET_ACTIONS", "STATES", "FollowRule", "GuardEvent", "GuardPolicy",
           "Journal", "JournalEntry", "JournalError", "QuietEvent"]


class JournalError(CoremapError):
    """The journal file cannot be opened or written."""


class _Ids:
    """`in` over the ids a journal has used already (its entries' and its quiet events')."""

    def __init__(self, entries: dict, quiet: dict):
        self._entries, self._quiet = entries, quiet

    def __contains__(self, i) -> bool:
        return i in self._entries or i in self._quiet


class Journal:
    """`Journal(path)`: open (creating) the journal file at `path`. With `readonly`, only read it
    (a missing file is an empty journal; a read-only file or folder is fine): `coremap journal`."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False):
        self.path = Path(path)
        # The writing process and a random part: a batch of a session whose process is gone was cut short
        # (app/pinning/ledger.py session_alive). Not uuid: its import costs every command 3 ms.
        self.session_id = f"{os.getpid()}-{os.urandom(4).hex()}"
        self.notes: list[str] = []         # corrupt lines skipped, for the log/status line
        self._entries: dict[int, JournalEntry] = {}
        self._quiet: dict[int, QuietEvent] = {}
        self._follows: list[FollowRule] = []
        self._policies: dict[int, GuardPolicy] = {}
        self._guard: list[GuardEvent] = []
        self._offset = 0
        self._line_no = 0
        self._max_id = 0
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
        why = not_private(st) and f"the pin journal {self.path}: {not_private(st)}"
        try:
            folder = os.stat(self.path.parent)
        except OSError:
            folder = None
        if not why and folder is not None and not_private(folder):
            why = f"the folder of the pin journal {self.path.parent}: {not_private(folder)}"
        if why:
            self.close()
            raise JournalError(f"{why}; refused, nothing was read or written (use a state folder of your own: "
                               "COREMAP_STATE_DIR, mode 0700)")
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
        if (kind in NAMED_KINDS) != (netdev is not None) or not valid_name(kind, netdev):
            raise ValueError(f"journal {kind} entry with netdev {netdev!r}: rps, xps and wq entries carry a name, "
                             "no other kind does")
        self._writable()
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            new_id = self._max_id + 1
            entry = JournalEntry(
                id=new_id, session=self.session_id, batch=new_id if batch is None else batch,
                origin=origin, root=str(root), kind=kind, target_id=int(target_id), pid=pid,
                label=label[:256], starttime=starttime, before=as_cpus(before),
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
            fields = {"state": state, "after": as_cpus(after), "effective": as_cpus(effective),
                      "code": code[:32], "message": message[:MAX_TEXT]}
            line = {"ev": "mark", "id": entry_id, **fields}
            # No fsync: a mark lost to a power cut leaves the entry "pending", which restore already
            # treats as changed (the conservative reading), and it halves the cost of a pin.
            self._append(line, sync=False)
            self._apply_mark(entry_id, fields)

    def quiet(self, action: str, cpus, root: str = "/", planned: int = 0) -> int:
        """Append an isolate or include of `cpus` that sets out to make `planned` writes (fsync'ed,
        before them); returns its id, which its writes then carry as their batch. A batch that a crash
        cut short is then told by its count (app/pinning/ledger.py: partial)."""
        if action not in QUIET_ACTIONS:
            raise ValueError(f"quiet action {action!r}: expected one of {', '.join(QUIET_ACTIONS)}")
        self._writable()
        with self._locked(fcntl.LOCK_EX):
            self._catch_up()
            ev = QuietEvent(self._max_id + 1, self.session_id, str(root), action, tuple(sorted(set(cpus))),
                            time.time(), int(planned))
            self._append({"ev": "quiet", "id": ev.id, "session": ev.session, "root": ev.root,
                          "action": ev.action, "cpus": list(ev.cpus), "time": ev.time, "planned": ev.planned})
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
                             "action": ev.action, "count": ev.count, "message": ev.message[:MAX_TEXT],
                             "since": ev.since}, sync=False)
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
        taken = decode_records(chunk, _Ids(self._entries, self._quiet))
        if taken is not None:
            fresh, earlier, lines = taken
            self._entries.update(fresh)
            for entry_id, fields in earlier:
                self._apply_mark(entry_id, fields)
            self._max_id = max(self._max_id, max(fresh, default=0))
            self._line_no += lines
        else:
            for raw in chunk.split(b"\n")[:-1]:
                self._line_no += 1
                self._take_line(raw)
        self._offset += end + 1

    def _take_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            ev, value = read_event(raw)
            if ev in ("record", "quiet"):
                if value.id in self._entries or value.id in self._quiet:
                    raise BadLine(f"id {value.id} used twice")
                (self._entries if ev == "record" else self._quiet)[value.id] = value
                self._max_id = max(self._max_id, value.id)
            elif ev == "mark":
                entry_id, fields = value
                if entry_id not in self._entries:
                    raise BadLine("mark for an unknown entry")
                self._apply_mark(entry_id, fields)
            elif ev == "follow":
                self._follows.append(value)
            elif ev == "policy":
                self._policies[value.batch] = value
            else:
                self._guard.append(value)
        except (ValueError, RecursionError) as e:
            # A torn last line after a crash, a hand edit, or a line someone else wrote: skip it,
            # keep everything else. (json's errors and the checks' are ValueErrors.)
            why = str(e)[:80] if isinstance(e, BadLine) else f"{type(e).__name__}: {str(e)[:80]}"
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
