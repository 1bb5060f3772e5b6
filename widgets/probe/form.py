"""ProbeForm: the probe panel's fields (probe, CPUs, duration, scheduling, and each probe's own
options on a page of their own) and the ProbeSpec (probes/spec.py) they describe.

The probes, their titles and their own options come from their records (probes/catalog.py): each
page is made of its probe's Fields (widgets/probe/fields.py). A common field is enabled only for the
probes that take its option (probes.spec.applies), and `spec()` reads only the chosen probe's page and
the common fields it takes, so a box ticked for one probe never leaks into another. CPUs come from the
validated line edit (app.parse.cpulist), which the panel also fills from drops and from the grid's
cpu_selected.
"""
from __future__ import annotations

import re

from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QLineEdit, QPushButton,
                               QSizePolicy, QSpinBox, QStackedWidget, QVBoxLayout, QWidget)

from app.errors import CpuListError
from app.parse.cpulist import format_cpulist, parse_cpulist
from probes.catalog import RECORDS
from probes.record import SECONDS_MEAN
from probes.spec import PROBE_NAMES, ProbeSpec, ProbeSpecError, applies, record
from widgets.probe.fields import compact, editor, row
from widgets.theme import status_style


class CpuListValidator(QValidator):
    """Acceptable: a CPU list parse_cpulist takes. Intermediate: on the way to one ("2-", "1,").
    Invalid: a character no CPU list holds ("2-x")."""

    _CHARS = re.compile(r"^[0-9,\-:/ ]*$")

    def validate(self, text: str, pos: int):
        if not self._CHARS.match(text):
            return QValidator.State.Invalid
        if not text.strip():
            return QValidator.State.Intermediate
        try:
            parse_cpulist(text)
        except CpuListError:
            return QValidator.State.Intermediate
        return QValidator.State.Acceptable


def page(parent: QWidget, rows) -> QWidget:
    """A form of (label, widget) rows: one probe's own options."""
    w = QWidget(parent)
    f = QFormLayout(w)
    f.setContentsMargins(0, 0, 0, 0)
    for label, widget in rows:
        f.addRow(label, widget)
    return w


