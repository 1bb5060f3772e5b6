"""ThreadNames: the full names of threads whose kernel name is cut, as read from verified JVMs.

The kernel keeps 15 bytes of a thread's name (comm, TASK_COMM_LEN 16 with the NUL,
include/linux/sched.h; __set_task_comm cuts at a byte, not a character), so a Java thread called
"market-data-feed-handler-0" shows as "market-data-fee". app/machine/java.py reads the full names
from a JVM it has verified; this value carries them to the window (MachineState.thread_names, which
crosses ssh like the rest of the state), to `coremap threads` and to the one name matcher
(app/machine/threads.py name_matcher). Only threads whose comm is exactly 15 bytes can have been cut,
so only those get a full name.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

COMM_LEN = 15


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
