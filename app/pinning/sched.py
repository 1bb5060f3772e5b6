"""A thread's scheduling policy and RT priority as a writer of the pin flow (kind "sched", id = the
tid, value (SCHED_* number, RT priority)): what tuna -p and chrt -p set, journalled with the value from
before, written with sched_setscheduler(2), read back, and put back by undo, restore and give-back like
any pin.

What the kernel refuses, and why (sched(7), sched_setscheduler(2); kernel/sched/syscalls.c
__sched_setscheduler), each said in one line before anything is journalled where it can be read first:
  - an RT priority outside 1-99 for fifo/rr, or other than 0 for the others: EINVAL (refused here as
    bad input, like a CPU this machine does not have);
  - SCHED_DEADLINE: it takes a runtime, deadline and period (sched_setattr), not a priority, and a
    deadline task refuses a plain policy change while it has bandwidth: coremap neither sets nor puts
    it back, and says so;
  - the CPU's stopper thread (migration/N): EINVAL, "changing the policy of the stop threads is a
    very bad idea";
  - an unprivileged user above its RLIMIT_RTPRIO (getrlimit(2); limits.conf "rtprio"): EPERM;
  - a real-time policy where the thread's cpu cgroup has no RT time (CONFIG_RT_GROUP_SCHED: a
    cgroup's cpu.rt_runtime_us is 0 unless given, Documentation/scheduler/sched-rt-group.rst): EPERM;
  - kernel.sched_rt_runtime_us = 0: the kernel takes it, but an RT task then never runs: refused.
"""
from __future__ import annotations

import os
import resource

from app.format import format_value
from app.machine.threads import TaskGone, read_task, read_tgid
from app.parse.task_stat import RT_POLICIES, RT_PRIORITY, SCHED_POLICIES, policy_name
from app.pinning.refusals import PinWriteError
from app.pinning.targets import PinTarget
from app.pinning.writers import UNKNOWN_START, Outcome, Prepared, Step, checked
from app.sysroot import SysRoot

SCHED_DEADLINE = 6
# What `coremap sched --policy` and the window's dialog offer: every policy but deadline.
SETTABLE = {name: number for number, name in SCHED_POLICIES.items() if number != SCHED_DEADLINE}
_RESET_ON_FORK = 0x40000000    # ORed into what sched_getscheduler(2) returns; stat leaves it out


def sched_target(tid: int, pid: int | None = None, label: str = "") -> PinTarget:
    return PinTarget("sched", int(tid), pid, label)


def sched_value(policy: str, priority: int | None) -> tuple[int, int]:
    """("fifo", 80) -> (1, 80); a policy without RT priority gets 0 when none is given. The range is
    sched_refusal's to check, not this one's."""
    if policy == "deadline":
        raise ValueError(deadline_sentence())
    if policy not in SETTABLE:
        raise ValueError(f"policy {policy[:20]!r}: choose one of {', '.join(SETTABLE)}")
    number = SETTABLE[policy]
    if priority is None:
        priority = RT_PRIORITY[0] if number in RT_POLICIES else 0
    return number, int(priority)


def deadline_sentence() -> str:
    return ("SCHED_DEADLINE takes a runtime, deadline and period, not a priority: coremap does not set it; "
            "use chrt --deadline (and chrt -p to put it back)")


def sched_refusal(value) -> str | None:
    """Why (policy, RT priority) is not a value sched_setscheduler takes; None when it is."""
    value = tuple(value)
    if len(value) != 2:
        return "a scheduling value is a policy and an RT priority"
    number, prio = value
    if number == SCHED_DEADLINE:
        return deadline_sentence()
    if number not in SCHED_POLICIES:
        return f"policy {number} is not one of {', '.join(SETTABLE)}"
    if number in RT_POLICIES and not RT_PRIORITY[0] <= prio <= RT_PRIORITY[1]:
        return (f"RT priority {prio} is out of range for {policy_name(number)}: give "
                f"{RT_PRIORITY[0]}-{RT_PRIORITY[1]} (99 is the highest)")
    if number not in RT_POLICIES and prio != 0:
        return f"{policy_name(number)} has no RT priority: give 0, or choose fifo or rr for {prio}"
    return None


def read_sched(tid: int) -> tuple[int, int] | None:
    """(policy, RT priority) of a live thread; None when it has exited."""
    try:
        return os.sched_getscheduler(tid) & ~_RESET_ON_FORK, os.sched_getparam(tid).sched_priority
    except ProcessLookupError:
        return None


