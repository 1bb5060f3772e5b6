"""A pin onto quiet CPUs while a cpuset shield stands (app/quiet/shield.py): the thread is in
/coremap-system, which allows only the housekeeping CPUs, so sched_setaffinity(2) alone would be
refused (EINVAL) or cut to them. These are the steps that come first, in the same batch (one undo
reverts all of it):

  cgroup v1   /coremap-pinned made (it allows every CPU) if it is not there, and the thread alone moved
              into it (its `tasks` file): its own mask then decides, its siblings stay in the shield
  cgroup v2   a cgroup holds whole processes: the process moves into /coremap-pinned, and its other
              threads get the shield's CPUs as their masks, so only the pinned thread runs on the
              quiet CPUs (threads it starts later inherit their creator's mask)

A process target moves whole, in either version. Nothing is added when no shield stands, or when the
thread's cpuset already allows the CPUs asked for.
"""
from __future__ import annotations

from app.format import CPUSET_NAMES
from app.machine.cgroups import cgroup_of, read_cpuset_layout
from app.machine.threads import TaskGone, read_task
from app.pinning.cgroups import PINNED, SYSTEM, CpusetWriter
from app.pinning.targets import PinTarget
from app.pinning.writers import Step
from app.sysroot import SysRoot


def placement_steps(root: SysRoot, target: PinTarget, cpus, expanded: list[PinTarget], online) -> list[Step]:
    """The steps that put `target` (a thread, or a process given as its threads `expanded`) where
    `cpus` are allowed, before its affinity steps; [] when none are needed."""
    if not root.is_live or target.kind not in ("thread", "process"):
        return []
    layout = read_cpuset_layout(root)
    if not layout.usable:
        return []
    pid = target.id if target.kind == "process" else (target.pid if target.pid is not None else _tgid(root, target))
    if pid is None or cgroup_of(root, pid, None if target.kind == "process" else target.id) != CPUSET_NAMES[SYSTEM]:
        return []
    writer = CpusetWriter(root)
    shield = writer.read(PinTarget("cpuset", SYSTEM)) or ()
    if set(cpus) <= set(shield):
        return []
    steps = []
    if not writer.read(PinTarget("cpuset", PINNED)):
        steps.append(Step(PinTarget("cpuset", PINNED), tuple(sorted(online))))
    if target.kind == "thread" and layout.kind == "v1":
        return steps + [Step(PinTarget("cgroupthread", target.id, pid, target.label), (PINNED,))]
    steps.append(Step(PinTarget("cgroup", pid), (PINNED,)))
    if target.kind == "thread":
        pinned = {target.id}
        for tid in _tids(root, pid):
            if tid not in pinned:
                steps.append(Step(PinTarget("thread", tid, pid), tuple(shield)))
    return steps


def _tgid(root: SysRoot, target: PinTarget) -> int | None:
    try:
        return read_task(root, target.id, target.id, detail="fast").pid
    except TaskGone:
        return None


def _tids(root: SysRoot, pid: int) -> list[int]:
    return sorted(int(n) for n in root.listdir(root.task_dir(pid, None, "task")) if n.isdigit())
