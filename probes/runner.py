"""ProbeRun: start `python -m probes NAME ...` as its own process (its own process group), read its
JSON lines on a reader thread, and hand them out without blocking the caller. Qt-free: the CLI
waits on it, the window polls it from a timer.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from app.format import probe_exit_sentence

TERM_GRACE_S = 0.2
PARENT_ENV = "COREMAP_PROBE_PARENT"
_ROOT = str(Path(__file__).resolve().parents[1])


def probe_command(name: str, args: list[str] | tuple = ()) -> list[str]:
    return [sys.executable, "-m", "probes", name, *map(str, args)]


class ProbeRun:
    """One probe process.

    `poll()` returns the lines that arrived since the last call; `on_line(dict)` (optional) is called
    on the reader thread for each line as it arrives. A line that is not JSON becomes
    {"type": "log", "text": ...}. Lines from stderr are kept in `stderr_lines` (the last 200).
    """

    def __init__(self, argv: list[str], *, on_line=None, env: dict | None = None):
        self.argv = list(argv)
        self.on_line = on_line
        self.lines: list[dict] = []
        self.stderr_lines: list[str] = []
        self._q: queue.Queue = queue.Queue()
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
    def start(cls, name: str, args=(), **kw) -> "ProbeRun":
        return cls(probe_command(name, args), **kw)

    def _read_stdout(self):
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            if not text:
                continue
            try:
                line = json.loads(text)
                if not isinstance(line, dict):
                    line = {"type": "log", "text": text}
            except ValueError:
                line = {"type": "log", "text": text}
            self.lines.append(line)
            self._q.put(line)
            if self.on_line is not None:
                self.on_line(line)
        self.proc.stdout.close()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            self.stderr_lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
            del self.stderr_lines[:-200]
        self.proc.stderr.close()

    def poll(self) -> list[dict]:
        out = []
        while True:
            try:
                out.append(self._q.get_nowait())
            except queue.Empty:
                return out

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to exit and for its last line to be read; returns its exit status."""
        rc = self.proc.wait(timeout)
        self._out.join(timeout if timeout is not None else None)
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

    def error(self) -> str | None:
        """The message of the run's `error` line, if it sent one."""
        for l in self.lines:
            if l.get("type") == "error":
                return l.get("message")
        return None

    def failure(self, what: str) -> str | None:
        """Why the run failed, once it has exited: its `error` line, else (a child that died without
        one) `what`, its exit status and its last stderr lines; None when it succeeded."""
        message = self.error()
        return message if message is not None else probe_exit_sentence(what, self.returncode, self.stderr_lines)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.running:
            self.cancel()
        return False


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
