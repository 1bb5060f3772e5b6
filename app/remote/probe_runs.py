"""RemoteProbeRun: a probe run on the server, a RunningProbe as ProbeRun is (probes/runner.py: `lines`,
`poll()`, `running`, `returncode`, `wait()`, `cancel()`, `failure()`; the lines kept by the same
ProbeLines), so `coremap probe` and the window's ProbeController run it as they run a local one.

The agent starts the same `python -m probes` child there (app/remote/server.py) and streams its JSON
lines as they come; each arrives here checked (`checked_line`): an object of plain JSON values, bounded,
whose histogram buckets are [lo, hi, count] of non-negative integers and whose `*_ns` figures are
non-negative numbers. A line that is not is replaced by a `log` line saying so, never handed on.
When the agent cannot run the probe (no C compiler there, a bad CPU) or the link drops, the run ends
with an `error` line naming the host and why.

What a run keeps is bounded too: a line at most MAX_ITEMS values in one list, a run MAX_RUN_VALUES
values in all (20,000 lying interval lines of 260 KB each took 5.4 GB), and a run that does not end
within its --seconds and PROBE_GRACE_S (or MAX_PROBE_S when it names none) is stopped with an `error`
line, as is one whose agent stops answering (AgentClient.check_alive).
"""
from __future__ import annotations

import math
import subprocess
import threading
import time
from collections.abc import Callable, Iterable

from app.errors import CoremapError
from app.format import printable
from app.remote.client import SILENCE_S, AgentClient
from probes.runner import ProbeLines, ProbeStarter, probe_command

MAX_DEPTH = 6
MAX_TEXT = 64 * 1024
MAX_ITEMS = 1 << 16          # a 100 ms chunk's histogram has ~35 buckets; HDR's whole range (1 ns-1 h) ~33,000
MAX_RUN_VALUES = 8 << 20     # ~350 MB of Python values at worst; two hours of jitter intervals (~110 values each)
MAX_NS = 1 << 62
STDERR_KEPT = 200
CANCEL_WAIT_S = 10.0         # how long a cancel waits for the agent to say its child ended
PROBE_GRACE_S = 120.0        # past its --seconds: building the probe there, its last lines, the link
ALIVE_CHECK_S = 5.0          # how often a wait() with no end in sight asks whether the agent still answers
MAX_PROBE_S = 86400.0        # a probe that names no duration (it ends with its rounds) ends within a day
# Runs started at once on one server (a jitter run's CPUs, probes/spec.py batches): half the streams its
# agent serves at once (app/remote/agent.py MAX_REQUESTS, 32), the rest left for snapshots and commands.
AT_ONCE = 16


class BadLine(ValueError):
    """A probe line from the server that is not what probes write."""


def checked_line(line) -> tuple[dict, int]:
    """(`line`, how many values it holds) when it is a line coremap can use; BadLine otherwise."""
    if not isinstance(line, dict) or not isinstance(line.get("type"), str) or len(line["type"]) > 32:
        raise BadLine("not an object with a type")
    values = _plain(line, 0)
    buckets = line.get("buckets")
    if buckets is not None:
        if not isinstance(buckets, list):
            raise BadLine("buckets is not a list")
        for b in buckets:
            if isinstance(b, dict):
                b = [b.get("lo_ns"), b.get("hi_ns"), b.get("count")]
            if (not isinstance(b, list) or len(b) != 3 or not all(type(x) is int and 0 <= x < MAX_NS for x in b)
                    or b[0] > b[1]):
                raise BadLine("a bucket that is not [lo, hi, count] of non-negative integers")
    for k, v in line.items():
        if k.endswith("_ns") and v is not None and (type(v) not in (int, float) or not 0 <= v < MAX_NS):
            raise BadLine(f"{k} is not a non-negative number")
    return line, values


def _plain(v, depth: int) -> int:
    """How many values `v` holds, once it is checked to be plain and bounded."""
    if depth > MAX_DEPTH:
        raise BadLine("nested too deep")
    t = type(v)
    if t is dict:
        if len(v) > MAX_ITEMS:
            raise BadLine("an object too large")
        n = 1
        for k, x in v.items():
            if len(k) > 64:
                raise BadLine("a key too long")
            n += _plain(x, depth + 1)
        return n
    if t is list:
        if len(v) > MAX_ITEMS:
            raise BadLine("a list too long")
        if all(type(x) is int for x in v):
            if v and not -MAX_NS <= min(v) and max(v) <= MAX_NS:
                raise BadLine("an integer past 62 bits")
            return 1 + len(v)
        return 1 + sum(_plain(x, depth + 1) for x in v)
    elif t is str:
        if len(v) > MAX_TEXT:
            raise BadLine("a string too long")
    elif t is float:
        if not math.isfinite(v):
            raise BadLine("a number that is not finite")
    elif t is int:
        if not -MAX_NS <= v <= MAX_NS:
            raise BadLine("an integer past 62 bits")
    elif v is not None and t is not bool:
        raise BadLine("not a JSON value")
    return 1


