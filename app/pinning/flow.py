"""The one pin flow. Every pin, isolate, include, undo, redo, restore and guard re-apply is a batch of
steps, and every step goes through the same five moves:

  1. read the value before (the writer's `prepare`; a target that is not there is refused unjournalled)
  2. journal the intent (fsync'ed: a crash after this leaves the write to restore)
  3. write (directly; where that is denied and a privileged writer was given, through the helper)
  4. read back (the writer's `read_back`: ok, moving, trimmed, gone)
  5. journal the outcome (the mark: done or failed, with what was read back)

Between 1 and 2 the writer says what it can tell without writing (its `foresee`: a per-CPU kernel
thread, CPUs outside the thread's cpuset, a managed IRQ); such a refusal is not journalled. `plan` is
the same moves without 2-5: the batch's dry run (app/pinning/dry_run.py), which every "can this go
there" asks.

The flow knows no kind of target: the writers (app/pinning/writers.py) do. It knows batches: the batch
id is the first entry's id, an isolate's quiet event id, or the batch a new step joins. A batch can
be cancelled between steps (`Progress.cancelled`), and reports each result as it is made
(`Progress.on_result`), so a window can show progress and keep painting while it runs in a worker.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

from app.format import offline_sentence
from app.pinning.dry_run import Plan, PlannedStep
from app.pinning.journal import Journal
from app.pinning.kinds import CPU_KINDS
from app.pinning.refusals import PinWriteError, refusal
from app.pinning.targets import PinResult, refused
from app.pinning.writers import NOW, Foresight, Outcome, Prepared, Step


# What a step can come to before its write and is still journalled (an exited target, an offline CPU:
# the undo stack and the Pins dock show them), or is written anyway (a mask the kernel will trim).
JOURNALLED = ("gone", "offline", "trimmed")


class Progress:
    """What a running batch reports to, and how it is cancelled (from any thread).

    `on_result(result, done, total)` is called in the thread running the batch after each step."""

    def __init__(self, on_result: Callable[[PinResult, int, int], None] | None = None):
        self._cancel = threading.Event()
        self._on_result = on_result
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def cancel(self) -> None:
        with self._lock:
            self._cancel.set()
            hooks = list(self._hooks)
        for fn in hooks:
            fn()

    def add_cancel_hook(self, fn: Callable[[], None]) -> None:
        """`fn()` runs when the batch is cancelled (at once when it is already): a batch that runs
        elsewhere (over ssh) is told to stop."""
        with self._lock:
            self._hooks.append(fn)
            now = self._cancel.is_set()
        if now:
            fn()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def report(self, result: PinResult, done: int, total: int) -> None:
        if self._on_result is not None:
            self._on_result(result, done, total)


class PinFlow:
    """`PinFlow(journal, root_key, writers, helper=None)`: runs batches of steps (see the module
    docstring). `helper` (app.pinning.helper.HelperClient) is tried where a direct write is denied
    and this process is not root (root is refused only for reasons the helper shares)."""

    def __init__(self, journal: Journal, root_key: str, writers: dict, helper=None):
        self.journal = journal
        self.root_key = root_key
        self.writers = writers
        self.helper = helper

    def run(self, steps: Sequence[Step], *, origin: str, online, batch: int | None = None,
            progress: Progress | None = None) -> list[PinResult]:
        """Write every step as one batch (`batch`: join that one; None: the first entry starts it)."""
        results: list[PinResult] = []
        online = frozenset(online)
        for i, step in enumerate(steps):
            if progress is not None and progress.cancelled:
                results += [refused(s.target, "cancelled", f"{s.target.describe()}: not written, the batch was "
                                    "cancelled", s.cpus) for s in steps[i:]]
                break
            result, batch = self._step(step, origin, online, batch)
            results.append(result)
            if progress is not None:
                progress.report(result, i + 1, len(steps))
        return results

    def plan(self, steps: Sequence[Step], online) -> Plan:
        """The batch's dry run: each step read as `run` would take it (before, refused, gone, offline,
        foreseen), nothing journalled or written. What an earlier step would change that a later one
        reads (a thread moved into /coremap-pinned) is carried forward (writers.Foresight)."""
        online, sight, planned = frozenset(online), Foresight(), Plan()
        for step in steps:
            writer = self.writers[step.target.kind]
            p, verdict = self._judge(writer, step, online, sight)
            code, message = (verdict.code, verdict.message) if verdict is not None else ("ok", "")
            if code in ("ok", "trimmed") and hasattr(writer, "forecast"):
                writer.forecast(p.target, step.cpus, sight)
            planned.append(PlannedStep(p.target, code, message, p.before, tuple(step.cpus)))
        return planned

    def _judge(self, writer, step: Step, online: frozenset[int], sight: Foresight) -> tuple[Prepared, Outcome | None]:
        """1. before, and what can be told without writing: what `prepare` found, and None when the step
        may be written, else the Outcome it comes to."""
        p = writer.prepare(step)
        if p.refusal is not None:
            return p, Outcome(*p.refusal)
        t = p.target
        if p.gone:
            return p, Outcome("gone", p.gone)
        offline = sorted(set(step.cpus) - online) if t.kind in CPU_KINDS else []
        if offline:
            return p, Outcome("offline", f"{t.describe()}: {offline_sentence(offline, online)}")
        return p, writer.foresee(t, step.cpus, sight) if hasattr(writer, "foresee") else None

    def _step(self, step: Step, origin: str, online: frozenset[int], batch: int | None) -> tuple[PinResult, int | None]:
        writer = self.writers[step.target.kind]
        p, verdict = self._judge(writer, step, online, NOW)                    # 1. before
        if verdict is not None and verdict.code not in JOURNALLED:
            # Refused before the write (prepare's refusal or the writer's foresight): nothing journalled.
            return refused(p.target, verdict.code, verdict.message, step.cpus, p.before), batch
        t = p.target
        jid = self.journal.record(kind=t.kind, target_id=t.id, requested=step.cpus, before=p.before,  # 2. intent
                                  pid=t.pid, label=t.label, root=self.root_key, origin=origin, batch=batch,
                                  starttime=p.starttime, netdev=t.netdev)
        if verdict is not None and verdict.code != "trimmed":
            outcome = verdict
        else:
            outcome = self._write(writer, t, step.cpus)                         # 3. write, 4. read back
        self.journal.mark(jid, "done" if outcome.done else "failed", outcome.after, outcome.effective,  # 5.
                          code=outcome.code, message=outcome.message)
        result = PinResult(t, outcome.code in ("ok", "moving"), outcome.code, outcome.message, p.before,
                           tuple(step.cpus), outcome.after, outcome.effective, jid)
        return result, batch if batch is not None else jid

    def _write(self, writer, target, cpus) -> Outcome:
        try:
            try:
                writer.write(target, cpus)
            except PermissionError:
                if self.helper is None or os.geteuid() == 0:
                    raise
                writer.write_privileged(self.helper, target, cpus)
        except (OSError, PinWriteError) as e:
            explain = getattr(writer, "explain_einval", None)
            code, message = refusal(target, e, cpus,
                                    explain_einval=(lambda: explain(target, cpus)) if explain else None)
            return Outcome(code, message)
        return writer.read_back(target, cpus)
