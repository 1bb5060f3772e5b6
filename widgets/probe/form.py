"""ProbeForm: the probe panel's fields (probe, CPUs, duration, scheduling, and each probe's own
options on a page of their own) and the ProbeSpec (probes/spec.py) they describe.

A field is enabled only for the probes that take its option (probes.spec.applies), and `spec()`
reads a field only for those, so a box ticked for one probe never leaks into another. CPUs come
from the validated line edit (app.parse.cpulist), which the panel also fills from drops and from
the grid's cpu_selected.
"""
from __future__ import annotations

import re
import shlex

from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLineEdit,
                               QSpinBox, QStackedWidget, QVBoxLayout, QWidget)

from app.errors import CpuListError
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.parse.size import parse_size
from probes import trace
from probes.first_touch import THP_MODES
from probes.messaging import DEFAULT_ROUNDS as MESSAGING_ROUNDS, TRANSPORTS
from probes.scaling import WORKS
from probes.spec import CPUS_OPTIONAL, PROBE_NAMES, ProbeSpec, ProbeSpecError, applies
from probes.sweep import DEFAULT_ROUNDS

PROBE_TITLES = {"jitter": "Jitter (gaps in a busy loop)", "wakeup": "Wakeup latency (timer sleep)",
                "sweep": "Sweep (same work on each CPU)", "c2c": "Core to core (cache-line ping-pong)",
                "counters": "Counters (perf events, pinned vs not)",
                "messaging": "Messaging (sender and receiver placements)",
                "first-touch": "First touch (cost of fresh pages)",
                "scaling": "Scaling (throughput on 1, 2, 4… CPUs)"}


# What the duration field means where it is not "how long, per CPU".
_SECONDS_MEANS = {"messaging": "Measured time per placement (cut into its rounds)",
                  "scaling": "The size of the work: what all runs would take at one CPU's speed"}


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


def row(parent: QWidget, *widgets) -> QWidget:
    """Widgets side by side, as one form field."""
    w = QWidget(parent)
    lay = QHBoxLayout(w)
    lay.setContentsMargins(0, 0, 0, 0)
    for x in widgets:
        lay.addWidget(x)
    return w


