"""The "Pin to…" dialog: the chosen rows pinned to a CPU list typed by hand, checked as it is typed: its
syntax and CPUs here, then what a drop asks (the pin flow's dry run, PinController.check), so the
dialog, the drop and `coremap pin --dry-run` refuse the same targets with the same words."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLayout, QLineEdit, QVBoxLayout, QWidget

from app.errors import CpuListError
from app.format import cpus_word, offline_sentence, unknown_cpus_sentence
from app.machine.topology import Topology
from app.parse.cpulist import parse_cpulist
from app.pinning.spread import spread_summary
from app.pinning.targets import PinRequest
from widgets.theme import status_style
from widgets.pinning.mime import PinPayload, Spread


@dataclass(frozen=True)
class CpuListCheck:
    cpus: tuple[int, ...] | None     # None when the text cannot be used
    message: str                     # why not, or what it means

    @property
    def ok(self) -> bool:
        return self.cpus is not None


def check_cpu_text(text: str, topology: Topology | None = None) -> CpuListCheck:
    """Validate a typed CPU list against the machine: syntax (app.parse.cpulist), then that every CPU
    exists and is online."""
    if not text.strip():
        return CpuListCheck(None, "type the CPUs to pin to, e.g. 2-5,8")
    try:
        cpus = parse_cpulist(text, what="CPU list")
    except CpuListError as e:
        return CpuListCheck(None, str(e))
    if not cpus:
        return CpuListCheck(None, "no CPU in that list; write CPUs like 2-5,8")
    if topology is not None:
        known = {c.id for c in topology.cpus}
        online = set(topology.online)
        missing = [c for c in cpus if c not in known]
        if missing:
            return CpuListCheck(None, unknown_cpus_sentence(missing, known))
        offline = [c for c in cpus if c not in online]
        if offline:
            return CpuListCheck(None, offline_sentence(offline, online))
    n = len(cpus)
    return CpuListCheck(cpus, f"{n} CPU{'s' if n > 1 else ''}: {', '.join(map(str, cpus[:16]))}"
                              f"{' …' if n > 16 else ''}")


def check_pin(payload: PinPayload, text: str, topology: Topology | None,
              check: Callable[[PinRequest], list[str]] | None, spread: Spread | None = None) -> CpuListCheck:
    """`check_cpu_text`, then, for a usable list, why the pin would not go (`check`: the drop's); where
    several IRQs spread over the CPUs, the line says where each goes."""
    typed = check_cpu_text(text, topology)
    if not typed.ok or check is None:
        return typed
    request = payload.request(typed.cpus, "dialog", spread)
    why = check(request)
    if not why:
        if request.each:
            return CpuListCheck(typed.cpus, f"spread over {cpus_word(typed.cpus)}: "
                                            f"{spread_summary(request.targets, request.each)}")
        return typed
    more = f" (and {len(why) - 1} more)" if len(why) > 1 else ""
    return CpuListCheck(None, f"cannot pin {payload.describe()} to {cpus_word(typed.cpus)}: {why[0]}{more}")


class PinDialog(QDialog):
    """Pin the chosen rows to a typed CPU list, validated as typed (OK is off while it is invalid, or
    while `check` says the pin would not go; the line says why)."""

    def __init__(self, payload: PinPayload, topology: Topology | None = None, initial: str = "",
                 parent: QWidget | None = None, *, check: Callable[[PinRequest], list[str]] | None = None,
                 spread: Spread | None = None):
        super().__init__(parent)
        self.payload = payload
        self.topology = topology
        self._pin_check = check
        self.spread = spread
        self.setWindowTitle("Pin to CPUs")
        self.target_label = QLabel(f"Pin {payload.describe()} to:", self)
        self.target_label.setTextFormat(Qt.TextFormat.PlainText)
        self.cpu_edit = QLineEdit(initial, self)
        self.cpu_edit.setPlaceholderText("CPUs, e.g. 2-5,8")
        self.cpu_edit.setClearButtonEnabled(True)
        self.reason_label = QLabel(self)
        self.reason_label.setTextFormat(Qt.TextFormat.PlainText)
        self.reason_label.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Pin")
        lay = QVBoxLayout(self)
        lay.addWidget(self.target_label)
        lay.addWidget(self.cpu_edit)
        lay.addWidget(self.reason_label)
        lay.addWidget(self.buttons)
        if QGuiApplication.platformName() == "offscreen":
            # As in MainWindow: the offscreen platform warns "does not support propagateSizeHints()"
            # for a top-level window whose layout sets a minimum size.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        self.cpu_edit.textChanged.connect(self._on_cpu_edit_text_changed)
        self.check = check_pin(payload, initial, topology, check, spread)
        self._show_check()

    def cpus(self) -> tuple[int, ...] | None:
        return self.check.cpus

    def request(self) -> PinRequest | None:
        """The pin the typed CPUs make (several IRQs spread as the line said); None while they cannot."""
        cpus = self.cpus()
        return self.payload.request(cpus, "dialog", self.spread) if cpus is not None else None

    def _on_cpu_edit_text_changed(self, text: str) -> None:
        self.check = check_pin(self.payload, text, self.topology, self._pin_check, self.spread)
        self._show_check()

    def _show_check(self) -> None:
        ok = self.check.ok
        self.ok_button.setEnabled(ok)
        self.reason_label.setText(self.check.message)
        self.reason_label.setStyleSheet("" if ok else status_style("fail", self))

    def _on_buttons_accepted(self) -> None:
        if self.check.ok:              # Enter in the line edit also lands here
            self.accept()