class ProbeForm(QWidget):
    """The fields of one probe run; `spec()` is what they ask for."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._build_common()
        self.options_stack = QStackedWidget(self)
        # probe -> option -> its editor, one page per probe in the catalog's order
        self.fields: dict[str, dict[str, QWidget]] = {}
        self.preset_buttons: dict[str, dict[str, QPushButton]] = {}
        for r in RECORDS.values():
            editors = self.fields[r.name] = {f.option: editor(f, self) for f in r.fields if f.in_form}
            # a check box says what it is itself
            rows = [("" if w.field.kind == "flag" else w.field.label, w) for w in editors.values()]
            if r.presets:
                rows.append(("preset", row(self, *self._preset_buttons(r))))
            self.options_stack.addWidget(page(self, rows))
        self._build_scheduling()
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("probe", self.probe_combo)
        form.addRow("CPUs", row(self, self.cpu_edit, self.unbound_check))
        form.addRow("duration", self.seconds_spin)
        form.addRow("scheduling", self.sched_row)
        form.addRow("timer slack", self.slack_spin)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(form)
        lay.addWidget(self.options_stack)
        self.probe_combo.currentIndexChanged.connect(self._on_probe_combo_changed)
        self.policy_combo.currentIndexChanged.connect(self._on_policy_combo_changed)
        self.cpu_edit.textChanged.connect(self._on_cpu_edit_text_changed)
        self._on_probe_combo_changed(0)

    # -- fields ----------------------------------------------------------------------------------
    def _build_common(self) -> None:
        self.probe_combo = QComboBox(self)
        for r in RECORDS.values():
            self.probe_combo.addItem(r.title, r.name)
        compact(self.probe_combo)
        self.cpu_edit = QLineEdit(self)
        self.cpu_edit.setPlaceholderText("e.g. 1 or 2-3,5 — or drop a CPU here")
        self.cpu_edit.setValidator(CpuListValidator(self.cpu_edit))
        self.cpu_edit.setToolTip("CPUs to probe; drop a CPU cell from the grid or click one")
        self.unbound_check = QCheckBox("unbound", self)
        self.unbound_check.setToolTip("Do not pin the probe; let the scheduler place it")
        self.seconds_spin = QDoubleSpinBox(self)
        self.seconds_spin.setRange(0.1, 3600.0)
        self.seconds_spin.setDecimals(1)
        self.seconds_spin.setValue(1.0)
        self.seconds_spin.setSuffix(" s")
        self.seconds_spin.setToolTip(SECONDS_MEAN)

    def _build_scheduling(self) -> None:
        self.policy_combo = QComboBox(self)
        self.policy_combo.addItem("SCHED_OTHER", "other")
        self.policy_combo.addItem("SCHED_FIFO", "fifo")
        self.priority_spin = QSpinBox(self)
        self.priority_spin.setRange(1, 99)
        self.priority_spin.setValue(80)
        self.priority_spin.setPrefix("prio ")
        self.priority_spin.setEnabled(False)
        self.slack_spin = QSpinBox(self)
        self.slack_spin.setRange(-1, 1_000_000_000)
        self.slack_spin.setValue(-1)
        self.slack_spin.setSpecialValueText("inherited")
        self.slack_spin.setSuffix(" ns")
        self.slack_spin.setToolTip("Timer slack of the probe (prctl PR_SET_TIMERSLACK)")
        self.sched_row = row(self, self.policy_combo, self.priority_spin)

    def _preset_buttons(self, r) -> list[QPushButton]:
        buttons = self.preset_buttons[r.name] = {}
        for p in r.presets:
            b = buttons[p.name] = QPushButton(p.name, self)
            b.setToolTip(p.help[:1].upper() + p.help[1:])
            b.clicked.connect(lambda _checked=False, probe=r.name, name=p.name: self.apply_preset(probe, name))
        return list(buttons.values())

    def apply_preset(self, probe: str, name: str) -> None:
        """Set the fields a preset of `probe`'s record names (wakeup: like cyclictest, SCHED_FIFO 80)."""
        preset = next(p for p in record(probe).presets if p.name == name)
        for option, value in preset.values:
            if option == "policy":
                self.policy_combo.setCurrentIndex(self.policy_combo.findData(value))
            elif option == "priority":
                self.priority_spin.setValue(int(value))
            elif option == "slack_ns":
                self.slack_spin.setValue(-1 if value is None else int(value))
            else:
                self.fields[probe][option].set_field_value(value)

    # -- public ----------------------------------------------------------------------------------
    @property
    def probe(self) -> str:
        return self.probe_combo.currentData()

    def set_probe(self, name: str) -> None:
        i = self.probe_combo.findData(name)
        if i < 0:
            raise ProbeSpecError(f"no probe named {name!r}; choose one of {', '.join(PROBE_NAMES)}")
        self.probe_combo.setCurrentIndex(i)

    def set_cpus(self, cpus) -> None:
        self.cpu_edit.setText(format_cpulist(sorted(set(cpus))))

    def cpus(self) -> tuple[int, ...]:
        return parse_cpulist(self.cpu_edit.text(), what="CPUs")

    def field(self, option: str, probe: str | None = None) -> QWidget:
        """The editor of `option` on `probe`'s page; without a probe, the one probe that takes it."""
        if probe is not None:
            return self.fields[probe][option]
        found = [name for name, fields in self.fields.items() if option in fields]
        if len(found) != 1:
            raise KeyError(f"{option!r} is an option of {', '.join(found) or 'no probe'}; name the probe")
        return self.fields[found[0]][option]

    def spec(self) -> ProbeSpec:
        """The run the fields ask for; ProbeSpecError, CpuListError or SizeError (the panel shows them
        on its status line) when they ask for something that cannot run."""
        probe = self.probe
        rec = record(probe)
        cpus = self._checked_cpus()
        unbound = applies("unbound", probe) and self.unbound_check.isChecked()
        if not cpus and not unbound and not rec.cpus_optional:
            raise ProbeSpecError("choose CPUs: type a list such as 1 or 2-3, drop a CPU cell here, or click "
                                 "one in the grid" + (" (or tick unbound)" if applies("unbound", probe) else ""))
        options = {option: ed.field_value() for option, ed in self.fields[probe].items()}
        for f in rec.fields:
            if f.unless and options.get(f.unless):
                options[f.option] = None
        fifo = applies("policy", probe) and self.policy_combo.currentData() == "fifo"
        slack = self.slack_spin.value()
        return ProbeSpec(probe, cpus, unbound=unbound, seconds=self.seconds_spin.value(), **options,
                         policy="fifo" if fifo else None, priority=self.priority_spin.value() if fifo else None,
                         slack_ns=slack if applies("slack_ns", probe) and slack >= 0 else None)

    def _checked_cpus(self) -> tuple[int, ...]:
        text = self.cpu_edit.text().strip()
        # an unfinished list ("2-") gets the parser's own message
        return parse_cpulist(text, what="CPUs") if text else ()

    # -- handlers --------------------------------------------------------------------------------
    def _on_probe_combo_changed(self, _index: int) -> None:
        probe = self.probe
        shown = PROBE_NAMES.index(probe)
        self.options_stack.setCurrentIndex(shown)
        # Only the shown probe's options ask for room: a stacked widget is as wide as its widest page
        # otherwise, and wakeup's long tick box kept every probe's form 466 px wide (issue 28: the docked
        # panel's histogram got 136 px).
        for i in range(self.options_stack.count()):
            policy = QSizePolicy.Policy.Preferred if i == shown else QSizePolicy.Policy.Ignored
            self.options_stack.widget(i).setSizePolicy(policy, policy)
        self.options_stack.updateGeometry()
        self.sched_row.setEnabled(applies("policy", probe))
        self.slack_spin.setEnabled(applies("slack_ns", probe))
        self.unbound_check.setEnabled(applies("unbound", probe))
        self.seconds_spin.setEnabled(applies("seconds", probe))
        self.seconds_spin.setToolTip(record(probe).seconds_means)

    def _on_policy_combo_changed(self, _index: int) -> None:
        self.priority_spin.setEnabled(self.policy_combo.currentData() == "fifo")

    def _on_cpu_edit_text_changed(self, text: str) -> None:
        ok = not text.strip() or self.cpu_edit.hasAcceptableInput()
        self.cpu_edit.setStyleSheet("" if ok else status_style("fail", self))
