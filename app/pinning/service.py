"""AffinityService: every pin, undo, redo and restore goes through here (the window and the CLI alike).

A pin: read the current affinity (before), journal it (app.pinning.journal, fsync'ed) BEFORE the write,
write, read back, and mark the journal entry done/failed. Threads are set with sched_setaffinity(2)
on the tid (a process = each of its threads, one result each); IRQs by writing
proc/irq/N/smp_affinity_list through the SysRoot (Documentation/core-api/irq/irq-affinity.rst), then
reading back smp_affinity_list and effective_affinity_list.

Errors the kernel gives, and what they mean here:
  sched_setaffinity: ESRCH the thread exited; EPERM another user's thread without CAP_SYS_NICE;
    EINVAL either PF_NO_SETAFFINITY (per-CPU kernel threads, kernel/sched/core.c
    __sched_setaffinity -> -EINVAL) or no CPU left once the mask is ANDed with the cpuset's.
  proc/irq/N/smp_affinity_list (kernel/irq/proc.c write_irq_affinity): EIO when the IRQ cannot be
    moved from user space (irq_can_set_affinity_usr: managed or per-CPU IRQs), EINVAL when no online
    CPU is in the list, ENOSPC when the target CPUs have no free vector (x86 vector.c), EPERM/EACCES
    without privilege (and EPERM for managed IRQs on newer kernels when already root).
"""
from __future__ import annotations

import errno
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.errors import CoremapError, CpuListError, SysRootReadError
from app.errors import excerpt
from app.format import format_change, format_cpus, offline_sentence, unknown_cpus_sentence
from app.machine.irqbalance import IrqbalanceStatus, read_irqbalance
from app.pinning.journal import Journal, JournalEntry
from app.machine.threads import TaskGone, read_task
from app.pinning.masks import MASK_KINDS, describe_mask, mask_error, mask_path, read_mask, write_mask
from app.machine.topology import read_cpu_ids, read_online_cpus
from app.parse.cpulist import MAX_CPU, format_cpulist, parse_cpulist, parse_cpumask
from app.sysroot import SysRoot

KINDS = ("thread", "process", "irq")      # what a drag or a pin request names
GUARD_ORIGIN = "guard"                   # a pin written back by the guard: not an undo step
NEEDS_HELPER = ("needs the helper: run `coremap pin` with pkexec/sudo, or allow org.coremap.helper")


@dataclass(frozen=True)
class PinTarget:
    kind: str            # "thread" | "process" | "irq", or a mask an isolate moves (app/pinning/masks.py)
    id: int              # tid, pid, IRQ number, a network queue's number (0 for the other masks)
    pid: int | None = None
    label: str = ""
    netdev: str | None = None      # the network device of an rps/xps mask

    def __post_init__(self):
        if self.kind not in KINDS and self.kind not in MASK_KINDS:
            raise ValueError(f"pin target kind {self.kind!r}: expected one of {', '.join(KINDS)}")

    def describe(self) -> str:
        """"thread 1234 (java)", "irq 24 (ttyS0)", "RPS eth0 rx-0"."""
        if self.kind in MASK_KINDS:
            return describe_mask(self.kind, self.id, self.netdev)
        return f"{self.kind} {self.id}" + (f" ({self.label})" if self.label else "")

    @property
    def key(self) -> tuple[str, str | None, int]:
        """What the journal keys a write by (JournalEntry.key without the root)."""
        return ("thread" if self.kind == "process" else self.kind, self.netdev, self.id)


@dataclass(frozen=True)
class PinRequest:
    targets: tuple[PinTarget, ...]
    cpus: tuple[int, ...]
    origin: str = ""
    # The full Java thread name the targets were found by (`coremap pin --java NAME`): a new thread of
    # that name in the same JVM gets the same pin while the guard runs (app/quiet/guard.py).
    java_name: str = ""


@dataclass(frozen=True)
class PinResult:
    target: PinTarget
    ok: bool
    # ok, moving (written; delivery follows at the next interrupt), trimmed (the kernel cut the mask),
    # gone, denied, kthread, cpuset, offline, managed, nospc, invalid
    code: str
    message: str
    before: tuple[int, ...] | None
    requested: tuple[int, ...]
    after: tuple[int, ...] | None
    effective: tuple[int, ...] | None
    journal_id: int | None
    warning: str = ""          # e.g. irqbalance may undo this pin

    def line(self, *, warning: bool = True) -> str:
        """"thread 1234 (java): 0-3 -> 2 ok": one line per target, the same in the CLI, the window's
        status line and its tooltips. A failure is its own sentence (it names the target)."""
        d = self.target.describe()
        if self.ok or self.code == "trimmed":
            s = f"{d}: {format_change(self.before, self.requested)} {self.code}"
            if self.target.kind == "irq" and self.effective is not None:
                s += f" (effective {format_cpus(self.effective)})"
            if self.code != "ok" and self.message:
                s += f": {self.message}"
        else:
            s = self.message if self.message.startswith(d) else f"{d}: {self.message}"
        if warning and self.warning:
            s += f"; warning: {self.warning}"
        return s


