"""The one writer of every file coremap writes (settings, sessions, autosaves, reports, screenshots,
`export --textfile`, --out files): a reader (or a crash) sees the old file or the new one, never half of one.

What it refuses, so a hostile path costs one line (issue 32): a target that exists and is not a regular
file (a link is never followed, a device, FIFO or folder never replaced: as root, renaming over
/dev/zero made it a regular file); any folder under /dev, /proc or /sys, however it is reached. A file
replaced keeps its mode and, when root replaces another user's file, its owner.

The recipe is the one ext4's and XFS's authors give (see the "data=ordered" discussion around
Documentation/admin-guide/ext4.rst `auto_da_alloc`, and rename(2)): write a temporary file in the
SAME folder (rename is atomic only within one filesystem), fsync it so its blocks are on disk
before the name points at them, rename it over the target, then fsync the folder so the rename
itself survives a power cut. Until the rename, the previous file is untouched.
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator

from app.errors import CoremapError


class AtomicWriteError(CoremapError):
    """The target folder cannot take the file (missing, read-only, full)."""


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        # Some filesystems (and non-Linux platforms) refuse to open a folder for reading; the
        # rename has still happened, only its durability across a power cut is unknown.
        return
    try:
        os.fsync(fd)
    except OSError:
        # EINVAL on filesystems that do not support fsync on folders (e.g. some FUSE mounts):
        # as above, the rename is done, only its durability is unconfirmed.
        pass
    finally:
        os.close(fd)


NAME_MAX = 255            # bytes in one file name on ext4, XFS, btrfs, tmpfs (and most others)
SYSTEM_TREES = ("/dev", "/proc", "/sys")       # the kernel's and devices': nothing there is ever replaced


def _system_tree(folder: Path) -> str | None:
    """The tree of SYSTEM_TREES `folder` is in once every link is resolved, or None."""
    real = os.path.realpath(folder)
    return next((t for t in SYSTEM_TREES if real == t or real.startswith(t + "/")), None)


def check_output_path(path: str | os.PathLike, what: str = "") -> Path:
    """The output path, refused early (before any capture, render or wait) when it cannot be written,
    with one line: a missing or unwritable folder, a name too long for the filesystem, or a target that
    exists and is not a regular file (a device such as /dev/null, a FIFO, a socket, a folder or a
    symlink — atomic_writer renames over its target, and as root that would replace /dev/null)."""
    target = Path(path)
    name = f"{what} {target}" if what else str(target)
    folder = target.parent if str(target.parent) else Path(".")
    if len(os.fsencode(target.name)) > NAME_MAX:
        raise AtomicWriteError(f"{what + ' ' if what else ''}{str(target)[:60]}…: the file name is "
                               f"{len(os.fsencode(target.name))} bytes, longer than the {NAME_MAX} a "
                               "filesystem allows; choose a shorter name")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise AtomicWriteError(f"{name}: cannot be used ({os.strerror(e.errno or 0)}); choose another path") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = ("a symlink" if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device")
        hint = (f"give a file name such as {target / 'out'}" if stat.S_ISDIR(st.st_mode)
                else "give the path of a regular file (coremap never writes through links or into devices)")
        raise AtomicWriteError(f"{name} is {kind}, not a regular file; {hint}")
    if not folder.is_dir():
        raise AtomicWriteError(f"{name}: folder {folder} does not exist; create it or choose another path")
    tree = _system_tree(folder)
    if tree is not None:
        raise AtomicWriteError(f"{name}: is in {tree}, where coremap never writes; choose a path in your "
                               "own folders")
    if not os.access(folder, os.W_OK):
        raise AtomicWriteError(f"{name}: folder {folder} is not writable; choose another path")
    return target


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: int | None = None) -> Iterator[BinaryIO]:
    """`with atomic_writer(p) as f: f.write(...)` streams into a temporary file beside `p` and
    renames it over `p` only when the block ends without an exception. On an exception the
    temporary file is removed and `p` (if it existed) is left exactly as it was.

    A replaced file keeps its mode (and, as root, its owner and group: `export --textfile` as root
    turned another user's file into root's, issue 32); `mode` is a new file's, by default 0o644 less the
    umask (mkstemp makes 0o600).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise AtomicWriteError(f"{target}: folder {folder} does not exist; create it or choose another path")
    check_output_path(target)
    try:
        # The temporary name keeps at most 100 bytes of the target's, so it fits wherever the target does.
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise AtomicWriteError(f"{target}: cannot create a file in {folder} ({os.strerror(e.errno or 0)}); "
                               "choose a writable folder") from None
    tmp = Path(tmp_name)
    try:
        old = os.lstat(target)
    except FileNotFoundError:
        old = None
    if old is not None:
        mode = old.st_mode & 0o7777
    elif mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o644 & ~umask
    done = False
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if old is not None and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()) and os.geteuid() == 0:
            os.chown(tmp, old.st_uid, old.st_gid)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        done = True
        _fsync_dir(folder)
    except OSError as e:
        raise AtomicWriteError(f"{target}: write failed ({os.strerror(e.errno or 0) if e.errno else e}); "
                               f"the previous file, if any, is unchanged") from None
    finally:
        if not done:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def write_atomic(path: str | os.PathLike, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` atomically (see module docstring)."""
    with atomic_writer(path, mode) as f:
        f.write(data)
