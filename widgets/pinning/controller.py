"""PinController: drops on the grid, "Pin to…", Edit → Undo / Redo / Restore all, and the batches other
controllers make (an isolate), all through one PinService (app/pinning/api.py: this machine's
AffinityService or a machine's over ssh), with results on the status bar's PinResultLine and in the
Pins journal.

The path of a pin (STYLE.md, "Data flow"): the grid asks its drop policy (PinDropPolicy, whose check
is `PinController.check`, i.e. the service's preflight, the pin flow's dry run; the Pin to… dialog asks
the same) whether a target can take the payload, lights
it and says why not before the drop; a drop emits `TopologyView.pin_requested(PinRequest)`. The
controller hands every write to its PinWorker (widgets/pinning/worker.py), which runs the service's
one pin flow in its own thread: the window keeps painting, the result line shows "N of M" with a
Cancel button, and each result shows when it arrives. Failures never open a modal dialog. A write the
kernel denies offers "Retry with privileges", the only thing that starts the pkexec helper: the
window itself never runs as root.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, Signal, SignalInstance
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QMenu, QStatusBar

from app.errors import CoremapError
from app.host import Host
from app.pinning.api import PinService
from app.pinning.flow import Progress
from app.pinning.helper import HelperClient
from app.pinning.service import AffinityService
from app.pinning.spread import spread_irqs
from app.pinning.targets import PinRequest, PinResult
from app.sampling.machine_state import MachineState
from widgets.pinning.drop import PinDropPolicy
from widgets.pinning.feedback import PinResultLine, RestoreBar
from widgets.pinning.journal_view import PinJournalWidget
from widgets.pinning.sched_dialog import SchedulingController
from widgets.pinning.sources import PinSources
from widgets.pinning.worker import PinJob, PinWorker
from widgets.topology.view import TopologyView

# A batch: run(service, progress) -> its results, in the worker thread.
Batch = Callable[[PinService, Progress], list]


class PinController(QObject):
    """Parameters (the narrow things it needs, never the window):
      grid           the TopologyView drops land on (it gets this controller's drop policy)
      sources        table views whose rows drag onto the grid and open "Pin to…" (PinSources)
      menu           the Edit menu: Pin to…, Undo, Redo, Restore all and Cancel are added to it
      status_bar     the result line is put first in it; drag hints show as its message
      state_applied  the window's signal after each MachineState reached its widgets

    Attributes the owner places: `journal_widget` (the "Pins" dock) and `restore_bar`. The pins are
    those of the Host shown (`set_host`): this machine's are opened lazily (when a pin is first checked,
    or at the first state when a previous journal exists); a host without pins (a capture, a metrics
    source) refuses with its reason."""

    results_shown = Signal(list)       # the PinResults just shown in the result line
    quiet_changed = Signal(tuple)      # the CPUs an isolate in effect made quiet, when they change
    # IRQs a Make quiet in effect could not move, the kernel managing them (Ledger.refused_managed)
    managed_refused = Signal(frozenset)

    def __init__(self, grid: TopologyView, sources: Iterable[QAbstractItemView], menu: QMenu,
                 status_bar: QStatusBar, state_applied: SignalInstance, parent: QObject | None = None):
        super().__init__(parent)
        self.grid = grid
        self.status_bar = status_bar
        self.service: PinService | None = None
        self.host: Host | None = None
        self.worker = PinWorker(self)
        self._state_seen = False
        self._topology = None
        self._irqs = None            # the IRQ table last shown: where a spread finds each IRQ's device node
        self._unavailable = "no machine shown yet"
        self._retry: PinRequest | None = None
        self._journal_token: tuple | None = None
        self._helper: HelperClient | None = None
        self._partial: frozenset[int] = frozenset()
        self._build_actions(menu)
        self._build_widgets()
        self.sources = PinSources(grid, self.request, self.show_message, self, check=self.check, spread=self.spread)
        for view in sources:
            self.sources.add(view)
        self.scheduling = SchedulingController(self._scheduler, self.run, self.show_message, grid.window(), self)
        self.sources.open_scheduling = self.scheduling.open
        self.pin_action.triggered.connect(self.sources.open_focused)
        grid.set_drop_policy(PinDropPolicy(self.check, self.spread))
        grid.pin_requested.connect(self._on_grid_pin_requested)
        grid.drop_hint.connect(self._on_grid_drop_hint)
        state_applied.connect(self._on_state_applied)
        self.worker.busy_changed.connect(self._on_worker_busy_changed)

    def _build_actions(self, menu: QMenu) -> None:
        def add(text: str, shortcut: str = "", tip: str = "") -> QAction:
            a = QAction(text, menu)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            a.setToolTip(tip)
            return a
        self.pin_action = add("Pin to…", "Ctrl+P", "Pin the selected rows of the IRQ or thread table to CPUs (Ctrl+P)")
        self.undo_action = add("Undo pin", "Ctrl+Z")
        self.redo_action = add("Redo pin", "Ctrl+Shift+Z")
        self.restore_action = add("Restore all", tip="Put every pinned thread and IRQ back to the affinity it had "
                                  "before coremap changed it")
        self.cancel_action = add("Cancel pinning", "Esc", "Stop the batch under way between two writes")
        for a in (self.undo_action, self.redo_action, self.restore_action, self.cancel_action):
            a.setEnabled(False)
        menu.addAction(self.pin_action)
        menu.addSeparator()
        for a in (self.undo_action, self.redo_action, self.restore_action, self.cancel_action):
            menu.addAction(a)
        self.undo_action.triggered.connect(lambda: self.run("undo", lambda s, p: s.undo(progress=p)))
        self.redo_action.triggered.connect(lambda: self.run("redo", lambda s, p: s.redo(progress=p)))
        self.restore_action.triggered.connect(self._on_restore_triggered)
        self.cancel_action.triggered.connect(self.worker.cancel)

    def _build_widgets(self) -> None:
        self.result_line = PinResultLine(self.status_bar)
        self.status_bar.insertWidget(0, self.result_line, 3)
        self.journal_widget = PinJournalWidget()
        for a in (self.undo_action, self.redo_action, self.restore_action):
            self.journal_widget.add_action_button(a)
        self.journal_widget.finish_buttons()
        self.restore_bar = RestoreBar()
        self.journal_widget.policy_requested.connect(self._on_journal_widget_policy_requested)
        self.result_line.retry_requested.connect(self._on_result_line_retry_requested)
        self.result_line.cancel_requested.connect(self.worker.cancel)
        self.restore_bar.restore_clicked.connect(self._on_restore_triggered)

    # -- the service ----------------------------------------------------------------------------------------
    def set_host(self, host: Host) -> None:
        """Pin through `host`'s pins (the machine the window shows now)."""
        self.host = host
        self.service = None
        self._state_seen = False
        self._unavailable = host.absent("pins")
        if host.has_journal():
            self._service()
            self._offer_restore()
        else:
            self.restore_bar.hide()
        self._refresh_journal()

    def _on_state_applied(self, state: MachineState) -> None:
        first = not self._state_seen or state.topology is not self._topology
        self._topology = self.sources.topology = state.topology
        if state.irqs is not None or first:
            self._irqs = state.irqs
        self._state_seen = True
        self._refresh_journal()

    def _service(self) -> PinService | None:
        if self.service is None and self.host is not None:
            self.service = self.host.pins
            if self.service is None:
                self._unavailable = self.host.absent("pins")     # this machine's journal may have failed
        return self.service

    def _scheduler(self) -> AffinityService | str:
        """The service Set scheduling… writes through, or why there is none: a thread's policy is set on
        a machine whose files are here (over ssh, `coremap --host H sched` runs it there)."""
        service = self._service()
        if service is None:
            return self._unavailable
        if self.host.root is None:
            return ("scheduling is set by coremap on the machine it runs on: run `coremap --host HOST sched "
                    "--tid T --policy fifo --priority N` for this one")
        return service

    def live_service(self) -> PinService | None:
        """The service pins go through (opened on first use on the live machine); None where pinning is
        unavailable (a snapshot), with the reason on the result line. Other controllers (quiet CPUs)
        write through it with `run`, so undo and the Pins panel see their batches."""
        service = self._service()
        if service is None:
            self.result_line.show_message(self._unavailable, ok=False)
        return service

    # -- requests -------------------------------------------------------------------------------------------
    def spread(self, irqs, cpus) -> tuple[tuple[int, ...], ...]:
        """Several IRQs dropped together: one per CPU of `cpus`, each device's NUMA node first, from the
        machine shown (app/pinning/spread.py: the rule `coremap pin --spread` follows)."""
        return spread_irqs(irqs, cpus, self._irqs, self._topology)

    def check(self, request: PinRequest) -> list[str]:
        """Why `request` would not go (the service's preflight: the pin flow's dry run of the same
        batch), or [] when a drop or the Pin to… dialog may go ahead. A drop onto quiet CPUs behind a
        shield goes: the batch moves the thread into /coremap-pinned first, as `coremap pin` does."""
        service = self._service()
        if service is None:
            return [self._unavailable]
        try:
            return service.preflight(request)
        except CoremapError as e:          # e.g. a proc file that cannot be read: say so, refuse
            return [str(e)]

    def request(self, request: PinRequest) -> PinJob | None:
        """Pin `request` in the worker and show its results as they come; None (with the reason shown)
        when pinning is unavailable."""
        def done(results: list[PinResult]) -> None:
            denied = tuple(r.target for r in results if r.code == "denied")
            # The Java name too: a retried pin of a Java thread is followed by that name, as the first try would be;
            # and a spread's own CPU for each IRQ it retries.
            own = {(t.kind, t.id): c for t, c in zip(request.targets, request.cpus_of())}
            each = tuple(own.get((t.kind, t.id), tuple(request.cpus)) for t in denied) if request.each else ()
            self._retry = PinRequest(denied, request.cpus, origin="retry", java_name=request.java_name,
                                     each=each) if denied else None
            self._show(results, "", can_retry=bool(denied) and self.service is not None and self.service.live)
        return self.run("pin", lambda s, p: s.apply(request, progress=p), on_done=done, show=False)

    def run(self, what: str, batch: Batch, *, on_done: Callable[[list], None] | None = None,
            summary: Callable[[list], tuple[str, bool]] | None = None, service: PinService | None = None,
            show: bool = True) -> PinJob | None:
        """Run `batch` on the service (or `service`) in the worker, with its progress on the result line.
        When it ends its results are shown (unless `show` is False; `summary(results)` -> (line, ok)
        replaces their count), then `on_done(results)` runs. None, with the reason shown, when there is
        no service."""
        service = service or self.live_service()
        if service is None:
            return None
        self.result_line.show_progress(what)

        def finished(results: list) -> None:
            if show:
                line, ok = summary(results) if summary is not None else ("", None)
                self._show(results, what, summary=line, ok=ok)
            if on_done is not None:
                on_done(results)
        return self.worker.submit(what, lambda p: batch(service, p), on_done=finished,
                                  on_failed=lambda message: self.result_line.show_message(message, ok=False),
                                  on_result=lambda r, done, total: self.result_line.show_progress(what, done, total, r))

    def show_message(self, text: str, ok: bool = True) -> None:
        self.result_line.show_message(text, ok)

    def show_results(self, results: list[PinResult], what: str, summary: str = "", ok: bool | None = None) -> None:
        """Show results of writes another controller made through the worker (Verify's isolate)."""
        self._show(results, what, summary=summary, ok=ok)

    def _show(self, results: list[PinResult], what: str, can_retry: bool = False, summary: str = "",
              ok: bool | None = None) -> None:
        """The results, with the batch's headline warning (decided once, app/pinning/advice.py)."""
        self.result_line.show_results(results, what, results.warning, can_retry, summary, ok)
        self._refresh_journal()
        self.results_shown.emit(list(results))

    def refresh_journal(self) -> None:
        """Show what the journal holds now (pins, isolates, guard reports made by any process)."""
        self._refresh_journal()

    def _refresh_journal(self) -> None:
        s = self.service
        if s is None:
            self._journal_token = None
            self.journal_widget.set_entries([])
            self._set_quiet(())
            self._set_refused(frozenset())
            for a in (self.undo_action, self.redo_action, self.restore_action):
                a.setEnabled(False)
            return
        # Read on every state applied: only news (the journal grew) costs more than an fstat.
        token = (id(s), s.journal.refresh())
        if token == self._journal_token:
            return
        self._journal_token = token
        ledger = s.ledger()
        events = [g for g in s.journal.guard_events() if g.root == s.root_key]
        self.journal_widget.set_entries(list(ledger.entries), events, s.journal.policies(), ledger.in_effect().keys())
        self._enable_history()
        self._set_quiet(ledger.quiet_cpus, [c for cut in ledger.cut_short for c in cut.cpus])
        self._set_refused(ledger.refused_managed())

    def _enable_history(self) -> None:
        """Undo, redo and restore as the ledger allows, and never while a batch runs (they would queue
        behind it and undo what the user has not seen yet)."""
        s, busy = self.service, self.worker.busy
        ledger = s.ledger() if s is not None else None
        self.undo_action.setEnabled(not busy and ledger is not None and bool(ledger.undo))
        self.redo_action.setEnabled(not busy and ledger is not None and bool(ledger.redo))
        self.restore_action.setEnabled(not busy and ledger is not None and bool(ledger.unrestored))
        self.cancel_action.setEnabled(busy)

    def _on_worker_busy_changed(self, busy: bool) -> None:
        self._enable_history()

    def _set_quiet(self, cpus: tuple[int, ...], partial=()) -> None:
        if (tuple(cpus), frozenset(partial)) != (self.grid.quiet_cpus, self._partial):
            self._partial = frozenset(partial)
            self.grid.set_quiet_cpus(cpus, partial)
            self.quiet_changed.emit(tuple(cpus))

    def _set_refused(self, irqs: frozenset) -> None:
        if irqs != self.grid.refused_managed:
            self.grid.set_refused_managed(irqs)
            self.managed_refused.emit(irqs)

    def _on_journal_widget_policy_requested(self, batch: int, reapply: bool) -> None:
        s = self.service
        if s is None:
            return
        try:
            s.journal.set_policy(batch, reapply)
        except CoremapError as e:
            self.result_line.show_message(str(e), ok=False)
            return
        self.result_line.show_message(f"pin #{batch}: the guard {'re-applies it' if reapply else 'only reports'} "
                                      "when someone else changes it")
        self._refresh_journal()

    def _offer_restore(self) -> None:
        s = self.service
        pending = s.pending_restore() if s is not None else []
        if pending:
            self.restore_bar.offer(pending)
        else:
            self.restore_bar.hide()

    # -- handlers -------------------------------------------------------------------------------------------
    def _on_grid_pin_requested(self, request: PinRequest) -> None:
        self.request(request)

    def _on_grid_drop_hint(self, text: str) -> None:
        if text:
            self.status_bar.showMessage(text)
        else:
            self.status_bar.clearMessage()

    def _on_restore_triggered(self) -> None:
        self.run("restore", lambda s, p: s.restore_all(progress=p), on_done=lambda _r: self.restore_bar.hide())

    def _on_result_line_retry_requested(self) -> None:
        s, req = self.service, self._retry
        if s is None or req is None:
            return
        if self._helper is None:
            self._helper = HelperClient()       # pkexec coremap-helper, started by its first request
        # The helper writes for this one retry only: a later denied pin asks again.
        self.run("retry", lambda _s, p: _s.apply(req, progress=p), service=s.with_writer(self._helper))
        self._retry = None

    def close(self) -> None:
        self.worker.stop()
        if self._helper is not None:
            self._helper.close()
            self._helper = None
