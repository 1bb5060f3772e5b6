"""HotSpot's attach protocol, spoken by coremap itself: what `jcmd PID Thread.print` does, without
starting a second JVM for it (jcmd costs 0.33 s of CPU and 45 MB each time on this VM; this costs a
few milliseconds and needs no JDK tools).

Only app/machine/java.py calls this, and only for a process `verify_jvm` has verified: the first step
of attaching to a JVM whose listener is not up is SIGQUIT, which ends any process that does not
handle it (issue 24: a `sleep` that only looked like a JVM was killed that way).

The protocol (src/jdk.attach/linux/classes/sun/tools/attach/VirtualMachineImpl.java and HotSpot's
attachListener_linux.cpp): the JVM listens on the Unix socket /tmp/.java_pid<PID>, created once its
attach listener runs. To start it, a client creates the file .attach_pid<PID> in the JVM's working
folder (or /tmp), owned by the JVM's user or root, and sends SIGQUIT; the JVM sees the file and starts
the listener instead of printing a thread dump. A request is "1" (the protocol version), the command
and three arguments, each ending in NUL; the reply is the result code on the first line, then the
command's output until the JVM closes the connection. The JVM admits only a peer of its own
effective uid and gid, or root.
"""
from __future__ import annotations

import errno
import os
import signal
import socket
import stat
import struct
import time
from collections.abc import Iterator
from pathlib import Path

from app.errors import CoremapError
from app.format import printable
from app.sysroot import SysRoot

_LISTENER_WAIT = 5.0          # seconds a JVM gets to start its listener after SIGQUIT (jcmd: 10 s in all)
_MAX_REPLY = 256 << 20        # bytes of one reply: a dump of 100,000 threads with deep stacks fits
MAX_LINE = 64 << 10          # a longer line is skipped (a thread line is a name and a few fields)
_SIGQUIT_BIT = 1 << (signal.SIGQUIT - 1)


class AttachError(CoremapError):
    """A JVM that could not be asked; the message says why, as a clause after "cannot be read: "."""


class Target:
    """The verified JVM to attach to: its pid, its user and group, the signals it handles, and a pidfd
    opened before it was verified, so a signal can only ever reach that very process (a pid reused
    meanwhile gets nothing: pidfd_send_signal fails with ESRCH)."""

    def __init__(self, pid: int, euid: int, egid: int, caught: int, pidfd: int | None):
        self.pid, self.euid, self.egid, self.caught, self.pidfd = pid, euid, egid, caught, pidfd


def open_pidfd(pid: int) -> int | None:
    """A pidfd of `pid` (Linux 5.3), None where the kernel has none. Raises ProcessLookupError when
    the process is gone."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError as e:
        if e.errno == errno.ENOSYS:
            return None
        raise


def request(target: Target, root: SysRoot, command: str, *args: str, timeout: float) -> Iterator[str]:
    """The lines of the JVM's reply to `command` with up to three arguments, as they arrive. Raises
    AttachError when the JVM cannot be reached, refuses, or does not finish within `timeout` s."""
    deadline = time.monotonic() + timeout
    sock = _open(target, root, deadline)
    with sock:
        parts = [b"1", command.encode(), *(a.encode() for a in args), *([b""] * (3 - len(args)))]
        try:
            sock.sendall(b"".join(p + b"\0" for p in parts))
        except OSError as e:
            raise AttachError(f"its attach listener closed the connection ({os.strerror(e.errno or 0)})") from None
        lines = _lines(sock, deadline)
        code = next(lines, None)
        if code is None:
            raise AttachError("its attach listener closed the connection without an answer")
        if code.strip() != "0":
            said = next((l.strip() for l in lines if l.strip()), code.strip())
            raise AttachError(f"the JVM refused {command} {' '.join(args)}: {printable(said[:200])}")
        yield from lines


def _open(target: Target, root: SysRoot, deadline: float) -> socket.socket:
    """A connection to the JVM's listener, started first when it is not up."""
    path = root.path("tmp", f".java_pid{target.pid}")
    sock = _connect(path, target, deadline)
    if sock is not None:
        return sock
    if not target.caught & _SIGQUIT_BIT:
        # Started with -Xrs, or still starting: SIGQUIT would end it (the default action), so never.
        raise AttachError("it has no handler for SIGQUIT, which would end it (started with -Xrs, or "
                          "still starting)")
    trigger = _make_trigger(target, root)
    try:
        _signal(target)
        pause, until = 0.005, min(deadline, time.monotonic() + _LISTENER_WAIT)
        while time.monotonic() < until:
            time.sleep(min(pause, max(0.0, until - time.monotonic())))
            sock = _connect(path, target, deadline)
            if sock is not None:
                return sock
            pause = min(pause * 2, 0.1)
    finally:
        try:
            os.unlink(trigger)
        except FileNotFoundError:
            pass        # the JVM removes the trigger itself once its listener runs (JDK 17 does not)
    raise AttachError(f"its attach listener did not start within {_LISTENER_WAIT:g} s of SIGQUIT (a JVM that "
                      "is stopped, or busy at a safepoint)")


