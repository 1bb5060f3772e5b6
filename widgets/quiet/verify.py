"""VerifyRunner: the window's Verify — probes/verify.py's VerifyPlan driven without blocking the UI.

For each step of the plan (pair, quiet) it sets the quiet state through `set_quiet` (an isolate or
include through the window's pin worker, shown on the result line; it answers later, in the UI
thread, so the window keeps painting while hundreds of targets move), then runs the step's
jitter jobs with a ProbeController of its own (which keeps coremap's threads off the probed CPUs
while each runs, probes/own_affinity.py), records each finished run, and goes on. At the end, on a
failure and on cancel, the CPUs get back the quiet state they had when Verify started.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.errors import CoremapError
from app.format import cpus_word
from probes.spec import Job
from probes.verify import VerifyPlan
from widgets.probe.controller import ProbeController

# set_quiet(cpus, quiet, done, failed): make the isolate or include, then call done(the outcome sentence,
# or None when none was needed) or failed(message), in the UI thread.
SetQuiet = Callable[[tuple[int, ...], bool, Callable[["str | None"], None], Callable[[str], None]], None]


class VerifyRunner(QObject):
    """Runs one verification at a time: `start(cpus, seconds, pairs, attribute, was_quiet)`."""

    progress = Signal(str)             # what it is doing, for the status line
    finished = Signal(object)          # the verification dict (VerifyPlan.result())
    failed = Signal(str)

    def __init__(self, set_quiet: SetQuiet, parent=None, *, controller: ProbeController | None = None):
        super().__init__(parent)
        self._set_quiet = set_quiet
        self.controller = controller or ProbeController(self)
        self.plan: VerifyPlan | None = None
        self._steps: list[tuple[int, bool]] = []
        self._step: tuple[int, bool] | None = None
        self._was_quiet = False
        self._cancelled = False
        self.controller.job_finished.connect(self._on_controller_job_finished)
        self.controller.finished.connect(self._on_controller_finished)
        self.controller.job_failed.connect(self._on_controller_job_failed)

    @property
    def running(self) -> bool:
        return self.plan is not None

    def start(self, cpus, *, seconds: float, pairs: int, attribute: bool, was_quiet: bool) -> None:
        if self.running:
            raise CoremapError("a verification is running; cancel it or wait for it to end")
        self.plan = VerifyPlan(tuple(sorted(cpus)), seconds, pairs, attribute)
        # The probed CPUs are made quiet between runs, coremap's own threads moved off them with the rest.
        self.controller.guard.lent = frozenset(self.plan.cpus)
        self._steps = self.plan.steps()
        self._was_quiet = was_quiet
        self._cancelled = False
        self._next_step()

    def cancel(self) -> None:
        if not self.running:
            return
        self._steps = []
        self._cancelled = True
        self.controller.cancel()

    def _next_step(self) -> None:
        plan = self.plan
        if not self._steps:
            self._restore(lambda: self._end(plan.result()))
            return
        self._step = self._steps.pop(0)
        pair, quiet = self._step

        def toggled(sentence: str | None) -> None:
            if self.plan is not plan:
                return              # ended meanwhile
            if self._cancelled:
                self._fail("verify cancelled; the CPUs have their quiet state from before")
                return
            if sentence:
                plan.note_outcome("isolate" if quiet else "include", sentence)
            self.progress.emit(f"verify {pair + 1}/{plan.pairs}: jitter on {cpus_word(plan.cpus)} "
                               f"{'quiet' if quiet else 'not quiet'} for {plan.seconds:g} s")
            try:
                self.controller.start(plan.jobs())
            except CoremapError as e:
                self._fail(str(e))
        self._set_quiet(plan.cpus, quiet, toggled, self._fail)

    def _restore(self, then) -> None:
        """Give the CPUs the quiet state they had when Verify started, then `then()`."""
        plan = self.plan

        def failed(message: str) -> None:
            if self.plan is plan:
                self.plan = None
                self.failed.emit(f"verify: could not give the CPUs their quiet state back: {message}")
        self._set_quiet(plan.cpus, self._was_quiet, lambda _sentence: then(), failed)

    def _end(self, result: dict) -> None:
        self.plan = None
        self.finished.emit(result)

    def _fail(self, message: str) -> None:
        if self.plan is None:
            return

        def failed() -> None:
            self.plan = None
            self.failed.emit(message)
        self._restore(failed)

    def _on_controller_job_finished(self, job: Job) -> None:
        pair, quiet = self._step
        self.plan.record(pair, quiet, job.summarize(self.controller.current_lines))

    def _on_controller_job_failed(self, _job: Job, message: str) -> None:
        self._steps = []
        self._fail(f"verify: {message}")

    def _on_controller_finished(self, how: str) -> None:
        if self.plan is None:
            return
        if how == "done":
            self._next_step()
        elif how == "cancelled":
            self._fail("verify cancelled; the CPUs have their quiet state from before")

