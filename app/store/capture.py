"""`coremap snapshot`: capture the parts of /sys and /proc that coremap reads into a tarball that
`--root` accepts once extracted, like hwloc-gather-topology. No Qt, no display: runs on a server.
And the one way such a tarball is read back (check_tarball, extract_tarball), whoever wrote it.

Layout of the tarball (every member under one top folder, so `tar xf` gives DIR/<top>/{sys,proc}):

    <host>-<YYYYmmddTHHMMSS>/sys/devices/system/cpu/...      topology, caches, cpufreq limits, masks
    <host>-<...>/sys/devices/system/node/...                 NUMA nodes
    <host>-<...>/sys/bus/pci/devices/*  (symlinks, as in sysfs) and the devices they point to
    <host>-<...>/sys/class/net/*        (symlinks)
    <host>-<...>/proc/{interrupts,softirqs,stat,cpuinfo,cmdline,version}, proc/sys/kernel/*, proc/irq/N/*
    <host>-<...>/proc/PID/{comm,cmdline,...}, proc/PID/task/TID/{stat,status,...}   threads (capture_threads.py)
    <host>-<...>/sys/fs/cgroup/.../cpuset.*    the cpusets the threads are in
    <host>-<...>/.coremap/thread_names.json     the full Java names of the threads whose comm is cut
    <host>-<...>/.coremap/t1/proc/{interrupts,softirqs,stat}   the counters again, `interval` s later
    <host>-<...>/.coremap/meta.json

sysfs reports every attribute as 4096 bytes long (fs/sysfs/file.c: the size of a page), so each file
is read and stored with its real length. Unreadable files (permission, EIO from a driver, an IRQ freed
between listing and reading) are skipped and listed in meta.json "skipped". What is read is bounded
twice: each file by SysRoot's limit for its kind, and all of them together by MAX_CAPTURED (a capture
of a capture holding 240 sparse 8 MiB IRQ files took 2 GB before).

A tarball to read (a host's snapshot brought over ssh, the window's own capture for a session) is
checked member by member before anything is written: at most MAX_MEMBERS members, none larger than
MAX_MEMBER, MAX_EXTRACTED in all (counted while reading, so a gzip bomb stops at the limit), one top
folder, only folders, files and relative links that stay inside; then extracted with tarfile's
"data" filter, which refuses the same again (absolute names, links out, devices).
"""
from __future__ import annotations

import datetime as _dt
import io
import json
import os
import posixpath
import re
import socket
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import app
from app.atomic import AtomicWriteError, atomic_writer, check_output_path
from app.errors import CoremapError, SysRootReadError
from app.inputs import MiB
from app.machine.identity import read_machine_id
from app.parse.json_text import JsonInputError, load_json
from app.store.capture_threads import CapturedThreads, capture_threads
from app.sysroot import SNAPSHOT_META_DIR, SysRoot

FORMAT = 1

# What one capture may hold: a 1,152-CPU machine's snapshot is ~30 MB, most of it /proc/interrupts twice.
MAX_CAPTURED = 256 * MiB
MAX_TARBALL = 256 * MiB          # as sent or stored, compressed
MAX_EXTRACTED = 1024 * MiB
MAX_MEMBERS = 500_000
MAX_MEMBER = 256 * MiB           # the largest file SysRoot reads (READ_LIMITS)
MAX_META = 1 * MiB

COUNTERS = ("interrupts", "softirqs", "stat")
PROC_FILES = COUNTERS + ("cpuinfo", "cmdline", "version", "sys/kernel/osrelease", "sys/kernel/hostname")
CPU_TOP_FILES = ("online", "offline", "possible", "present", "isolated", "nohz_full", "kernel_max",
                 "smt/active", "smt/control")
CPU_FILES = ("online", "cpu_capacity")
CPUFREQ_FILES = ("cpuinfo_min_freq", "cpuinfo_max_freq")      # plus every scaling_*
NODE_TOP_FILES = ("online", "possible", "has_cpu", "has_memory", "has_normal_memory")
NODE_FILES = ("cpulist", "cpumap", "distance", "meminfo")
IRQ_FILES = ("smp_affinity", "smp_affinity_list", "effective_affinity", "effective_affinity_list",
             "node", "affinity_hint")