def page(parent: QWidget, *rows) -> QWidget:
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
        for build in (self._jitter_page, self._wakeup_page, self._sweep_page, self._c2c_page,
                      self._counters_page, self._messaging_page, self._first_touch_page, self._scaling_page):
            self.options_stack.addWidget(build())
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
        self.duty_combo.currentIndexChanged.connect(self._on_duty_combo_changed)
        self.policy_combo.currentIndexChanged.connect(self._on_policy_combo_changed)
        self.cpu_edit.textChanged.connect(self._on_cpu_edit_text_changed)
        self._on_probe_combo_changed(0)

    # -- fields ----------------------------------------------------------------------------------
    def _build_common(self) -> None:
        self.probe_combo = QComboBox(self)
        for key in PROBE_NAMES:
            self.probe_combo.addItem(PROBE_TITLES[key], key)
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
        self.seconds_spin.setToolTip("How long to measure, per CPU")

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

    def _jitter_page(self) -> QWidget:
        self.duty_combo = QComboBox(self)
        for text, val in (("100%", 100.0), ("50%", 50.0), ("10%", 10.0), ("custom", None)):
            self.duty_combo.addItem(text, val)
        self.duty_spin = QDoubleSpinBox(self)
        self.duty_spin.setRange(0.1, 100.0)
        self.duty_spin.setValue(25.0)
        self.duty_spin.setSuffix(" %")
        self.duty_spin.setEnabled(False)
        self.attribute_check = QCheckBox("attribute gaps (tracefs)", self)
        why = trace.unavailable_reason()
        self.attribute_check.setEnabled(why is None)
        self.attribute_check.setChecked(why is None)
        self.attribute_check.setToolTip(
            why or "Record interrupts, softirqs, NMIs and task switches on the probed CPU while it runs "
                   "and say what ran during each large gap (Gaps tab). Tracing adds a little work to "
                   "every interrupt on that CPU.")
        return page(self, ("duty cycle", row(self, self.duty_combo, self.duty_spin)), ("", self.attribute_check))

    def _wakeup_page(self) -> QWidget:
        self.interval_spin = QSpinBox(self)
        self.interval_spin.setRange(1, 10_000_000)
        self.interval_spin.setValue(1000)
        self.interval_spin.setSuffix(" µs")
        self.dma_check = QCheckBox("hold /dev/cpu_dma_latency at 0", self)
        return page(self, ("interval", self.interval_spin), ("", self.dma_check))

    def _sweep_page(self) -> QWidget:
        self.rounds_spin = QSpinBox(self)
        self.rounds_spin.setRange(2, 100_000)
        self.rounds_spin.setValue(DEFAULT_ROUNDS)
        return page(self, ("rounds", self.rounds_spin))

    def _c2c_page(self) -> QWidget:
        self.pairs_edit = QLineEdit(self)
        self.pairs_edit.setPlaceholderText("every pair of the CPUs, or e.g. 0:1,0:2")
        return page(self, ("pairs", self.pairs_edit))

    def _counters_page(self) -> QWidget:
        self.command_edit = QLineEdit(self)
        self.command_edit.setPlaceholderText("default: a jitter probe of the duration")
        return page(self, ("command", self.command_edit))

    def _messaging_page(self) -> QWidget:
        self.placement_edit = QLineEdit(self)
        self.placement_edit.setPlaceholderText("auto, or sender:receiver pairs such as 0:1,1:1,unpinned")
        self.placement_edit.setToolTip("auto runs every kind of placement this machine offers among the CPUs "
                                       "above (all when empty): same CPU, SMT siblings, same L3, other L3, "
                                       "other node, and unpinned")
        self.transport_combo = QComboBox(self)
        for t, text in zip(TRANSPORTS, ("shared-memory ring", "pipe", "UDP on loopback")):
            self.transport_combo.addItem(text, t)
        self.messaging_rounds_spin = QSpinBox(self)
        self.messaging_rounds_spin.setRange(1, 100)
        self.messaging_rounds_spin.setValue(MESSAGING_ROUNDS)
        self.messaging_rounds_spin.setToolTip("Each placement's time is cut into this many segments, run in "
                                              "alternated order")
        return page(self, ("placements", self.placement_edit), ("transport", self.transport_combo),
                    ("rounds", self.messaging_rounds_spin))

    def _first_touch_page(self) -> QWidget:
        self.size_edit = QLineEdit("1G", self)
        self.size_edit.setToolTip("Memory to map and touch: 64M, 512M, 1G… (powers of 1024)")
        self.node_spin = QSpinBox(self)
        self.node_spin.setRange(-1, 1023)
        self.node_spin.setValue(-1)
        self.node_spin.setSpecialValueText("each node with memory")
        self.node_spin.setPrefix("node ")
        self.thp_combo = QComboBox(self)
        self.thp_combo.addItem("no hint (the system's mode)", None)
        for mode in THP_MODES:
            self.thp_combo.addItem(mode, mode)
        return page(self, ("size", self.size_edit), ("memory on", self.node_spin),
                    ("huge pages", self.thp_combo))

    def _scaling_page(self) -> QWidget:
        self.work_combo = QComboBox(self)
        for w, text in zip(WORKS, ("a shared lock", "a shared atomic", "private data")):
            self.work_combo.addItem(text, w)
        self.threads_spin = QSpinBox(self)
        self.threads_spin.setRange(0, 1024)
        self.threads_spin.setSpecialValueText("one per CPU")
        self.scaling_rounds_spin = QSpinBox(self)
        self.scaling_rounds_spin.setRange(0, 100)
        self.scaling_rounds_spin.setSpecialValueText("default (3; 1 for a command)")
        self.scaling_command_edit = QLineEdit(self)
        self.scaling_command_edit.setPlaceholderText("the built-in work, or a command to run at each width")
        return page(self, ("work", self.work_combo), ("threads", self.threads_spin),
                    ("rounds", self.scaling_rounds_spin), ("command", self.scaling_command_edit))

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

    def spec(self) -> ProbeSpec:
        """The run the fields ask for; ProbeSpecError or CpuListError (the panel shows them on its
        status line) when they ask for something that cannot run."""
        probe = self.probe
        cpus = self._checked_cpus()
        unbound = applies("unbound", probe) and self.unbound_check.isChecked()
        if not cpus and not unbound and probe not in CPUS_OPTIONAL:
            raise ProbeSpecError("choose CPUs: type a list such as 1 or 2-3, drop a CPU cell here, or click "
                                 "one in the grid" + (" (or tick unbound)" if applies("unbound", probe) else ""))
        fifo = applies("policy", probe) and self.policy_combo.currentData() == "fifo"
        slack = self.slack_spin.value()
        command = self._command(self.scaling_command_edit if probe == "scaling" else self.command_edit) \
            if applies("command", probe) else ()
        work = probe == "scaling" and not command
        return ProbeSpec(
            probe, cpus, unbound=unbound, seconds=self.seconds_spin.value(),
            duty=self._duty() if applies("duty", probe) else None,
            interval_us=self.interval_spin.value() if applies("interval_us", probe) else None,
            policy="fifo" if fifo else None, priority=self.priority_spin.value() if fifo else None,
            slack_ns=slack if applies("slack_ns", probe) and slack >= 0 else None,
            dma_latency=applies("dma_latency", probe) and self.dma_check.isChecked(),
            attribute=(applies("attribute", probe) and self.attribute_check.isEnabled()
                       and self.attribute_check.isChecked()),
            rounds=self._rounds(probe), command=command,
            pairs=(self.pairs_edit.text().strip() or None) if applies("pairs", probe) else None,
            placement=(self.placement_edit.text().strip() or None) if applies("placement", probe) else None,
            transport=self.transport_combo.currentData() if applies("transport", probe) else None,
            size=parse_size(self.size_edit.text(), what="size") if applies("size", probe) else None,
            node=self.node_spin.value() if applies("node", probe) and self.node_spin.value() >= 0 else None,
            thp=self.thp_combo.currentData() if applies("thp", probe) else None,
            work=self.work_combo.currentData() if work else None,
            threads=(self.threads_spin.value() or None) if work else None)

    def _checked_cpus(self) -> tuple[int, ...]:
        text = self.cpu_edit.text().strip()
        # an unfinished list ("2-") gets the parser's own message
        return parse_cpulist(text, what="CPUs") if text else ()

    def _duty(self) -> float:
        duty = self.duty_combo.currentData()
        return self.duty_spin.value() if duty is None else duty

    def _rounds(self, probe: str) -> int | None:
        """Each probe's own rounds field (sweep: units per CPU; messaging, scaling: alternated rounds)."""
        if probe == "sweep":
            return self.rounds_spin.value()
        if probe == "messaging":
            return self.messaging_rounds_spin.value()
        if probe == "scaling":
            return self.scaling_rounds_spin.value() or None
        return None

    def _command(self, edit: QLineEdit) -> tuple[str, ...]:
        text = edit.text()
        try:
            return tuple(shlex.split(text))
        except ValueError as e:
            raise ProbeSpecError(f"command {text!r}: {e}; check the quotes") from None

    # -- handlers --------------------------------------------------------------------------------
    def _on_probe_combo_changed(self, _index: int) -> None:
        probe = self.probe
        self.options_stack.setCurrentIndex(PROBE_NAMES.index(probe))
        self.sched_row.setEnabled(applies("policy", probe))
        self.slack_spin.setEnabled(applies("slack_ns", probe))
        self.unbound_check.setEnabled(applies("unbound", probe))
        self.seconds_spin.setEnabled(applies("seconds", probe))
        self.seconds_spin.setToolTip(_SECONDS_MEANS.get(probe, "How long to measure, per CPU"))

    def _on_duty_combo_changed(self, _index: int) -> None:
        self.duty_spin.setEnabled(self.duty_combo.currentData() is None)

    def _on_policy_combo_changed(self, _index: int) -> None:
        self.priority_spin.setEnabled(self.policy_combo.currentData() == "fifo")

    def _on_cpu_edit_text_changed(self, text: str) -> None:
        ok = not text.strip() or self.cpu_edit.hasAcceptableInput()
        self.cpu_edit.setStyleSheet("" if ok else "color: #b00020;")
