"""Which cpuset machinery the machine offers for keeping CPUs quiet at run time, and where each task is.

The kernel's own way to keep CPUs out of general scheduling at run time is a cpuset: a task may run
only on its cpuset's CPUs, whatever mask it asks sched_setaffinity(2) for, and a child process starts
in its parent's cpuset (Documentation/admin-guide/cgroup-v1/cpusets.rst; cgroup-v2.rst "Cpuset").

  v1        a cpuset hierarchy mounted (sys/fs/cgroup/cpuset/cpuset.cpus): coremap builds a shield
            the way `cset shield` does, a child cpuset of the root holding everything else
  v2        the unified hierarchy offers the cpuset controller (sys/fs/cgroup/cgroup.controllers):
            the same shield, a child of the root with +cpuset in the root's subtree_control
  systemd   v2 with systemd as PID 1: its slices own the tree, so their AllowedCPUs= is set at run
            time (systemctl set-property --runtime) instead of moving processes out of their units
  none      no cpuset (a container without it, a kernel without CONFIG_CPUSETS): tasks are moved
            one by one with sched_setaffinity, which new tasks may undo

read_cpuset_layout says which, from the files alone; app/quiet/ decides what to do with it.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.errors import CpuListError, SysRootReadError
from app.parse.cpulist import parse_cpulist
from app.sysroot import SysRoot

_V1_MOUNT = ("fs", "cgroup", "cpuset")
_V2_MOUNT = ("fs", "cgroup")


@dataclass(frozen=True)
class CpusetLayout:
    """What the machine offers (see the module docstring). `mount`: the parts under sys/ of the cpuset
    hierarchy's root; `cpus`, `mems`: the root cpuset's; `why`: why there is none (for `none`)."""
    kind: str                           # "v1" | "v2" | "systemd" | "none"
    mount: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()
    mems: tuple[int, ...] = ()
    why: str = ""

    @property
    def usable(self) -> bool:
        return self.kind in ("v1", "v2")


def read_cpuset_layout(root: SysRoot) -> CpusetLayout:
    v1 = _cpus(root, _V1_MOUNT, "cpuset.cpus")
    if v1 is not None:
        return CpusetLayout("v1", _V1_MOUNT, v1, _cpus(root, _V1_MOUNT, "cpuset.mems") or (0,))
    try:
        controllers = (root.read_optional(root.sys(*_V2_MOUNT, "cgroup.controllers")) or "").split()
    except SysRootReadError:
        controllers = []
    if "cpuset" not in controllers:
        return CpusetLayout("none", why="no cpuset hierarchy: cgroup v1's cpuset is not mounted and cgroup v2 "
                                        "does not offer the cpuset controller")
    cpus = _cpus(root, _V2_MOUNT, "cpuset.cpus.effective") or ()
    mems = _cpus(root, _V2_MOUNT, "cpuset.mems.effective") or (0,)
    kind = "systemd" if _pid1(root) == "systemd" else "v2"
    return CpusetLayout(kind, _V2_MOUNT, cpus, mems)


def cgroup_of(root: SysRoot, pid: int, tid: int | None = None) -> str | None:
    """The cpuset cgroup of a process (or thread), as the kernel names it ("/" for the root, a path
    under the hierarchy otherwise; proc/PID/cpuset); None when it cannot be read (exited)."""
    path = root.task_dir(pid, tid, "cpuset") if tid is not None else root.proc(pid, "cpuset")
    try:
        text = root.read_first_line(path)
    except SysRootReadError:
        return None
    text = (text or "").strip()
    return text if text.startswith("/") and ".." not in text.split("/") else None


def procs_of(root: SysRoot, layout: CpusetLayout, name: str) -> list[int]:
    """The processes in the cgroup `name` (a child of the hierarchy's root, "" for the root)."""
    parts = (*layout.mount, name) if name else layout.mount
    try:
        text = root.read_optional(root.sys(*parts, "cgroup.procs"), limit=1 << 22) or ""
    except SysRootReadError:
        return []
    return [int(w) for w in text.split() if w.isascii() and w.isdigit()]


def _cpus(root: SysRoot, mount: tuple[str, ...], name: str) -> tuple[int, ...] | None:
    path = root.sys(*mount, name)
    try:
        text = root.read_optional(path)
        return parse_cpulist(text, what=str(path)) if text is not None else None
    except (SysRootReadError, CpuListError):
        return None


def _pid1(root: SysRoot) -> str:
    try:
        return (root.read_first_line(root.proc(1, "comm")) or "").strip()
    except SysRootReadError:
        return ""