def _connect(path: Path, target: Target, deadline: float) -> socket.socket | None:
    """A connection to the listener's socket; None when there is none to connect to yet (absent, or
    left by an earlier JVM of this pid). Raises AttachError for a socket someone else made."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != target.euid or st.st_mode & 0o077:
        raise AttachError(f"{path} is not its attach socket (not a socket of its user, mode 600); remove it")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        sock.connect(str(path))
        # The kernel's word on who listens there (the JVM's pid when it bound the socket): a socket
        # that a different process serves is never spoken to.
        peer, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()        # an earlier JVM's socket, or one being replaced: not up yet
        return None
    except OSError as e:
        sock.close()
        raise AttachError(f"cannot connect to {path} ({os.strerror(e.errno or 0)})") from None
    if peer != target.pid:
        sock.close()
        raise AttachError(f"{path} is served by process {peer}, not by the JVM")
    return sock


def _make_trigger(target: Target, root: SysRoot) -> Path:
    """The .attach_pid<PID> file the JVM looks for on SIGQUIT: in its working folder first, then /tmp,
    as HotSpot looks (is_init_trigger). Created new (O_EXCL, never through a link), so a file someone
    planted is neither reused nor removed."""
    name = f".attach_pid{target.pid}"
    tried = []
    for folder in (root.task_dir(target.pid, None, "cwd"), root.path("tmp")):
        path = folder / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            tried.append(f"{path} ({os.strerror(e.errno or 0)})")
            continue
        os.close(fd)
        return path
    raise AttachError(f"cannot create the attach trigger: {'; '.join(tried)}")


def _signal(target: Target) -> None:
    try:
        if target.pidfd is not None:
            signal.pidfd_send_signal(target.pidfd, signal.SIGQUIT)
        else:
            # No pidfd (a kernel before 5.3): the check just made is as close as this can get.
            os.kill(target.pid, signal.SIGQUIT)
    except ProcessLookupError:
        raise AttachError("it exited") from None


def _lines(sock: socket.socket, deadline: float) -> Iterator[str]:
    """The reply's lines, each decoded with replacement; at most _MAX_REPLY bytes in all, and lines
    longer than MAX_LINE skipped, so a JVM (or anything else) cannot make coremap hold more."""
    buf = b""
    total = 0
    skipping = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AttachError("its thread dump did not end in time (a JVM that is stopped, or very large)")
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            continue
        except OSError as e:
            raise AttachError(f"its reply broke off ({os.strerror(e.errno or 0)})") from None
        if not chunk:
            if buf and not skipping:
                yield buf.decode("utf-8", "replace")
            return
        total += len(chunk)
        if total > _MAX_REPLY:
            raise AttachError(f"its reply is longer than {_MAX_REPLY >> 20} MiB")
        buf += chunk
        *whole, buf = buf.split(b"\n")
        for line in whole:
            if skipping or len(line) > MAX_LINE:
                skipping = False        # an overlong line, or the end of one
                continue
            yield line.decode("utf-8", "replace")
        if len(buf) > MAX_LINE:
            buf, skipping = b"", True
