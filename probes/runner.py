"""ProbeRun: start `python -m probes NAME ...` as its own process (its own process group), read its
JSON lines on a reader thread, and hand them out without blocking the caller. Qt-free: the CLI
waits on it, the window polls it from a timer.

A probe may also run on another machine (app/remote/probe_runs.py RemoteProbeRun): both are a
`RunningProbe`, the Protocol the window and the CLI hold a run by, and both keep their lines in
`ProbeLines`, so there is one poll loop and one reading of a run's `error` line.
"""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from app.format import probe_exit_sentence
from app.inputs import MiB
from app.parse.json_text import JsonInputError, load_json
from probes import PARENT_ENV

TERM_GRACE_S = 0.2
# A probe whose hello says how long it will run (`expect_s`) and that still runs this long after that, and a
# tenth more, is stopped with an `error` line: a probe that never ends is said within 15 s of its time
# (issue 32), here and on a server (app/remote/probe_runs.py), in the window and the CLI alike.
OVERRUN_GRACE_S = 15.0
MAX_EXPECT_S = 7 * 86400.0
EXIT_AFTER_EOF_S = 1.0       # a child whose output ended and that still runs after this keeps its watch
MAX_LINE = 64 * MiB          # as a remote run's (app/remote/protocol.py): a line with a whole histogram
MAX_LOG_TEXT = 4096          # of a line that is not JSON, kept as a log line
_ROOT = str(Path(__file__).resolve().parents[1])


def probe_command(name: str, args: Iterable = (), python: str = sys.executable) -> list[str]:
    return [python, "-m", "probes", name, *map(str, args)]


class RunningProbe(Protocol):
    """A probe run as the window (widgets/probe/controller.py) and the CLI (app/cli/probe.py) hold it,
    wherever the probe runs: ProbeRun here, RemoteProbeRun on a machine over ssh."""

    argv: list[str]
    lines: list[dict]               # every line so far, in order
    stderr_lines: list[str]         # the child's last stderr lines

    @property
    def pid(self) -> int | None: ...

    @property
    def running(self) -> bool: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> list[dict]:
        """The lines that arrived since the last call; never blocks."""

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, once the run ended and its last line is in; subprocess.TimeoutExpired after
        `timeout` seconds."""

    def cancel(self) -> int:
        """Stop the run now; its exit status."""

    def error(self) -> str | None:
        """The message of the run's `error` line, if it sent one."""

    def failure(self, what: str) -> str | None:
        """Why the run failed, once it has ended, in one sentence about `what`; None when it succeeded."""

    def __enter__(self) -> RunningProbe: ...

    def __exit__(self, *exc) -> bool: ...


class ProbeStarter(Protocol):
    """What starts a job's run: ProbeRun.start here, RemoteProbeRun.starter(...) for another machine."""

    def __call__(self, name: str, args: Iterable = (), *, on_line: Callable[[dict], None] | None = None
                 ) -> RunningProbe: ...


class ProbeLines(ABC):
    """What every RunningProbe keeps of its lines, wherever the probe runs: `lines`, the ones `poll()`
    has not handed out yet, `on_line(dict)` (optional) called for each as it arrives (on the thread
    that received it), and the run's `error` line. Subclasses add the lines with `_add` and say how
    the run ends (`running`, `returncode`, `wait`, `cancel`)."""

    def __init__(self, argv: list[str], on_line: Callable[[dict], None] | None):
        self.argv = list(argv)
        self.on_line = on_line
        self.lines: list[dict] = []
        self.stderr_lines: list[str] = []
        self._q: queue.Queue = queue.Queue()
        self._overrun_watch: threading.Timer | None = None

    @property
    @abstractmethod
    def running(self) -> bool: ...

    @property
    @abstractmethod
    def returncode(self) -> int | None: ...

    @abstractmethod
    def wait(self, timeout: float | None = None) -> int: ...

    @abstractmethod
    def cancel(self) -> int: ...

    def _add(self, line: dict) -> None:
        self.lines.append(line)
        self._q.put(line)
        if self.on_line is not None:
            self.on_line(line)
        if line.get("type") == "hello":
            self._watch_overrun(line.get("expect_s"))

    def _watch_overrun(self, expect) -> None:
        """Stop the run when it outlives the time its hello said it takes (OVERRUN_GRACE_S)."""
        if type(expect) not in (int, float) or not 0 < expect <= MAX_EXPECT_S:
            return          # a probe that cannot know (a command counted, a JVM started): no deadline
        allowed = expect * 1.1 + OVERRUN_GRACE_S
        timer = threading.Timer(allowed, self._overran, (expect, allowed))
        timer.daemon = True
        timer.start()
        self._overrun_watch = timer

    def _ended(self) -> None:
        """The run is over: its overrun watch goes now, not the rest of its allowed time later. Started
        on the thread that read the hello, the watch's thread kept that thread's mask (coremap's own
        threads are kept off the probed CPUs while a run lasts) and outlived the run by seconds."""
        if self._overrun_watch is not None:
            self._overrun_watch.cancel()

    def _overran(self, expect: float, allowed: float) -> None:
        if self.running:
            self._stop_overrun(f"the probe did not end within {allowed:.0f} s (it said it takes {expect:g} s); "
                               "it was stopped: check what else runs on its CPU, or that it is not stopped "
                               "(SIGSTOP, a debugger)")

    def _stop_overrun(self, why: str) -> None:
        """End the run from this side with `why` as its `error` line."""
        self._add({"type": "error", "message": why})
        self.cancel()

    def poll(self) -> list[dict]:
        out = []
        while True:
            try:
                out.append(self._q.get_nowait())
            except queue.Empty:
                return out

    def error(self) -> str | None:
        for line in self.lines:
            if line.get("type") == "error":
                return self._message(line.get("message"))
        return None

    def _message(self, message) -> str | None:
        """An `error` line's message as error() gives it."""
        return message

    def failure(self, what: str) -> str | None:
        """Why the run failed, once it has exited: its `error` line, else (a child that died without
        one) `what`, its exit status and its last stderr lines; None when it succeeded."""
        message = self.error()
        return message if message is not None else probe_exit_sentence(self._where(what), self.returncode,
                                                                       self.stderr_lines)

    def _where(self, what: str) -> str:
        """`what` as the exit sentence names it (a run on another machine says which)."""
        return what

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.running:
            self.cancel()
        return False


