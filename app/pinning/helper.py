"""coremap-helper: the only code that runs with privilege, and it does only the writes of the pin flow.

Reads ONE JSON request per line on stdin, writes one JSON reply per line on stdout:
{"op": "hello"} -> {"ok": true, "version": N}, and the requests of app/pinning/helper_ops.py (a thread's
or an IRQ's affinity, a mask, a setting, coremap's cpusets and what is in them, a systemd unit's
AllowedCPUs=, irqbalance's banned CPUs), each with its keys and nothing else.

Everything else is refused with {"ok": false, "error": "..."} and nothing is written: what is outside a
request's typed definition (app/pinning/helper_ops.py: unknown ops or keys, non-integers (JSON true is
not 1), numbers out of range (tid 1..4194304 = PID_MAX_LIMIT on 64-bit, include/linux/threads.h; irq
0..65535)), CPU lists that do not parse or name offline CPUs, targets that do not exist, lines over
4096 bytes. It never takes a path, and takes no command-line arguments: the
root is always "/", so `pkexec coremap-helper` cannot be pointed at a folder of symlinks.
Kernel errors come back as {"ok": false, "error": "...", "errno": "EPERM"} so the client can classify
them exactly as a direct write's.

`HelperClient` starts it with pkexec (polkit action org.coremap.helper, resources/) or `sudo -n` and
keeps it open for the session.
"""
from __future__ import annotations

import errno
import json
import os
from typing import Union
import shutil
import subprocess
import sys
from pathlib import Path

from app.parse.cpulist import format_cpulist
from app.parse.json_text import JsonInputError, decode_json
from app.pinning.refusals import PinWriteError
from app.sysroot import SysRoot

VERSION = 2             # new ops only add to the protocol: an older helper refuses them as unknown
MAX_LINE = 4096


class Helper:
    """The request handler, separate from stdin/stdout so tests can run it against a fixture root."""

    def __init__(self, root: SysRoot):
        # Imported here: the requests' definitions need msgspec, which the Python of a server running
        # only the shipped agent lacks; the agent loads this module for HelperClient alone.
        from app.pinning import helper_ops, trace_op
        self.root = root
        self._ops = helper_ops
        self._handlers = {**helper_ops.OPS, **trace_op.OPS}     # trace_op: gap attribution's tracing (issue 22)
        # every request the helper takes, told apart by "op"
        self._request = Union[(helper_ops.Hello, *self._handlers)]

    def handle(self, line: bytes | str) -> dict:
        try:
            return self._handle(line)
        except self._ops.Refused as e:
            return {"ok": False, "error": str(e)}

    def _handle(self, line) -> dict:
        raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
        if len(raw) > MAX_LINE:
            raise self._ops.Refused(f"request longer than {MAX_LINE} bytes")
        try:
            req = decode_json(raw, self._request, what="request", limit=MAX_LINE)
        except JsonInputError as e:
            raise self._ops.Refused(str(e)) from None
        if type(req) is self._ops.Hello:
            return {"ok": True, "version": VERSION}
        return self._handlers[type(req)](self.root, req)


def serve(root: SysRoot, stdin, stdout) -> None:
    """Answer requests from binary `stdin` until EOF, one reply line per request line."""
    helper = Helper(root)
    while True:
        line = stdin.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            # Over-long: discard the rest of the line unread into memory, then refuse it once.
            while True:
                chunk = stdin.readline(MAX_LINE)
                if not chunk or chunk.endswith(b"\n"):
                    break
            reply = {"ok": False, "error": f"request longer than {MAX_LINE} bytes"}
        else:
            reply = helper.handle(line.rstrip(b"\n"))
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        print("coremap-helper takes no arguments; it reads JSON requests on stdin", file=sys.stderr)
        return 2
    if not sys.flags.isolated:
        # Started as the installed `coremap-helper` script or `python -m app.pinning.helper`: Python read
        # PYTHONPATH, PYTHONSTARTUP, PYTHONINSPECT (which would read stdin as code after serve()) and the
        # user's site folder. Start again isolated, in a scrubbed environment, before any request is read.
        os.execve(isolated_command()[0], isolated_command(), SAFE_ENV)
    try:
        serve(SysRoot("/"), sys.stdin.buffer, sys.stdout)
    except ModuleNotFoundError as e:
        print(f"coremap-helper: this Python has no {e.name} (a server running coremap's shipped agent); "
              "install coremap there (pip install coremap) to make privileged changes", file=sys.stderr)
        return 1
    return 0


# What the helper runs with, whoever starts it: no PYTHON* or LD_* variable, no locale or path of the
# caller's (issue 24: a planted app/helper.py on PYTHONPATH was imported, and LD_PRELOAD loaded, with
# privilege).
SAFE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def isolated_command() -> list[str]:
    """This Python (by absolute path), isolated (-I: no PYTHON* variables, no current folder or user
    site folder on sys.path), running the helper from the folder this very file was loaded from."""
    here = str(Path(__file__).resolve().parent.parent.parent)
    return [os.path.abspath(sys.executable), "-I", "-c",
            f"import sys; sys.path.insert(0, {here!r}); from app.pinning.helper import main; sys.exit(main())"]


