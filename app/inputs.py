"""The one reader of the files coremap did not write itself and that are not a machine: files a user
names (`irqs --file`, `report --notes`, `report --probe`, `fleet --file`, probe result files),
sessions, stored results and the small state files (recent hosts); and the one JSON decoder for
everything they and other machines send. Captures and the live machine are SysRoot's
(app/sysroot/), which confines its reads to a root in the same way.

A file is opened once, without blocking (O_NONBLOCK: a FIFO with no writer cannot hang the open),
and fstat decides what it is:
- a regular file is read up to its byte budget (each kind of file has its own: `limit`);
- a FIFO (`--file <(ssh host cat /proc/interrupts)`) only where the caller allows a stream, read up
  to the same budget and never waiting longer than STREAM_IDLE_S for its next byte;
- a device (/dev/zero, /dev/urandom), a socket or a folder is refused with one line before a byte is
  read, so nothing hangs and nothing grows without bound.
Text is decoded with replacement (U+FFFD), never an error. `no_links` refuses a path whose last part
is a symlink (state files: a link planted there would redirect a read or a write).

What is read is JSON more often than not: app/parse/json_text.py load_json is the one decoder of it.
"""
from __future__ import annotations

import errno
import fcntl
import os
import select
import stat
import time
from typing import BinaryIO

from app.errors import CoremapError
from app.parse.number import parse_float

MiB = 1 << 20
# Longest wait for the next byte of a FIFO (a pipe from a command): within the 15 s a user waits for any
# answer (issue 32: `irqs --file FIFO` with no writer waited 60 s).
STREAM_IDLE_S = 10.0
STREAM_IDLE_ENV = "COREMAP_STREAM_IDLE_S"     # the suite's FIFO cases wait 1 s, not 10 (issue 31)


def env_seconds(name: str, default: float, lo: float = 0.0) -> float:
    """A wait that tests set short through the environment, never waiting a real one out (issue 31):
    `default`, or the seconds $name holds (lo to 60; one line naming it otherwise)."""
    text = os.environ.get(name)
    return default if text is None else parse_float(text, what=name, lo=lo, hi=60, unit="s")


def stream_idle_s() -> float:
    return env_seconds(STREAM_IDLE_ENV, STREAM_IDLE_S, lo=0.1)


class InputFileError(CoremapError):
    """A named input that cannot be read as a file."""


def open_input(path: str | os.PathLike, *, what: str, limit: int, hint: str = "", stream: bool = False,
               no_links: bool = False, trusted: bool = False) -> BinaryIO:
    """`path` opened for reading as a binary file (seekable unless a stream) after the checks of the
    module docstring; InputFileError naming `what` otherwise. The caller closes it.
    `trusted`: the file says what coremap may read or send (sources.ini, a token file), so it must be
    this user's or root's and writable by no one else (not_trusted), checked on the file opened."""
    name, tail = _name(path, what), f"; {hint}" if hint else ""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (os.O_NOFOLLOW if no_links else 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputFileError(f"{name}: no such file{tail}") from None
    except IsADirectoryError:
        raise InputFileError(f"{name}: is a folder, not a file{tail}") from None
    except OSError as e:
        why = "is a symbolic link, which coremap does not follow here" if no_links and e.errno == errno.ELOOP \
            else f"cannot open it ({os.strerror(e.errno or 0)})"
        raise InputFileError(f"{name}: {why}{tail}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISFIFO(st.st_mode) and stream:
            return os.fdopen(fd, "rb", buffering=0)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a pipe" if stat.S_ISFIFO(st.st_mode)
                    else "a device or socket")
            raise InputFileError(f"{name}: is {kind}, not a file{tail}")
        why = not_trusted(st) if trusted else ""
        if why:
            raise InputFileError(f"{name}: is refused: {why}; make it yours and writable by you alone "
                                 "(chown, chmod go-w)")
        if st.st_size > limit:
            raise InputFileError(f"{name}: is {st.st_size:,} bytes, more than the {_mib(limit)} it may hold{tail}")
        # Regular files never block; reads of them ignore O_NONBLOCK. Cleared all the same, so a
        # library reading it (zipfile) sees an ordinary file.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: str | os.PathLike, *, what: str, limit: int, hint: str = "", stream: bool = False,
               no_links: bool = False, trusted: bool = False) -> bytes:
    """The bytes of `path`, at most `limit`; InputFileError naming `what` (e.g. "--notes") otherwise.
    `stream`: a FIFO is read as it comes (each wait for data at most STREAM_IDLE_S)."""
    name, tail = _name(path, what), f"; {hint}" if hint else ""
    with open_input(path, what=what, limit=limit, hint=hint, stream=stream, no_links=no_links,
                    trusted=trusted) as f:
        fd = f.fileno()
        fifo = stat.S_ISFIFO(os.fstat(fd).st_mode)
        chunks, n = [], 0
        try:
            while True:
                if fifo:
                    _wait_readable(fd, name, tail)
                b = os.read(fd, min(MiB, limit + 1 - n))
                if not b:
                    return b"".join(chunks)
                chunks.append(b)
                n += len(b)
                if n > limit:
                    raise InputFileError(f"{name}: is longer than the {_mib(limit)} it may hold{tail}")
        except BlockingIOError:
            raise InputFileError(f"{name}: sent nothing for {stream_idle_s():g} s{tail}") from None
        except OSError as e:
            raise InputFileError(f"{name}: cannot read it ({os.strerror(e.errno or 0)}){tail}") from None


def read_input_text(path, *, what: str, limit: int, hint: str = "", stream: bool = False,
                    no_links: bool = False, trusted: bool = False) -> str:
    """read_input as text; invalid UTF-8 is replaced (U+FFFD), never an error."""
    return read_input(path, what=what, limit=limit, hint=hint, stream=stream, no_links=no_links,
                      trusted=trusted).decode("utf-8", errors="replace")


def not_private(st: os.stat_result) -> str:
    """Why a state file or folder (the pin journal, the state folder) is not this user's alone: "" when it
    is; else e.g. "it belongs to uid 65534" or "others may write it". As root above all, coremap acts on
    what its journal says: a journal another user owns or can write would let them choose what root pins
    and restores (issue 24)."""
    if st.st_uid != os.geteuid():
        return f"it belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"others may write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def child_operand(path: str | os.PathLike) -> str:
    """A file name as an operand of a child program, never one of its options: a name that starts with
    "-" gets "./" (issue 32: `--pcp-archive=-Dall` reached pmdumplog as its debug option, which wrote a
    dump file outside the working folder). "./" rather than "--": every program reads it alike."""
    p = os.fspath(path)
    return "./" + p if p.startswith("-") else p


def not_trusted(st: os.stat_result) -> str:
    """Why a file that decides what coremap reads or sends (sources.ini, a token or CA file) cannot be
    believed: "" when it is this user's or root's and no one else may write it. As root above all: a
    sources.ini another user can write would have root read a root-only file and send it as a token
    (issue 32)."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"it belongs to uid {st.st_uid}, neither this user (uid {os.geteuid()}) nor root"
    if st.st_mode & 0o022:
        return f"others may write it (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def _wait_readable(fd: int, name: str, tail: str) -> None:
    idle = stream_idle_s()
    deadline = time.monotonic() + idle
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise InputFileError(f"{name}: sent nothing for {idle:g} s{tail}")
        if poller.poll(left * 1000):
            return


def _name(path, what: str) -> str:
    return f"{what} {os.fspath(path)}" if what else os.fspath(path)


def _mib(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n:,} bytes"
