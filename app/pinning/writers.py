"""The small writers the pin flow (app/pinning/flow.py) runs: one per kind of target, each knowing how
to read its target's value before the write, write it (directly, or through the privileged helper),
and read it back. They hold no state of a batch; the flow journals around them.

  ThreadWriter  sched_setaffinity(2) on one tid, read back with sched_getaffinity(2)
  IrqWriter     proc/irq/N/smp_affinity_list, read back with both of the IRQ's CPU lists
                (Documentation/core-api/irq/irq-affinity.rst)
  MaskWriter    the masks an isolate moves (app/pinning/masks.py)

Every path comes from SysRoot, built from a checked kind, number or device name; never from text a
journal or a request carried.

What a writer can tell without writing (a per-CPU kernel thread, CPUs outside the cpuset a thread will
be in, a managed IRQ) is its `foresee(target, value, sight)`: the pin flow asks it before every write
and in a dry run (PinFlow.plan), so a drop's verdict, a preview and the write are one rule. `sight`
(Foresight) holds what the batch's earlier steps will have changed by then; a writer whose step changes
what a later step's foresight reads (a thread moved into another cpuset) says so in `forecast`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from app.errors import SysRootReadError
from app.format import format_cpus, format_value
from app.machine.cpusets import read_cpuset_cpus
from app.machine.interrupts import irq_is_managed, read_irq_cpus
from app.machine.threads import TaskGone, read_task, read_tgid
from app.parse.cpulist import format_cpulist
from app.pinning.masks import mask_path, read_mask, write_mask
from app.pinning.refusals import managed_irq
from app.pinning.targets import PinTarget
from app.sysroot import SysRoot


# A replayed thread whose journal line holds no start time (an old or forged line): no thread has it,
# so prepare() leaves whatever now has the id alone (issue 24: restore re-pinned a reused pid).
UNKNOWN_START = -1


@dataclass(frozen=True)
class Step:
    """One write of a batch: set `target` to `cpus`. `expect_starttime`: the thread must still be the
    one journalled (an undo or restore); `inherited`: the `before` to journal instead of the value
    read (a pinned process's new thread, born with the pin, whose undo gives it the process's old mask)."""
    target: PinTarget
    cpus: tuple[int, ...]
    expect_starttime: int | None = None
    inherited: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Prepared:
    """What a writer found before the write: the target as it will be journalled (its label and pid
    filled in), its value, and either nothing against the write, `gone` (journalled, not written: the
    target exited) or `refusal` ((code, sentence): refused before anything is journalled)."""
    target: PinTarget
    before: tuple[int, ...] | None = None
    starttime: int | None = None
    gone: str = ""
    refusal: tuple[str, str] | None = None


@dataclass(frozen=True)
class Outcome:
    """How a write ended: its code and sentence, the value read back, and whether it happened."""
    code: str
    message: str = ""
    after: tuple[int, ...] | None = None
    effective: tuple[int, ...] | None = None
    done: bool = False


class Foresight:
    """What a batch's earlier steps will have changed when a later step is written, as far as a writer's
    `foresee` reads it: where a thread or a process will be placed (a cpuset, and the CPUs it allows)
    and the CPUs a coremap cpuset will allow. A dry run fills it step by step; a batch that really runs
    passes an empty one, since there the machine has changed already."""

    def __init__(self):
        self.cpusets: dict[int, tuple[int, ...]] = {}
        self._placed: dict[tuple[int, int | None], tuple[tuple[int, ...] | None, str]] = {}

    def place(self, pid: int, tid: int | None, allowed: tuple[int, ...] | None, where: str) -> None:
        """Thread `tid` of `pid` (every thread of `pid` when `tid` is None) will be in cpuset `where`,
        which allows `allowed` (None: every CPU)."""
        self._placed[(pid, tid)] = (allowed, where)

    def placed(self, pid: int, tid: int) -> tuple[tuple[int, ...] | None, str] | None:
        """(CPUs allowed, cpuset) where an earlier step put the thread; None when none moved it."""
        return self._placed.get((pid, tid)) or self._placed.get((pid, None))


NOW = Foresight()       # a batch that runs: nothing foreseen, the machine is read as it is


def checked(target: PinTarget, value, after, *, what: str, effective=None, why: str) -> Outcome:
    """"ok" when `after` is what was asked, else "trimmed" (the write happened, the kernel kept
    something else)."""
    if after == tuple(value):
        return Outcome("ok", "", after, effective, done=True)
    return Outcome("trimmed", f"{target.describe()} {what} {format_value(target.kind, after)}, not the requested "
                   f"{format_value(target.kind, value)}: {why}", after, effective, done=True)


class ThreadWriter:
    """A thread's CPU affinity. Threads exist only on the live machine: a capture refuses them."""

    def __init__(self, root: SysRoot):
        self.root = root

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        try:
            return tuple(sorted(os.sched_getaffinity(target.id)))
        except (ProcessLookupError, PermissionError):
            return None

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        if not self.root.is_live:
            return Prepared(t, refusal=("invalid", f"{t.describe()}: threads can be pinned only on the live "
                                        f"machine, not on the capture {self.root.root}; drop --root"))
        pid = t.pid if t.pid is not None else read_tgid(self.root, t.id)
        task = None
        if pid is not None:
            try:
                task = read_task(self.root, pid, t.id, detail="fast")
            except TaskGone:
                task = None
        t = PinTarget("thread", t.id, pid, t.label or (task.comm if task is not None else ""))
        start = task.starttime if task is not None else \
            (None if step.expect_starttime == UNKNOWN_START else step.expect_starttime)
        if task is None:
            return Prepared(t, starttime=start, gone=f"{t.describe()} has exited; refresh the list")
        if step.expect_starttime == UNKNOWN_START:
            return Prepared(t, starttime=None, gone=(
                f"{t.describe()}: the journal holds no start time for the thread that was pinned, so it cannot "
                "be told from a new one that reused the id; left alone"))
        if step.expect_starttime is not None and task.starttime != step.expect_starttime:
            return Prepared(t, starttime=step.expect_starttime, gone=(
                f"{t.describe()}: the thread that was pinned exited and its id was reused; left alone"))
        if task.state in ("Z", "X"):
            # A zombie has exited; only its entry waits to be reaped. sched_setaffinity would still
            # "succeed" on it, which would journal a pin of nothing.
            return Prepared(t, starttime=start, gone=(f"{t.describe()} has exited (a zombie its parent has "
                                                      "not reaped); refresh the list"))
        before = self.read(t)
        if before is None:
            return Prepared(t, starttime=start, gone=f"{t.describe()} has exited; refresh the list")
        return Prepared(t, step.inherited if step.inherited is not None else before, start)

    def write(self, target: PinTarget, cpus) -> None:
        os.sched_setaffinity(target.id, cpus)

    def write_privileged(self, helper, target: PinTarget, cpus) -> None:
        helper.set_thread_affinity(target.id, cpus)

    def read_back(self, target: PinTarget, cpus) -> Outcome:
        after = self.read(target)
        if after is None:
            return Outcome("gone", f"{target.describe()} exited right after the write")
        return checked(target, cpus, after, what="runs on", why="the kernel trimmed the mask to its cpuset")

    def foresee(self, target: PinTarget, cpus, sight: Foresight) -> Outcome | None:
        """What sched_setaffinity(2) will say, read beforehand (kernel/sched/core.c __sched_setaffinity):
        EINVAL for a per-CPU kernel thread (PF_NO_SETAFFINITY) or for CPUs none of which the thread's
        cpuset allows (the cpuset it will be in once the batch's earlier steps moved it), a mask cut to
        the cpuset ("trimmed") where only some are; None when nothing stands against it."""
        pid = target.pid if target.pid is not None else target.id
        try:
            task = read_task(self.root, pid, target.id, detail="fast")
        except TaskGone:
            return Outcome("gone", f"{target.describe()} has exited; refresh the list")
        if task.no_setaffinity:
            return Outcome("kthread", f"kernel thread {target.id} ({task.comm}) refuses affinity changes (a per-CPU "
                           "kernel thread); leave it where it is")
        allowed, where = sight.placed(pid, target.id) or read_cpuset_cpus(self.root, pid, target.id)
        if allowed is None or set(cpus) <= set(allowed):
            return None
        if not set(cpus) & set(allowed):
            return Outcome("cpuset", f"{target.describe()} may run only on CPUs {format_cpus(allowed)} of its cpuset "
                           f"{where}; choose CPUs among them or move it to another cpuset")
        kept = sorted(set(cpus) & set(allowed))
        return Outcome("trimmed", f"{target.describe()} would run on CPUs {format_cpus(kept)} only: its cpuset "
                       f"{where} allows CPUs {format_cpus(allowed)}")

    def explain_einval(self, target: PinTarget, cpus) -> tuple[str, str]:
        """Why sched_setaffinity said EINVAL: what `foresee` reads now (a per-CPU kernel thread, CPUs
        outside its cpuset), or the cpuset when it cannot be read."""
        seen = self.foresee(target, cpus, NOW)
        if seen is not None and seen.code != "trimmed":
            return seen.code, seen.message
        pid = target.pid if target.pid is not None else target.id
        return "cpuset", (f"the kernel refused CPUs {format_cpus(cpus)} for {target.describe()}: they lie outside "
                          f"its cpuset (see /proc/{pid}/task/{target.id}/cpuset); choose other CPUs")