class SchedWriter:
    """A thread's scheduling policy and RT priority. Threads exist only on the live machine."""

    def __init__(self, root: SysRoot):
        self.root = root

    def read(self, target: PinTarget) -> tuple[int, int] | None:
        return read_sched(target.id)

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        if not self.root.is_live:
            return Prepared(t, refusal=("invalid", f"{t.describe()}: a thread's scheduling can be set only on the "
                                        f"live machine, not on the capture {self.root.root}; drop --root"))
        pid = t.pid if t.pid is not None else read_tgid(self.root, t.id)
        try:
            task = read_task(self.root, pid, t.id, detail="fast") if pid is not None else None
        except TaskGone:
            task = None
        t = sched_target(t.id, pid, t.label or (task.comm if task is not None else ""))
        expect = step.expect_starttime
        start = task.starttime if task is not None else (None if expect == UNKNOWN_START else expect)
        if task is None or task.state in ("Z", "X"):
            return Prepared(t, starttime=start, gone=f"{t.describe()} has exited; refresh the list")
        if expect == UNKNOWN_START or (expect is not None and task.starttime != expect):
            return Prepared(t, starttime=None if expect == UNKNOWN_START else expect, gone=(
                f"{t.describe()}: the thread whose scheduling was set exited (or its id was reused); left alone"))
        before = self.read(t)
        if before is None:
            return Prepared(t, starttime=start, gone=f"{t.describe()} has exited; refresh the list")
        if before[0] == SCHED_DEADLINE:
            return Prepared(t, before, start, refusal=("invalid", f"{t.describe()} runs under SCHED_DEADLINE, "
                                                       "which coremap does not change or put back; use chrt"))
        return Prepared(t, before, start)

    def foresee(self, target: PinTarget, value, sight=None) -> Outcome | None:
        """What sched_setscheduler will say, read beforehand (the module docstring's list)."""
        pid = target.pid if target.pid is not None else target.id
        try:
            task = read_task(self.root, pid, target.id, detail="fast")
        except TaskGone:
            return Outcome("gone", f"{target.describe()} has exited; refresh the list")
        if task.kthread and task.comm.startswith("migration/"):
            return Outcome("kthread", f"kernel thread {target.id} ({task.comm}) is its CPU's stopper, which refuses "
                           "any policy change; leave it as it is")
        if value[0] not in RT_POLICIES:
            return None
        why = self._rt_refusal(pid, target.id, value[1])
        return Outcome("denied", f"{target.describe()}: {why}") if why else None

    def _rt_refusal(self, pid: int, tid: int, priority: int) -> str:
        """Why a real-time policy at `priority` would be refused or never run; "" when nothing says so."""
        runtime = self.root.read_int(self.root.proc("sys", "kernel", "sched_rt_runtime_us"))
        if runtime == 0:
            return ("kernel.sched_rt_runtime_us is 0, so real-time tasks get no CPU time at all; set it "
                    "(950000 is the default, -1 no limit) before making a thread real-time")
        group, group_runtime = self._cpu_group_runtime(pid, tid)
        if group_runtime == 0:
            return (f"its cpu cgroup {group} has no real-time time (cpu.rt_runtime_us is 0), so the kernel "
                    "refuses a real-time policy there; give the cgroup RT time or move the thread out of it")
        if os.geteuid() != 0:
            soft, _hard = resource.getrlimit(resource.RLIMIT_RTPRIO)
            if soft != resource.RLIM_INFINITY and priority > soft:
                return (f"RLIMIT_RTPRIO is {soft} for this user, so it may set RT priorities up to {soft} only; "
                        "raise it (rtprio in /etc/security/limits.conf) or run coremap as root")
        return ""

    def _cpu_group_runtime(self, pid: int, tid: int) -> tuple[str, int | None]:
        """(the thread's cgroup v1 cpu controller path, its cpu.rt_runtime_us); None where there is none
        (cgroup v2, a kernel without CONFIG_RT_GROUP_SCHED). proc/PID/task/TID/cgroup: "N:cpu,cpuacct:/x"."""
        text = self.root.read_optional(self.root.task_dir(pid, tid, "cgroup")) or ""
        for line in text.splitlines():
            _n, controllers, path = (line.split(":", 2) + ["", ""])[:3]
            if "cpu" not in controllers.split(","):
                continue
            rel = [p for p in path.strip().strip("/").split("/") if p]
            if any(p in (".", "..") for p in rel):
                return path, None
            for mount in (controllers, "cpu", "cpu,cpuacct"):
                runtime = self.root.read_int(self.root.sys("fs", "cgroup", mount, *rel, "cpu.rt_runtime_us"))
                if runtime is not None:
                    return path or "/", runtime
        return "/", None

    def write(self, target: PinTarget, value) -> None:
        try:
            os.sched_setscheduler(target.id, value[0], os.sched_param(value[1]))
        except PermissionError as e:
            raise PinWriteError(self._eperm(target, value)) from e

    def _eperm(self, target: PinTarget, value) -> str:
        """What EPERM means here: the reasons foresee reads, or another user's thread."""
        pid = target.pid if target.pid is not None else target.id
        why = self._rt_refusal(pid, target.id, value[1]) if value[0] in RT_POLICIES else ""
        return why or ("the kernel refused the change (another user's thread, or a real-time policy this user "
                       "may not set: see RLIMIT_RTPRIO); run coremap as root")

    def write_privileged(self, helper, target: PinTarget, value) -> None:
        # Not reached: write() turns EPERM into its reason, which the helper would not change for RT limits.
        raise PinWriteError("coremap-helper does not set scheduling; run coremap as root")

    def explain_einval(self, target: PinTarget, value) -> tuple[str, str]:
        seen = self.foresee(target, value)
        if seen is not None:
            return seen.code, seen.message
        return "invalid", (f"the kernel refused {format_value('sched', value)} for {target.describe()} (a kernel "
                           "thread that keeps its own policy, or a deadline task); leave it as it is")

    def read_back(self, target: PinTarget, value) -> Outcome:
        after = self.read(target)
        if after is None:
            return Outcome("gone", f"{target.describe()} exited right after the write")
        return checked(target, value, after, what="reads back", why="the kernel kept another policy")

