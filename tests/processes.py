"""Waiting for a `coremap` window started as a child process to be up: the event itself, never a fixed
sleep (issue 31: fixed sleeps of 1-6 s around window processes cost 27 s a run and were still too short on
a busy machine)."""
from __future__ import annotations

import subprocess
import time


def main_thread_ticks(pid: int) -> int:
    """The main thread's user + system time in clock ticks (proc(5): stat fields 14 and 15)."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def settle(proc: subprocess.Popen, quiet_s: float = 1.0, limit_s: float = 120.0) -> None:
    """Wait until the window's main thread used no CPU for `quiet_s` (first state painted, docks laid
    out, the signal handlers in place), however long a busy machine takes it to get there."""
    end = time.monotonic() + limit_s
    last = main_thread_ticks(proc.pid)
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(quiet_s)
        now = main_thread_ticks(proc.pid)
        if now == last:
            return
        last = now