class IrqWriter:
    """An IRQ's requested affinity; its effective affinity is read back beside it."""

    def __init__(self, root: SysRoot):
        self.root = root

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        try:
            return read_irq_cpus(self.root, target.id)[0]
        except SysRootReadError:
            return None

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        folder = self.root.irq_dir(t.id)
        if not self.root.exists(folder):
            return Prepared(t, refusal=("invalid", f"IRQ {t.id} does not exist on this machine; see `coremap irqs`"))
        if not t.label:
            names = [n for n in self.root.listdir(folder) if self.root.is_dir(folder / n)]
            if names:
                t = PinTarget("irq", t.id, None, ",".join(names))
        return Prepared(t, self.read(t))

    def foresee(self, target: PinTarget, cpus, sight: Foresight) -> Outcome | None:
        """A managed IRQ, where debugfs says so (the write would meet EIO; without debugfs the write is
        the first to tell)."""
        return Outcome(*managed_irq(target)) if irq_is_managed(self.root, target.id) else None

    def write(self, target: PinTarget, cpus) -> None:
        _write_line(self.root, self.root.irq_dir(target.id, "smp_affinity_list"), format_cpulist(cpus))

    def write_privileged(self, helper, target: PinTarget, cpus) -> None:
        helper.set_irq_affinity(target.id, cpus)

    def read_back(self, target: PinTarget, cpus) -> Outcome:
        after = self.read(target)
        effective = self._effective(target.id, cpus)
        if after != tuple(cpus):
            return checked(target, cpus, after, what="reads back", effective=effective,
                           why="the kernel trimmed the mask")
        if delivery_lags(cpus, effective, live=self.root.is_live):
            # The mask reads back as asked; only the delivery has not followed yet. x86 moves an IRQ
            # whose vector is in use at its next interrupt (kernel/irq/migration.c
            # irq_move_masked_irq), so this is not a failure, but it is not "moved" either: it may also
            # be a chip that cannot target those CPUs.
            return Outcome("moving", (
                f"{target.describe()} is still delivered on CPU {format_cpus(effective)}, outside the requested "
                f"{format_cpus(cpus)}: x86 moves some IRQs only at their next interrupt; check its effective "
                "affinity again after it fires"), after, effective, done=True)
        return Outcome("ok", "", after, effective, done=True)

    def _effective(self, irq: int, cpus) -> tuple[int, ...] | None:
        # Where the chip moves the vector in process context the write itself updates it: give it a
        # few milliseconds before calling delivery elsewhere. Only the live kernel moves it; a test
        # tree's file is read once.
        eff = None
        for delay in (0, 0.002, 0.005, 0.01) if self.root.is_live else (0,):
            time.sleep(delay)
            try:
                eff = read_irq_cpus(self.root, irq)[1]
            except SysRootReadError:
                return None
            if eff is None or set(eff) <= set(cpus):
                break
        return eff


