"""Exceptions that carry a message for the user: they name the thing and say what to do.

The CLI prints `str(error)` and exits 2; the window shows it on a status line. Anything else that
escapes is a bug.
"""
from __future__ import annotations


def excerpt(text: str, limit: int = 40) -> str:
    """A short, escaped quotation of untrusted text for an error line: control characters and
    non-printing code points escaped (repr), cut at `limit` characters with '…'. Never a file's whole
    contents, never an escape sequence a terminal would act on."""
    return repr(text[:limit]) + ("…" if len(text) > limit else "")


class CoremapError(Exception):
    """Base class: `str(err)` is a complete sentence for the user."""


class NotASysRoot(CoremapError):
    """A --root that does not hold a captured /sys and /proc."""


class SysRootReadError(CoremapError):
    """A file under the root that is missing, unreadable or truncated."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ParseError(CoremapError):
    """Text that does not have the format the kernel documents."""

    def __init__(self, what: str, reason: str, line: int | None = None):
        self.what = what
        self.reason = reason
        self.line = line
        where = f"{what}, line {line}" if line is not None else what
        super().__init__(f"{where}: {reason}")


class CpuListError(CoremapError, ValueError):
    """A CPU list such as "2-x" that cannot be parsed, or names CPUs that cannot be used."""
