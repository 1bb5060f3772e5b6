"""The one map from what the kernel (or the helper) said to what a pin result says: errno -> (code,
sentence), for every kind of target. psutil's `wrap_exceptions` is the model: the errno is turned into
the domain's words in one place, so a thread, an IRQ and a mask that are refused alike read alike.

What the kernel's errors mean, by the file or call that gives them:
  sched_setaffinity(2): ESRCH the thread exited; EPERM another user's thread without CAP_SYS_NICE;
    EINVAL either PF_NO_SETAFFINITY (per-CPU kernel threads, kernel/sched/core.c
    __sched_setaffinity) or no CPU left once the mask is ANDed with the cpuset's.
  proc/irq/N/smp_affinity_list (kernel/irq/proc.c write_irq_affinity): EIO when the IRQ cannot be
    moved from user space (irq_can_set_affinity_usr: managed or per-CPU IRQs), EINVAL when no online
    CPU is in the list, ENOSPC when the target CPUs have no free vector (x86 vector.c), EPERM/EACCES
    without privilege (and EPERM for managed IRQs on newer kernels when already root).
  the masks (app/pinning/masks.py): EINVAL when no usable CPU is left (workqueue_set_unbound_cpumask),
    ENOENT when the device or queue went away.
  SysRoot.open_for_write: EXDEV when the file's path leads out of the tree (a link in a test tree).
"""
from __future__ import annotations

import errno
import os
from collections.abc import Callable

from app.format import format_cpus, needs_helper_sentence
from app.pinning.targets import PinTarget


class PinWriteError(Exception):
    """A write the helper refused or could not make (not a kernel errno): its text is the reason."""


# What a missing file means, by kind (ENOENT): what went away.
_ENOENT = {"irq": "its driver was unloaded; see `coremap irqs`",
           "cgroup": "the cpuset it would move into no longer exists",
           "cgroupthread": "the cpuset it would move into no longer exists",
           "cpuset": "the cpuset no longer exists",
           "sysctl": "this kernel does not have that setting"}


def managed_irq(target: PinTarget) -> tuple[str, str]:
    """(code, sentence) for an IRQ whose affinity the kernel manages: the write's EIO, or what a dry run
    reads in debugfs before it (app/pinning/writers.py IrqWriter.foresee)."""
    return "managed", (f"{target.describe()} cannot be moved: the kernel manages its affinity (a managed or "
                       "per-CPU interrupt); pin the thread that services it instead")


def refusal(target: PinTarget, err: OSError | PinWriteError, cpus, *,
            explain_einval: Callable[[], tuple[str, str]] | None = None) -> tuple[str, str]:
    """(code, sentence) for a write of `cpus` to `target` that failed with `err`.

    `explain_einval` (the writer's, when it has one) tells an EINVAL apart (a per-CPU kernel thread, a
    cpuset) by reading the machine again; it is called only for that case."""
    what = target.describe()
    if isinstance(err, PinWriteError):
        return "denied", f"{what}: {err}"
    e = err.errno
    kind = target.kind
    if kind == "irq" and (e == errno.EIO or (e == errno.EPERM and os.geteuid() == 0)):
        return managed_irq(target)
    if e == errno.ESRCH:
        return "gone", f"{what} has exited; refresh the list"
    if e in (errno.EPERM, errno.EACCES):
        if kind == "thread":
            return "denied", needs_helper_sentence(what, whose="belongs to another user")
        if kind == "irq":
            return "denied", needs_helper_sentence(what)
        return "denied", needs_helper_sentence(what, whose="only root may change it")
    if e == errno.EINVAL:
        if explain_einval is not None:
            return explain_einval()
        return "invalid", (f"the kernel refused CPUs {format_cpus(cpus)} for {what} (none of them can take it: "
                           "offline, or isolated from the kernel's own work); choose other CPUs")
    if e == errno.ENOSPC:
        return "nospc", (f"{what}: CPUs {format_cpus(cpus)} have no free interrupt vector left; add CPUs to the "
                         "list or move other IRQs off them first")
    if e == errno.ENOENT:
        return "gone", f"{what} has gone ({_ENOENT.get(kind, 'the device or queue was removed')})"
    if e == errno.EXDEV:
        return "invalid", f"{what}: its file leads outside the tree (a link out of it); nothing was written"
    return "denied", f"{what}: {os.strerror(e or errno.EIO)}"
