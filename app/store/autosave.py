"""Autosave per running window, and crash recovery that tells a window that died from one that runs.

Each window that autosaves holds an AutosaveSlot in the state folder (app/store/folders.py):
`instances/ID.lock`, flock'ed for as long as the window's process lives, and `instances/ID.coremap`,
its autosave. The kernel drops an flock when the process ends, however it ends (kill -9 included), and
never while it runs, so:
- a window that closes normally removes both files (`release`);
- a window that died leaves its autosave beside a lock nobody holds: the next window to start finds
  it (`claim_crashed`), takes it out of instances/ into recovered/ and offers it once;
- a window that is still running holds its lock, and is never taken for a crashed one (issue 23: the
  banner "coremap did not close cleanly last time" appeared while another window was running, and
  again after two clean exits that followed a kill -9, since one clean-exit marker served every
  window and was only written by a window that had autosaved).

Two windows starting at once cannot both claim one crashed autosave: each takes the dead window's
lock (non-blocking) before moving its files, and only one gets it. The lock is opened close-on-exec,
so no probe child the window starts inherits it and outlives it holding the lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path

from app.errors import CoremapError
from app.store.folders import state_dir
from app.store.session import Session, save_session

INSTANCES = "instances"
RECOVERED = "recovered"
KEEP_RECOVERED = 5          # recovered autosaves kept; older ones are deleted when a new one is claimed
# What one clean-exit marker and one autosave file were before instances/ (a run of an older coremap).
_LEGACY = ("autosave.coremap", "autosave.clean-exit")


class AutosaveError(CoremapError):
    """The autosave slot cannot be made or written."""


class AutosaveSlot:
    """This window's autosave file and the lock that says it is alive. `acquire()` before the first
    write (idempotent); `release()` on a normal exit removes both."""

    def __init__(self, folder: Path | None = None):
        self._folder = folder
        self.id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._fd: int | None = None

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = state_dir(create=False) / INSTANCES     # made by acquire()
        return self._folder

    @property
    def path(self) -> Path:
        """This window's autosave."""
        return self.folder / f"{self.id}.coremap"

    @property
    def lock_path(self) -> Path:
        return self.folder / f"{self.id}.lock"

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        for _attempt in range(3):
            fd = self._open_lock()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                # A window starting now may have taken this new, not yet locked file for a dead window's
                # and removed it (claim_crashed): a lock on a removed file protects nothing: make it again.
                if os.fstat(fd).st_ino == os.stat(self.lock_path, follow_symlinks=False).st_ino:
                    self._fd = fd
                    return
            except FileNotFoundError:
                pass
            except OSError as e:
                os.close(fd)
                raise AutosaveError(f"{self.lock_path}: another process holds this window's lock "
                                    f"({e.strerror})") from None
            os.close(fd)
        raise AutosaveError(f"{self.lock_path}: the lock file keeps being removed; is another program "
                            "clearing the state folder?")

    def _open_lock(self) -> int:
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            return os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise AutosaveError(f"{self.lock_path}: cannot create the autosave lock ({e.strerror}); "
                                "set COREMAP_STATE_DIR to a folder you may write") from None

    def write(self, session: Session) -> Path:
        """Save `session` to this window's autosave, atomically (app/atomic.py)."""
        self.acquire()
        save_session(self.path, session)
        return self.path

    def release(self) -> None:
        """A normal exit: remove the autosave and the lock file (still holding the lock, so no window
        starting now takes this one for a crashed one), then drop the lock."""
        if self._fd is None:
            return
        for p in (self.path, self.lock_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        os.close(self._fd)
        self._fd = None


def claim_crashed(folder: Path | None = None) -> list[Path]:
    """The autosaves of windows that died without a clean exit, moved out of instances/ into
    recovered/ (so each is offered once), newest first. A dead window that never autosaved leaves
    only its lock file, which is removed. Locks that are held belong to running windows: left alone."""
    base = folder or state_dir()
    found = [p for p in (_claim_legacy(base),) if p is not None]
    instances = base / INSTANCES
    try:
        locks = sorted(instances.glob("*.lock"))
    except OSError:
        locks = []
    for lock in locks:
        claimed = _claim_one(lock, base / RECOVERED)
        if claimed is not None:
            found.append(claimed)
    found.sort(key=_mtime, reverse=True)
    if found:
        _prune(base / RECOVERED)
    return [p for p in found if p.exists()]


def _claim_one(lock: Path, recovered: Path) -> Path | None:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None             # removed meanwhile by its window's clean exit, or by another claimer
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None         # its window is running (or another window is claiming it right now)
        if not lock.exists():
            return None         # released between our open and our flock: a clean exit
        autosave = lock.with_suffix(".coremap")
        for partial in lock.parent.glob(f".{autosave.name}.*.tmp"):
            partial.unlink()    # an autosave the window was writing when it died (app/atomic.py's temp file)
        target = None
        if autosave.is_file():
            recovered.mkdir(parents=True, exist_ok=True, mode=0o700)
            target = recovered / autosave.name
            os.replace(autosave, target)
        lock.unlink()
        return target
    except OSError:
        return None             # a state folder gone read-only: nothing is offered, nothing is lost
    finally:
        os.close(fd)


def _claim_legacy(base: Path) -> Path | None:
    """An older coremap's single autosave without its clean-exit marker: offered once like the others."""
    autosave, marker = (base / n for n in _LEGACY)
    try:
        if not autosave.is_file():
            return None
        clean = marker.exists()
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()
        if clean:
            autosave.unlink()
            return None
        (base / RECOVERED).mkdir(parents=True, exist_ok=True, mode=0o700)
        target = base / RECOVERED / "autosave.coremap"
        os.replace(autosave, target)
        return target
    except OSError:
        return None


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _prune(recovered: Path) -> None:
    try:
        files = sorted(recovered.glob("*.coremap"), key=_mtime, reverse=True)
    except OSError:
        return
    for old in files[KEEP_RECOVERED:]:
        with contextlib.suppress(OSError):
            old.unlink()