PCI_FILES = ("vendor", "device", "class", "numa_node", "local_cpulist", "local_cpus", "irq")
HYBRID_PMUS = ("cpu_core", "cpu_atom")    # Intel hybrid: sys/devices/cpu_core/cpus lists the P-cores
# The kernel's knobs and masks a tuning changes (tuned's cpu-partitioning and latency profiles, coremap's
# isolate), kept so that a diff of two captures says which differ (app/store/diff.py names them).
KNOB_FILES = ("proc/sys/kernel/sched_rt_runtime_us", "proc/sys/kernel/sched_rt_period_us",
              "proc/sys/kernel/numa_balancing", "proc/sys/kernel/hung_task_timeout_secs",
              "proc/sys/kernel/watchdog", "proc/sys/kernel/nmi_watchdog", "proc/sys/kernel/watchdog_cpumask",
              "proc/sys/kernel/timer_migration", "proc/sys/vm/stat_interval",
              "sys/kernel/mm/transparent_hugepage/enabled", "sys/kernel/mm/transparent_hugepage/defrag",
              "sys/kernel/mm/ksm/run", "sys/devices/virtual/workqueue/cpumask",
              "sys/devices/system/clocksource/clocksource0/current_clocksource")

_CPU_DIR = re.compile(r"^cpu[0-9]{1,5}$", re.ASCII)
_NODE_DIR = re.compile(r"^node[0-9]{1,5}$", re.ASCII)
_INDEX_DIR = re.compile(r"^index[0-9]{1,3}$", re.ASCII)


class SnapshotError(CoremapError):
    """A snapshot that cannot be written (bad output path) or a root that cannot be captured."""


@dataclass(frozen=True)
class SnapshotResult:
    """What take_snapshot wrote (and `coremap snapshot` prints): the tarball, its top folder, how many
    files and links it holds, the seconds between its two counter captures, what was skipped."""
    path: Path
    top: str                         # the top folder inside the tarball
    files: int
    links: int
    interval: float | None           # seconds between the two counter captures; None without one
    skipped: list[str] = field(default_factory=list)
    threads: int | None = None       # threads captured; None when not asked for
    threads_cut: str | None = None   # why not every thread was captured


class _Capture:
    """Reads files under a root into an in-memory list of tar members (relative paths)."""

    def __init__(self, root: SysRoot, budget: list[int] | None = None):
        self.root = root
        self.files: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.skipped: list[str] = []
        self.budget = budget if budget is not None else [MAX_CAPTURED]     # bytes left, shared with t1's

    def file(self, rel: str, *, optional: bool = True, dest: str | None = None) -> bytes | None:
        # Through the SysRoot: a capture of a capture reads only its regular files, bounded, never
        # through a link that leaves it (app/sysroot.py).
        try:
            data = self.root.read_bytes(self.root.path(rel))
        except SysRootReadError as e:
            if e.reason == "missing":
                if not optional:
                    self.skipped.append(f"{rel}: missing")
            elif e.reason != "is a folder, not a file":
                # Permission (e.g. proc/irq/N/* to a non-root user on some kernels), EIO/EINVAL from a
                # driver's show() method, or an IRQ/task freed between listing and reading: note it, go on.
                self.skipped.append(f"{rel}: {e.reason}")
            return None
        self.budget[0] -= len(data)
        if self.budget[0] < 0:
            raise SnapshotError(f"{self.root.root}: its files hold more than the {MAX_CAPTURED // MiB} MiB a "
                                "machine's capture does (sparse or padded files?); not a capture coremap copies")
        self.files[dest or rel] = data
        return data

    def listdir(self, rel: str) -> list[str]:
        try:
            return self.root.listdir(self.root.path(rel))
        except SysRootReadError as e:
            self.skipped.append(f"{rel}/: {e.reason}")
            return []

    def regular_files(self, rel: str, *, exclude=("uevent",)) -> None:
        for name in self.listdir(rel):
            p = self.root.path(rel, name)
            if name in exclude or self.root.readlink(p) is not None or self.root.is_dir(p):
                continue
            self.file(f"{rel}/{name}")

    def link(self, rel: str) -> str | None:
        """Store `rel` as a symlink with sysfs's own relative target; the normalised target path
        (relative to the root) is returned, or None when it is not a link or would leave the root."""
        try:
            target = self.root.readlink(self.root.path(rel))
        except SysRootReadError:
            # Unreadable folder on the way: nothing to store (reported by the reads that need it).
            return None
        if target is None:
            # Not a link, or removed meanwhile (a hot-unplugged device): nothing to store.
            return None
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if posixpath.isabs(target) or resolved.startswith("../") or resolved == "..":
            self.skipped.append(f"{rel}: link to {target} leaves the captured tree")
            return None
        self.links[rel] = target
        return resolved