def delivery_lags(requested, effective, *, live: bool) -> bool:
    """Whether an IRQ whose mask reads back as `requested` is still delivered elsewhere (`effective`
    outside it). Only the live kernel moves delivery; a test tree's effective_affinity_list is a file
    nobody updates, so there it never lags."""
    return live and effective is not None and not set(effective) <= set(requested)


class MaskWriter:
    """A mask an isolate moves: the default IRQ affinity, the workqueue cpumask, RPS and XPS."""

    def __init__(self, root: SysRoot):
        self.root = root

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        return read_mask(self.root, mask_path(self.root, target.kind, target.id, target.netdev), target.kind)

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        try:
            before = self.read(t)
        except ValueError as e:
            return Prepared(t, refusal=("invalid", str(e)))
        if before is None:
            return Prepared(t, refusal=("invalid", f"{t.describe()} does not exist on this machine"))
        return Prepared(t, before)

    def write(self, target: PinTarget, cpus) -> None:
        write_mask(self.root, mask_path(self.root, target.kind, target.id, target.netdev), cpus, target.kind)

    def write_privileged(self, helper, target: PinTarget, cpus) -> None:
        helper.set_mask(target.kind, target.id, target.netdev, cpus)

    def read_back(self, target: PinTarget, cpus) -> Outcome:
        return checked(target, cpus, self.read(target), what="reads back", why="the kernel trimmed the mask")


def _write_line(root: SysRoot, path, text: str) -> None:
    """One write(2) of the whole value, as procfs and sysfs want; through the SysRoot, so never O_CREAT
    (a missing file is ENOENT) and, in a test tree, never through a link that leaves it."""
    fd = root.open_for_write(path)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)
