"""Waiting for a `coremap` window started as a child process to be up: the event itself, never a fixed
sleep (issue 31: fixed sleeps of 1-6 s around window processes cost 27 s a run and were still too short on
a busy machine)."""
from __future__ import annotations

import contextlib
import subprocess
import sys
import time


def main_thread_ticks(pid: int) -> int:
    """The main thread's user + system time in clock ticks (proc(5): stat fields 14 and 15)."""
    with open(f"/proc/{pid}/task/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def settle(proc: subprocess.Popen, quiet_s: float = 1.0, limit_s: float = 120.0, poll_s: float = 0.05) -> None:
    """Wait until the window's main thread used no CPU for `quiet_s` (first state painted, docks laid
    out, the signal handlers in place), however long a busy machine takes it to get there. Looked at
    every `poll_s`, so it returns `quiet_s` after the last tick the thread used, not up to twice that
    (a look every `quiet_s` saw a stretch that began just after a look only at the look after next)."""
    settle_all([proc], quiet_s, limit_s, poll_s)


def settle_all(procs: list[subprocess.Popen], quiet_s: float = 1.0, limit_s: float = 120.0,
               poll_s: float = 0.05) -> None:
    """settle() for windows started together: each is watched until it is quiet, in the same pass, so
    their starts and quiet stretches overlap instead of adding up (one that ended is done)."""
    end = time.monotonic() + limit_s
    last = {p.pid: main_thread_ticks(p.pid) for p in procs}
    quiet_since = dict.fromkeys(last, time.monotonic())
    waiting = list(procs)
    while waiting and time.monotonic() < end:
        time.sleep(poll_s)
        for p in list(waiting):
            if p.poll() is not None:
                waiting.remove(p)
                continue
            now = main_thread_ticks(p.pid)
            if now != last[p.pid]:
                last[p.pid], quiet_since[p.pid] = now, time.monotonic()
            elif time.monotonic() - quiet_since[p.pid] >= quiet_s:
                waiting.remove(p)


def started(argv: list[str], limit_s: float = 30.0) -> subprocess.Popen:
    """`argv` started, once it runs its own program: Popen returns after the fork, and until the exec the
    child is a copy of the test, named "python" (a test that named it "sleep" failed on a fresh clone)."""
    proc = subprocess.Popen(argv)
    name = argv[0].rsplit("/", 1)[-1][:15]           # the kernel keeps 15 bytes of a name (TASK_COMM_LEN)
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            with open(f"/proc/{proc.pid}/comm") as f:
                if f.read().strip() == name:
                    return proc
        except FileNotFoundError:
            break                                     # it exited already: the caller's test says so
        time.sleep(0.002)
    return proc


@contextlib.contextmanager
def zombie():
    """(parent pid, zombie pid): a child that has exited and that its parent, alive, never reaps; both are
    gone when the block ends. Yielded once the child is a zombie (it may not be yet when its pid is printed)."""
    from tests.jvms import wait_until
    parent = subprocess.Popen([sys.executable, "-c",
                               "import os, time\npid = os.fork()\nif pid == 0: os._exit(0)\n"
                               "print(pid, flush=True)\ntime.sleep(30)\n"], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        wait_until(lambda: open(f"/proc/{child}/stat").read().split(") ")[1][0] == "Z", what="the zombie")
        yield parent.pid, child
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
