"""AffinityService: what can be done to one machine's affinities, for the window, the CLI and the agent
alike. Each method turns a request into steps and hands them to the one pin flow (app/pinning/flow.py:
read before, journal, write, read back, journal), then decides the batch's warnings once
(app/pinning/advice.py) from the Ledger (app/pinning/ledger.py), which it keeps until the journal grows.

  apply        a PinRequest: threads, processes (each of their threads), IRQs
  apply_each   (target, cpus) pairs as one batch: an isolate, an include, a guard re-apply
  undo, redo   the newest batch on the undo (redo) stack, written back from what its writes found
  restore_all  every target still changed, back to its first journalled `before`
  plan         apply's dry run: the same steps, read as the flow would take them, nothing written
  schedule     threads' scheduling policy and RT priority (app/pinning/sched.py); plan_schedule its dry run
  preflight    the plan's reasons not to go: what a drag shows before the drop

Every method that writes takes an optional Progress (report each result; cancel between steps) and
returns a BatchResults (app/pinning/targets.py): the results and the batch's headline warning.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from app.errors import CoremapError
from app.machine.irqbalance import read_irqbalance
from app.machine.threads import TaskGone, read_task
from app.machine.topology import read_online_cpus
from app.pinning.advice import advise
from app.pinning.balancer import BalancerWriter, ban_steps
from app.pinning.checks import cpus_refusal, value_refusal
from app.pinning.dry_run import Plan, PlannedStep
from app.pinning.flow import PinFlow, Progress
from app.pinning.journal import Journal, JournalEntry
from app.pinning.ledger import Ledger, ledger_of, restorable
from app.pinning.placement import placement_steps
from app.pinning.refusals import PinWriteError
from app.pinning.targets import GUARD_ORIGIN, KINDS, BatchResults, PinRequest, PinResult, PinTarget, refused, summarize
from app.pinning.cgroups import cgroup_writers
from app.pinning.kinds import BALANCER_KINDS, CPU_KINDS, MASK_KINDS, SCALAR_KINDS, TASK_KINDS
from app.pinning.sched import SchedWriter, sched_target
from app.pinning.settings import DmaLatencyWriter, ScalarWriter
from app.pinning.spread import queue_steps
from app.pinning.writers import UNKNOWN_START, IrqWriter, MaskWriter, Step, ThreadWriter
from app.sysroot import SysRoot

__all__ = ["AffinityService", "BatchResults", "CaptureReadOnly", "GUARD_ORIGIN", "KINDS", "PinRequest",
           "PinResult", "PinTarget", "PinWriteError", "Plan", "Progress", "summarize"]


class CaptureReadOnly(CoremapError):
    """A pin, undo or restore asked of a capture (a --root that is not this machine)."""


class AffinityService:
    """`AffinityService(root, journal, writer=None)`: pins on `root`, journalled in `journal`.

    `writer` (an app.pinning.helper.HelperClient) is tried when a direct write is denied. It is given at
    construction and never changes: `with_writer()` makes a service that writes through one for a
    single privileged retry (the window's "Retry with privileges") while this one keeps asking nobody.
    """

    def __init__(self, root: SysRoot, journal: Journal, writer=None):
        self.root = root
        self.journal = journal
        self._writer = writer
        self.root_key = str(root.root.resolve())
        self._flow = PinFlow(journal, self.root_key, writers_for(root, lambda: self.ledger().entries), writer)
        self._ledger: tuple[object, Ledger] | None = None

    @property
    def live(self) -> bool:
        """Whether this pins the running machine (where a denied write may be retried with privilege)."""
        return self.root.is_live

    def with_writer(self, writer) -> "AffinityService":
        """The same machine and journal, with `writer` tried where a direct write is denied."""
        return AffinityService(self.root, self.journal, writer)

    def ledger(self) -> Ledger:
        """What this machine's journal adds up to, worked out again only when the journal grew (so
        `coremap undo` in another process and the window agree, and a tick costs an fstat)."""
        token = self.journal.refresh()
        if self._ledger is None or self._ledger[0] != token:
            self._ledger = (token, ledger_of(self.journal.entries(), self.journal.quiet_events(), self.root_key))
        return self._ledger[1]

    # -- writes ---------------------------------------------------------------------------------------
    def apply(self, request: PinRequest, *, progress: Progress | None = None) -> BatchResults:
        """Pin every target of `request`. CPUs that cannot be used (beyond any machine, not on this
        one, offline) are refused for every target before anything is journalled or written."""
        self._check_writable()
        b = self._pin_batch(request)
        if b.steps is None:
            return BatchResults(b.results)
        written = self._flow.run(b.steps, origin=request.origin or "pin", online=b.online, progress=progress)
        batch = self._batch_of(written)
        if batch is not None:
            for target, expanded, cpus in b.follows:
                ids = {t.id for t in expanded}
                mine = [r for r in written if r.target.kind == "thread" and r.target.id in ids]
                self._record_follow(target, request, mine, cpus, batch)
        return self._advised(b.results + written)

    def plan(self, request: PinRequest) -> Plan:
        """`apply`'s dry run: the same steps, each as the flow would take it, nothing journalled or
        written (app/pinning/dry_run.py). CaptureReadOnly as apply raises it."""
        self._check_writable()
        b = self._pin_batch(request)
        planned = Plan(PlannedStep.of(r) for r in b.results)
        if b.steps:
            planned += self._flow.plan(b.steps, b.online)
        return planned

    def apply_each(self, pairs, *, origin: str, quiet: tuple[str, tuple[int, ...]] | None = None,
                   join: int | None = None, progress: Progress | None = None) -> BatchResults:
        """Set each (target, cpus) pair, all in ONE batch (one undo reverts them all): an isolate, an
        include, a guard re-apply. `quiet` = (action, CPUs) journals an isolate or include first, whose
        id becomes the batch id; `join` adds the writes to an existing batch instead. Every pair's CPUs
        are checked before anything is journalled: one bad list refuses the whole batch."""
        self._check_writable()
        pairs = [(t, _value(t.kind, cpus)) for t, cpus in pairs]
        online = read_online_cpus(self.root)
        for t, cpus in pairs:
            refusal = value_refusal(self.root, t.kind, cpus, online, t.id)
            if refusal is not None:
                code, why = refusal
                return BatchResults(refused(u, code, f"{t.describe()}: {why}" if u is t else
                                            f"not written: {t.describe()} was refused ({why})", c) for u, c in pairs)
        batch = join
        if quiet is not None and pairs:
            batch = self.journal.quiet(quiet[0], quiet[1], self.root_key, planned=len(pairs))
        steps, results = [], []
        for t, cpus in pairs:
            steps += [Step(u, cpus) for u in self._expand(t, cpus, results)]
        results += self._flow.run(steps, origin=origin, online=online, batch=batch, progress=progress)
        return self._advised(results)

    def pin_new_thread(self, target: PinTarget, cpus, *, join: int, inherited, origin: str = "follow") -> PinResult:
        """A thread a pinned process created after the pin (app/quiet/guard.py): journalled in the pin's
        batch `join`, with `inherited` (the process's affinity from before the pin) as its `before`, so
        undoing the pin gives it that rather than the pinned mask it was born with; then pinned."""
        self._check_writable()
        cpus = tuple(sorted(set(int(c) for c in cpus)))
        online = read_online_cpus(self.root)
        refusal = cpus_refusal(self.root, cpus, online)
        if refusal is not None:
            return refused(target, refusal[0], refusal[1], cpus)
        [r] = self._flow.run([Step(target, cpus, inherited=tuple(inherited))], origin=origin, online=online,
                             batch=join)
        return r

    def schedule(self, targets, value, *, origin: str = "sched", progress: Progress | None = None) -> BatchResults:
        """Set the scheduling policy and RT priority (`value`: app/pinning/sched.py) of each thread of
        `targets` (threads, processes: each of their threads), as one batch that one undo puts back."""
        self._check_writable()
        steps, results, online = self._sched_batch(targets, value)
        if steps:
            results += self._flow.run(steps, origin=origin, online=online, progress=progress)
        return BatchResults(results)

    def plan_schedule(self, targets, value) -> Plan:
        """`schedule`'s dry run: each thread's change as the flow would take it, nothing written."""
        self._check_writable()
        steps, results, online = self._sched_batch(targets, value)
        planned = Plan(PlannedStep.of(r) for r in results)
        if steps:
            planned += self._flow.plan(steps, online)
        return planned

    def undo(self, *, progress: Progress | None = None) -> BatchResults:
        """Put back what the last pin (or redo) changed; empty when there is nothing to undo."""
        return self._replay_newest("undo", progress)

    def redo(self, *, progress: Progress | None = None) -> BatchResults:
        """Re-apply the last undone pin; empty when there is nothing to redo. (The redo stack holds undo
        batches: redoing one writes back what each of its writes found.)"""
        return self._replay_newest("redo", progress)

    def roll_back(self, batch: int, *, progress: Progress | None = None) -> BatchResults:
        """Put back what batch `batch` wrote, its pending writes too (a crash may have left them made or
        not: either way the value from before is written), its last write first; journalled as an undo
        of it, so it leaves the undo stack wherever it stood."""
        self._check_writable()
        entries = [e for e in self.ledger().batches.get(batch, ()) if e.state in ("done", "pending")]
        return self._replay(entries[::-1], f"undo:{batch}", progress)

    def restore_all(self, *, progress: Progress | None = None) -> BatchResults:
        """Every changed target back to its first journalled `before`, newest first; a move back into a
        coremap cpuset that is gone is left out with a note (app/pinning/ledger.py restorable)."""
        self._check_writable()
        cpusets = self._flow.writers["cpuset"]
        firsts, notes = restorable(self.ledger().unrestored, lambda i: bool(cpusets.read(PinTarget("cpuset", i))))
        firsts.sort(key=lambda e: e.id, reverse=True)
        return BatchResults(self._replay(firsts, "restore", progress), "; ".join(notes))

    # -- reads ----------------------------------------------------------------------------------------
    def read_affinity(self, target: PinTarget) -> tuple[int, ...] | None:
        """The target's value now (a thread's allowed CPUs, an IRQ's requested list, a mask's CPUs);
        None when it is gone."""
        if target.kind == "process":
            raise ValueError("read_affinity of a process: read each of its threads")
        return self._flow.writers[target.kind].read(target)

    def pending_restore(self) -> list[JournalEntry]:
        """Changes a previous run left behind (crash, kill -9, quit without restoring): for each target,
        the entry whose `before` restore_all() would write back. Threads that exited since (or whose
        tid now belongs to another thread) are left out: there is nothing to restore. So is what a Make
        quiet moved: quiet CPUs are meant to stay quiet, the grid badges them and Give back (or a cut-short
        bar, app/pinning/ledger.py CutShort) gives them back."""
        return [e for e in self.ledger().unrestored
                if e.session != self.journal.session_id and e.origin != "isolate"
                and (e.kind not in ("thread", "sched") or self._same_thread(e))]

    def preflight(self, request: PinRequest) -> list[str]:
        """Why `request` would not go, from its plan ([] = it would): what a drag shows before the drop."""
        try:
            return self.plan(request).reasons()
        except CaptureReadOnly as e:
            return [str(e)]

    # -- inside ---------------------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if not self.root.writable:
            raise CaptureReadOnly(f"a capture cannot be pinned: {self.root.root} is a capture of another machine "
                                  "(or a folder of its files); pins, undo and restore act on the machine coremap "
                                  "runs on, so drop --root or --session")

    def _pin_batch(self, request: PinRequest) -> "_PinBatch":
        """The steps of a pin, made once for `apply` and `plan`: CPUs refused for every target (`steps`
        None), else each target's placement (a pin onto quiet CPUs behind a cpuset shield goes into a
        cpuset that allows them first), irqbalance's ban of an IRQ, then the target's own writes."""
        cpus = tuple(sorted(set(int(c) for c in request.cpus)))
        online = read_online_cpus(self.root)
        refusal = cpus_refusal(self.root, cpus, online)
        if refusal is not None:
            return _PinBatch(cpus, online, None, [refused(t, refusal[0], refusal[1], cpus) for t in request.targets])
        steps, results, follows = [], [], []
        for target, mine in zip(request.targets, request.cpus_of()):
            mine = tuple(sorted(set(int(c) for c in mine)))       # a spread's one CPU, else `cpus`
            expanded = self._expand(target, mine, results)
            steps += placement_steps(self.root, target, mine, expanded, online)
            if target.kind == "irq":
                # irqbalance told to leave the IRQs alone first, so its next pass does not move them back.
                steps += ban_steps(self.root, "irqbalanceirq", [t.id for t in expanded])
            steps += [Step(t, mine) for t in expanded]
            follows.append((target, expanded, mine))
        if request.rps:
            queues, why = queue_steps(self.root, request)
            if why:         # said once, of the first target: the whole pin is refused
                return _PinBatch(cpus, online, None, [refused(request.targets[0], "invalid", why, cpus)])
            steps += queues
        return _PinBatch(cpus, online, steps, results, follows)

    def _sched_batch(self, targets, value) -> tuple[list[Step] | None, list[PinResult], tuple[int, ...]]:
        """The steps of a `schedule`: a value sched_setscheduler cannot take refuses every target."""
        value = tuple(int(v) for v in value)
        online = read_online_cpus(self.root)
        refusal = value_refusal(self.root, "sched", value, online)
        if refusal is not None:
            return None, [refused(t, refusal[0], refusal[1], value) for t in targets], online
        results: list[PinResult] = []
        steps = [Step(sched_target(u.id, u.pid, u.label), value) for t in targets for u in self._expand(t, value, results)]
        return steps, results, online

    def _expand(self, target: PinTarget, cpus, results: list) -> list[PinTarget]:
        """A process as each of its threads ([] and a "gone" result when it has exited)."""
        if target.kind != "process":
            return [target]
        names = [n for n in self.root.listdir(self.root.task_dir(target.id, None, "task")) if n.isdigit()]
        if not names:
            results.append(refused(target, "gone", f"process {target.id} has exited; refresh the list", cpus))
        return [PinTarget("thread", int(n), target.id, "") for n in sorted(names, key=int)]

    @staticmethod
    def _batch_of(results: list[PinResult]) -> int | None:
        """The batch the flow started: its first journal entry's id."""
        return next((r.journal_id for r in results if r.journal_id is not None), None)

    def _record_follow(self, target: PinTarget, request: PinRequest, results: list[PinResult], cpus,
                       batch: int) -> None:
        """A pinned process, or a thread found by its Java name: journal the rule that pins its new
        threads (app/quiet/guard.py follows it) once one of the writes happened."""
        if not any(r.changed for r in results):
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
        self.journal.follow(batch=batch, pid=pid, cpus=cpus, starttime=start, name=name, root=self.root_key)

    def _advised(self, results: list[PinResult]) -> BatchResults:
        if not any(r.changed for r in results):
            return BatchResults(results)
        needs_irqbalance = any(r.target.kind == "irq" for r in results)
        status = read_irqbalance(self.root) if needs_irqbalance else _NO_IRQBALANCE
        advised, warning = advise(self.root, results, self.ledger(), status)
        return BatchResults(advised, warning)

    def _replay_newest(self, what: str, progress: Progress | None) -> BatchResults:
        """Write back what each write of the newest batch on the undo (redo) stack found, its last write
        first; journalled with origin "undo:B" / "redo:B"."""
        self._check_writable()
        ledger = self.ledger()
        stack = ledger.undo if what == "undo" else ledger.redo
        if not stack:
            return BatchResults()
        b = stack[-1]
        return self._replay(ledger.done_entries(b)[::-1], f"{what}:{b}", progress)

    def _replay(self, entries: list[JournalEntry], origin: str, progress: Progress | None) -> BatchResults:
        steps = [Step(PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev), tuple(e.before),
                      expect_starttime=(UNKNOWN_START if e.starttime is None else e.starttime)
                      if e.kind in TASK_KINDS else None)
                 for e in entries if e.before is not None]
        return BatchResults(self._flow.run(steps, origin=origin, online=read_online_cpus(self.root),
                                           progress=progress))

    def _same_thread(self, e: JournalEntry) -> bool:
        pid = e.pid if e.pid is not None else e.target_id
        try:
            task = read_task(self.root, pid, e.target_id, detail="fast")
        except TaskGone:
            return False
        # Without a start time (an old or forged line) the thread cannot be told from a new one that
        # reused its id: not the same, so there is nothing of it to restore (issue 24).
        return e.starttime is not None and task.starttime == e.starttime


