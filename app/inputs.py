"""Files a user names on the command line or in a dialog (`irqs --file`, `report --notes`,
`report --probe`, probe result files): read bounded, and only what can be read as a file.

A regular file is read up to its limit; a FIFO (`--file <(ssh host cat /proc/interrupts)`) is read as
a stream up to the same limit; a device (/dev/zero, /dev/urandom), a socket or a folder is refused
with one line before a byte is read, so nothing hangs and nothing grows without bound.
"""
from __future__ import annotations

import fcntl
import os
import stat

from app.errors import CoremapError

MiB = 1 << 20


class InputFileError(CoremapError):
    """A named input that cannot be read as a file."""


def read_input(path: str | os.PathLike, *, what: str, limit: int, hint: str = "") -> bytes:
    """The bytes of `path`, at most `limit`; InputFileError naming `what` (e.g. "--notes") otherwise."""
    name = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    tail = f"; {hint}" if hint else ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputFileError(f"{name}: no such file{tail}") from None
    except IsADirectoryError:
        raise InputFileError(f"{name}: is a folder, not a file{tail}") from None
    except OSError as e:
        raise InputFileError(f"{name}: cannot open it ({os.strerror(e.errno or 0)}){tail}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISFIFO(st.st_mode):
            # A pipe from a shell's process substitution: wait for its writer like any reader.
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        elif not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a device or socket"
            raise InputFileError(f"{name}: is {kind}, not a file{tail}")
        elif st.st_size > limit:
            raise InputFileError(f"{name}: is {st.st_size:,} bytes, more than the {_mib(limit)} it may hold{tail}")
        chunks, n = [], 0
        while True:
            b = os.read(fd, min(MiB, limit + 1 - n))
            if not b:
                return b"".join(chunks)
            chunks.append(b)
            n += len(b)
            if n > limit:
                raise InputFileError(f"{name}: is longer than the {_mib(limit)} it may hold{tail}")
    except OSError as e:
        raise InputFileError(f"{name}: cannot read it ({os.strerror(e.errno or 0)}){tail}") from None
    finally:
        os.close(fd)


def read_input_text(path, *, what: str, limit: int, hint: str = "") -> str:
    """read_input as text; invalid UTF-8 is replaced (U+FFFD), never an error."""
    return read_input(path, what=what, limit=limit, hint=hint).decode("utf-8", errors="replace")


def _mib(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n:,} bytes"
