"""File → Compare with…: the machine the window shows (A) against a capture, a snapshot tarball or a
saved session (B), through the same comparison as `coremap diff` (app/store/diff.py; the capture opened
by app/store/machines.py, checked and confined like every capture). The diff is read on a worker
thread and shown in the Compare dock, grouped as the command prints it; the grid marks the CPUs whose
IRQ load or placement differs (TopologyView.set_compared), with how in each one's tooltip. What cannot
be compared is said on the status line, never in a modal dialog.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMenu, QPushButton, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

from app.errors import CoremapError
from app.format import plural
from app.parse.cpulist import format_cpulist
from app.store.diff import MachineDiff, change_line, diff_roots
from app.store.machines import LIVE, SESSIONS, TARBALLS, opened_machine
from app.sysroot import SysRoot
from widgets.topology.view import TopologyView

ITEMS_IN_TOOLTIP = 40          # a change's items shown on hovering it (--json has them all)


class CompareView(QWidget):
    """The Compare dock's content: which two machines, then each group and its changes."""

    cleared = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        self.sides = QLabel(self)
        self.sides.setTextFormat(Qt.TextFormat.PlainText)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderHidden(True)
        self.tree.setObjectName("compare-tree")
        self.clear_button = QPushButton("Clear Comparison", self)
        self.clear_button.clicked.connect(self.cleared)
        lay.addWidget(self.sides)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.clear_button)

    def show_diff(self, d: MachineDiff) -> None:
        self.sides.setText(f"A: {d.a}\nB: {d.b}")
        self.tree.clear()
        for g in d.groups:
            if not g.changes and not g.note:
                continue
            head = f"{g.name}: {plural(len(g.changes), 'difference')}" if g.changes else f"{g.name}: {g.note}"
            top = QTreeWidgetItem(self.tree, [head])
            for c in g.changes:
                item = QTreeWidgetItem(top, [change_line(c)])
                if len(c.items) > 1:
                    more = f"\n... {len(c.items) - ITEMS_IN_TOOLTIP} more" if len(c.items) > ITEMS_IN_TOOLTIP else ""
                    item.setToolTip(0, "\n".join(c.items[:ITEMS_IN_TOOLTIP]) + more)
            top.setExpanded(len(g.changes) <= 12)
        if d.cpus:
            QTreeWidgetItem(self.tree, [f"CPUs whose IRQs differ: {format_cpulist(d.cpus)}"])

    def group_lines(self) -> dict[str, list[str]]:
        """{group line: its change lines}, as shown (for people reading a test)."""
        out = {}
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            out[top.text(0)] = [top.child(j).text(0) for j in range(top.childCount())]
        return out


