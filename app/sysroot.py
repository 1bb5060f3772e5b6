"""SysRoot: the one place that spells /proc and /sys.

Every read of the machine goes through a SysRoot, so the same code runs on the live machine
(`SysRoot("/")`) and on a captured snapshot of another one (`SysRoot("/tmp/worker1")`), the way
prometheus/procfs takes its mount point as a parameter. Parsers never open files; readers in
`app.machine` call the methods here and hand text to `app.parse`.

A snapshot taken by `coremap snapshot` may hold a second capture of the counters
(interrupts, softirqs, stat) under `.coremap/t1/`, taken `interval` seconds after the first, so
rates can be shown for a machine that is not this one; `later()` returns it.
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from app.errors import NotASysRoot, SysRootReadError

SNAPSHOT_META_DIR = ".coremap"


class SysRoot:
    """A filesystem root holding `proc/` and `sys/` (the live machine's is "/")."""

    def __init__(self, root: str | os.PathLike = "/", *, check: bool = True):
        self.root = Path(root)
        if check:
            self._check()

    # -- identity ---------------------------------------------------------------------------
    @property
    def is_live(self) -> bool:
        """True when this is the running machine, where writes and live sampling make sense."""
        try:
            return self.root.resolve() == Path("/")
        except OSError:
            return False

    def __repr__(self) -> str:
        return f"SysRoot({str(self.root)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, SysRoot) and self.root == other.root

    def __hash__(self) -> int:
        return hash(self.root)

    def _check(self) -> None:
        r = self.root
        if not r.exists():
            raise NotASysRoot(f"{r}: no such folder; point --root at a folder that holds sys/ and proc/")
        if not r.is_dir():
            hint = (" (a snapshot tarball: extract it first with `tar xf`, then pass the folder)"
                    if r.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")) else "")
            raise NotASysRoot(f"{r}: not a folder{hint}")
        markers = ("sys/devices/system/cpu", "proc/stat", "proc/interrupts", "proc/cpuinfo")
        if any((r / m).exists() for m in markers):
            return
        # Captures often nest one level deeper (hwloc's tarballs hold NAME/sys, NAME/proc).
        inner = [d for d in _safe_listdir(r) if any((r / d / m).exists() for m in markers)]
        hint = f"; did you mean {r / inner[0]}?" if len(inner) == 1 else ""
        raise NotASysRoot(
            f"{r} is not a sysroot: it holds none of sys/devices/system/cpu, proc/stat, "
            f"proc/interrupts{hint}")

    # -- paths --------------------------------------------------------------------------------
    def proc(self, *parts: str | int) -> Path:
        """Path of proc/<parts> under this root."""
        return self.root.joinpath("proc", *map(str, parts))

    def sys(self, *parts: str | int) -> Path:
        """Path of sys/<parts> under this root."""
        return self.root.joinpath("sys", *map(str, parts))

    def cpu_dir(self, *parts: str | int) -> Path:
        """sys/devices/system/cpu/<parts>."""
        return self.sys("devices", "system", "cpu", *parts)

    def node_dir(self, *parts: str | int) -> Path:
        """sys/devices/system/node/<parts>."""
        return self.sys("devices", "system", "node", *parts)

    def tracefs(self, *parts: str | int) -> Path:
        """The tracefs mount: sys/kernel/tracing, or sys/kernel/debug/tracing where only debugfs is
        mounted (kernels before 4.1 and some distributions; Documentation/trace/ftrace.rst)."""
        t = self.sys("kernel", "tracing")
        if not _exists(t / "events"):
            old = self.sys("kernel", "debug", "tracing")
            if _exists(old / "events"):
                t = old
        return t.joinpath(*map(str, parts))

    def irq_dir(self, irq: int | str, *parts: str) -> Path:
        """proc/irq/<irq>/<parts>."""
        return self.proc("irq", str(irq), *parts)

    def task_dir(self, pid: int, tid: int | None = None, *parts: str) -> Path:
        """proc/<pid>/task/<tid>/<parts> (proc/<pid>/<parts> when tid is None)."""
        if tid is None:
            return self.proc(str(pid), *parts)
        return self.proc(str(pid), "task", str(tid), *parts)

    # -- reads --------------------------------------------------------------------------------
    def read(self, path: Path | str) -> str:
        """The whole text of `path` (which must lie under this root). Raises SysRootReadError.

        os.open/os.read, not open(): a buffered file object costs more than the read itself, and a
        machine with 8,192 CPUs has 100,000 small sysfs files to read (issue 10, "Scale")."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = _read_all(fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            raise SysRootReadError(path, "missing") from None
        except PermissionError:
            raise SysRootReadError(path, "permission denied; run as a user who may read it") from None
        except OSError as e:
            raise SysRootReadError(path, os.strerror(e.errno) if e.errno else str(e)) from None
        return data.decode("utf-8", errors="replace")

    def read_optional(self, path: Path) -> str | None:
        """Text of `path`, or None when the file is absent (many sysfs files are optional).

        Permission and I/O errors still raise: a file that exists but cannot be read is news.
        """
        try:
            return self.read(path)
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
            return int(line, 0) if line.startswith("0x") else int(line)
        except ValueError:
            raise SysRootReadError(path, f"expected an integer, found {line[:40]!r}") from None

    def exists(self, path: Path) -> bool:
        return path.exists()

    def listdir(self, path: Path) -> list[str]:
        """Entries of a folder; [] when it is absent."""
        return _safe_listdir(path)

    def readlink(self, path: Path) -> str | None:
        try:
            return os.readlink(path)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EINVAL):
                return None
            raise SysRootReadError(path, os.strerror(e.errno)) from None

    # -- snapshots ------------------------------------------------------------------------------
    def later(self) -> tuple["SysRoot", float] | None:
        """(second capture, seconds between captures) for a snapshot that holds one, else None."""
        meta_path = self.root / SNAPSHOT_META_DIR / "meta.json"
        t1 = self.root / SNAPSHOT_META_DIR / "t1"
        if not meta_path.exists() or not t1.is_dir():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            interval = float(meta["interval"])
        except (OSError, ValueError, KeyError, TypeError):
            raise SysRootReadError(meta_path, "not a coremap snapshot description; capture again") from None
        return SysRoot(t1, check=False), interval

    def snapshot_meta(self) -> dict | None:
        """The snapshot's meta.json (host, time, coremap version), or None for a live root/fixture."""
        p = self.root / SNAPSHOT_META_DIR / "meta.json"
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            raise SysRootReadError(p, "not a coremap snapshot description; capture again") from None


def _read_all(fd: int) -> bytes:
    """Everything up to end of file: sysfs hands a whole attribute to the first read, but a procfs
    file such as /proc/interrupts on a big machine comes in several."""
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _exists(path: Path) -> bool:
    """Path.exists() that says False where it may not look (tracefs is mode 700: a user cannot
    even stat what lies inside it) instead of raising PermissionError."""
    try:
        return path.exists()
    except PermissionError:
        return False


def _safe_listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []
    except PermissionError:
        raise SysRootReadError(path, "permission denied; run as a user who may read it") from None
