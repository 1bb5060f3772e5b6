"""QuietController: the Quiet menu — make the selected CPUs quiet (a preview, then one batch), give
them back, verify with the jitter probe before and after, make it permanent (the plan), and keep
irqbalance off them (its config line, written by the helper when asked).

Previews and writes go through the QuietService of the machine the window pins on (this one, or one
over ssh: app/quiet/service.py), in the PinController's worker, so the isolate is a batch of that
machine's journal like any pin, with progress and Cancel on the result line: Edit → Undo reverts it, the Pins panel lists it, the
grid marks its CPUs (PinController sets the quiet marks from the journal), and the guard keeps it.
The outcome goes on the result line: how many targets moved, how many could not, and why.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from app.pinning.ledger import session_alive
from app.errors import CoremapError
from app.format import cpus_word, format_rate, format_ratio
from app.pinning.helper import HelperClient
from app.machine.topology import Topology
from app.quiet.boot_plan import machine_root, make_plan
from app.quiet.isolate import QuietPreview, failed_results, outcome_sentence
from app.quiet.service import QuietService
from app.sampling.machine_state import MachineState
from probes.trace import unavailable_reason
from widgets.pinning.controller import PinController
from widgets.quiet.cut_short import CutShortBar
from widgets.quiet.plan_dialog import IrqbalanceFixDialog, PlanDialog
from widgets.quiet.preview_dialog import QuietPreviewDialog
from widgets.quiet.verify import VerifyRunner
from widgets.topology.view import TopologyView

VERIFY_SECONDS = 5.0
CUT_SHORT_AFTER_S = 30.0       # another run's batch with no write for this long is not under way
VERIFY_PAIRS = 2


class QuietController(QObject):
    """Parameters (the narrow things it needs): `grid` (its selected and quiet CPUs), `menu` (the Quiet
    menu, filled here), `pins` (the service writes go through and the result line), `status` (a
    line for progress), `add_run(result, source)` (the probe panel shows Verify's two sides),
    `state_applied` (the window's signal: which machine is shown). `verifications` is what Verify
    found, kept for the session and the report."""

    verified = Signal(object)          # a verification dict, when Verify finishes
    preview_shown = Signal(object)     # the QuietPreviewDialog, once its preview was worked out

    def __init__(self, grid: TopologyView, menu: QMenu, pins: PinController, *, status: Callable[[str], None],
                 add_run: Callable[[dict, str], object], state_applied, parent: QObject | None = None):
        super().__init__(parent)
        self.grid = grid
        self.pins = pins
        self._cut_offered: int | None = None
        self._status = status
        self._add_run = add_run
        self._topology: Topology | None = None
        self._live = False
        self._source = ""                  # the shown machine's folder, for the boot plan
        self.verifications: list[dict] = []
        self.dialog: QuietPreviewDialog | None = None
        self.plan_dialog: PlanDialog | None = None
        self.irqbalance_dialog: IrqbalanceFixDialog | None = None
        self._helper = None
        self.runner = VerifyRunner(self._set_quiet, self)
        self.runner.progress.connect(self._status)
        self.runner.finished.connect(self._on_runner_finished)
        self.runner.failed.connect(self._on_runner_failed)
        self._build_actions(menu)
        self.cut_short_bar = CutShortBar()
        self.cut_short_bar.finish_clicked.connect(self._on_cut_short_bar_finish_clicked)
        self.cut_short_bar.roll_back_clicked.connect(self._on_cut_short_bar_roll_back_clicked)
        state_applied.connect(self._on_state_applied)

    def _build_actions(self, menu: QMenu) -> None:
        def add(text: str, tip: str, slot) -> QAction:
            a = QAction(text, menu)
            a.setToolTip(tip)
            a.triggered.connect(slot)
            menu.addAction(a)
            return a
        self.isolate_action = add("Make quiet…", "Move every movable IRQ, thread and mask off the selected CPUs "
                                  "(a preview first; Edit → Undo reverts it)", self.open_isolate)
        self.include_action = add("Give back…", "Give the selected quiet CPUs (all, when none is selected) back "
                                  "to what was moved off them, and undo the pins made onto them while they were quiet "
                                  "(a preview first)", self.open_include)
        menu.addSeparator()
        self.verify_action = add("Verify", f"Jitter on the selected (or quiet) CPUs, not quiet and quiet, "
                                 f"{VERIFY_PAIRS} alternated pairs of {VERIFY_SECONDS:g} s", self.verify)
        self.cancel_verify_action = add("Cancel verify", "Stop the verification and give the CPUs their quiet "
                                        "state back", self.runner.cancel)
        menu.addSeparator()
        self.plan_action = add("Make it permanent…", "The kernel command line and configuration that keep "
                               "these CPUs quiet after a reboot (written for review, never applied)", self.open_plan)
        self.irqbalance_action = add("Keep irqbalance off the quiet CPUs…", "irqbalance's banned-CPU line, "
                                     "written by coremap-helper when you ask", self.open_irqbalance_fix)
        self.cancel_verify_action.setEnabled(False)

    # -- which CPUs --------------------------------------------------------------------------------
    def _on_state_applied(self, state: MachineState) -> None:
        self._topology = state.topology
        self._live = bool(state.live)
        self._source = "" if state.host else state.source
        self._offer_cut_short()

    # -- a batch a crash cut short ----------------------------------------------------------------------
    def _offer_cut_short(self) -> None:
        """Offer to finish or roll back an isolate or include that stopped early: one of another run whose
        process is gone (or, naming none, whose last write is CUT_SHORT_AFTER_S old), or this window's own,
        cancelled."""
        pins = self.pins.service
        if pins is None or self.pins.worker.busy:
            return
        now = time.time()
        mine = pins.journal.session_id
        cuts = [c for c in pins.ledger().cut_short
                if c.session == mine or not session_alive(c.session, c.last, now=now, quiet_for=CUT_SHORT_AFTER_S)]
        cut = cuts[-1] if cuts else None
        if cut is None:
            self._cut_offered = None
            self.cut_short_bar.offer(None)
        elif cut.batch != self._cut_offered:        # once per batch: a dismissed bar stays dismissed
            self._cut_offered = cut.batch
            self.cut_short_bar.offer(cut)

    def _on_cut_short_bar_finish_clicked(self, cut) -> None:
        service = self._service()
        if service is None or cut is None:
            return
        self.cut_short_bar.hide()
        self.pins.run(f"finish {cut.action} #{cut.batch}", lambda _pins, p: service.finish(cut, progress=p)[1])

    def _on_cut_short_bar_roll_back_clicked(self, cut) -> None:
        if cut is None:
            return
        self.cut_short_bar.hide()
        self.pins.run(f"roll back #{cut.batch}", lambda pins, p: pins.roll_back(cut.batch, progress=p))

    def _chosen(self, *, quiet_only: bool = False) -> tuple[int, ...]:
        """The selected CPUs; with `quiet_only`, those of them that are quiet (all quiet CPUs when
        none is selected)."""
        selected = tuple(self.grid.selected_cpus())
        if not quiet_only:
            return selected
        quiet = self.grid.quiet_cpus
        return tuple(c for c in selected if c in quiet) if selected else quiet

    # -- isolate / include ------------------------------------------------------------------------------
    def open_isolate(self) -> None:
        cpus = self._chosen()
        if not cpus:
            self.pins.show_message("select CPUs in the grid first (click, ctrl-click, or a box's header), "
                                   "then Quiet → Make quiet…", ok=False)
            return None
        return self._open_preview("isolate", cpus)

    def open_include(self) -> None:
        cpus = self._chosen(quiet_only=True)
        if not cpus:
            self.pins.show_message("no CPU is quiet: nothing to give back", ok=False)
            return None
        return self._open_preview("include", cpus)

    def _service(self) -> QuietService | None:
        """The QuietService of the Host the window pins on (one per host: a preview made over ssh is applied
        by the same RemoteQuiet); None, with the reason shown, where there are no pins."""
        return self.pins.host.quiet if self.pins.live_service() is not None else None

    def _open_preview(self, action: str, cpus, options: dict | None = None) -> None:
        """Work the preview out in the pin worker (it reads every thread and IRQ), then show it; a newer
        preview supersedes one still being worked out. `options`: the preview dialog's tick boxes
        (pm_qos, move_pinned, keep_pins, knobs: app/quiet/service.py QuietService.preview)."""
        service = self._service()
        if service is None:
            return
        options = dict(options or {})
        self.pins.show_message("working out what to move…")
        self.pins.worker.submit("preview", lambda _p: service.preview(action, cpus, **options), key="quiet-preview",
                                on_done=self._show_preview,
                                on_failed=lambda message: self.pins.show_message(message, ok=False))

    def _show_preview(self, preview: QuietPreview) -> None:
        self.pins.show_message(f"{preview.action} {cpus_word(preview.cpus)}: review the preview")
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        self.dialog = QuietPreviewDialog(preview, self.grid.window())
        self.dialog.accepted.connect(lambda p=preview: self.apply(p))
        self.dialog.options_changed.connect(lambda options, p=preview: self._open_preview(p.action, p.cpus, options))
        self.dialog.open()
        self.preview_shown.emit(self.dialog)

    def apply(self, preview: QuietPreview):
        """Write `preview` as one batch in the pin worker (progress and Cancel on the result line) and
        say how it went: what moved, what could not and why. Returns the job (None when unavailable)."""
        service = self._service()
        if service is None:
            return None
        return self.pins.run(f"{preview.action} {cpus_word(preview.cpus)}",
                             lambda _pins, p: service.apply(preview, progress=p),
                             summary=lambda results: (outcome_sentence(preview, results), not failed_results(results)))

    def _set_quiet(self, cpus, quiet: bool, done: Callable[[str | None], None], failed: Callable[[str], None]) -> None:
        """Verify's toggle: isolate or include `cpus` now, without a preview (the user asked for Verify),
        in the pin worker; `done(sentence or None)` or `failed(message)` in the UI thread after."""
        service = self._service()
        if service is None:
            failed("pinning is unavailable here, so CPUs cannot be made quiet")
            return

        def finished(outcome) -> None:
            if outcome is not None:
                sentence, results = outcome
                self.pins.show_results(results, "verify", summary=sentence, ok=not failed_results(results))
            done(outcome[0] if outcome is not None else None)
        self.pins.worker.submit("verify", lambda _p: service.set_quiet(cpus, quiet), on_done=finished,
                                on_failed=failed)

    # -- verify ---------------------------------------------------------------------------------
    def verify(self, *, seconds: float = VERIFY_SECONDS, pairs: int = VERIFY_PAIRS) -> bool:
        cpus = self._chosen() or self.grid.quiet_cpus
        if not cpus or not self._live:
            self.pins.show_message("select the CPUs to verify in the grid (or make some quiet first); "
                                   "Verify runs on the live machine only", ok=False)
            return False
        try:
            self.runner.start(cpus, seconds=seconds, pairs=pairs, attribute=unavailable_reason() is None,
                              was_quiet=set(cpus) <= set(self.grid.quiet_cpus))
        except CoremapError as e:
            self.pins.show_message(str(e), ok=False)
            return False
        self.verify_action.setEnabled(False)
        self.cancel_verify_action.setEnabled(True)
        return True

    def add_verification(self, v: dict) -> None:
        """A verification to keep for the session and the report (one that ran, or an opened session's)."""
        self.verifications.append(v)

    def _on_runner_finished(self, v: dict) -> None:
        self._verify_done()
        self.add_verification(v)
        for side in (v["before"], v["after"]):
            self._add_run(dict(side), f"verify {cpus_word(v['cpus'])}")
        self._status(f"verify {cpus_word(v['cpus'])}: gaps >= 10 µs {format_rate(v['before']['gaps10_per_s'])} "
                     f"not quiet, {format_rate(v['after']['gaps10_per_s'])} quiet "
                     f"({format_ratio(v['ratio'].get('gaps10_per_s'))} per pair); kept for the session and the report")
        self.verified.emit(v)

    def _on_runner_failed(self, message: str) -> None:
        self._verify_done()
        self.pins.show_message(message, ok=False)

    def _verify_done(self) -> None:
        self.verify_action.setEnabled(True)
        self.cancel_verify_action.setEnabled(False)

    # -- permanent, irqbalance ---------------------------------------------------------------------
    def open_plan(self) -> PlanDialog | None:
        cpus = self._chosen() or self.grid.quiet_cpus
        if not cpus or self._topology is None:
            self.pins.show_message("select the CPUs to keep quiet in the grid first", ok=False)
            return None
        topology, text, root = self._topology, ",".join(map(str, cpus)), machine_root(self._source)

        def replan(replace: bool, intel_pstate: bool):
            # The dialog's tick boxes: `plan --replace` and `--intel-pstate-disable` on the same CPUs.
            return make_plan(topology, text, root=root, replace=replace, intel_pstate=intel_pstate)
        try:
            plan = replan(False, False)
        except CoremapError as e:
            self.pins.show_message(str(e), ok=False)
            return None
        self.plan_dialog = PlanDialog(plan, self.grid.window(), replan=replan)
        self.plan_dialog.saved.connect(lambda folder: self._status(f"plan written to {folder}"))
        self.plan_dialog.open()
        return self.plan_dialog

    def open_irqbalance_fix(self) -> IrqbalanceFixDialog | None:
        cpus = self.grid.quiet_cpus or tuple(self._chosen())
        pins = self.pins.live_service()
        root = getattr(pins, "root", None)         # this machine's AffinityService has one
        if pins is None:
            return None
        if root is None:
            self.pins.show_message("irqbalance is configured on the machine it runs on: there, `coremap plan` "
                                   "prints its line", ok=False)
            return None
        if not cpus:
            self.pins.show_message("no CPU is quiet or selected: nothing to keep irqbalance off", ok=False)
            return None
        self.irqbalance_dialog = IrqbalanceFixDialog(root, cpus, self._write_irqbalance, self.grid.window())
        self.irqbalance_dialog.open()
        return self.irqbalance_dialog

    def _write_irqbalance(self, cpus) -> str:
        if self._helper is None:
            self._helper = HelperClient()           # started by its first request: only when asked
        return self._helper.ban_irqbalance_cpus(cpus)

    def close(self) -> None:
        self.runner.cancel()
        if self._helper is not None:
            self._helper.close()
            self._helper = None