def _capture_static(c: _Capture) -> None:
    cpu = "sys/devices/system/cpu"
    for name in CPU_TOP_FILES:
        c.file(f"{cpu}/{name}")
    for d in c.listdir(cpu):
        if not _CPU_DIR.match(d):
            continue
        for name in CPU_FILES:
            c.file(f"{cpu}/{d}/{name}")
        c.regular_files(f"{cpu}/{d}/topology")
        for idx in c.listdir(f"{cpu}/{d}/cache"):
            if _INDEX_DIR.match(idx):
                c.regular_files(f"{cpu}/{d}/cache/{idx}")
        freq = f"{cpu}/{d}/cpufreq"      # a link to ../cpufreq/policyN on live systems: read through it
        for name in c.listdir(freq):
            if name in CPUFREQ_FILES or name.startswith("scaling_"):
                c.file(f"{freq}/{name}")
    node = "sys/devices/system/node"
    for name in NODE_TOP_FILES:
        c.file(f"{node}/{name}")
    for d in c.listdir(node):
        if _NODE_DIR.match(d):
            for name in NODE_FILES:
                c.file(f"{node}/{d}/{name}")
    for pmu in HYBRID_PMUS:
        c.file(f"sys/devices/{pmu}/cpus")
    for name in PROC_FILES:
        if name not in COUNTERS:         # read first, by take_snapshot, to time the interval
            c.file(f"proc/{name}")
    c.file("proc/irq/default_smp_affinity")
    for name in KNOB_FILES:
        c.file(name)
    for irq in c.listdir("proc/irq"):
        if irq.isdigit():
            for name in IRQ_FILES:
                c.file(f"proc/irq/{irq}/{name}")
    for dev in c.listdir("sys/bus/pci/devices"):
        target = c.link(f"sys/bus/pci/devices/{dev}")
        if target is None:
            continue
        for name in PCI_FILES:
            c.file(f"{target}/{name}")
        for irq in c.listdir(f"{target}/msi_irqs"):
            c.file(f"{target}/msi_irqs/{irq}")
        c.link(f"{target}/driver")
    for iface in c.listdir("sys/class/net"):
        c.link(f"sys/class/net/{iface}")


def _capture_threads(c: _Capture) -> CapturedThreads:
    """Every thread's files into `c`, counted against its budget (its own bounds: capture_threads)."""
    kept = capture_threads(c.root)
    c.budget[0] -= sum(len(v) for v in kept.files.values())
    if c.budget[0] < 0:
        raise SnapshotError(f"{c.root.root}: its files hold more than the {MAX_CAPTURED // MiB} MiB a "
                            "machine's capture does; capture it with --no-threads")
    c.files.update(kept.files)
    return kept


def _host_of(c: _Capture) -> str:
    text = c.files.get("proc/sys/kernel/hostname")
    if text is not None and text.strip():
        return text.decode("utf-8", "replace").strip()
    if c.root.is_live:
        return socket.gethostname()
    return c.root.root.resolve().name or "machine"


def _kernel_of(c: _Capture) -> str | None:
    for rel in ("proc/sys/kernel/osrelease", "proc/version"):
        text = c.files.get(rel)
        if text:
            return text.decode("utf-8", "replace").strip()
    return None


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "machine"