class ProbeRun(ProbeLines):
    """One probe process, here. A line that is not JSON becomes {"type": "log", "text": ...}. Lines from
    stderr are kept in `stderr_lines` (the last 200)."""

    def __init__(self, argv: list[str], *, on_line: Callable[[dict], None] | None = None, env: dict | None = None):
        super().__init__(argv, on_line)
        e = dict(os.environ if env is None else env)
        # the child imports `probes` and `app` from this checkout whether or not coremap is installed
        e["PYTHONPATH"] = _ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        e["PYTHONUNBUFFERED"] = "1"
        # The child asks the kernel to kill it when we die (probes/__main__.py, PR_SET_PDEATHSIG) and
        # checks that we are still its parent, so no probe outlives a CLI or window killed by
        # SIGTERM, SIGHUP or SIGKILL. Note: the death signal follows the *thread* that started the
        # child; runs are started from the main (UI) thread, which lives as long as the process.
        e[PARENT_ENV] = str(os.getpid())
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=e, start_new_session=True)
        self.pid = self.proc.pid
        self._out = threading.Thread(target=self._read_stdout, name=f"probe-{self.pid}-out", daemon=True)
        self._err = threading.Thread(target=self._read_stderr, name=f"probe-{self.pid}-err", daemon=True)
        self._out.start()
        self._err.start()

    @classmethod
    def start(cls, name: str, args: Iterable = (), *, on_line: Callable[[dict], None] | None = None,
              env: dict | None = None) -> ProbeRun:
        return cls(probe_command(name, args), on_line=on_line, env=env)

    def _read_stdout(self):
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            if not text:
                continue
            try:
                line = load_json(text, what="the probe", limit=MAX_LINE)
                if not isinstance(line, dict):
                    line = {"type": "log", "text": text}
            except JsonInputError:
                line = {"type": "log", "text": text[:MAX_LOG_TEXT]}
            self._add(line)
        self.proc.stdout.close()
        try:
            self.proc.wait(EXIT_AFTER_EOF_S)     # the child closes its output as it exits
            self._ended()
        except subprocess.TimeoutExpired:
            pass                                # still running: the overrun watch stays on it

    def _read_stderr(self):
        for raw in self.proc.stderr:
            self.stderr_lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
            del self.stderr_lines[:-200]
        self.proc.stderr.close()

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to exit and for its last line to be read; returns its exit status. The
        reader ends as the child's stdout closes at its exit: Popen.wait(timeout) polls, up to 50 ms late."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._out.join(timeout)
        rc = self.proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._err.join(1.0)
        return rc

    def cancel(self) -> int:
        """Stop the probe now: SIGTERM to its process group, SIGKILL after TERM_GRACE_S, then reap."""
        if self.proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.proc.wait()
        else:
            # the leader is gone; children it left in the group (a counted command) still go
            self._signal_group(signal.SIGKILL)
        self._out.join(1.0)
        self._err.join(1.0)
        return self.proc.returncode

    def _signal_group(self, sig):
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            # the group emptied between our check and the kill: nothing left to stop
            pass


def run_to_end(name: str, args=(), *, timeout: float | None = None, on_line=None) -> tuple[int, list[dict], ProbeRun]:
    """Start a probe, wait for it, return (exit status, all its lines, the run)."""
    run = ProbeRun.start(name, args, on_line=on_line)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        rc = run.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        run.cancel()
        raise
    except KeyboardInterrupt:
        run.cancel()
        raise
    return rc, run.lines, run
