"""coremap's own cost, shown in the window's status bar: its share of one CPU since the last look and
its resident memory. psutil is the better tool here (one `oneshot()` reads /proc/self/stat and statm,
30 µs a look, measured), and the window looks once per tick."""
from __future__ import annotations

import psutil

from app.format import format_ns, format_percent, format_size


class OwnUsage:
    """`read()`: (% of one CPU used since the previous read, every thread counted; resident bytes)."""

    def __init__(self):
        self._process = psutil.Process()
        self._process.cpu_percent(None)       # the first call only starts psutil's clock

    def read(self) -> tuple[float, int]:
        with self._process.oneshot():
            return self._process.cpu_percent(None), self._process.memory_info().rss

    def text(self, tick_seconds: float) -> str:
        """'coremap 0.8% CPU · 96.5 MiB · tick 12 ms': the status bar's line, after a tick."""
        cpu, rss = self.read()
        return f"coremap {format_percent(cpu)} CPU · {format_size(rss)} · tick {format_ns(tick_seconds * 1e9)}"


def process_facts(pid: int) -> str | None:
    """'user alice · 96.5 MiB resident' for a live process; None when it has exited or may not be
    looked at."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            return f"user {p.username()} · {format_size(p.memory_info().rss)} resident"
    except (psutil.Error, KeyError):
        # psutil.Error: the process exited (NoSuchProcess) or is another user's (AccessDenied);
        # KeyError: a uid without a name in the password database.
        return None
