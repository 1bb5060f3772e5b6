"""SysRoot: the one place that spells /proc and /sys, and the one place that opens them (confined).

Every read of the machine goes through a SysRoot, so the same code runs on the live machine
(`SysRoot("/")`) and on a captured snapshot of another one (`SysRoot("/tmp/worker1")`), the way
prometheus/procfs takes its mount point as a parameter. Parsers never open files; readers in
`app.machine` call the methods here and hand text to `app.parse`.

SysRoot holds the layout: the path builders (proc(), sys(), cpu_dir(), irq_dir(), ...), the check
that a folder is a sysroot at all, the bound on each file it reads, and a snapshot's second capture.
Its reads and writes, confined to the root because a capture is hostile input, come from
ConfinedRoot (app/sysroot/confined.py, which says how).

A snapshot taken by `coremap snapshot` may hold a second capture of the counters
(interrupts, softirqs, stat) under `.coremap/t1/`, taken `interval` seconds after the first, so
rates can be shown for a machine that is not this one; `later()` returns it.
"""
from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path

from app.errors import NotASysRoot, SysRootReadError
from app.parse.json_text import JsonInputError, load_json
from app.sysroot.confined import (  # WRITABLE_TEST_ROOTS_ENV: the tests import it from here
    DEFAULT_READ_LIMIT,
    WRITABLE_TEST_ROOTS_ENV,
    ConfinedRoot,
    MiB,
)

__all__ = ["READ_LIMITS", "SNAPSHOT_META_DIR", "WRITABLE_TEST_ROOTS_ENV", "SysRoot", "valid_netdev"]

SNAPSHOT_META_DIR = ".coremap"
# The largest real file of each kind, times a margin. /proc/interrupts of a 1,152-CPU machine is 13 MB
# and grows with CPUs x IRQs; an 8,192-CPU one would be ~100 MB. Everything else coremap reads is a
# sysfs attribute (at most a page) or a small /proc file; maps of a big JVM run to a few MB.
READ_LIMITS = {"interrupts": 256 * MiB, "softirqs": 64 * MiB, "stat": 64 * MiB, "cpuinfo": 256 * MiB,
               "maps": 64 * MiB, "trace": 256 * MiB}


class SysRoot(ConfinedRoot):
    """A filesystem root holding `proc/` and `sys/` (the live machine's is "/")."""

    def __init__(self, root: str | os.PathLike = "/", *, check: bool = True):
        super().__init__(root)
        if check:
            self._check()

    def __repr__(self) -> str:
        return f"SysRoot({str(self.root)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, SysRoot) and self.root == other.root

    def __hash__(self) -> int:
        return hash(self.root)

    def _check(self) -> None:
        r = self.root
        try:
            st = os.stat(r)
        except FileNotFoundError:
            raise NotASysRoot(f"{r}: no such folder; point --root at a folder that holds sys/ and proc/") from None
        except OSError as e:
            raise NotASysRoot(f"{r}: cannot open it ({os.strerror(e.errno or 0)}); point --root at a folder "
                              "that holds sys/ and proc/") from None
        if not stat.S_ISDIR(st.st_mode):
            hint = (" (a snapshot tarball: extract it first with `tar xf`, then pass the folder)"
                    if r.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")) else "")
            raise NotASysRoot(f"{r}: not a folder{hint}")
        markers = ("sys/devices/system/cpu", "proc/stat", "proc/interrupts", "proc/cpuinfo")
        if any(self.exists(r / m) for m in markers):
            return
        # Captures often nest one level deeper (hwloc's tarballs hold NAME/sys, NAME/proc).
        inner = [d for d in self.listdir(r) if any(self.exists(r / d / m) for m in markers)]
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
        if not self._exists_quietly(t / "events"):
            old = self.sys("kernel", "debug", "tracing")
            if self._exists_quietly(old / "events"):
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

    def workqueue_cpumask(self) -> Path:
        """sys/devices/virtual/workqueue/cpumask: where unbound workqueues may run
        (Documentation/core-api/workqueue.rst, "Affinity Scopes"; a hex mask)."""
        return self.sys("devices", "virtual", "workqueue", "cpumask")

    def net_dir(self, netdev: str | None = None) -> Path:
        """sys/class/net, or sys/class/net/<netdev> for a name checked by `net_queue_mask`'s rule."""
        if netdev is None:
            return self.sys("class", "net")
        return self.sys("class", "net", _netdev(netdev))

    def net_queue_mask(self, netdev: str, kind: str, queue: int) -> Path:
        """sys/class/net/<netdev>/queues/rx-<queue>/rps_cpus (kind "rps") or tx-<queue>/xps_cpus
        ("xps"), hex masks (Documentation/networking/scaling.rst). Built only from a checked name and
        an integer, so a name from a journal or a helper request can never make a path elsewhere:
        ValueError for anything else."""
        if kind not in ("rps", "xps") or type(queue) is not int or not 0 <= queue < 1 << 16:
            raise ValueError(f"network queue mask {kind!r} {queue!r}: expected rps or xps and a queue number")
        folder = f"rx-{queue}" if kind == "rps" else f"tx-{queue}"
        return self.sys("class", "net", _netdev(netdev), "queues", folder, f"{kind}_cpus")

    # -- snapshots ------------------------------------------------------------------------------
    def later(self) -> tuple["SysRoot", float] | None:
        """(second capture, seconds between captures) for a snapshot that holds one, else None."""
        t1 = self.path(SNAPSHOT_META_DIR, "t1")
        meta = self.snapshot_meta()
        if meta is None or not self.is_dir(t1):
            return None
        try:
            interval = float(meta["interval"])
        except (KeyError, TypeError, ValueError):
            interval = math.nan
        if not (math.isfinite(interval) and 0 < interval <= 86400):
            raise SysRootReadError(self.path(SNAPSHOT_META_DIR, "meta.json"),
                                   "holds no valid interval between its captures; capture again")
        later = SysRoot(t1, check=False)
        later.notes = self.notes          # one list: what either capture refused is news
        return later, interval

    def snapshot_meta(self) -> dict | None:
        """The snapshot's meta.json (host, time, coremap version), or None for a live root/fixture."""
        p = self.path(SNAPSHOT_META_DIR, "meta.json")
        text = self.read_optional(p, limit=1 * MiB)
        if text is None:
            return None
        try:
            meta = load_json(text, what=str(p), limit=1 * MiB)
        except JsonInputError:
            meta = None
        if not isinstance(meta, dict):
            raise SysRootReadError(p, "not a coremap snapshot description; capture again")
        return meta

    def _read_limit(self, path) -> int:
        # ConfinedRoot.read_bytes asks this for the bound of a read that names none.
        return READ_LIMITS.get(os.path.basename(path), DEFAULT_READ_LIMIT)


# Network device names coremap builds paths from: the kernel's own rule (net/core/dev.c
# dev_valid_name: 1-15 bytes, not "." or "..", no "/", ":" or white space) narrowed to the characters
# real names use, so a name read from a hostile journal or request is plain text and never a path.
NETDEV_RE = re.compile(r"[A-Za-z0-9_.@+-]{1,15}")


def valid_netdev(name) -> bool:
    """Whether `name` is a network device name coremap writes a path with (NETDEV_RE)."""
    return type(name) is str and bool(NETDEV_RE.fullmatch(name)) and name not in (".", "..")


def _netdev(name) -> str:
    if not valid_netdev(name):
        raise ValueError(f"network device name {str(name)[:40]!r}: expected 1-15 letters, digits or _.@+-")
    return name

