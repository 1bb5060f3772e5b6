"""PinSources: the table views whose rows can be pinned without a drag: their context menu ("Pin to…"),
Ctrl+P, and the Pin to… dialog. Each makes the same PinRequest a drop makes and hands it to `pin`
(PinController.request): one way in for every pin. The thread tables' menus also offer "Set
scheduling…" (widgets/pinning/sched_dialog.py), for the same selection.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QAbstractItemView, QApplication, QMenu

from app.format import format_cpus
from app.machine.topology import Topology
from app.pinning.targets import PinRequest
from widgets.pinning.dialog import PinDialog
from widgets.pinning.mime import PinPayload, PinPayloadError, Spread, decode_pin_mime
from widgets.topology.view import TopologyView


class PinSources(QObject):
    """Parameters: `grid` (its selected CPUs start the dialog), `pin(request)` (where requests go),
    `say(text, ok)` (the result line), `check(request)` (why it would not go: the drop's check, which
the dialog shows as the CPUs are typed), `spread(irqs, cpus)` (where several IRQs go, as a drop spreads them). `topology` is set by the owner as machines change; `dialog`
    is the Pin to… dialog open now (or last)."""

    def __init__(self, grid: TopologyView, pin: Callable[[PinRequest], object], say: Callable[[str, bool], None],
                 parent: QObject | None = None, *, check: Callable[[PinRequest], list[str]] | None = None,
                 spread: Spread | None = None):
        super().__init__(parent)
        self.grid = grid
        self._pin = pin
        self._check = check
        self._spread = spread
        self._say = say
        self.topology: Topology | None = None
        self.dialog: PinDialog | None = None
        self._views: list[QAbstractItemView] = []
        self._last: QAbstractItemView | None = None
        self._scheduling: list[QAbstractItemView] = []
        # payload -> the Set scheduling… dialog (SchedulingController.open), set by the owner
        self.open_scheduling: Callable[[PinPayload], object] | None = None

    def add(self, view: QAbstractItemView) -> None:
        """Rows of `view` can be dragged onto the grid (its model's mimeData) and pinned with the
        context menu or Ctrl+P."""
        view.setDragEnabled(True)
        view.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        view.customContextMenuRequested.connect(lambda pos, v=view: self._on_view_context_menu(v, pos))
        self._views.append(view)

    def add_scheduling(self, view: QAbstractItemView) -> None:
        """`view` (a source already) offers "Set scheduling…" for its selected threads or processes."""
        self._scheduling.append(view)

    def payload(self, view: QAbstractItemView) -> PinPayload | None:
        """The pin payload of `view`'s selected rows, built by its model's mimeData (as a drag is)."""
        sm = view.selectionModel()
        indexes = sm.selectedRows(0) if sm is not None else []
        if not indexes:
            return None
        try:
            return decode_pin_mime(view.model().mimeData(indexes))
        except PinPayloadError as e:
            self._say(str(e), False)
            return None

    def menu(self, view: QAbstractItemView) -> QMenu:
        """The context menu of a source's rows: "Pin to…" (disabled, saying why, when nothing pinnable
        is selected)."""
        menu = QMenu(view)
        payload = self.payload(view)
        act = menu.addAction("Pin to…\tCtrl+P" if payload else "Pin to… (select threads, processes or numbered IRQs)")
        act.setEnabled(payload is not None)
        act.triggered.connect(lambda _=False, v=view: self.open_dialog(v))
        if view in self._scheduling and self.open_scheduling is not None:
            tasks = payload is not None and payload.kind in ("thread", "process")
            sched = menu.addAction("Set scheduling…" if tasks else "Set scheduling… (select threads or processes)")
            sched.setEnabled(tasks)
            sched.triggered.connect(lambda _=False, p=payload: self.open_scheduling(p))
        return menu

    def open_focused(self) -> PinDialog | None:
        """Ctrl+P: the dialog for the focused (or last used) source's selection."""
        view = self._focused()
        if view is None:
            self._say("select rows in the IRQ or thread table first, then press Ctrl+P", False)
            return None
        return self.open_dialog(view)

    def open_dialog(self, view: QAbstractItemView) -> PinDialog | None:
        payload = self.payload(view)
        if payload is None:
            self._say("nothing to pin in that selection: choose threads, processes or numbered IRQs "
                      "(LOC, NMI and other per-CPU counters have no affinity)", False)
            return None
        self._last = view
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        selected = self.grid.selected_cpus()
        self.dialog = PinDialog(payload, self.topology, format_cpus(selected) if selected else "", self.grid.window(),
                                check=self._check, spread=self._spread)
        self.dialog.accepted.connect(self._on_dialog_accepted)
        self.dialog.open()
        return self.dialog

    def _on_dialog_accepted(self) -> None:
        d = self.sender()
        if isinstance(d, PinDialog) and d.request() is not None:
            self._pin(d.request())

    def _on_view_context_menu(self, view: QAbstractItemView, pos) -> None:
        self._last = view
        self.menu(view).popup(view.viewport().mapToGlobal(pos))

    def _focused(self) -> QAbstractItemView | None:
        fw = QApplication.focusWidget()
        for v in self._views:
            if fw is not None and (fw is v or v.isAncestorOf(fw)):
                return v
        return self._last
