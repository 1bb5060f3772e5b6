"""PinController: drops on the grid, "Pin to…", Edit → Undo / Redo / Restore all, all through one
AffinityService, with the results shown in the status bar's PinResultLine and the Pins journal.

The path of a pin (STYLE.md, "Data flow"): the grid finds the target under the cursor and asks its
drop policy (PinDropPolicy, whose check is `PinController.check`, i.e. AffinityService.preflight)
whether it can take the payload, lights the target and says why not before the drop; a drop emits
`TopologyView.pin_requested(PinRequest)`. The controller hands requests to the Qt-free
AffinityService (read before, journal, write, read back) and shows one result per target; failures
never open a modal dialog. A write the kernel denies offers "Retry with privileges", which is the
only thing that starts the pkexec helper: the window itself never runs as root.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, Qt, Signal, SignalInstance
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QApplication, QMenu, QStatusBar

from dataclasses import replace

from app.pinning.service import AffinityService, PinRequest, PinResult
from app.errors import CoremapError
from app.pinning.helper import HelperClient
from app.pinning.journal import Journal
from app.machine.topology import Topology
from app.parse.cpulist import format_cpulist
from app.quiet.ledger import quiet_warnings, read_quiet_state
from app.sampling.machine_state import MachineState
from app.store.folders import journal_path
from app.sysroot import SysRoot
from widgets.pinning.dialog import PinDialog
from widgets.pinning.drop import PinDropPolicy
from widgets.pinning.feedback import PinJournalWidget, PinResultLine, RestoreBar
from widgets.pinning.mime import PinPayload, PinPayloadError, decode_pin_mime
from widgets.topology.view import TopologyView


class PinController(QObject):
    """Connects drops, "Pin to…" and Edit → Undo/Redo/Restore all to an AffinityService, and shows results.

    Parameters (the narrow things it needs, never the window):
      grid           the TopologyView drops land on; it gets this controller's drop policy, and its
                     selected CPUs are what the "Pin to…" dialog starts with
      sources        table views whose rows drag onto the grid and open "Pin to…" (context menu, Ctrl+P)
      menu           the Edit menu: Pin to…, Undo, Redo and Restore all are added to it (and owned by it)
      status_bar     the result line is put first in it; drag hints show as its message
      state_applied  the window's signal after each MachineState reached its widgets

    Attributes the owner places: `journal_widget` (the "Pins" dock's widget) and `restore_bar` (a
    bar at the top of the window). The service is created on the first live state
    (`AffinityService(SysRoot("/"), Journal(journal_path()))`, lazily: the journal is opened when a
    pin is first checked or when a previous journal exists); on a snapshot pinning is refused, unless a
    service is given with `set_service` (tests pin IRQs into a copy of a captured machine that way).
    """

    results_shown = Signal(list)       # the PinResults just shown in the result line
    quiet_changed = Signal(tuple)      # the CPUs an isolate in effect made quiet, when they change

    def __init__(self, grid: TopologyView, sources: Iterable[QAbstractItemView], menu: QMenu,
                 status_bar: QStatusBar, state_applied: SignalInstance, parent: QObject | None = None):
        super().__init__(parent)
        self.grid = grid
        self.status_bar = status_bar
        self.service: AffinityService | None = None
        self._injected = False
        self._state_seen = False
        self._live = False
        self._host = ""
        self._topology: Topology | None = None
        self._unavailable = "no machine shown yet"
        self._retry: PinRequest | None = None
        self._journal_token: tuple | None = None
        self._helper: HelperClient | None = None
        self._sources: list[QAbstractItemView] = []
        self._last_source: QAbstractItemView | None = None
        self.dialog: PinDialog | None = None
        self._build_actions(menu)
        self._build_widgets()
        grid.set_drop_policy(PinDropPolicy(self.check))
        grid.pin_requested.connect(self._on_grid_pin_requested)
        grid.drop_hint.connect(self._on_grid_drop_hint)
        for source in sources:
            self.add_source(source)
        state_applied.connect(self._on_state_applied)

    def _build_actions(self, menu: QMenu) -> None:
        self.undo_action = QAction("Undo pin", menu)
        self.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
        self.redo_action = QAction("Redo pin", menu)
        self.redo_action.setShortcut(QKeySequence("Ctrl+Shift+Z"))
        self.restore_action = QAction("Restore all", menu)
        self.restore_action.setToolTip("Put every pinned thread and IRQ back to the affinity it had before coremap "
                                       "changed it")
        self.pin_action = QAction("Pin to…", menu)
        self.pin_action.setShortcut(QKeySequence("Ctrl+P"))
        self.pin_action.setToolTip("Pin the selected rows of the IRQ or thread table to CPUs (Ctrl+P)")
        for a in (self.undo_action, self.redo_action, self.restore_action):
            a.setEnabled(False)
        menu.addAction(self.pin_action)
        menu.addSeparator()
        for a in (self.undo_action, self.redo_action, self.restore_action):
            menu.addAction(a)
        self.undo_action.triggered.connect(self._on_undo_triggered)
        self.redo_action.triggered.connect(self._on_redo_triggered)
        self.restore_action.triggered.connect(self._on_restore_triggered)
        self.pin_action.triggered.connect(self._on_pin_action_triggered)

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
        self.restore_bar.restore_clicked.connect(self._on_restore_bar_restore_clicked)

    def add_source(self, view: QAbstractItemView) -> None:
        """Rows of `view` can be dragged onto the grid (its model's mimeData) and pinned with the
        context menu or Ctrl+P."""
        view.setDragEnabled(True)
        view.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        view.customContextMenuRequested.connect(lambda pos, v=view: self._on_source_context_menu(v, pos))
        self._sources.append(view)

    # -- the service ----------------------------------------------------------------------------------------
    def set_service(self, service: AffinityService | None) -> None:
        """Pin through `service` (whatever the window shows); None returns to the window's own choice."""
        self.service = service
        self._injected = service is not None
        self._refresh_journal()
        if service is not None:
            self._offer_restore()

    def _on_state_applied(self, state: MachineState) -> None:
        first = not self._state_seen or state.topology is not self._topology
        self._topology = state.topology
        self._live = bool(state.live)
        self._host = state.topology.hostname or state.source
        self._state_seen = True
        if not self._injected:
            if not self._live:
                self.service = None
                self._unavailable = f"this is a snapshot of {self._host}: pinning needs the live machine"
            elif first and self.service is None and journal_path(create=False).exists():
                # A journal from earlier runs: open it now, to offer restoring what they left behind.
                if self._open_live_service() is not None:
                    self._offer_restore()
        self._refresh_journal()

    def _open_live_service(self) -> AffinityService | None:
        if self.service is not None:
            return self.service
        try:
            self.service = AffinityService(SysRoot("/"), Journal(journal_path()))
        except CoremapError as e:
            self._unavailable = str(e)
            self.result_line.show_message(str(e), ok=False)
            return None
        return self.service

    def _service(self) -> AffinityService | None:
        if self.service is not None:
            return self.service
        if self._injected or not self._live:
            return None
        return self._open_live_service()

    def live_service(self) -> AffinityService | None:
        """The service pins go through (opened on first use on the live machine); None where pinning
        is unavailable (a snapshot), with the reason on the result line. Other controllers (quiet
        CPUs, the guard) write through the same one, so undo and the Pins panel see their batches."""
        service = self._service()
        if service is None:
            self.result_line.show_message(self._unavailable, ok=False)
        return service

    # -- requests -------------------------------------------------------------------------------------------
    def check(self, request: PinRequest) -> list[str]:
        """Why `request` would be refused (AffinityService.preflight), or [] when a drop may go ahead.

        A target that has exited is not a reason to refuse the drop: the pin then fails with its own
        message in the result line and a "failed" journal entry, like any other pin that lost a race."""
        service = self._service()
        if service is None:
            return [self._unavailable]
        gone = {f"{t.describe()} has exited" for t in request.targets}
        try:
            reasons = service.preflight(request)
        except CoremapError as e:          # e.g. a proc file that cannot be read: say so, refuse
            return [str(e)]
        return [r for r in reasons if r not in gone]

    def request(self, request: PinRequest) -> list[PinResult]:
        """Apply `request` and show its results; [] (with the reason shown) when pinning is unavailable."""
        service = self._service()
        if service is None:
            self.result_line.show_message(self._unavailable, ok=False)
            return []
        try:
            results = service.apply(request)
        except CoremapError as e:          # the journal cannot be written, a root that went away, ...
            self.result_line.show_message(str(e), ok=False)
            return []
        denied = tuple(r.target for r in results if r.code == "denied")
        self._retry = PinRequest(denied, request.cpus, origin="retry") if denied else None
        warned = quiet_warnings(service, results)
        results = [replace(r, warning=warned[i]) if i in warned else r for i, r in enumerate(results)]
        quiet = list(warned.values())
        self._show(results, "", can_retry=bool(denied) and service.live,
                   warning=quiet[0] + (f" (and {len(quiet) - 1} more)" if len(quiet) > 1 else "") if quiet else "")
        return results

    def show_results(self, results: list[PinResult], what: str, summary: str = "", ok: bool | None = None) -> None:
        """Show results of writes another controller made through `live_service()` (an isolate), with
        `summary` as the line's text and `ok` as its colour when given."""
        self._show(results, what, summary=summary, ok=ok)

    def show_message(self, text: str, ok: bool = True) -> None:
        self.result_line.show_message(text, ok)

    def _show(self, results: list[PinResult], what: str, can_retry: bool = False, warning: str = "",
              summary: str = "", ok: bool | None = None) -> None:
        """`warning` (a pin back onto quiet CPUs) goes first; else irqbalance's, when it may undo IRQ pins."""
        if not warning and any(r.warning for r in results) and self.service is not None:
            irqs = [r.target.id for r in results if r.warning and r.target.kind == "irq"]
            warning = self.service.irqbalance_warning(irqs) or next(r.warning for r in results if r.warning)
        self.result_line.show_results(results, what, warning, can_retry, summary, ok)
        self._refresh_journal()
        self.results_shown.emit(results)

    def refresh_journal(self) -> None:
        """Show what the journal holds now (pins, isolates, guard reports made by any process)."""
        self._refresh_journal()

    def _refresh_journal(self) -> None:
        s = self.service
        if s is None:
            self._journal_token = None
            self.journal_widget.set_entries([])
            self._set_quiet(())
            for a in (self.undo_action, self.redo_action, self.restore_action):
                a.setEnabled(False)
            return
        # Read on every state applied: only news (the journal grew) costs more than an fstat.
        token = (id(s), s.journal.refresh())
        if token == self._journal_token:
            return
        self._journal_token = token
        entries = [e for e in s.journal.entries() if e.root == s.root_key]
        events = [g for g in s.journal.guard_events() if g.root == s.root_key]
        history = s.history()
        self.journal_widget.set_entries(entries, events, s.journal.policies(), history.in_effect().keys())
        self.undo_action.setEnabled(bool(history.undo))
        self.redo_action.setEnabled(bool(history.redo))
        self.restore_action.setEnabled(bool(s.journal.unrestored(s.root_key)))
        self._set_quiet(read_quiet_state(s, history).cpus)

    def _set_quiet(self, cpus: tuple[int, ...]) -> None:
        if tuple(cpus) != self.grid.quiet_cpus:
            self.grid.set_quiet_cpus(cpus)
            self.quiet_changed.emit(tuple(cpus))

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

    # -- sources: context menu and Ctrl+P -------------------------------------------------------------------
    def selection_payload(self, view: QAbstractItemView) -> PinPayload | None:
        """The pin payload of `view`'s selected rows, built by its model's mimeData (as a drag is)."""
        sm = view.selectionModel()
        if sm is None:
            return None
        indexes = sm.selectedRows(0)
        if not indexes:
            return None
        try:
            return decode_pin_mime(view.model().mimeData(indexes))
        except PinPayloadError as e:
            self.result_line.show_message(str(e), ok=False)
            return None

    def source_menu(self, view: QAbstractItemView) -> QMenu:
        """The context menu of a source's rows: "Pin to…" (disabled, saying why, when nothing pinnable
        is selected)."""
        menu = QMenu(view)
        payload = self.selection_payload(view)
        act = menu.addAction("Pin to…\tCtrl+P" if payload
                             else "Pin to… (select threads, processes or numbered IRQs)")
        act.setEnabled(payload is not None)
        act.triggered.connect(lambda _=False, v=view: self.open_pin_dialog(v))
        return menu

    def _on_source_context_menu(self, view: QAbstractItemView, pos) -> None:
        self._last_source = view
        menu = self.source_menu(view)
        menu.popup(view.viewport().mapToGlobal(pos))

    def _focused_source(self) -> QAbstractItemView | None:
        fw = QApplication.focusWidget()
        for v in self._sources:
            if fw is not None and (fw is v or v.isAncestorOf(fw)):
                return v
        return self._last_source

    def _on_pin_action_triggered(self) -> None:
        view = self._focused_source()
        if view is None:
            self.result_line.show_message("select rows in the IRQ or thread table first, then press Ctrl+P",
                                          ok=False)
            return
        self.open_pin_dialog(view)

    def open_pin_dialog(self, view: QAbstractItemView) -> PinDialog | None:
        payload = self.selection_payload(view)
        if payload is None:
            self.result_line.show_message(
                "nothing to pin in that selection: choose threads, processes or numbered IRQs "
                "(LOC, NMI and other per-CPU counters have no affinity)", ok=False)
            return None
        self._last_source = view
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        selected = self.grid.selected_cpus()
        self.dialog = PinDialog(payload, self._topology, format_cpulist(selected), self.grid.window())
        self.dialog.accepted.connect(self._on_dialog_accepted)
        self.dialog.open()
        return self.dialog

    def _on_dialog_accepted(self) -> None:
        d = self.sender()
        if not isinstance(d, PinDialog) or d.cpus() is None:
            return
        self.request(PinRequest(d.payload.targets(), d.cpus(), origin="dialog"))

    # -- handlers -------------------------------------------------------------------------------------------
    def _on_grid_pin_requested(self, request: PinRequest) -> None:
        self.request(request)

    def _on_grid_drop_hint(self, text: str) -> None:
        if text:
            self.status_bar.showMessage(text)
        else:
            self.status_bar.clearMessage()

    def _on_undo_triggered(self) -> None:
        s = self._service()
        if s is not None:
            self._run(s.undo, "undo")

    def _on_redo_triggered(self) -> None:
        s = self._service()
        if s is not None:
            self._run(s.redo, "redo")

    def _on_restore_triggered(self) -> None:
        s = self._service()
        if s is not None and self._run(s.restore_all, "restore"):
            self.restore_bar.hide()

    def _run(self, action: Callable[[], list[PinResult]], what: str) -> bool:
        try:
            results = action()
        except CoremapError as e:
            self.result_line.show_message(f"{what}: {e}", ok=False)
            return False
        self._show(results, what)
        return True

    def _on_restore_bar_restore_clicked(self) -> None:
        self._on_restore_triggered()

    def _on_result_line_retry_requested(self) -> None:
        s, req = self.service, self._retry
        if s is None or req is None:
            return
        if self._helper is None:
            self._helper = HelperClient()       # pkexec coremap-helper, started by its first request
        # The helper writes for this one retry only: a later denied pin asks again.
        privileged = s.with_writer(self._helper)
        self._run(lambda: privileged.apply(req), "retry")
        self._retry = None

    def close(self) -> None:
        if self._helper is not None:
            self._helper.close()
            self._helper = None