def summarize(results: list[PinResult], what: str = "") -> str:
    """One line for a batch: every target when there are few, else counts and the first failure."""
    prefix = f"{what}: " if what else ""
    if not results:
        return prefix + "nothing to do"
    if len(results) <= 3:
        return prefix + "; ".join(r.line(warning=False) for r in results)
    bad = [r for r in results if not r.ok]
    s = f"{prefix}{len(results)} targets: {len(results) - len(bad)} ok, {len(bad)} failed"
    if bad:
        s += f" · {bad[0].line(warning=False)}"
    return s


def delivery_lags(requested, effective, *, live: bool) -> bool:
    """Whether an IRQ whose mask now reads back as `requested` is still delivered elsewhere
    (`effective` outside it): "moving", a success with a note. Only the live kernel moves delivery;
    a test tree's effective_affinity_list is a file nobody updates, so there it never lags."""
    return live and effective is not None and not set(effective) <= set(requested)


class CaptureReadOnly(CoremapError):
    """A pin, undo or restore asked of a capture (a --root that is not this machine)."""


class PinWriteError(CoremapError):
    """A write the helper refused or could not do (not a kernel errno)."""


class AffinityService:
    """`AffinityService(root, journal, writer=None)`: pins on `root`, journalled in `journal`.

    `writer` (an app.pinning.helper.HelperClient) is tried when a direct write gets EPERM/EACCES. It is
    given at construction and never changes: `with_writer()` makes a service that writes through
    one for a single privileged retry (the window's "Retry with privileges") while this one keeps
    asking nobody.
    """

    def __init__(self, root: SysRoot, journal: Journal, writer=None):
        self.root = root
        self.journal = journal
        self._writer = writer
        self.root_key = str(root.root.resolve())

    @property
    def live(self) -> bool:
        """Whether this pins the running machine (where a denied write may be retried with privilege)."""
        return self.root.is_live

    def irqbalance_warning(self, irqs=()) -> str:
        """What irqbalance, if it runs here, will do to the pinned `irqs` ("" when it does not run)."""
        return read_irqbalance(self.root).pinned_text(irqs)

    def with_writer(self, writer) -> "AffinityService":
        """The same machine and journal, with `writer` tried where a direct write is denied."""
        return AffinityService(self.root, self.journal, writer)

    # -- public ---------------------------------------------------------------------------------
    def apply(self, request: PinRequest) -> list[PinResult]:
        """Pin every target of `request`. CPUs that cannot be used (beyond any machine, not on this
        one, offline) are refused for every target before anything is journalled or written."""
        self._check_writable()
        cpus = tuple(sorted(set(int(c) for c in request.cpus)))
        origin = request.origin or "pin"
        results: list[PinResult] = []
        online = read_online_cpus(self.root)
        refusal = self._cpus_refusal(cpus, online)
        if refusal is not None:
            code, why = refusal
            return [self._refused(t, code, why, None, cpus) for t in request.targets]
        batch = _Batch()
        for target in request.targets:
            before = len(results)
            for t in self._expand(target, results, cpus):
                results.append(self._pin_one(t, cpus, online, origin, batch))
            self._record_follow(target, request, results[before:], cpus, batch)
        return results

    def apply_each(self, pairs, *, origin: str, quiet: tuple[str, tuple[int, ...]] | None = None,
                   join: int | None = None) -> list[PinResult]:
        """Set each (target, cpus) pair, all in ONE batch (one undo reverts them all): an isolate,
        an include, the pin of a pinned process's new thread. `quiet` = (action, CPUs) journals an
        isolate or include first, whose id becomes the batch id; `join` adds the writes to an existing
        batch instead. Every pair's CPUs are checked before anything is journalled: one bad list
        refuses the whole batch."""
        self._check_writable()
        pairs = [(t, tuple(sorted(set(int(c) for c in cpus)))) for t, cpus in pairs]
        online = read_online_cpus(self.root)
        for t, cpus in pairs:
            refusal = self._cpus_refusal(cpus, online)
            if refusal is not None:
                code, why = refusal
                return [self._refused(u, code, f"{t.describe()}: {why}" if u is t else
                                      f"not written: {t.describe()} was refused ({why})", None, c)
                        for u, c in pairs]
        batch = _Batch()
        batch.id = join
        if quiet is not None and pairs:
            batch.id = self.journal.quiet(quiet[0], quiet[1], self.root_key)
        results: list[PinResult] = []
        for t, cpus in pairs:
            for u in self._expand(t, results, cpus):
                results.append(self._pin_one(u, cpus, online, origin, batch))
        return results

    def pin_new_thread(self, target: PinTarget, cpus, *, join: int, inherited, origin: str = "follow") -> PinResult:
        """A thread a pinned process created after the pin (app/quiet/guard.py): journalled in the pin's
        batch `join`, with `inherited` — the process's affinity from before the pin — as its `before`,
        so undoing the pin gives it that rather than the pinned mask it was born with; then pinned."""
        self._check_writable()
        cpus = tuple(sorted(set(int(c) for c in cpus)))
        online = read_online_cpus(self.root)
        refusal = self._cpus_refusal(cpus, online)
        if refusal is not None:
            return self._refused(target, refusal[0], refusal[1], None, cpus)
        batch = _Batch()
        batch.id = join
        return self._pin_thread(target, cpus, online, origin, batch, None, inherited)

    def read_affinity(self, target: PinTarget) -> tuple[int, ...] | None:
        """The target's affinity now (a thread's allowed CPUs, an IRQ's requested list, a mask's
        CPUs); None when it is gone."""
        if target.kind == "thread":
            try:
                return tuple(sorted(os.sched_getaffinity(target.id)))
            except (ProcessLookupError, PermissionError):
                return None
        if target.kind == "irq":
            return self._read_irq_affinity(target.id)
        if target.kind in MASK_KINDS:
            return read_mask(self.root, mask_path(self.root, target.kind, target.id, target.netdev))
        raise ValueError(f"read_affinity of a {target.kind}: read each of its threads")

    def _record_follow(self, target: PinTarget, request: PinRequest, results: list[PinResult], cpus,
                       batch: "_Batch") -> None:
        """A pinned process, or a thread found by its Java name: journal the rule that pins its new
        threads (app/quiet/guard.py follows it) once one of the writes happened."""
        if batch.id is None or not any(r.ok or r.code == "trimmed" for r in results):
            return
        if target.kind == "process":
            pid, name = target.id, ""
        elif target.kind == "thread" and request.java_name and target.pid is not None:
            pid, name = target.pid, request.java_name
        else:
            return
        try:
            start = read_task(self.root, pid, pid, detail="fast").starttime
        except TaskGone:
            start = None        # the leader exited (its threads run on): the rule then goes by pid alone
        self.journal.follow(batch=batch.id, pid=pid, cpus=cpus, starttime=start, name=name, root=self.root_key)

    def undo(self) -> list[PinResult]:
        """Put back what the last pin (or redo) changed; [] when there is nothing to undo."""
        self._check_writable()
        history = self._history()
        return self._replay_newest(history, history.undo, "undo")

    def redo(self) -> list[PinResult]:
        """Re-apply the last undone pin; [] when there is nothing to redo."""
        # The redo stack holds undo batches: redoing one writes back what each of its writes found.
        self._check_writable()
        history = self._history()
        return self._replay_newest(history, history.redo, "redo")

    def history(self) -> "History":
        """The journal's batches of this machine as undo and redo stacks (see _history)."""
        return self._history()

    def can_undo(self) -> bool:
        return bool(self._history().undo)

    def can_redo(self) -> bool:
        return bool(self._history().redo)

    def restore_all(self) -> list[PinResult]:
        """Every changed target back to its first journalled `before`, newest first."""
        self._check_writable()
        firsts = sorted(self.journal.unrestored(self.root_key), key=lambda e: e.id, reverse=True)
        return self._replay(firsts, lambda e: e.before, "restore")

    def pending_restore(self) -> list[JournalEntry]:
        """Changes a previous run left behind (crash, kill -9, quit without restoring): for each
        target, the entry whose `before` restore_all() would write back. Threads that exited since
        (or whose tid now belongs to another thread) are left out: there is nothing to restore."""
        out = []
        for e in self.journal.unrestored(self.root_key):
            if e.session == self.journal.session_id:
                continue
            if e.kind == "thread" and self._same_thread(e) is None:
                continue
            out.append(e)
        return out

    def preflight(self, request: PinRequest) -> list[str]:
        """Why targets cannot take these CPUs, before anything is written ([] = no objection known)."""
        cpus = tuple(sorted(set(request.cpus)))
        online = read_online_cpus(self.root)
        refusal = self._cpus_refusal(cpus, online)
        if refusal is not None and refusal[0] == "invalid":
            return [refusal[1]]
        reasons = [refusal[1]] if refusal is not None else []
        for t in request.targets:
            if t.kind == "irq":
                if not self.root.exists(self.root.irq_dir(t.id)):
                    reasons.append(f"IRQ {t.id} does not exist on this machine; see `coremap irqs`")
                elif self._irq_managed(t.id):
                    reasons.append(f"IRQ {t.id} is managed by the kernel (its driver spreads it over "
                                   "CPUs itself) and cannot be moved; pick another IRQ")
                continue
            pid = t.pid if t.pid is not None else (t.id if t.kind == "process" else self._tgid(t.id))
            tid = t.id
            if pid is None:
                reasons.append(f"{t.describe()} has exited")
                continue
            try:
                task = read_task(self.root, pid, tid, detail="fast")
            except TaskGone:
                reasons.append(f"{t.describe()} has exited")
                continue
            if task.no_setaffinity:
                reasons.append(f"kernel thread {tid} ({task.comm}) refuses affinity changes")
                continue
            allowed, where = self._cpuset_cpus(pid, tid)
            if allowed is not None and not set(cpus) & set(allowed):
                reasons.append(f"{t.describe()} may run only on CPUs {format_cpus(allowed)} (cpuset {where}); "
                               "choose CPUs among them")
        return reasons

    # -- one target -----------------------------------------------------------------------------
    def _expand(self, target: PinTarget, results: list, cpus) -> list[PinTarget]:
        if target.kind != "process":
            return [target]
        pid = target.id
        names = [n for n in self.root.listdir(self.root.task_dir(pid, None, "task")) if n.isdigit()]
        if not names:
            results.append(self._refused(target, "gone", f"process {pid} has exited; refresh the list",
                                         None, cpus))
            return []
        return [PinTarget("thread", int(n), pid, "") for n in sorted(names, key=int)]

    def _pin_one(self, t: PinTarget, cpus, online, origin, batch: "_Batch",
                 expect_starttime: int | None = None) -> PinResult:
        if t.kind == "thread":
            return self._pin_thread(t, cpus, online, origin, batch, expect_starttime)
        if t.kind in MASK_KINDS:
            return self._pin_mask(t, cpus, online, origin, batch)
        return self._pin_irq(t, cpus, online, origin, batch)

    def _pin_thread(self, t, cpus, online, origin, batch, expect_starttime, inherited=None) -> PinResult:
        if not self.root.is_live:
            return self._refused(t, "invalid", f"{t.describe()}: threads can be pinned only on the live "
                                 f"machine, not on the capture {self.root.root}; drop --root", None, cpus)
        tid = t.id
        pid = t.pid if t.pid is not None else self._tgid(tid)
        task = None
        if pid is not None:
            try:
                task = read_task(self.root, pid, tid, detail="fast")
            except TaskGone:
                task = None
        if task is not None and t.label == "":
            t = PinTarget("thread", tid, pid, task.comm)
        elif t.pid is None and pid is not None:
            t = PinTarget("thread", tid, pid, t.label)
        before = None
        gone_msg = f"{t.describe()} has exited; refresh the list"
        if task is not None and expect_starttime is not None and task.starttime != expect_starttime:
            task = None
            gone_msg = f"{t.describe()}: the thread that was pinned exited and its id was reused; left alone"
        if task is not None and task.state in ("Z", "X"):
            # A zombie has exited; only its entry waits to be reaped. sched_setaffinity would still
            # "succeed" on it, which would journal a pin of nothing.
            task = None
            gone_msg = f"{t.describe()} has exited (a zombie its parent has not reaped); refresh the list"
        if task is not None:
            try:
                before = tuple(sorted(os.sched_getaffinity(tid)))
            except ProcessLookupError:
                task = None
        if task is not None and inherited is not None:
            before = tuple(inherited)
        attempt = self._record(t, before, cpus, origin, batch, task.starttime if task else expect_starttime)
        if task is None:
            return self._finish(attempt, _Outcome("gone", gone_msg))
        offline = sorted(set(cpus) - set(online))
        if offline:
            return self._finish(attempt, _Outcome("offline", self._offline_msg(t, offline, online)))
        return self._finish(attempt, self._write_thread(t, pid, cpus))

    def _write_thread(self, t: PinTarget, pid, cpus) -> _Outcome:
        """Set the thread's affinity (through the writer when denied) and read it back."""
        tid = t.id
        try:
            try:
                os.sched_setaffinity(tid, cpus)
            except PermissionError:
                if self._writer is None:
                    raise
                self._writer.set_thread_affinity(tid, cpus)
        except PinWriteError as e:
            return _Outcome("denied", f"{t.describe()}: {e}")
        except OSError as e:
            return _Outcome(*self._thread_error(t, pid, e, cpus))
        try:
            after = tuple(sorted(os.sched_getaffinity(tid)))
        except ProcessLookupError:
            return _Outcome("gone", f"{t.describe()} exited right after the write")
        if after != cpus:
            return _Outcome("trimmed", f"{t.describe()} runs on {format_cpus(after)}, not the requested "
                            f"{format_cpus(cpus)}: the kernel trimmed the mask to its cpuset", after, after,
                            done=True)
        return _Outcome("ok", "", after, after, done=True)

    def _thread_error(self, t, pid, e: OSError, cpus) -> tuple[str, str]:
        if e.errno == errno.ESRCH:
            return "gone", f"{t.describe()} has exited; refresh the list"
        if e.errno in (errno.EPERM, errno.EACCES):
            return "denied", f"{t.describe()} belongs to another user; {NEEDS_HELPER}"
        if e.errno == errno.EINVAL:
            try:
                task = read_task(self.root, pid, t.id, detail="fast")
            except TaskGone:
                return "gone", f"{t.describe()} has exited; refresh the list"
            if task.no_setaffinity:
                return "kthread", (f"kernel thread {t.id} ({task.comm}) refuses affinity changes "
                                   "(a per-CPU kernel thread); leave it where it is")
            allowed, where = self._cpuset_cpus(pid, t.id)
            if allowed is not None:
                return "cpuset", (f"{t.describe()} may run only on CPUs {format_cpus(allowed)} of its cpuset "
                                  f"{where}; choose CPUs among them or move it to another cpuset")
            return "cpuset", (f"the kernel refused CPUs {format_cpus(cpus)} for {t.describe()}: they lie outside "
                              f"its cpuset (see /proc/{pid}/task/{t.id}/cpuset); choose other CPUs")
        return "denied", f"{t.describe()}: {os.strerror(e.errno or 0)}"

    def _pin_irq(self, t, cpus, online, origin, batch) -> PinResult:
        irq = t.id
        d = self.root.irq_dir(irq)
        if not self.root.exists(d):
            return self._refused(t, "invalid", f"IRQ {irq} does not exist on this machine; see "
                                 "`coremap irqs`", None, cpus)
        if not t.label:
            names = [n for n in self.root.listdir(d) if (d / n).is_dir()]
            if names:
                t = PinTarget("irq", irq, None, ",".join(names))
        before = self._read_irq_affinity(irq)
        warning = self._irqbalance_status(batch).warning_for(irq)
        attempt = self._record(t, before, cpus, origin, batch, None, warning)
        offline = sorted(set(cpus) - set(online))
        if offline:
            return self._finish(attempt, _Outcome("offline", self._offline_msg(t, offline, online)))
        return self._finish(attempt, self._write_irq(t, cpus))

    def _write_irq(self, t: PinTarget, cpus) -> _Outcome:
        """Write the IRQ's smp_affinity_list (through the writer when denied) and read back both lists."""
        irq = t.id
        try:
            try:
                self._write_proc(self.root.irq_dir(irq, "smp_affinity_list"), format_cpulist(cpus))
            except PermissionError as e:
                if self._writer is None or (e.errno == errno.EPERM and os.geteuid() == 0):
                    raise
                self._writer.set_irq_affinity(irq, cpus)
        except PinWriteError as e:
            return _Outcome("denied", f"{t.describe()}: {e}")
        except OSError as e:
            return _Outcome(*self._irq_error(t, e, cpus))
        after = self._read_irq_affinity(irq)
        effective = self._read_effective(irq, cpus)
        if after != cpus:
            return _Outcome("trimmed", f"{t.describe()} reads back {format_cpus(after or ())}, not the "
                            f"requested {format_cpus(cpus)}: the kernel trimmed the mask", after, effective,
                            done=True)
        if delivery_lags(cpus, effective, live=self.root.is_live):
            # The mask was written and reads back as asked; only the delivery has not followed yet.
            # x86 moves an IRQ whose vector is in use at its next interrupt (kernel/irq/migration.c
            # irq_move_masked_irq), so this is not a failure — but say so, it may also be a chip
            # that cannot target those CPUs.
            return _Outcome("moving", (
                f"{t.describe()} is still delivered on CPU {format_cpus(effective)}, outside the requested "
                f"{format_cpus(cpus)}: x86 moves some IRQs only at their next interrupt; check its effective "
                "affinity again after it fires"), after, effective, done=True)
        return _Outcome("ok", "", after, effective, done=True)

    def _pin_mask(self, t: PinTarget, cpus, online, origin, batch) -> PinResult:
        """A mask an isolate moves (app/pinning/masks.py): read, journal, write, read back."""
        try:
            path = mask_path(self.root, t.kind, t.id, t.netdev)
        except ValueError as e:
            return self._refused(t, "invalid", str(e), None, cpus)
        before = read_mask(self.root, path)
        if before is None:
            return self._refused(t, "invalid", f"{t.describe()} does not exist on this machine", None, cpus)
        attempt = self._record(t, before, cpus, origin, batch, None)
        offline = sorted(set(cpus) - set(online))
        if offline:
            return self._finish(attempt, _Outcome("offline", self._offline_msg(t, offline, online)))
        try:
            try:
                write_mask(self.root, path, cpus)
            except PermissionError as e:
                if self._writer is None or (e.errno == errno.EPERM and os.geteuid() == 0):
                    raise
                self._writer.set_mask(t.kind, t.id, t.netdev, cpus)
        except PinWriteError as e:
            return self._finish(attempt, _Outcome("denied", f"{t.describe()}: {e}"))
        except OSError as e:
            return self._finish(attempt, _Outcome(*mask_error(t.describe(), e, cpus)))
        after = read_mask(self.root, path)
        if after != cpus:
            return self._finish(attempt, _Outcome(
                "trimmed", f"{t.describe()} reads back {format_cpus(after or ())}, not the requested "
                f"{format_cpus(cpus)}: the kernel trimmed the mask", after, after, done=True))
        return self._finish(attempt, _Outcome("ok", "", after, after, done=True))

    def _irq_error(self, t, e: OSError, cpus) -> tuple[str, str]:
        irq = t.id
        if e.errno == errno.EIO or (e.errno == errno.EPERM and os.geteuid() == 0):
            return "managed", (f"{t.describe()} cannot be moved: the kernel manages its affinity "
                               "(a managed or per-CPU interrupt); pin the thread that services it instead")
        if e.errno in (errno.EPERM, errno.EACCES):
            return "denied", f"{t.describe()}: {NEEDS_HELPER}"
        if e.errno == errno.ENOSPC:
            return "nospc", (f"{t.describe()}: CPUs {format_cpus(cpus)} have no free interrupt vector left; "
                             "add CPUs to the list or move other IRQs off them first")
        if e.errno == errno.EINVAL:
            return "invalid", (f"the kernel refused CPUs {format_cpus(cpus)} for {t.describe()} (none of them "
                               "can take it); choose online CPUs")
        if e.errno == errno.ENOENT:
            return "invalid", f"IRQ {irq} has gone (its driver was unloaded); see `coremap irqs`"
        if e.errno == errno.EXDEV:
            return "invalid", (f"{t.describe()}: its smp_affinity_list leads outside {self.root.root} (a link out "
                               "of the tree); nothing was written")
        return "denied", f"{t.describe()}: {os.strerror(e.errno or 0)}"

    # -- helpers ----------------------------------------------------------------------------------
    def _check_cpus(self, cpus) -> str:
        if not cpus:
            return "no CPUs given; write CPUs like 2-5,8"
        if any(c < 0 or c >= MAX_CPU for c in cpus):
            return f"CPU list {excerpt(format_cpus(cpus))} holds CPU numbers beyond any machine; write CPUs like 2-5,8"
        return ""

    def _cpus_refusal(self, cpus, online) -> tuple[str, str] | None:
        """(code, reason) when these CPUs cannot take a pin here, checked before any journal line:
        "invalid" for CPUs this machine does not have (exit 2 in the CLI), "offline" for CPUs it has
        but that are offline (exit 1)."""
        bad = self._check_cpus(cpus)
        if bad:
            return "invalid", bad
        known = read_cpu_ids(self.root)
        missing = [c for c in cpus if c not in known]
        if missing:
            return "invalid", unknown_cpus_sentence(missing, known)
        offline = sorted(set(cpus) - set(online))
        if offline:
            return "offline", offline_sentence(offline, online)
        return None

    def _check_writable(self) -> None:
        if not self.root.writable:
            raise CaptureReadOnly(f"a capture cannot be pinned: {self.root.root} is a capture of another machine "
                                  "(or a folder of its files); pins, undo and restore act on the machine coremap "
                                  "runs on, so drop --root")

    def _offline_msg(self, t, offline, online) -> str:
        who = f"{t.describe()}: " if t is not None else ""
        return who + offline_sentence(offline, online)

    def _record(self, t, before, cpus, origin, batch, starttime, warning: str = "") -> "_Attempt":
        """Journal the write about to be made (before it is made: a crash leaves it to restore)."""
        jid = self.journal.record(kind=t.kind, target_id=t.id, requested=cpus, before=before, pid=t.pid,
                                  label=t.label, root=self.root_key, origin=origin, batch=batch.id,
                                  starttime=starttime, netdev=t.netdev)
        if batch.id is None:
            batch.id = jid
        return _Attempt(t, jid, before, cpus, warning)

    def _finish(self, attempt: "_Attempt", outcome: "_Outcome") -> PinResult:
        """Mark the journal entry of `attempt` with `outcome`; the result shown for it."""
        o = outcome
        self.journal.mark(attempt.journal_id, "done" if o.done else "failed", o.after, o.effective,
                          code=o.code, message=o.message)
        return PinResult(attempt.target, o.code in ("ok", "moving"), o.code, o.message, attempt.before,
                         attempt.requested, o.after, o.effective, attempt.journal_id, attempt.warning)

    def _write_proc(self, path, text: str) -> None:
        """One write(2) of the whole list, as procfs wants; through the SysRoot, so never O_CREAT (a
        missing file is ENOENT) and, in a test tree, never through a link that leaves it."""
        fd = self.root.open_for_write(path)
        try:
            os.write(fd, (text + "\n").encode())
        finally:
            os.close(fd)

    def _refused(self, t, code, message, before, cpus) -> PinResult:
        """A request refused before anything was journalled or written (bad input)."""
        return PinResult(t, False, code, message, before, tuple(cpus), None, None, None)

    def _replay(self, entries: list[JournalEntry], value, origin: str) -> list[PinResult]:
        online = read_online_cpus(self.root)
        batch = _Batch()
        out = []
        for e in entries:
            cpus = value(e)
            if cpus is None:
                continue
            t = PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev)
            out.append(self._pin_one(t, tuple(cpus), online, origin, batch,
                                     expect_starttime=e.starttime if e.kind == "thread" else None))
        return out

    def _replay_newest(self, history: "History", stack: tuple[int, ...], what: str) -> list[PinResult]:
        """Write back what each write of the newest batch on `stack` found, its last write first;
        journalled with origin "undo:B" / "redo:B"."""
        if not stack:
            return []
        b = stack[-1]
        return self._replay(history.done_entries(b)[::-1], lambda e: e.before, f"{what}:{b}")

    def _history(self) -> "History":
        """Undo and redo stacks rebuilt from the journal on every call (so `coremap undo` in a new
        process undoes what the window did)."""
        return history_of(self.journal.entries(), self.root_key)

    def _same_thread(self, e: JournalEntry):
        pid = e.pid if e.pid is not None else self._tgid(e.target_id)
        if pid is None:
            return None
        try:
            task = read_task(self.root, pid, e.target_id, detail="fast")
        except TaskGone:
            return None
        if e.starttime is not None and task.starttime != e.starttime:
            return None
        return task

    def _tgid(self, tid: int) -> int | None:
        """The process of thread `tid` (status Tgid; /proc/TID resolves for any thread id)."""
        text = self.root.read_optional(self.root.proc(tid, "status"))
        for line in (text or "").splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
        return None

    def _read_irq_affinity(self, irq: int) -> tuple[int, ...] | None:
        text = self.root.read_optional(self.root.irq_dir(irq, "smp_affinity_list"))
        if text is not None:
            return parse_cpulist(text, what=str(self.root.irq_dir(irq, "smp_affinity_list")))
        text = self.root.read_optional(self.root.irq_dir(irq, "smp_affinity"))
        if text is not None:
            return parse_cpumask(text, what=str(self.root.irq_dir(irq, "smp_affinity")))
        return None

    def _read_effective(self, irq: int, cpus) -> tuple[int, ...] | None:
        # effective_affinity_list exists with CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK. Where the chip
        # moves the vector in process context it is updated by the write itself; give it a few
        # milliseconds before calling the result trimmed.
        path = self.root.irq_dir(irq, "effective_affinity_list")
        eff = None
        for delay in (0, 0.002, 0.005, 0.01):
            time.sleep(delay)
            text = self.root.read_optional(path)
            if text is None:
                return None
            eff = parse_cpulist(text, what=str(path))
            if set(eff) <= set(cpus):
                break
        return eff

    def irq_managed(self, irq: int) -> bool:
        """Whether debugfs says IRQ `irq` is managed (False where it cannot tell)."""
        return self._irq_managed(irq)

    def cpuset_cpus(self, pid: int, tid: int) -> tuple[tuple[int, ...] | None, str]:
        """The CPUs the thread's cpuset allows and the cpuset's path ((None, path) if unreadable)."""
        return self._cpuset_cpus(pid, tid)

    def _irq_managed(self, irq: int) -> bool:
        """Managed IRQs are flagged only in debugfs (GENERIC_IRQ_DEBUGFS: irq/irqs/N lists
        IRQD_AFFINITY_MANAGED); without it the write's EIO is the first sign."""
        try:
            text = self.root.read_optional(self.root.sys("kernel", "debug", "irq", "irqs", str(irq)))
        except SysRootReadError:
            return False        # debugfs readable by root only: no verdict
        return text is not None and "AFFINITY_MANAGED" in text

    def _cpuset_cpus(self, pid: int, tid: int) -> tuple[tuple[int, ...] | None, str]:
        """CPUs the thread's cpuset allows and the cpuset's path, from proc/PID/task/TID/cpuset and the
        cgroup's cpuset.cpus.effective (v2) or cpuset.effective_cpus (v1); (None, path) if unreadable."""
        try:
            where = (self.root.read_first_line(self.root.task_dir(pid, tid, "cpuset")) or "").strip()
        except SysRootReadError:
            return None, "?"
        if not where:
            return None, "?"
        rel = where.strip("/")
        for parts in (("fs", "cgroup"), ("fs", "cgroup", "cpuset")):
            for name in ("cpuset.cpus.effective", "cpuset.effective_cpus"):
                p = self.root.sys(*parts, *(rel.split("/") if rel else []), name)
                try:
                    text = self.root.read_optional(p)
                except SysRootReadError:
                    continue
                if text is not None and text.strip():
                    try:
                        return parse_cpulist(text, what=str(p)), where
                    except CpuListError:
                        continue
        return None, where

    def _irqbalance_status(self, batch: "_Batch") -> IrqbalanceStatus:
        """irqbalance as found at the batch's first IRQ: read once per batch, not once per IRQ."""
        if batch.irqbalance is None:
            batch.irqbalance = read_irqbalance(self.root)
        return batch.irqbalance