@dataclass
class _PinBatch:
    """A pin request turned into steps (AffinityService._pin_batch)."""
    cpus: tuple[int, ...]
    online: tuple[int, ...]
    steps: list[Step] | None                 # None: the CPUs were refused for every target
    results: list[PinResult]                 # targets refused or gone before any step
    follows: list = field(default_factory=list)


def _value(kind: str, value) -> tuple[int, ...]:
    """A value as the journal keeps it: a CPU set sorted and without repeats, anything else as given."""
    return tuple(sorted(set(int(c) for c in value))) if kind in CPU_KINDS else tuple(int(v) for v in value)


def writers_for(root: SysRoot, entries=None) -> dict[str, object]:
    """kind -> its writer, for every kind the journal records (app/pinning/kinds.py); `entries()`: the
    machine's journal entries, where a request is held by the journal itself (dmalatency)."""
    mask, scalar, balancer = MaskWriter(root), ScalarWriter(root), BalancerWriter(root)
    return {"thread": ThreadWriter(root), "irq": IrqWriter(root), "sched": SchedWriter(root), **{k: mask for k in MASK_KINDS},
            **{k: scalar for k in SCALAR_KINDS}, "dmalatency": DmaLatencyWriter(root, entries),
            **{k: balancer for k in BALANCER_KINDS}, **cgroup_writers(root)}


class _NoIrqbalance:
    """irqbalance not looked at (a batch without IRQs): it has nothing to warn about."""

    def warning_for(self, irq: int) -> str:
        return ""

    def pinned_text(self, irqs=()) -> str:
        return ""


_NO_IRQBALANCE = _NoIrqbalance()
