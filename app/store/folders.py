"""Where coremap keeps what must survive a crash: the pin journal.

$COREMAP_STATE_DIR, else $XDG_STATE_HOME/coremap, else ~/.local/state/coremap (the XDG Base
Directory Specification's "state" data: things that should persist across restarts but are not
worth backing up).
"""
from __future__ import annotations

import os
from pathlib import Path

from app.errors import CoremapError


class StateDirError(CoremapError):
    """The state folder cannot be created or written."""


def state_dir(create: bool = True) -> Path:
    """The state folder, created (mode 0700) when `create` is true."""
    explicit = os.environ.get("COREMAP_STATE_DIR")
    if explicit:
        path = Path(explicit)
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        # The spec says a relative XDG_STATE_HOME is invalid and must be ignored.
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
        path = base / "coremap"
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as e:
            raise StateDirError(
                f"{path}: cannot create the state folder ({e.strerror}); "
                "set COREMAP_STATE_DIR to a folder you may write") from None
    return path


def journal_path(create: bool = True) -> Path:
    """The pin journal's path; with create=False the state folder is not made (read-only commands)."""
    return state_dir(create) / "journal.jsonl"


def reports_dir(create: bool = True) -> Path:
    """Where screenshots, sessions and reports go by default: $COREMAP_REPORTS_DIR, else
    ~/coremap-reports (a folder the user sees, unlike the state folder)."""
    explicit = os.environ.get("COREMAP_REPORTS_DIR")
    path = Path(explicit) if explicit else Path.home() / "coremap-reports"
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StateDirError(
                f"{path}: cannot create the reports folder ({e.strerror}); "
                "set COREMAP_REPORTS_DIR to a folder you may write") from None
    return path