class _Batch:
    """One apply(), undo, redo or restore: the id of its first journal entry (set when that is
    recorded; every later entry carries it) and irqbalance's status, read at its first IRQ."""

    def __init__(self):
        self.id: int | None = None
        self.irqbalance: IrqbalanceStatus | None = None


def history_of(entries, root_key: str) -> "History":
    """Undo and redo stacks of batch ids with each batch's entries, from the journal's `entries` of the
    root `root_key`: the local service's, or a remote agent's view of its own journal."""
    batches: dict[int, list[JournalEntry]] = {}
    for e in entries:
        if e.root == root_key:
            batches.setdefault(e.batch, []).append(e)
    undo: list[int] = []
    redo: list[int] = []
    original: dict[int, int] = {}
    for b in sorted(batches):
        origin = batches[b][0].origin
        if origin.startswith("undo:"):
            src = int(origin[5:])
            if src in undo:
                undo.remove(src)
            redo.append(b)
            original[b] = original.get(src, src)
        elif origin.startswith("redo:"):
            src = int(origin[5:])
            if src in redo:
                redo.remove(src)
            undo.append(b)
            original[b] = original.get(src, src)
        elif origin == "restore":
            undo.clear()
            redo.clear()
        elif origin == GUARD_ORIGIN:
            # The guard writing a pin back (app/quiet/guard.py) is not a change of the user's: it is
            # neither undone on its own nor does it clear the redo stack.
            continue
        elif any(e.state == "done" for e in batches[b]):
            undo.append(b)
            redo.clear()
    return History(tuple(undo), tuple(redo), {b: tuple(es) for b, es in batches.items()}, original)


