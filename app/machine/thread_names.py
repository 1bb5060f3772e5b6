"""ThreadNames: the full names of threads whose kernel name is cut, as read from verified JVMs.

The kernel keeps 15 bytes of a thread's name (comm, TASK_COMM_LEN 16 with the NUL,
include/linux/sched.h; __set_task_comm cuts at a byte, not a character), so a Java thread called
"market-data-feed-handler-0" shows as "market-data-fee". app/machine/java.py reads the full names
from a JVM it has verified; this value carries them to the window (MachineState.thread_names, which
crosses ssh like the rest of the state), to `coremap threads` and to the one name matcher
(app/machine/threads.py name_matcher). Only threads whose comm is exactly 15 bytes can have been cut,
so only those get a full name.

A capture (`coremap snapshot`) cannot ask a JVM, so the names read when it was taken are stored in it
as data, `.coremap/thread_names.json`: names_document writes it, read_captured_names reads it back
(through the capture's confined reader, decoded to the bounds of _Captured), so a capture's threads
are named as they were on their machine.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

try:
    import msgspec
    from msgspec import Meta
except ImportError:
    # The agent shipped to a server runs on the standard library alone (app/remote/ship.py); it only
    # writes this file (names_document), never reads one.
    msgspec = None

if TYPE_CHECKING:
    from app.sysroot import SysRoot

COMM_LEN = 15
CAPTURED_NAMES = "thread_names.json"     # in a snapshot's .coremap/ folder
_CAPTURED_FORMAT = 1
_MAX_CAPTURED_NAMES = 16 << 20            # bytes: 100,000 names of 150 bytes
_PID_LIMIT = 1 << 22                     # PID_MAX_LIMIT on 64-bit (include/linux/threads.h)
_NAME_LIMIT = 4096                       # a Java thread's name is any string; none real is this long
if msgspec is not None:
    _Id = Annotated[int, Meta(ge=1, le=_PID_LIMIT)]
    _Text = Annotated[str, Meta(max_length=_NAME_LIMIT)]


def is_cut(comm: str) -> bool:
    """Whether a thread's comm may be the start of a longer name: it fills all 15 bytes. A cut through
    a character is read as one U+FFFD standing for its 1-3 bytes (3 bytes encoded)."""
    if len(comm) > COMM_LEN:
        return False
    n = len(comm.encode("utf-8"))
    return n == COMM_LEN or (comm.endswith("\ufffd") and COMM_LEN <= n <= COMM_LEN + 2)


def comm_of(name: str) -> str:
    """The kernel's name (comm) of a thread called `name`, as coremap reads comm (its first 15 bytes,
    decoded with replacement, as app/machine/threads.py and SysRoot decode /proc text)."""
    return name.encode("utf-8")[:COMM_LEN].decode("utf-8", "replace")


@dataclass(frozen=True)
class ThreadNames:
    """Full names by process. A sampler hands out the same object while nothing changed, so the window
    and the wire see an unchanged value by identity."""
    names: dict[int, dict[int, str]] = field(default_factory=dict)   # pid -> {tid: full name}
    unavailable: dict[int, str] = field(default_factory=dict)        # pid -> why its names cannot be read
    read_at: dict[int, float] = field(default_factory=dict)          # pid -> when they were read (epoch s)

    def full_name(self, pid: int, tid: int, comm: str) -> str | None:
        """The full name of thread `tid` of process `pid` whose comm is `comm`, when it is longer than
        comm; None otherwise, and when the name read no longer fits comm (the thread renamed itself,
        or its tid now names another thread)."""
        of = self.names.get(pid)
        name = of.get(tid) if of else None
        if name is None or name == comm or not is_cut(comm) or comm_of(name) != comm:
            return None
        return name

    def name(self, pid: int, tid: int, comm: str) -> str:
        """The one name coremap gives thread `tid` of `pid` wherever a single name is shown (a pin's
        label, so the journal, result lines, the Pins dock, the guard and reports; gap attribution;
        `coremap threads --json`): its full Java name where one was read, else its comm."""
        return self.full_name(pid, tid, comm) or comm

    def note(self, pid: int, comm: str) -> str | None:
        """Why a thread of `pid` called `comm` shows only its kernel name, when that name is cut and
        the JVM's names could not be read; else None."""
        why = self.unavailable.get(pid)
        return why if why and is_cut(comm) else None

    def read_line(self, pid: int) -> str | None:
        """"Java thread names read from the JVM at 13:05:02", or why they could not be; None for a
        process that is not a JVM with cut names."""
        why = self.unavailable.get(pid)
        if why:
            return f"Java thread names cannot be read: {why}"
        at = self.read_at.get(pid)
        if at is None:
            return None
        return f"Java thread names read from the JVM at {time.strftime('%H:%M:%S', time.localtime(at))}"


NO_THREAD_NAMES = ThreadNames()


def shown_thread_name(full: str | None, comm: str) -> str:
    """A thread's name as coremap shows it: the full name, with the kernel's where the two differ
    ("market-data-feed-handler-0 (market-data-fee)"), else comm."""
    return f"{full} ({comm})" if full else comm


def names_document(names: ThreadNames) -> bytes:
    """`names` as a capture stores them (CAPTURED_NAMES; read back by read_captured_names)."""
    doc = {"format": _CAPTURED_FORMAT,
           "names": {str(pid): {str(tid): n for tid, n in sorted(of.items())} for pid, of in sorted(names.names.items())},
           "unavailable": {str(pid): why for pid, why in sorted(names.unavailable.items())},
           "read_at": {str(pid): at for pid, at in sorted(names.read_at.items())}}
    return (json.dumps(doc, indent=None, ensure_ascii=False) + "\n").encode("utf-8")


if msgspec is not None:
    class _Captured(msgspec.Struct, forbid_unknown_fields=True):
        """The one definition of CAPTURED_NAMES's content, with its bounds."""
        format: Literal[1]
        names: dict[_Id, dict[_Id, _Text]]
        unavailable: dict[_Id, _Text] = {}
        read_at: dict[_Id, Annotated[float, Meta(ge=0, le=1e11)]] = {}


def read_captured_names(root: SysRoot) -> ThreadNames:
    """The Java names a capture stored (none for a capture without the file: taken before threads were
    captured, or by another tool). A file that is not what names_document writes is noted on the root
    (main() prints its notes), and its threads show their kernel names."""
    from app.errors import SysRootReadError
    from app.parse.json_text import JsonInputError, decode_json
    from app.sysroot import SNAPSHOT_META_DIR
    path = root.path(SNAPSHOT_META_DIR, CAPTURED_NAMES)
    try:
        text = root.read_optional(path, limit=_MAX_CAPTURED_NAMES)
        if text is None:
            return NO_THREAD_NAMES
        doc = decode_json(text, _Captured, what=str(path), limit=_MAX_CAPTURED_NAMES)
    except (SysRootReadError, JsonInputError) as e:
        root._note(path, f"is not the Java names coremap stores ({str(e)[:120]}); threads show their kernel names")
        return NO_THREAD_NAMES
    return ThreadNames(doc.names, doc.unavailable, doc.read_at)