def take_snapshot(out: str | os.PathLike, root: SysRoot | None = None, *, interval: float = 1.0,
                  second: bool = True, threads: bool = True, sleep=time.sleep) -> SnapshotResult:
    """Capture `root` (default: this machine) into the tarball `out`, written atomically.

    With `second`, the counters (interrupts, softirqs, stat) are read again `interval` seconds after
    the first read, so rates can be shown for the captured machine. For a capture root (not the live
    machine) the counters cannot move: its own second capture, if it holds one, is carried over;
    otherwise the snapshot has none. With `threads`, every thread's files too (app/store/capture_threads.py).
    """
    root = root or SysRoot("/")
    try:
        out = check_output_path(out)
    except AtomicWriteError as e:
        raise SnapshotError(str(e)) from None
    if not interval > 0 and second:
        raise SnapshotError(f"--interval {interval}: give a positive number of seconds, or --no-second")
    c = _Capture(root)
    live = root.is_live
    # The counters first, back to back, so `interval` is measured between the two reads of them.
    t0 = time.monotonic()
    for name in COUNTERS:
        c.file(f"proc/{name}", optional=False)
    t0 = (t0 + time.monotonic()) / 2
    when = _dt.datetime.now().astimezone()
    _capture_static(c)
    if not c.files:
        raise SnapshotError(f"{root.root}: nothing to capture (no sys/devices/system/cpu, no proc/); "
                            "point --root at a folder that holds sys/ and proc/")
    kept = _capture_threads(c) if threads else None
    t1_files: dict[str, bytes] = {}
    measured: float | None = None
    if second and live:
        wait = t0 + interval - time.monotonic()
        if wait > 0:
            sleep(wait)
        t1 = time.monotonic()
        sub = _Capture(root, c.budget)
        for name in COUNTERS:
            sub.file(f"proc/{name}", optional=False)
        t1 = (t1 + time.monotonic()) / 2
        c.skipped += [f"{SNAPSHOT_META_DIR}/t1/{s}" for s in sub.skipped]
        t1_files = {f"{SNAPSHOT_META_DIR}/t1/{k}": v for k, v in sub.files.items()}
        measured = round(t1 - t0, 6)
    elif second:
        later = root.later()
        if later is not None:
            sub = _Capture(later[0], c.budget)
            for name in COUNTERS:
                sub.file(f"proc/{name}")
            t1_files = {f"{SNAPSHOT_META_DIR}/t1/{k}": v for k, v in sub.files.items()}
            measured = later[1]
    host = _host_of(c)
    top = f"{_safe_name(host)}-{when:%Y%m%dT%H%M%S}"
    meta = {"format": FORMAT, "coremap": app.__version__, "host": host,
            "time": when.isoformat(timespec="seconds"), "interval": measured if t1_files else None,
            "kernel": _kernel_of(c), "live": live, "skipped": c.skipped,
            "machine_id": read_machine_id(root),    # what a probe result is checked against (issue 30)
            "threads": None if kept is None else {"processes": kept.processes, "tasks": kept.tasks, "cut": kept.cut}}
    files = dict(c.files)
    files.update(t1_files)
    files[f"{SNAPSHOT_META_DIR}/meta.json"] = (json.dumps(meta, indent=1) + "\n").encode()
    _write_tar(out, top, files, c.links, when.timestamp())
    return SnapshotResult(out, top, len(files), len(c.links), meta["interval"], c.skipped,
                          kept.tasks if kept else None, kept.cut if kept else None)