class CompareController(QObject):
    """File → Compare with…, Compare with Capture Folder… and (a capture shown) Compare with This Machine,
    the Compare dock and the grid's marks.

    Parameters: `menu` (the File menu; the actions go before `before`), `view` (the grid to mark),
    `add_dock` (makes the Compare dock: MainWindow.add_dock's signature), `status` (the status line),
    `machine` (the window's machine now: a SysRoot, or None where it is not read here, over ssh)."""

    finished = Signal(int, object)       # (request id, MachineDiff or the error line)
    diff_shown = Signal(object)          # the MachineDiff now in the dock and on the grid

    def __init__(self, menu: QMenu, before: QAction | None, view: TopologyView, *,
                 add_dock: Callable[..., QDockWidget], status: Callable[[str], None],
                 machine: Callable[[], SysRoot | None], parent: QObject | None = None):
        super().__init__(parent)
        self._view, self._status, self._machine = view, status, machine
        self._dialog: QFileDialog | None = None
        self._request = 0
        self.view = CompareView()
        self.view.cleared.connect(self.clear)
        self.dock = add_dock("Compare", "compare-dock", self.view, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.dock.hide()
        self.actions: dict[str, QAction] = {}
        for key, text, folder in (("compare", "Compare &with…", False),
                                  ("compare_folder", "Compare with Capture &Folder…", True)):
            a = QAction(text, menu)
            a.triggered.connect(lambda _=False, f=folder: self.ask(folder=f))
            if before is not None:
                menu.insertAction(before, a)
            else:
                menu.addAction(a)
            self.actions[key] = a
        # A capture or session shown: against this machine now, the before/after of a tuning.
        a = QAction("Compare with &This Machine", menu)
        a.triggered.connect(lambda _=False: self.compare(LIVE))
        if before is not None:
            menu.insertAction(before, a)
        else:
            menu.addAction(a)
        self.actions["compare_live"] = a
        menu.aboutToShow.connect(self._on_menu_about_to_show)
        if before is not None:
            menu.insertSeparator(before)
        self.finished.connect(self._on_finished)

    def _on_menu_about_to_show(self) -> None:
        root = self._machine()
        self.actions["compare_live"].setEnabled(root is not None and not root.is_live)

    # -- asking -----------------------------------------------------------------------------------
    def ask(self, *, folder: bool = False) -> None:
        """A file chooser (not modal: the window keeps sampling) for what to compare with."""
        if self._dialog is not None:
            self._dialog.close()
        d = QFileDialog(self.view.window(), "Compare with")
        d.setObjectName("compare-file-dialog")
        d.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        if folder:
            d.setFileMode(QFileDialog.FileMode.Directory)
            d.setOption(QFileDialog.Option.ShowDirsOnly, True)
        else:
            d.setFileMode(QFileDialog.FileMode.ExistingFile)
            d.setNameFilters([f"Captures and sessions ({' '.join('*' + s for s in TARBALLS + SESSIONS)})",
                              "All files (*)"])
        d.fileSelected.connect(self.compare)
        d.finished.connect(lambda _r: setattr(self, "_dialog", None))
        self._dialog = d
        d.open()

    def compare(self, path: str) -> None:
        """Compare the window's machine with `path`, on a worker thread; the result shows when it is
        done, unless another comparison was asked for meanwhile."""
        root = self._machine()
        if root is None:
            self._status("Compare needs the machine read here; this one is over ssh: take its snapshot "
                         "(coremap snapshot) and compare the two captures with `coremap diff`")
            return
        self._request += 1
        request = self._request
        self._status(f"comparing with {path}…")
        threading.Thread(target=self._run, args=(request, root, path), name="coremap-compare", daemon=True).start()

    def _run(self, request: int, root: SysRoot, path: str) -> None:
        try:
            name = "this machine" if root.is_live else str(root.root)
            with opened_machine(path) as (other, other_name):
                result: MachineDiff | str = diff_roots(root, name, other, other_name)
        except CoremapError as e:
            result = str(e)
        except OSError as e:
            # A capture removed or unreadable while it was read (its temporary folder, a session's).
            result = f"{path}: {e.strerror or e}; compare again"
        self.finished.emit(request, result)

    # -- showing ----------------------------------------------------------------------------------
    def _on_finished(self, request: int, result) -> None:
        if request != self._request:
            return              # a comparison asked for later supersedes this one
        if isinstance(result, str):
            self._status(result)
            return
        self.view.show_diff(result)
        self._view.set_compared(result.cpus)
        self.dock.show()
        self.dock.raise_()
        marked = self._view.compared_cpus        # B's CPUs that A lacks have no cell to mark
        cpus = f"; CPUs marked on the grid: {format_cpulist(marked)}" if marked else ""
        self._status(("no differences" if result.same else
                      plural(sum(len(g.changes) for g in result.groups), "difference")) + f" from {result.b}{cpus}")
        self.diff_shown.emit(result)

    def clear(self) -> None:
        self._request += 1
        self._view.set_compared({})
        self.view.tree.clear()
        self.view.sides.clear()
        self.dock.hide()
