"""ConfinedRoot: a folder read (and, on the live machine or a test tree, written) without ever leaving it.

A capture is hostile input: it may come from anyone, unpacked with a plain `tar xf`, and coremap often
runs as root. So under a root that is not "/":
- every open resolves inside the root: openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS where the
  kernel has it (Linux 5.6), else a component-by-component walk with O_NOFOLLOW that follows only
  relative links that stay inside. A member that leads outside (`proc/cmdline -> /etc/shadow`, or
  `../../..` past the root) is read as missing, and a note says so; the target is never opened.
  RESOLVE_BENEATH rather than RESOLVE_IN_ROOT: a link that leaves the capture is news (a crafted or
  broken capture), and re-rooting it could show another file of the capture under the wrong name;
- only regular files are read (a FIFO would hang, /dev/zero would never end): anything else is
  missing, with a note;
- every read is bounded (`_read_limit`, which SysRoot sets per file name), on the live machine too.
Writes go through `open_for_write`, which refuses a capture unless a test made the tree on purpose
(COREMAP_WRITABLE_TEST_ROOTS), and even then opens with the same confinement.

This module knows no file of /proc or /sys by name: SysRoot (app/sysroot/__init__.py) spells them.
"""
from __future__ import annotations

import ctypes
import errno
import os
import stat
from pathlib import Path

from app.errors import SysRootReadError, excerpt
from app.parse.number import NumberError, parse_int

# os.pathsep-separated folders the tests build on purpose and may write IRQ masks into (never a
# capture a user was handed): see open_for_write.
WRITABLE_TEST_ROOTS_ENV = "COREMAP_WRITABLE_TEST_ROOTS"

MiB = 1 << 20
DEFAULT_READ_LIMIT = 8 * MiB
MAX_NOTES = 50
_MAX_LINKS = 40          # as the kernel's own limit on symlinks in one path (MAXSYMLINKS)


class LeavesRoot(OSError):
    """A path whose resolution would leave the capture."""

    def __init__(self, rel: str):
        super().__init__(errno.EXDEV, "leads outside the capture", rel)