def _write_tar(out: Path, top: str, files: dict[str, bytes], links: dict[str, str], mtime: float) -> None:
    dirs = set()
    for rel in list(files) + list(links):
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    with atomic_writer(out) as f:
        with tarfile.open(fileobj=f, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
            tf.addfile(_info(top, tarfile.DIRTYPE, mtime))
            for d in sorted(dirs):
                tf.addfile(_info(f"{top}/{d}", tarfile.DIRTYPE, mtime))
            for rel in sorted(files):
                data = files[rel]
                ti = _info(f"{top}/{rel}", tarfile.REGTYPE, mtime)
                ti.size = len(data)          # the real length, not sysfs's 4096
                tf.addfile(ti, io.BytesIO(data))
            for rel in sorted(links):
                ti = _info(f"{top}/{rel}", tarfile.SYMTYPE, mtime)
                ti.linkname = links[rel]
                tf.addfile(ti)


def _info(name: str, kind: bytes, mtime: float) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mtime = int(mtime)
    ti.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    ti.uname = ti.gname = "root"
    return ti


# -- reading a tarball back ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tarball:
    """What a snapshot tarball holds: its top folder, its files and links, its meta.json."""
    top: str
    files: int
    links: int
    meta: dict


def check_tarball(f: BinaryIO, who: str, *, one_top: bool = True) -> Tarball:
    """What the snapshot tarball in `f` holds, when it is one coremap may extract (the module
    docstring); SnapshotError starting with `who` ("node7 sent a snapshot", "/tmp/x.tar.gz") otherwise.
    `one_top=False` takes a capture by another tool, with several top entries (a must-gather's
    sysinfo.tgz: proc/, sys/, machineinfo.json), under every other bound; its `top` is then ""."""
    top, total, n, files, links, meta = None, 0, 0, 0, 0, {}
    try:
        with tarfile.open(fileobj=f, mode="r:gz") as tf:
            for m in tf:
                n += 1
                total += max(0, m.size)
                if n > MAX_MEMBERS or total > MAX_EXTRACTED or m.size > MAX_MEMBER:
                    raise SnapshotError(f"{who} that unpacks to more than {MAX_MEMBERS:,} files, "
                                        f"{MAX_MEMBER // MiB} MiB in one or {MAX_EXTRACTED // MiB} MiB in all; "
                                        "not a coremap snapshot")
                name = m.name
                parts = name.split("/")
                if name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir() or m.issym()):
                    raise SnapshotError(f"{who} holding {name[:60]!r}, which no coremap snapshot holds (an "
                                        "absolute path, '..', or a device)")
                if m.issym() and (m.linkname.startswith("/") or not _inside(
                        posixpath.normpath(posixpath.join(posixpath.dirname(name), m.linkname)), parts[0], one_top)):
                    raise SnapshotError(f"{who} whose link {name[:60]!r} leaves it")
                if top is None:
                    top = parts[0]
                elif parts[0] != top:
                    if one_top:
                        raise SnapshotError(f"{who} with more than one top folder")
                    top = "."
                files += m.isfile()
                links += m.issym()
                if m.isfile() and parts[1:] == [SNAPSHOT_META_DIR, "meta.json"] and m.size <= MAX_META:
                    meta = _meta(tf.extractfile(m).read(MAX_META), who)
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise SnapshotError(f"{who} that is not a gzip'ed tar ({str(e)[:80]})") from None
    if top is None or top in ("", "..") or (top == "." and one_top):
        raise SnapshotError(f"{who} that is empty")
    return Tarball("" if top == "." else top, files, links, meta)


def _inside(target: str, top: str, one_top: bool) -> bool:
    """Whether a link's normalised target stays in the tarball: in its own top folder, or (several top
    entries) anywhere in it."""
    if one_top:
        return target.startswith(top + "/")
    return target not in ("..", ".") and not target.startswith("../")


def extract_tarball(f: BinaryIO, dest: Path, who: str, *, one_top: bool = True) -> Path:
    """Extract the snapshot tarball in `f` (checked first: check_tarball) into the folder `dest`, with
    tarfile's "data" filter; the extracted top folder (`dest` itself for several, `one_top=False`)."""
    top = check_tarball(f, who, one_top=one_top).top
    f.seek(0)
    try:
        with tarfile.open(fileobj=f, mode="r:gz") as tf:
            tf.extractall(dest, filter="data")
    except (tarfile.TarError, EOFError, ValueError) as e:
        # FilterError (a TarError): what check_tarball let through and the filter did not.
        raise SnapshotError(f"{who} that cannot be extracted ({str(e)[:80]})") from None
    return dest / top


def _meta(raw: bytes, who: str) -> dict:
    try:
        meta = load_json(raw, what=f"{who}: meta.json", limit=MAX_META)
    except JsonInputError:
        return {}
    return meta if isinstance(meta, dict) else {}
