"""Where coremap keeps what must survive a crash (the pin journal, the autosave), what the window
remembers (its settings, in the XDG config folder) and where it puts what the user saves
(screenshots, sessions, reports).

State: $COREMAP_STATE_DIR, else $XDG_STATE_HOME/coremap, else ~/.local/state/coremap (the XDG Base
Directory Specification's "state" data: things that should persist across restarts but are not
worth backing up).

Reports: $COREMAP_REPORTS_DIR, else coremap/ in the user's documents folder (XDG_DOCUMENTS_DIR, as
xdg-user-dirs writes it in $XDG_CONFIG_HOME/user-dirs.dirs, the folder a file manager shows as
Documents), else reports/ in the state folder when the user has no documents folder.
"""
from __future__ import annotations

import os
from pathlib import Path

from app.errors import CoremapError
from app.inputs import not_private, not_trusted


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
    try:
        why = not_private(os.stat(path))
    except OSError:
        why = ""            # not made yet (create=False): nothing in it to trust or distrust
    if why:
        # What it holds (the pin journal, autosaves) decides what coremap pins and restores.
        raise StateDirError(f"{path}: the state folder is refused: {why}; set COREMAP_STATE_DIR to a "
                            "folder of your own (mode 0700)")
    return path


def journal_path(create: bool = True) -> Path:
    """The pin journal's path; with create=False the state folder is not made (read-only commands)."""
    return state_dir(create) / "journal.jsonl"


def _config_home() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"


def documents_dir() -> Path | None:
    """The user's documents folder: $XDG_DOCUMENTS_DIR, else the line xdg-user-dirs writes in
    user-dirs.dirs (XDG_DOCUMENTS_DIR="$HOME/Documents"; only "$HOME/…" or an absolute path is valid
    there), else ~/Documents when it exists; None otherwise, or when it is set to the home folder
    itself (xdg-user-dirs' way of saying the user has none)."""
    home = Path.home()
    value = os.environ.get("XDG_DOCUMENTS_DIR") or _user_dirs_value("XDG_DOCUMENTS_DIR")
    if value:
        path = Path(value.replace("$HOME", str(home), 1)) if value.startswith("$HOME") else Path(value)
        if not path.is_absolute() or path == home:
            return None
        return path
    fallback = home / "Documents"
    return fallback if fallback.is_dir() else None


def _user_dirs_value(key: str) -> str | None:
    """`key`'s value in user-dirs.dirs (shell-style KEY="value" lines), None when absent or unreadable."""
    try:
        text = (_config_home() / "user-dirs.dirs").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None         # no file (xdg-user-dirs not installed) or unreadable: the fallbacks decide
    for line in text.splitlines():
        name, eq, value = line.strip().partition("=")
        if eq and name == key and len(value) >= 2 and value[0] == value[-1] == '"':
            return value[1:-1]
    return None


def settings_path() -> Path:
    """The window's settings (widgets/settings.py): $XDG_CONFIG_HOME/coremap/settings.ini, else
    ~/.config/coremap/settings.ini (the XDG Base Directory Specification's "config" files)."""
    return _config_home() / "coremap" / "settings.ini"


def foreign_folder(path: Path) -> str:
    """Why the folder of a file coremap keeps for the user (settings.ini) is not theirs to write: "" when
    it is. A link on the way that another user owns, or a folder (its links resolved) another user owns
    or may write, would have coremap write where that user chose: as root with a user's $HOME, a
    ~/.config/coremap linked into /etc (issue 32)."""
    folder = Path(os.path.abspath(path.parent))
    for p in (folder, *folder.parents):
        try:
            st = os.lstat(p)
        except OSError:
            continue            # not made yet: the writer makes it, as this user
        if os.path.islink(p) and st.st_uid not in (os.geteuid(), 0):
            return f"{p} is a link of uid {st.st_uid}, not this user's"
    try:
        st = os.stat(folder)
    except OSError:
        return ""
    # Group-writable is left alone: with umask 002 (a private group per user) every folder is.
    why = not_trusted(st) if st.st_uid not in (os.geteuid(), 0) or st.st_mode & 0o002 else ""
    return f"its folder {os.path.realpath(folder)}: {why}" if why else ""


def reports_dir(create: bool = True) -> Path:
    """Where screenshots, sessions and reports go by default: $COREMAP_REPORTS_DIR, else coremap/ in
    the user's documents folder (a folder the user sees, unlike the state folder), else reports/ in
    the state folder."""
    explicit = os.environ.get("COREMAP_REPORTS_DIR")
    if explicit:
        path = Path(explicit)
    else:
        docs = documents_dir()
        path = docs / "coremap" if docs is not None else state_dir(create) / "reports"
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StateDirError(
                f"{path}: cannot create the reports folder ({e.strerror}); "
                "set COREMAP_REPORTS_DIR to a folder you may write") from None
    return path