class RemoteProbeRun(ProbeLines):
    """One probe on the server; see the module docstring."""

    def __init__(self, client: AgentClient, name: str, args: Iterable = (), *,
                 on_line: Callable[[dict], None] | None = None):
        args = list(map(str, args))
        super().__init__(probe_command(name, args, python="python"), on_line)
        self.host = client.host
        self.pid: int | None = None         # the probe's pid on the server
        self._rc: int | None = None
        self._values = 0                    # values kept so far (MAX_RUN_VALUES)
        self._stopped = ""                  # why this end stopped the run, once it has
        self._deadline = time.monotonic() + _duration(args)
        # Set when the run ends there or is stopped from here (a flood, an overrun): a wait() wakes at once.
        self._wake = threading.Event()
        self._pending = client.start("probe", probe=name, args=args, on_event=self._on_event,
                                     on_done=self._done)

    def _done(self, _pending) -> None:
        self._wake.set()
        self._ended()

    @classmethod
    def starter(cls, client_of: Callable[[], AgentClient | None]) -> ProbeStarter:
        """A ProbeStarter (ProbeRun.start's shape) for the machine `client_of()` connects to."""
        def start(name: str, args: Iterable = (), *, on_line: Callable[[dict], None] | None = None
                  ) -> RemoteProbeRun:
            client = client_of()
            if client is None:
                raise CoremapError("the machine's connection is down (reconnecting); run the probe once "
                                   "the window shows it live again")
            return cls(client, name, args, on_line=on_line)
        return start

    def _on_event(self, ev: dict) -> None:
        if "pid" in ev:
            pid = ev["pid"]
            self.pid = pid if type(pid) is int and 0 < pid < 1 << 32 else None
        if "line" in ev and not self._stopped:
            try:
                line, n = checked_line(ev["line"])
            except BadLine as e:
                line, n = {"type": "log", "text": f"{self.host} sent a probe line coremap cannot use ({e})"}, 1
            self._values += n
            if self._values > MAX_RUN_VALUES:
                self._stop(f"{self.host} sent more probe data than coremap keeps for one run "
                           f"({MAX_RUN_VALUES:,} values); the run was stopped")
                return
            self._add(line)

    def _stop_overrun(self, why: str) -> None:
        self._stop(f"{self.host}: {why}")       # the agent stops the child there (ProbeLines._overran)

    def _stop(self, why: str) -> None:
        """End the run from this side: the agent is asked to stop it, the run ends with `why`."""
        self._stopped = why
        self._add({"type": "error", "message": why})
        self._pending.cancel()
        self._wake.set()

    def _finish(self) -> int:
        """The exit status, once the agent answered (an error becomes an `error` line and status 2)."""
        if self._rc is None and self._stopped:
            self._rc = 2
        if self._rc is None:
            try:
                res = self._pending.wait(0)
            except CoremapError as e:
                self._add({"type": "error", "message": str(e)})
                self._rc = 2
                return self._rc
            rc = res.get("rc") if isinstance(res, dict) else None
            err = res.get("stderr") if isinstance(res, dict) else None
            if isinstance(err, list):
                self.stderr_lines = [printable(str(x))[:500] for x in err[-STDERR_KEPT:]]
            self._rc = rc if type(rc) is int and -255 <= rc <= 255 else 1
        return self._rc

    @property
    def running(self) -> bool:
        return not self._pending.done

    @property
    def returncode(self) -> int | None:
        return self._finish() if self._pending.done else None

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            return self._wait_to_the_end()
        try:
            self._pending.wait(timeout, give_up=False)
        except TimeoutError:
            raise subprocess.TimeoutExpired(self.argv, timeout) from None
        except CoremapError:
            pass        # becomes the run's error line in _finish
        return self._finish()

    def _wait_to_the_end(self) -> int:
        """wait() with no timeout: until the run ends, its deadline passes (it is then stopped), or the
        agent stops answering (the connection is then given up)."""
        client = self._pending.client
        while True:
            if self._stopped:
                return self.cancel()        # stopped from this side (past its time, a flood): no more waiting
            left = self._deadline - time.monotonic()
            if left <= 0:
                self._stop(f"{self.host}: the probe did not end within the {_duration(self.argv):g} s it may "
                           "take; it was stopped")
                return self.cancel()
            if self._pending.done:
                return self._finish()
            if not self._wake.wait(min(left, ALIVE_CHECK_S)) and client.silent_for() >= SILENCE_S:
                client.check_alive("the probe")

    def cancel(self) -> int:
        """Stop the probe on the server (the agent ends its child as a local cancel does)."""
        self._pending.cancel()
        try:
            self._pending.wait(CANCEL_WAIT_S, give_up=False)
        except (TimeoutError, CoremapError):
            pass        # the link is gone or slow: the agent ends the child with the connection
        return self._finish() if self._pending.done else 143

    def error(self) -> str | None:
        return self._stopped or super().error()

    def _message(self, message) -> str:
        """The `error` line's message, printable and naming the host (a CPU there, a compiler there)."""
        message = printable(str(message))[:1000]
        return message if message.startswith(f"{self.host}:") else f"{self.host}: {message}"

    def _where(self, what: str) -> str:
        return f"{what} on {self.host}"


def _duration(argv) -> float:
    """How long a run of these arguments may take: its --seconds and PROBE_GRACE_S, else MAX_PROBE_S."""
    argv = [str(a) for a in argv]
    try:
        seconds = float(argv[argv.index("--seconds") + 1])
    except (ValueError, IndexError):
        return MAX_PROBE_S
    return min(seconds, MAX_PROBE_S) + PROBE_GRACE_S if math.isfinite(seconds) and seconds > 0 else MAX_PROBE_S
