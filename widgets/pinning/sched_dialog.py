"""The "Set scheduling…" dialog of the thread tree's context menu: a policy and an RT priority for the
chosen threads (or each thread of the chosen processes), as tuna -p and chrt -p set them. Its line is
the pin flow's dry run of the change (AffinityService.plan_schedule, the same `coremap sched --dry-run`
prints): what would be written, or why not, in the kernel's terms, never a modal error. "Set" goes
through the one pin flow, so Edit → Undo puts the policy back.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLabel, QLayout, QSpinBox,
                               QVBoxLayout, QWidget)

from app.errors import CoremapError
from app.parse.task_stat import RT_POLICIES, RT_PRIORITY, SCHED_POLICIES
from app.pinning.dry_run import Plan
from app.pinning.sched import read_sched
from app.pinning.targets import PinTarget
from widgets.pinning.mime import PinPayload
from widgets.theme import status_style

# targets, (policy, RT priority) -> the dry run, or the sentence saying why there is none
Planner = Callable[[Sequence[PinTarget], tuple[int, int]], "Plan | str"]
# What the dialog offers, in chrt's order: every policy but SCHED_DEADLINE (app/pinning/sched.py).
_OFFERED = ("other", "batch", "idle", "fifo", "rr")
_SHOWN_LINES = 3


class SchedDialog(QDialog):
    """Parameters: `targets` (threads or processes), `what` (how the title names them), `current`
    ((policy, RT priority) of the first thread, where the choice starts), `plan` (the dry run)."""

    def __init__(self, targets: Sequence[PinTarget], what: str, current: tuple[int, int] | None,
                 plan: Planner, parent: QWidget | None = None):
        super().__init__(parent)
        self.targets = tuple(targets)
        self._plan = plan
        self.plan: Plan | None = None
        self.setWindowTitle("Set scheduling")
        self.target_label = QLabel(f"Scheduling of {what}:", self)
        self.target_label.setTextFormat(Qt.TextFormat.PlainText)
        self.policy_combo = QComboBox(self)
        for name in _OFFERED:
            number = next(n for n, v in SCHED_POLICIES.items() if v == name)
            self.policy_combo.addItem(f"SCHED_{name.upper()}", number)
        self.priority_spin = QSpinBox(self)
        self.priority_spin.setRange(*RT_PRIORITY)
        self.priority_spin.setToolTip(f"RT priority for SCHED_FIFO and SCHED_RR, {RT_PRIORITY[0]}-{RT_PRIORITY[1]} "
                                      "(99 highest); the time-shared policies have none")
        self.preview_label = QLabel(self)
        self.preview_label.setTextFormat(Qt.TextFormat.PlainText)
        self.preview_label.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Set")
        form = QFormLayout()
        form.addRow("Policy:", self.policy_combo)
        form.addRow("RT priority:", self.priority_spin)
        lay = QVBoxLayout(self)
        lay.addWidget(self.target_label)
        lay.addLayout(form)
        lay.addWidget(self.preview_label)
        lay.addWidget(self.buttons)
        if QGuiApplication.platformName() == "offscreen":
            # As in PinDialog: the offscreen platform warns about propagateSizeHints() otherwise.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        if current is not None and current[0] in SCHED_POLICIES and SCHED_POLICIES[current[0]] in _OFFERED:
            self.policy_combo.setCurrentIndex(self.policy_combo.findData(current[0]))
            if current[0] in RT_POLICIES:
                self.priority_spin.setValue(current[1])
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        self.policy_combo.currentIndexChanged.connect(self._on_choice_changed)
        self.priority_spin.valueChanged.connect(self._on_choice_changed)
        self._on_choice_changed()

    def value(self) -> tuple[int, int]:
        """(policy, RT priority) as chosen; the priority is 0 for a time-shared policy."""
        policy = int(self.policy_combo.currentData())
        return policy, self.priority_spin.value() if policy in RT_POLICIES else 0

    def _on_choice_changed(self, *_args) -> None:
        self.priority_spin.setEnabled(int(self.policy_combo.currentData()) in RT_POLICIES)
        planned = self._plan(self.targets, self.value())
        if isinstance(planned, str):
            self.plan, ok, text = None, False, planned
        else:
            self.plan, ok = planned, planned.goes
            lines = [s.line() for s in planned] if ok else planned.reasons()
            more = f"\n… and {len(lines) - _SHOWN_LINES} more" if len(lines) > _SHOWN_LINES else ""
            text = "\n".join(lines[:_SHOWN_LINES]) + more
        self.ok_button.setEnabled(ok)
        self.preview_label.setText(text)
        self.preview_label.setStyleSheet("" if ok else status_style("fail", self))

    def _on_buttons_accepted(self) -> None:
        if self.plan is not None and self.plan.goes:
            self.accept()


class SchedulingController(QObject):
    """Set scheduling… for a table's selected threads or processes: the dialog, its dry run and the
    batch, on the machine the window pins (the pin flow's service). Parameters: `service()` (the
    service, or the sentence why there is none), `run(what, batch)` (PinController.run: the worker,
    the result line, the journal and Edit → Undo), `say(text, ok)` (the result line), `window` (the
    dialog's parent). `dialog` is the one open now (or last)."""

    def __init__(self, service: Callable[[], object], run: Callable, say: Callable[[str, bool], None],
                 window: QWidget, parent: QObject | None = None):
        super().__init__(parent)
        self._service, self._run, self._say, self._window = service, run, say, window
        self.dialog: SchedDialog | None = None

    def open(self, payload: PinPayload) -> SchedDialog | None:
        """The dialog for `payload`'s threads or processes; None, with the reason on the result line,
        when it cannot be set here."""
        if payload.kind not in ("thread", "process"):
            self._say("scheduling is set on threads and processes; select rows of the thread table", False)
            return None
        service = self._service()
        if isinstance(service, str):
            self._say(service, False)
            return None
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        self.dialog = SchedDialog(payload.targets(), payload.describe(), read_sched(payload.ids[0]), self.plan,
                                  self._window)
        self.dialog.accepted.connect(self._on_dialog_accepted)
        self.dialog.open()
        return self.dialog

    def plan(self, targets, value) -> Plan | str:
        """The dry run of setting `value` on `targets`, or why there is none."""
        service = self._service()
        if isinstance(service, str):
            return service
        try:
            return service.plan_schedule(targets, value)
        except CoremapError as e:
            return str(e)

    def _on_dialog_accepted(self) -> None:
        d = self.sender()
        if isinstance(d, SchedDialog):
            targets, value = d.targets, d.value()
            self._run("set", lambda s, p: s.schedule(targets, value, origin="window", progress=p))