@dataclass(frozen=True)
class History:
    """The journal's batches of this root as undo and redo stacks (batch ids, newest last).

    `original` maps an undo or redo batch to the batch the user made (an undo of a redo of batch 5
    is still about batch 5), so what is in effect can be told in the user's terms: an isolate, a
    process pin with its follow rule."""
    undo: tuple[int, ...]
    redo: tuple[int, ...]
    batches: Mapping[int, tuple[JournalEntry, ...]] = field(default_factory=dict)
    original: Mapping[int, int] = field(default_factory=dict)

    def done_entries(self, batch: int) -> list[JournalEntry]:
        """The entries of `batch` whose write happened, in journal order."""
        return [e for e in self.batches.get(batch, ()) if e.state == "done"]

    def origin_of(self, batch: int) -> int:
        """The batch the user made that `batch` undoes or redoes (itself for one the user made)."""
        return self.original.get(batch, batch)

    def in_effect(self) -> dict[int, int]:
        """{user's batch: the batch now holding its writes} for every batch whose writes are in place
        (the undo stack: made, or redone, and not undone or restored since)."""
        return {self.origin_of(b): b for b in self.undo}


@dataclass(frozen=True)
class _Attempt:
    """A write journalled and about to be made: what, where it was, and what was asked."""
    target: PinTarget
    journal_id: int
    before: tuple[int, ...] | None
    requested: tuple[int, ...]
    warning: str = ""          # irqbalance may undo it (IRQs only)


@dataclass(frozen=True)
class _Outcome:
    """How a write ended: its code and sentence, the affinity read back, and whether it happened
    (journal state "done") or not ("failed")."""
    code: str
    message: str = ""
    after: tuple[int, ...] | None = None
    effective: tuple[int, ...] | None = None
    done: bool = False
