"""RemoteProbeRun: a probe run on the server, a RunningProbe as ProbeRun is (probes/runner.py: `lines`,
`poll()`, `running`, `returncode`, `wait()`, `cancel()`, `failure()`; the lines kept by the same
ProbeLines), so `coremap probe` and the window's ProbeController run it as they run a local one.

The agent starts the same `python -m probes` child there (app/remote/server.py) and streams its JSON
lines as they come; each arrives here checked (`check_line`): an object of plain JSON values, bounded,
whose histogram buckets are [lo, hi, count] of non-negative integers and whose `*_ns` figures are
non-negative numbers. A line that is not is replaced by a `log` line saying so, never handed on.
When the agent cannot run the probe (no C compiler there, a bad CPU) or the link drops, the run ends
with an `error` line naming the host and why.
"""
from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Iterable

from app.errors import CoremapError
from app.format import printable
from app.remote.client import AgentClient
from probes.runner import ProbeLines, ProbeStarter, probe_command

MAX_DEPTH = 6
MAX_TEXT = 64 * 1024
MAX_ITEMS = 1 << 20
MAX_NS = 1 << 62
STDERR_KEPT = 200


class BadLine(ValueError):
    """A probe line from the server that is not what probes write."""


def check_line(line) -> dict:
    """`line` when it is a probe protocol line coremap can use (see the module docstring)."""
    if not isinstance(line, dict) or not isinstance(line.get("type"), str) or len(line["type"]) > 32:
        raise BadLine("not an object with a type")
    _plain(line, 0)
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
    return line


def _plain(v, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise BadLine("nested too deep")
    t = type(v)
    if t is dict:
        if len(v) > MAX_ITEMS:
            raise BadLine("an object too large")
        for k, x in v.items():
            if len(k) > 64:
                raise BadLine("a key too long")
            _plain(x, depth + 1)
    elif t is list:
        if len(v) > MAX_ITEMS:
            raise BadLine("a list too long")
        if all(type(x) is int for x in v):
            if v and not -MAX_NS <= min(v) and max(v) <= MAX_NS:
                raise BadLine("an integer past 62 bits")
            return
        for x in v:
            _plain(x, depth + 1)
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


class RemoteProbeRun(ProbeLines):
    """One probe on the server; see the module docstring."""

    def __init__(self, client: AgentClient, name: str, args: Iterable = (), *,
                 on_line: Callable[[dict], None] | None = None):
        args = list(map(str, args))
        super().__init__(probe_command(name, args, python="python"), on_line)
        self.host = client.host
        self.pid: int | None = None         # the probe's pid on the server
        self._rc: int | None = None
        self._pending = client.start("probe", probe=name, args=args, on_event=self._on_event)

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
        if "line" in ev:
            try:
                line = check_line(ev["line"])
            except BadLine as e:
                line = {"type": "log", "text": f"{self.host} sent a probe line coremap cannot use ({e})"}
            self._add(line)

    def _finish(self) -> int:
        """The exit status, once the agent answered (an error becomes an `error` line and status 2)."""
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
        try:
            self._pending.wait(timeout, give_up=False)
        except TimeoutError:
            raise subprocess.TimeoutExpired(self.argv, timeout) from None
        except CoremapError:
            pass        # becomes the run's error line in _finish
        return self._finish()

    def cancel(self) -> int:
        """Stop the probe on the server (the agent ends its child as a local cancel does)."""
        self._pending.cancel()
        try:
            self._pending.wait(10.0, give_up=False)
        except (TimeoutError, CoremapError):
            pass        # the link is gone or slow: the agent ends the child with the connection
        return self._finish() if self._pending.done else 143

    def _message(self, message) -> str:
        """The `error` line's message, printable and naming the host (a CPU there, a compiler there)."""
        message = printable(str(message))[:1000]
        return message if message.startswith(f"{self.host}:") else f"{self.host}: {message}"

    def _where(self, what: str) -> str:
        return f"{what} on {self.host}"
