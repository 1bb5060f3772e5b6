"""coremap's own cost, shown in the window's status bar (its share of one CPU since the last look and
its resident memory), and another process's user and memory for the thread tree's tooltip (psutil).

The window looks at itself once per tick, so that look is two syscalls and one small read:
times(2) for the CPU time of every thread, dead ones included, and proc/self/statm for the resident
pages (7 us, against 230 us for psutil's oneshot() in the window's UI thread, measured)."""
from __future__ import annotations

import os
import time

from app.format import format_ns, format_percent, format_size

_PAGE = os.sysconf("SC_PAGE_SIZE")


class OwnUsage:
    """`read()`: (% of one CPU used since the previous read, every thread counted; resident bytes)."""

    def __init__(self):
        self._last = self._cpu_and_clock()

    @staticmethod
    def _cpu_and_clock() -> tuple[float, float]:
        t = os.times()
        return t.user + t.system, time.monotonic()

    def read(self) -> tuple[float, int]:
        (cpu0, t0), (cpu1, t1) = self._last, self._cpu_and_clock()
        self._last = (cpu1, t1)
        pct = 100.0 * (cpu1 - cpu0) / (t1 - t0) if t1 > t0 else 0.0
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        try:
            resident = int(os.read(fd, 256).split()[1]) * _PAGE     # size, resident, ... in pages
        finally:
            os.close(fd)
        return max(pct, 0.0), resident

    def text(self, tick_seconds: float, *, cpu: bool = True) -> str:
        """'coremap 0.8% CPU · 96.5 MiB · tick 12 ms': the status bar's line, after a tick. Without
        `cpu` (a capture, read once: its one look would span the window's start, and stay on screen),
        'coremap · 96.5 MiB · tick 12 ms'."""
        share, rss = self.read()
        used = f" {format_percent(share)} CPU" if cpu else ""
        return f"coremap{used} · {format_size(rss)} · tick {format_ns(tick_seconds * 1e9)}"


def process_facts(pid: int) -> str | None:
    """'user alice · 96.5 MiB resident' for a live process; None when it has exited or may not be
    looked at."""
    # Imported here: psutil reads this machine's /proc/stat when it is imported, which a command on a
    # capture has no business doing (tests/hostile/test_readers.py audits what such commands open).
    import psutil
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            return f"user {p.username()} · {format_size(p.memory_info().rss)} resident"
    except (psutil.Error, KeyError):
        # psutil.Error: the process exited (NoSuchProcess) or is another user's (AccessDenied);
        # KeyError: a uid without a name in the password database.
        return None
