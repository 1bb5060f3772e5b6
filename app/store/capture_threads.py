"""The threads of a capture: what `coremap snapshot` keeps of /proc/PID/task/TID, so that `coremap
threads --root CAPTURE` (and a diff, and the window) show where each thread ran and was allowed to run.

For each process, its comm, cmdline, cpuset and cgroup; for each of its threads the files the thread
reader reads (app/machine/threads.py: stat with policy and RT priority, status with the allowed CPUs,
sched with the migrations) and its comm, cpuset and cgroup. The cgroups the threads' cpusets name are
kept too (their cpuset.cpus and effective CPUs, app/machine/cpusets.py reads them), and the full Java
names coremap reads from verified JVMs, stored as data (app/machine/thread_names.py, CAPTURED_NAMES):
a capture cannot ask a JVM. A capture is read back by the same readers, through the capture's confined
SysRoot, so it answers as the machine did.

Bounded: at most MAX_TASKS threads and MAX_THREAD_BYTES of their files, whole processes only; a
capture cut short says so in its meta.json ("threads": "cut") and `coremap threads` repeats it.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.errors import SysRootReadError
from app.inputs import MiB
from app.machine.java import full_thread_names
from app.machine.thread_names import CAPTURED_NAMES, ThreadNames, names_document
from app.machine.threads import CMDLINE_LIMIT, DETAIL_LIMIT, STAT_LIMIT
from app.sysroot import SNAPSHOT_META_DIR, SysRoot

MAX_TASKS = 32_768                  # threads: a big JVM host has ~5,000
MAX_THREAD_BYTES = 64 * MiB         # their files: ~4 KiB a thread (sched is most of it)
PROCESS_FILES = (("comm", STAT_LIMIT), ("cmdline", CMDLINE_LIMIT), ("cpuset", STAT_LIMIT),
                 ("cgroup", DETAIL_LIMIT), ("status", DETAIL_LIMIT))
TASK_FILES = (("stat", STAT_LIMIT), ("status", DETAIL_LIMIT), ("sched", DETAIL_LIMIT), ("comm", STAT_LIMIT),
              ("cpuset", STAT_LIMIT), ("cgroup", DETAIL_LIMIT))
# The cgroup files of a cpuset the threads name (v2 under sys/fs/cgroup, v1 under sys/fs/cgroup/cpuset):
# app/machine/cpusets.py and app/machine/cgroups.py read them.
CGROUP_MOUNTS = (("fs", "cgroup"), ("fs", "cgroup", "cpuset"))
CGROUP_FILES = ("cpuset.cpus", "cpuset.cpus.effective", "cpuset.effective_cpus", "cpuset.mems",
                "cpuset.cpus.partition")
CGROUP_TOP_FILES = ("cgroup.controllers", "cgroup.subtree_control")


@dataclass(frozen=True)
class CapturedThreads:
    """What capture_threads kept: files by path under the root, and what meta.json says of them."""
    files: dict[str, bytes]
    processes: int
    tasks: int
    cut: str | None                  # why not every thread was kept, or None


def capture_threads(root: SysRoot) -> CapturedThreads:
    """The thread files of every process under `root` (module docstring), within the bounds."""
    files: dict[str, bytes] = {}
    used, tasks, processes, cut = 0, 0, 0, None
    cpusets: set[str] = set()
    pids = sorted(int(p) for p in root.listdir_small(str(root.proc())) if p.isascii() and p.isdigit())
    for n, pid in enumerate(pids):
        got = _process(root, pid)
        if got is None:
            continue            # exited between listing proc/ and reading it: normal churn
        size = sum(len(v) for v in got.values())
        threads = sum(1 for k in got if k.endswith("/stat"))
        if tasks + threads > MAX_TASKS or used + size > MAX_THREAD_BYTES:
            cut = (f"threads of {processes:,} of {len(pids):,} processes kept ({tasks:,} threads, "
                   f"{used / MiB:.1f} MiB): a capture holds at most {MAX_TASKS:,} threads and "
                   f"{MAX_THREAD_BYTES // MiB} MiB of their files")
            break
        files.update(got)
        used, tasks, processes = used + size, tasks + threads, processes + 1
        cpusets.update(v.decode("utf-8", "replace").strip() for k, v in got.items() if k.endswith("/cpuset"))
    files.update(_cgroups(root, cpusets))
    names = _names(root, files)
    if root.is_live or names.names or names.unavailable:
        files[f"{SNAPSHOT_META_DIR}/{CAPTURED_NAMES}"] = names_document(names)
    return CapturedThreads(files, processes, tasks, cut)


def _process(root: SysRoot, pid: int) -> dict[str, bytes] | None:
    """One process's files, its threads' included; None when it is gone."""
    base = f"proc/{pid}"
    out: dict[str, bytes] = {}
    for name, limit in PROCESS_FILES:
        data = _read(root, f"{base}/{name}", limit)
        if data is not None:
            out[f"{base}/{name}"] = data
    if f"{base}/comm" not in out and f"{base}/status" not in out:
        return None
    for tid in root.listdir_small(str(root.path(base, "task"))):
        if not (tid.isascii() and tid.isdigit()):
            continue
        task = f"{base}/task/{tid}"
        stat = _read(root, f"{task}/stat", STAT_LIMIT)
        if stat is None:
            continue            # exited since the listing
        out[f"{task}/stat"] = stat
        for name, limit in TASK_FILES[1:]:
            data = _read(root, f"{task}/{name}", limit)
            if data is not None:
                out[f"{task}/{name}"] = data
    return out


def _read(root: SysRoot, rel: str, limit: int) -> bytes | None:
    try:
        return root.read_small(str(root.path(rel)), limit)
    except SysRootReadError:
        # Permission (another user's sched or cgroup on a hardened kernel), or an I/O error of a task
        # that is exiting: that file is not kept, the thread is.
        return None


def _cgroups(root: SysRoot, cpusets: set[str]) -> dict[str, bytes]:
    """The cpuset files of the cgroups `cpusets` names, and of the hierarchies' roots."""
    out: dict[str, bytes] = {}
    for mount in CGROUP_MOUNTS:
        top = "sys/" + "/".join(mount)
        for name in CGROUP_TOP_FILES + CGROUP_FILES:
            data = _read(root, f"{top}/{name}", STAT_LIMIT)
            if data is not None:
                out[f"{top}/{name}"] = data
        for where in sorted(cpusets):
            parts = [p for p in where.strip("/").split("/") if p]
            if not parts or any(p in (".", "..") for p in parts):
                continue        # the root (done above), or a path that climbs: none from a real machine
            for name in CGROUP_FILES:
                rel = f"{top}/{'/'.join(parts)}/{name}"
                data = _read(root, rel, STAT_LIMIT)
                if data is not None:
                    out[rel] = data
    return out



def _names(root: SysRoot, files: dict[str, bytes]) -> ThreadNames:
    """The full Java names of the captured threads: read now from their verified JVMs on the live
    machine (only threads whose comm the kernel cut cost a read), or carried over from a capture."""
    threads, comms = [], {}
    for rel, data in files.items():
        parts = rel.split("/")          # proc/PID/task/TID/stat or proc/PID/comm
        if len(parts) == 5 and parts[4] == "stat":
            threads.append((int(parts[1]), int(parts[3]), data[data.find(b"(") + 1:data.rfind(b")")]
                            .decode("utf-8", "replace")))
        elif len(parts) == 3 and parts[2] == "comm":
            comms[int(parts[1])] = data.decode("utf-8", "replace").rstrip("\n")
    return full_thread_names(threads, root, comms)