# -- client -----------------------------------------------------------------------------------------
class HelperClient:
    """Talks to a coremap-helper started once per session. Used by AffinityService as its `writer`
    when a direct write is denied.

    Methods raise OSError (with the kernel's errno) when the helper's write failed, and
    PinWriteError when the helper refused or could not be started.
    """

    def __init__(self, command: list[str] | None = None, *, refused: str | None = None):
        self.command = command or default_command()
        self._proc: subprocess.Popen | None = None
        # What to say when the helper stops at once: sudo -n wanted a password, pkexec was refused.
        self.refused = refused or (
            "`sudo -n` would not start coremap's helper (sudo wants a password, and coremap never asks "
            "for one); allow it with a NOPASSWD sudoers rule for coremap-helper, or run coremap as root"
            if self.command[:2] == ["sudo", "-n"] else
            "authorisation refused or cancelled; allow org.coremap.helper or run coremap with sudo")

    def _start(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        try:
            # A scrubbed environment and "/" as the folder: nothing of the caller's reaches the helper
            # (pkexec and sudo scrub too, but a helper started directly by root would inherit it all).
            self._proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/", env=dict(SAFE_ENV),
                text=True, bufsize=1)
        except OSError as e:
            raise PinWriteError(f"cannot start the helper `{' '.join(self.command)}` ({e.strerror}); "
                                "install polkit's pkexec or sudo") from None
        return self._proc

    def request(self, obj: dict) -> dict:
        proc = self._start()
        try:
            proc.stdin.write(json.dumps(obj) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = proc.poll()
            self._proc = None
            raise PinWriteError(f"the helper stopped (exit status {code}): {self.refused}")
        return json.loads(line)

    def hello(self) -> int:
        return int(self.request({"op": "hello"})["version"])

    def set_thread_affinity(self, tid: int, cpus) -> None:
        self._check(self.request({"op": "set_thread_affinity", "tid": int(tid), "cpus": format_cpulist(cpus)}))

    def set_irq_affinity(self, irq: int, cpus) -> None:
        self._check(self.request({"op": "set_irq_affinity", "irq": int(irq), "cpus": format_cpulist(cpus)}))

    def set_mask(self, kind: str, queue: int, netdev: str | None, cpus) -> None:
        self._check(self.request({"op": "set_mask", "kind": kind, "netdev": netdev, "queue": int(queue),
                                  "cpus": format_cpulist(cpus)}))

    def set_setting(self, kind: str, ident: int, value) -> None:
        self._check(self.request({"op": "set_setting", "kind": kind, "id": int(ident), "value": [int(v) for v in value]}))

    def set_cpuset(self, index: int, cpus) -> None:
        self._check(self.request({"op": "set_cpuset", "index": int(index), "cpus": format_cpulist(cpus)}))

    def move_task(self, ident: int, index: int, *, thread: bool) -> None:
        self._check(self.request({"op": "move_task", "id": int(ident), "index": int(index), "thread": bool(thread)}))

    def set_subtree(self, on: bool) -> None:
        self._check(self.request({"op": "set_subtree", "on": bool(on)}))

    def set_slice(self, index: int, cpus) -> None:
        self._check(self.request({"op": "set_slice", "index": int(index), "cpus": format_cpulist(cpus)}))

    def ban_irqbalance_cpus(self, cpus) -> str:
        """Write IRQBALANCE_BANNED_CPULIST into irqbalance's configuration; returns the file written."""
        reply = self.request({"op": "irqbalance_ban_cpus", "cpus": format_cpulist(cpus)})
        self._check(reply)
        return str(reply.get("path", ""))

    def trace(self, action: str, cpus, buffer_kb: int) -> dict:
        """Start, read or stop the tracing of gap attribution on `cpus` (app/pinning/trace_op.py); the
        reply (read: each CPU's trace text and stats). PinWriteError when the helper refuses."""
        reply = self.request({"op": "trace", "action": action, "cpus": format_cpulist(cpus),
                              "buffer_kb": int(buffer_kb)})
        self._check(reply)
        return reply

    def _check(self, reply: dict) -> None:
        if reply.get("ok"):
            return
        name = reply.get("errno")
        if name and hasattr(errno, name):
            code = getattr(errno, name)
            raise OSError(code, os.strerror(code))
        raise PinWriteError(f"the helper refused: {reply.get('error', 'no reason given')}")

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass    # the helper already exited; its pipe is gone
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


def default_command() -> list[str]:
    """Root already: the helper directly. Else pkexec on the installed coremap-helper (the path the
    polkit policy names), else pkexec/sudo -n on this Python running app.pinning.helper.

    Always by absolute path, and Python in isolated mode (isolated_command: no current folder, no
    PYTHON* variables, no user site-packages on sys.path), so an app/pinning/helper.py lying in the
    caller's working directory or on PYTHONPATH is never the one imported with privilege; the
    installed script restarts itself so (main)."""
    here = isolated_command()
    if os.geteuid() == 0:
        return here
    installed = shutil.which("coremap-helper")
    installed = os.path.abspath(installed) if installed else None
    if shutil.which("pkexec") and (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return ["pkexec", installed] if installed else ["pkexec", *here]
    return ["sudo", "-n", installed] if installed else ["sudo", "-n", *here]


if __name__ == "__main__":
    sys.exit(main())
