"""Which CPUs a thread's cpuset allows: proc/PID/task/TID/cpuset names the cgroup, and the cgroup's
effective CPU list says what the kernel lets it use (cgroup v2: cpuset.cpus.effective under
sys/fs/cgroup; cgroup v1: cpuset.effective_cpus under sys/fs/cgroup/cpuset;
Documentation/admin-guide/cgroup-v2.rst "Cpuset", Documentation/admin-guide/cgroup-v1/cpusets.rst).
A sched_setaffinity(2) mask is ANDed with it, so a pin outside it is refused (EINVAL) or trimmed.
"""
from __future__ import annotations

from app.errors import CpuListError, SysRootReadError
from app.parse.cpulist import parse_cpulist
from app.sysroot import SysRoot

_MOUNTS = (("fs", "cgroup"), ("fs", "cgroup", "cpuset"))
_FILES = ("cpuset.cpus.effective", "cpuset.effective_cpus")


def read_cpuset_path(root: SysRoot, pid: int, tid: int) -> str | None:
    """The cpuset cgroup of a thread ("/" for the root one); None when it cannot be read."""
    try:
        where = (root.read_first_line(root.task_dir(pid, tid, "cpuset")) or "").strip()
    except SysRootReadError:
        return None
    return where or None


def read_cpuset_cpus(root: SysRoot, pid: int, tid: int) -> tuple[tuple[int, ...] | None, str]:
    """(the CPUs the thread's cpuset allows, the cpuset's path); (None, path or "?") when unreadable."""
    where = read_cpuset_path(root, pid, tid)
    if where is None:
        return None, "?"
    return cpuset_cpus_at(root, where), where


def cpuset_cpus_at(root: SysRoot, where: str) -> tuple[int, ...] | None:
    """The effective CPUs of the cpuset cgroup `where` (v2 or v1 layout); None when unreadable."""
    rel = [p for p in where.strip("/").split("/") if p]
    if any(p in (".", "..") for p in rel):
        return None         # a cgroup path from the machine never climbs; a forged one is not followed
    for mount in _MOUNTS:
        for name in _FILES:
            path = root.sys(*mount, *rel, name)
            try:
                text = root.read_optional(path)
            except SysRootReadError:
                continue
            if text is not None and text.strip():
                try:
                    return parse_cpulist(text, what=str(path))
                except CpuListError:
                    continue
    return None