class _Confinement:
    """A folder (the live machine's is "/") as coremap may touch it: what it is (live, writable), how a path
    under it is opened without ever leaving it, what was refused on the way (notes), and the one way to
    write there. ConfinedRoot adds the reads."""

    def __init__(self, root: str | os.PathLike = "/"):
        self.root = Path(root)
        self._prefix = str(self.root).rstrip("/") + "/"      # for the string paths hot loops pass
        self.notes: list[str] = []          # what was refused while reading (links out, devices)
        self._root_fd: int | None = None
        try:
            self._live = self.root.resolve() == Path("/")
        except (OSError, RuntimeError):
            self._live = False

    def __del__(self):
        fd, self._root_fd = getattr(self, "_root_fd", None), None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                # Closed already (interpreter shutdown closing fds): nothing left to release.
                pass

    # -- identity ---------------------------------------------------------------------------
    @property
    def is_live(self) -> bool:
        """True when this is the running machine, where writes and live sampling make sense."""
        return self._live

    @property
    def writable(self) -> bool:
        """Whether affinity writes may go into this root: the live machine, or a tree a test built
        on purpose and named in COREMAP_WRITABLE_TEST_ROOTS. A capture someone handed us, never."""
        if self._live:
            return True
        allowed = os.environ.get(WRITABLE_TEST_ROOTS_ENV, "")
        try:
            mine = self.root.resolve()
        except (OSError, RuntimeError):
            return False
        return any(p and Path(p).resolve() == mine for p in allowed.split(os.pathsep))

    # -- paths -----------------------------------------------------------------------------------
    def path(self, *parts: str | int) -> Path:
        """Path of <parts> under this root (etc/, run/ for irqbalance's files)."""
        return self.root.joinpath(*map(str, parts))

    # -- writes -------------------------------------------------------------------------------
    def open_for_write(self, path: Path) -> int:
        """An fd to write a procfs file such as proc/irq/N/smp_affinity_list: no O_CREAT (a missing
        file is ENOENT, never a new file), never through a link that leaves the root, and only on the
        live machine or a test tree (see `writable`). Raises OSError as open(2) would."""
        if not self.writable:
            raise PermissionError(errno.EROFS, "a capture cannot be written to", str(path))
        flags = os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOCTTY
        if self._live:
            return os.open(path, flags)
        fd = self._open(path, flags | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise PermissionError(errno.EPERM, "not a regular file", str(path))
        return fd

    def make_dir(self, path: Path) -> None:
        """mkdir(2) of `path` (a cgroup: the kernel fills it with its files), under the same rules as
        open_for_write: a writable root only, and never through a link that leaves it. Raises OSError
        as mkdir(2) would (FileExistsError when it is there)."""
        parent, name = self._parent_fd(path)
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        finally:
            os.close(parent)

    def remove_dir(self, path: Path) -> None:
        """rmdir(2) of `path` (an empty cgroup), under the same rules as make_dir."""
        parent, name = self._parent_fd(path)
        try:
            os.rmdir(name, dir_fd=parent)
        finally:
            os.close(parent)

    def _parent_fd(self, path: Path) -> tuple[int, str]:
        if not self.writable:
            raise PermissionError(errno.EROFS, "a capture cannot be written to", str(path))
        path = Path(path)
        if path.name in ("", ".", ".."):
            raise PermissionError(errno.EPERM, "not a folder name", str(path))
        return self._open(path.parent, os.O_RDONLY | os.O_DIRECTORY), path.name

    # -- confinement ----------------------------------------------------------------------------
    def _rel(self, path: Path | str) -> str:
        # String slicing, not Path.relative_to: a big capture is 100,000 reads (issue 10, "Scale").
        p = os.fspath(path)
        if p.startswith(self._prefix):
            return p[len(self._prefix):] or "."
        if p.rstrip("/") == self._prefix.rstrip("/"):
            return "."
        raise LeavesRoot(p)

    def _dirfd(self) -> int:
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._root_fd

    def _open(self, path: Path, flags: int) -> int:
        """open(2) of `path`, resolved inside the root for a capture (see the module docstring)."""
        flags |= os.O_CLOEXEC
        if self._live:
            return os.open(path, flags)
        rel = self._rel(path)
        try:
            return _openat2(self._dirfd(), rel, flags)
        except LeavesRoot:
            self._note(path, "leads outside the capture (a link to an absolute path or above the root); "
                             "read as missing")
            raise
        except _NoOpenat2:
            pass
        try:
            return _walk_open(self._dirfd(), rel, flags)
        except LeavesRoot:
            self._note(path, "leads outside the capture (a link to an absolute path or above the root); "
                             "read as missing")
            raise

    def _stat(self, path: Path) -> os.stat_result | None:
        if self._live:
            try:
                return os.stat(path)
            except OSError:
                return None
        try:
            fd = self._open(path, os.O_PATH)
        except OSError:
            return None
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def _exists_quietly(self, path: Path) -> bool:
        """exists() that says False where it may not look (tracefs is mode 700: a user cannot even
        stat what lies inside it) instead of raising PermissionError."""
        return self._stat(path) is not None

    def _note(self, path: Path, what: str) -> None:
        if len(self.notes) >= MAX_NOTES:
            return
        try:
            rel = self._rel(path)
        except LeavesRoot:
            rel = str(path)
        note = f"{rel} {what}"
        if note not in self.notes:
            self.notes.append(note)

    def _read_limit(self, path) -> int:
        """How many bytes a read of `path` may return when the caller names no limit (SysRoot knows
        the files that are larger)."""
        return DEFAULT_READ_LIMIT


class ConfinedRoot(_Confinement):
    """Bounded, confined reads of the files under one folder (the live machine's is "/"); the notes of
    what was refused and the one way to write there come from _Confinement."""

    # -- reads --------------------------------------------------------------------------------
    def read_bytes(self, path: Path, limit: int | None = None) -> bytes:
        """The whole content of `path` (under this root), at most `limit` bytes (by default
        `_read_limit(path)`). Raises SysRootReadError; a capture member that is a link out of the
        capture or not a regular file is "missing" (and noted)."""
        if limit is None:
            limit = self._read_limit(path)
        try:
            fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except LeavesRoot:
            raise SysRootReadError(path, "missing") from None
        except (FileNotFoundError, ProcessLookupError):
            # ESRCH: a /proc file of a task that exited while the path was walked, as read_small says
            raise SysRootReadError(path, "missing") from None
        except PermissionError:
            raise SysRootReadError(path, "permission denied; run as a user who may read it") from None
        except OSError as e:
            raise SysRootReadError(path, os.strerror(e.errno) if e.errno else str(e)) from None
        try:
            st = os.fstat(fd)
            if not self._live and not stat.S_ISREG(st.st_mode):
                self._note(path, "is not a regular file (a device, FIFO, socket or folder); read as missing")
                raise SysRootReadError(path, "missing")
            if st.st_size > limit:
                raise SysRootReadError(path, f"is {st.st_size:,} bytes, more than the {_size(limit)} such a "
                                             "file can hold; not a file coremap reads")
            data = _read_bounded(fd, limit, path)
        except IsADirectoryError:
            raise SysRootReadError(path, "is a folder, not a file") from None
        except ProcessLookupError:
            # ESRCH: the task exited between the open and the read (an isolate stopped on one such
            # process's comm): gone, like a file no longer there
            raise SysRootReadError(path, "missing") from None
        except OSError as e:
            raise SysRootReadError(path, os.strerror(e.errno) if e.errno else str(e)) from None
        finally:
            os.close(fd)
        return data

    def read_small(self, path: str, limit: int) -> bytes | None:
        """The first `limit` bytes of `path` (a string under this root: the hot loops build them once),
        or None when it is not there: a task that exited (ENOENT, ESRCH), or in a capture a member that
        is missing, leads out of it or is not a regular file (noted). The thread reader's read of every
        proc/PID/task/TID file, so it stays small: one open, one read for a file under 64 KiB, no
        fstat on the live machine (procfs makes its files itself). Other errors raise as read_bytes's."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC) if self._live else \
                self._open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError, LeavesRoot):
            # Exited between listing and reading (normal churn); in a capture: absent, or refused
            # (_open noted a link out).
            return None
        except PermissionError:
            raise SysRootReadError(path, "permission denied; run as a user who may read it") from None
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise SysRootReadError(path, os.strerror(e.errno) if e.errno else str(e)) from None
            self._note(path, "is a loop of links; read as missing")
            return None
        try:
            size = None
            if not self._live:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    self._note(path, "is not a regular file (a device, FIFO, socket or folder); read as missing")
                    return None
                size = st.st_size
            data = os.read(fd, min(limit, 65536))
            if len(data) < limit and data and (size is None or len(data) < size):
                # procfs hands a file over in pieces past a page; a capture's file may be anything up
                # to its limit. Read on to the end or the limit, never past it.
                chunks = [data]
                n = len(data)
                while n < limit:
                    b = os.read(fd, min(limit - n, 1 * MiB))
                    if not b:
                        break
                    chunks.append(b)
                    n += len(b)
                data = b"".join(chunks)
            return data
        except (ProcessLookupError, FileNotFoundError):
            return None         # exited between open and read
        except OSError as e:
            raise SysRootReadError(path, os.strerror(e.errno) if e.errno else str(e)) from None
        finally:
            os.close(fd)

    def listdir_small(self, path: str) -> list[str]:
        """Entries of a folder (unsorted), [] when it is absent, gone or not a folder: the thread reader's
        listing of proc/ and proc/PID/task/, confined in a capture like every other open (a task/ that
        is a link into the live /proc lists nothing)."""
        try:
            if self._live:
                return os.listdir(path)
            fd = self._open(path, os.O_RDONLY | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError, ProcessLookupError, LeavesRoot):
            return []
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise SysRootReadError(path, os.strerror(e.errno) if e.errno else str(e)) from None
            self._note(path, "is a loop of links; read as missing")
            return []
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def read(self, path: Path, limit: int | None = None) -> str:
        """The whole text of `path` (which must lie under this root). Raises SysRootReadError."""
        return self.read_bytes(path, limit).decode("utf-8", errors="replace")

    def read_optional(self, path: Path, limit: int | None = None) -> str | None:
        """Text of `path`, or None when the file is absent (many sysfs files are optional).

        Permission and I/O errors still raise: a file that exists but cannot be read is news.
        """
        try:
            return self.read(path, limit)
        except SysRootReadError as e:
            if e.reason == "missing":
                return None
            raise

    def read_first_line(self, path: Path) -> str | None:
        text = self.read_optional(path)
        if text is None:
            return None
        return text.split("\n", 1)[0].strip()

    def read_int(self, path: Path) -> int | None:
        """An integer file such as topology/core_id; None when absent or empty."""
        line = self.read_first_line(path)
        if line is None or line == "":
            return None
        try:
            return parse_int(line, what="", base=16 if line.startswith("0x") else 10)
        except NumberError:
            raise SysRootReadError(path, f"expected an integer, found {excerpt(line)}") from None

    def exists(self, path: Path) -> bool:
        """Whether `path` exists under this root (a link that leaves a capture does not)."""
        return self._stat(path) is not None

    def is_dir(self, path: Path) -> bool:
        st = self._stat(path)
        return st is not None and stat.S_ISDIR(st.st_mode)

    def link_count(self, path: Path) -> int | None:
        """st_nlink of `path` (None when absent). For proc/PID/task it is the process's thread count
        plus 2 (fs/proc/base.c proc_task_getattr), one stat instead of listing thousands of threads."""
        st = self._stat(path)
        return None if st is None else st.st_nlink

    def listdir(self, path: Path) -> list[str]:
        """Entries of a folder, sorted; [] when it is absent or not a folder."""
        if self._live:
            return _safe_listdir(path)
        try:
            fd = self._open(path, os.O_RDONLY | os.O_DIRECTORY)
        except (LeavesRoot, FileNotFoundError, NotADirectoryError):
            return []
        except PermissionError:
            raise SysRootReadError(path, "permission denied; run as a user who may read it") from None
        except OSError as e:
            raise SysRootReadError(path, os.strerror(e.errno) if e.errno else str(e)) from None
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def readlink(self, path: Path) -> str | None:
        """The text of a symlink (never followed), or None when `path` is not one."""
        try:
            if self._live:
                return os.readlink(path)
            parent = self._open(Path(path).parent, os.O_PATH | os.O_DIRECTORY)
            try:
                return os.readlink(Path(path).name, dir_fd=parent)
            finally:
                os.close(parent)
        except (LeavesRoot, FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EINVAL):
                return None
            raise SysRootReadError(path, os.strerror(e.errno)) from None

# -- openat2 and the walk ------------------------------------------------------------------------------
class _NoOpenat2(Exception):
    """This kernel (or a seccomp filter) has no openat2: use the walk."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_SYS_OPENAT2 = 437            # the same number on every architecture (added after the syscall table unification)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_HOW_SIZE = ctypes.sizeof(_OpenHow)
_EAGAIN_TRIES = 8
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _syscall = _libc.syscall
    _syscall.restype = ctypes.c_long
    # Declared, so ctypes converts without guessing: a capture's thread list is thousands of opens.
    _syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
except (OSError, AttributeError):
    _syscall = None
_HOWS: dict[int, tuple[_OpenHow, int]] = {}        # open flags -> (its open_how, the struct's address)
_openat2_works: bool | None = None if _syscall is not None else False


def _openat2(dirfd: int, rel: str, flags: int) -> int:
    global _openat2_works
    if _openat2_works is False:
        raise _NoOpenat2()
    how = _HOWS.get(flags)
    if how is None:
        struct = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        how = _HOWS[flags] = (struct, ctypes.addressof(struct))
    name = os.fsencode(rel)
    for _ in range(_EAGAIN_TRIES):
        fd = _syscall(_SYS_OPENAT2, dirfd, name, how[1], _HOW_SIZE)
        if fd >= 0:
            _openat2_works = True
            return int(fd)
        e = ctypes.get_errno()
        # EAGAIN: a rename or mount anywhere on the system during a RESOLVE_BENEATH walk with ".."
        # (openat2(2)): the kernel asks to try again rather than risk an escape.
        if e != errno.EAGAIN:
            break
    if e in (errno.ENOSYS, errno.EPERM) and _openat2_works is None:
        # ENOSYS: before Linux 5.6; EPERM: a seccomp filter (some container runtimes) refuses it.
        _openat2_works = False
        raise _NoOpenat2()
    if e == errno.EXDEV:
        raise LeavesRoot(rel)
    if e == errno.EAGAIN:
        raise _NoOpenat2()          # still racing renames: the walk (one component at a time) has no such retry
    raise OSError(e, os.strerror(e), rel)


def _walk_open(dirfd: int, rel: str, flags: int) -> int:
    """open(2) of `rel` below `dirfd`, one component at a time with O_NOFOLLOW, following only
    relative links that stay below `dirfd` (RESOLVE_BENEATH done by hand, for kernels without
    openat2). Raises LeavesRoot for an absolute link or a '..' above the root."""
    todo = [p for p in rel.split("/") if p not in ("", ".")]
    stack = [os.dup(dirfd)]              # the folders walked so far; stack[0] is the root
    links = 0
    try:
        while todo:
            name = todo.pop(0)
            if name == "..":
                if len(stack) == 1:
                    raise LeavesRoot(rel)
                os.close(stack.pop())
                continue
            last = not todo
            try:
                fd = os.open(name, (flags if last else os.O_PATH | os.O_DIRECTORY) | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=stack[-1])
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                target = _link_text(name, stack[-1], e)
                links = _follow(target, todo, links, rel)
                continue
            if last and flags & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):
                # O_PATH | O_NOFOLLOW opens the link itself: follow it by hand.
                os.close(fd)
                links = _follow(os.readlink(name, dir_fd=stack[-1]), todo, links, rel)
                continue
            if last:
                return fd
            stack.append(fd)
        # rel named the root itself
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=stack[0])
    finally:
        for fd in stack:
            os.close(fd)


def _link_text(name: str, dirfd: int, cause: OSError) -> str:
    try:
        return os.readlink(name, dir_fd=dirfd)
    except OSError:
        raise cause from None        # not a link: ENOTDIR/ELOOP were the real answer


def _follow(target: str, todo: list[str], links: int, rel: str) -> int:
    links += 1
    if links > _MAX_LINKS:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
    if target.startswith("/"):
        raise LeavesRoot(rel)
    todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
    return links


def _read_bounded(fd: int, limit: int, path) -> bytes:
    chunks, n = [], 0
    while True:
        b = os.read(fd, min(1 * MiB, limit + 1 - n))
        if not b:
            return b"".join(chunks)
        chunks.append(b)
        n += len(b)
        if n > limit:
            raise SysRootReadError(path, f"is longer than the {_size(limit)} such a file can hold; "
                                         "not a file coremap reads")


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n:,} bytes"


def _safe_listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []
    except PermissionError:
        raise SysRootReadError(path, "permission denied; run as a user who may read it") from None
