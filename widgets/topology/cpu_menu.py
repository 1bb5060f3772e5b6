"""CpuMenu: the grid's context menu, what a right-click on a CPU (or on a selection of CPUs) offers
(issue 28: a right-click gave no menu and cleared the selection):

  Make quiet…                    the Quiet menu's preview, for these CPUs
  Give back…                     the Quiet menu's give-back preview, for the quiet ones among them
  Pin the selected thread here   the thread tree's selection onto these CPUs, as a drop would pin it
  Run a probe here               the probe panel, set to these CPUs
  Copy the CPU list              "1,3-5" on the clipboard (the kernel's cpulist spelling)

What each item does belongs to its owner (the quiet and pin controllers, the probe panel); the
composition root (widgets/application.py) hands them in as plain callables. The CPUs are the grid's
selection, which the right-click itself made (CpuGestures.select_for_menu), so the Quiet menu's
items work on them without a left-click first. An item that cannot act is disabled, and why goes on
the status line when the menu opens, as a drop's refusal does: never a dialog.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QPoint
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import QMenu

from app.format import cpus_word, format_cpus
from widgets.topology.view import TopologyView


@dataclass(frozen=True)
class CpuMenuActions:
    """What the menu's items call. `pin_blocked(cpus)` says why the thread tree's selection cannot be
    pinned to `cpus` ("" when it can: the pin flow's own check, as a drop asks it) and `pin_here(cpus)`
    pins it; `quiet_cpus()` are the CPUs an isolate made quiet; `status(text)` is the status line."""
    make_quiet: Callable[[], object]
    give_back: Callable[[], object]
    quiet_cpus: Callable[[], tuple[int, ...]]
    pin_blocked: Callable[[tuple[int, ...]], str]
    pin_here: Callable[[tuple[int, ...]], object]
    probe_here: Callable[[tuple[int, ...]], object]
    status: Callable[[str], None]


class CpuMenu(QObject):
    """Shows the context menu `grid` asks for (its cpu_menu_requested). `menu` is the menu shown now
    (or last); `actions` its items by name: quiet, give_back, pin, probe, copy."""

    def __init__(self, grid: TopologyView, actions: CpuMenuActions, parent: QObject | None = None):
        super().__init__(parent)
        self._do = actions
        self.cpus: tuple[int, ...] = ()
        self.menu = QMenu(grid)
        self.menu.setObjectName("cpu-context-menu")
        self.actions: dict[str, QAction] = {}
        for name, text, slot in (("quiet", "Make quiet…", self._on_quiet_triggered),
                                 ("give_back", "Give back…", self._on_give_back_triggered),
                                 (None, "", None),
                                 ("pin", "Pin the selected thread here", self._on_pin_triggered),
                                 ("probe", "Run a probe here", self._on_probe_triggered),
                                 (None, "", None),
                                 ("copy", "Copy the CPU list", self._on_copy_triggered)):
            if name is None:
                self.menu.addSeparator()
                continue
            a = self.menu.addAction(text)
            a.triggered.connect(slot)
            self.actions[name] = a
        self._said = False
        self.menu.aboutToHide.connect(self._on_menu_about_to_hide)
        grid.cpu_menu_requested.connect(self._on_grid_cpu_menu_requested)

    def prepare(self, cpus) -> list[str]:
        """Enable the items for `cpus`; the reasons of the disabled ones ("item: why"), which are also
        their status tips. The items keep the names of the module docstring whatever the CPUs."""
        self.cpus = cpus = tuple(sorted(cpus))
        word = cpus_word(cpus)
        quiet = set(self._do.quiet_cpus())
        reasons = {
            "quiet": f"{word} {'is' if len(cpus) == 1 else 'are'} quiet already" if set(cpus) <= quiet else "",
            "give_back": "" if quiet & set(cpus) else f"{word} {'is' if len(cpus) == 1 else 'are'} not quiet",
            "pin": self._do.pin_blocked(cpus),
        }
        why = []
        for name, a in self.actions.items():
            reason = reasons.get(name, "")
            a.setEnabled(not reason)
            a.setStatusTip(reason)
            if reason:
                why.append(f"{a.text()}: {reason}")
        self.actions["copy"].setStatusTip(format_cpus(cpus))
        return why

    def popup(self, cpus, where: QPoint) -> QMenu:
        """Open the menu for `cpus` at global point `where` (not modal: it returns at once)."""
        why = self.prepare(cpus)
        self._said = bool(why)
        if why:
            self._do.status("; ".join(why))
        self.menu.popup(where)
        return self.menu

    # -- handlers ----------------------------------------------------------------------------------------
    def _on_grid_cpu_menu_requested(self, cpus: list, where: QPoint) -> None:
        self.popup(cpus, where)

    def _on_menu_about_to_hide(self) -> None:
        # Why an item was disabled holds only while the menu is open: left on the status line it hid the
        # result line of the Make quiet or Give back chosen from it for 15 s, and then read wrong
        # ("Make quiet…: CPU 1 is quiet already" after CPU 1 was given back; issue 28, found walking it).
        if self._said:
            self._said = False
            self._do.status("")

    def _on_quiet_triggered(self) -> None:
        self._do.make_quiet()

    def _on_give_back_triggered(self) -> None:
        self._do.give_back()

    def _on_pin_triggered(self) -> None:
        self._do.pin_here(self.cpus)

    def _on_probe_triggered(self) -> None:
        self._do.probe_here(self.cpus)

    def _on_copy_triggered(self) -> None:
        text = format_cpus(self.cpus)
        QGuiApplication.clipboard().setText(text)
        self._do.status(f"copied {text} to the clipboard")
