"""Two small windows of the Quiet menu, neither of which changes the machine on its own:

- PlanDialog, "Make it permanent…": `coremap plan --quiet LIST` in a window (app/quiet/boot_plan.py):
  what it found on the machine at the top (how it keeps its kernel command line, whether the kernel
  has CONFIG_NO_HZ_FULL, the boot CPU), then one tab per route, by hand or with tuned, each with every
  piece's file, apply and roll-back lines and the pieces of either route, so the two are never read as
  one. "Save to folder…" writes the same files `--out` does, rollback scripts included; "Copy roll
  back" puts the open route's rollback script on the clipboard. Above the tabs, the words of the
  running kernel command line that work against the plan, and two tick boxes that plan again as
  `plan --replace` and `--intel-pstate-disable` do. Nothing is applied.
- IrqbalanceFixDialog, "Keep irqbalance off the quiet CPUs…": the IRQBALANCE_BANNED_CPULIST line for
  irqbalance's configuration file, shown with the file's path and what the file holds now; "Write
  it" sends it to coremap-helper (app/pinning/helper.py irqbalance_ban_cpus), the only code that may write
  there, and only when pressed. irqbalance reads it when it next starts.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QDialog, QFileDialog, QHBoxLayout, QLabel, QLayout, QPlainTextEdit,
                               QPushButton, QTabWidget, QVBoxLayout, QWidget)

from app.errors import CoremapError
from app.format import cpus_word
from app.machine.irqbalance import banned_line, config_path, read_config_text, read_irqbalance, with_banned_cpus
from app.quiet.boot_plan import QuietPlan, kernel_config_line
from app.quiet.boot_plan_text import (common_lines, conflict_sentences, conflicts_heading, intro_sentences,
                                     machine_sentences, rollback_script, route_lines, write_plan_folder)
from app.store.folders import reports_dir
from app.sysroot import SysRoot
from widgets.theme import status_style


def _mono(parent: QWidget, text: str) -> QPlainTextEdit:
    edit = QPlainTextEdit(text, parent)
    edit.setReadOnly(True)
    edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
    font = QFont("DejaVu Sans Mono")
    font.setStyleHint(QFont.StyleHint.Monospace)
    edit.setFont(font)
    return edit


def _fit_offscreen(lay: QLayout) -> None:
    if QGuiApplication.platformName() == "offscreen":
        # As in MainWindow: the offscreen platform warns about a top-level window's minimum size.
        lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)


def _label(parent: QWidget, text: str) -> QLabel:
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    return label


class PlanDialog(QDialog):
    """The plan that keeps the quiet CPUs quiet after a reboot, one tab per route; "Save to folder…"
    writes its files, "Copy roll back" the open route's rollback script.

    Attributes: `plan`; `machine`, a label per fact found on the machine, `kernel_line` the one that
    says whether the kernel has CONFIG_NO_HZ_FULL; `conflicts`, the words of the running kernel command
    line that work against the plan, each with why (hidden when none does); `replace_box` and
    `pstate_box`, `plan --replace` and `--intel-pstate-disable` (shown when the dialog can re-plan);
    `tabs`, one page per route (`route_keys[i]` is page i's route); `text`, the by-hand route's page
    (its kernel command line); `status`, the result line."""

    saved = Signal(str)

    def __init__(self, plan: QuietPlan, parent: QWidget | None = None,
                 replan: Callable[[bool, bool], QuietPlan] | None = None):
        """`replan(replace, intel_pstate)`: the same CPUs planned again with those choices."""
        super().__init__(parent)
        self._replan = replan
        self.setWindowTitle(f"Make {cpus_word(plan.quiet)} quiet after a reboot")
        self.summary = _label(self, "")
        # One line per fact; the kernel's stands out when nohz_full= would be ignored.
        self.machine = [_label(self, line) for line in machine_sentences(plan)]
        self.kernel_line = next(label for label in self.machine if label.text() == kernel_config_line(plan.facts))
        if plan.facts.kernel.no_hz_full is False:
            self.kernel_line.setStyleSheet(status_style("warn", self, "font-weight: bold;"))
        # Above the routes, as in the CLI's text: what the plan changes of the running command line, and why.
        self.conflicts = _label(self, "")
        self.conflicts.setStyleSheet(status_style("warn", self))
        self.replace_box = QCheckBox("Replace the running command line's CPU lists (--replace)", self)
        self.replace_box.setToolTip("write only the CPUs chosen, ending the isolation of the CPUs the running "
                                    "command line isolates; unticked, they are kept and the lists merged")
        self.pstate_box = QCheckBox("Add intel_pstate=disable (--intel-pstate-disable)", self)
        self.pstate_box.setToolTip("acpi-cpufreq instead of the CPU's own frequency control, as tuned's "
                                   "cpu-partitioning profile sets it")
        self.tabs = QTabWidget(self)
        self.route_keys: list[str] = []
        self.text: QPlainTextEdit | None = None
        self.status = _label(self, "Nothing is applied: take one route, apply each piece where it says.")
        self.save_button = QPushButton("Save to folder…", self)
        self.copy_button = QPushButton("Copy roll back", self)
        self.copy_button.setToolTip("the open route's rollback script, every piece's undo, last applied first")
        self.close_button = QPushButton("Close", self)
        self._lay_out()
        self.show_plan(plan)
        self.replace_box.toggled.connect(self._on_choice_toggled)
        self.pstate_box.toggled.connect(self._on_choice_toggled)
        self.save_button.clicked.connect(self._on_save_button_clicked)
        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        self.close_button.clicked.connect(self.accept)
        self.resize(900, 680)

    def _lay_out(self) -> None:
        choices = QHBoxLayout()
        for box in (self.replace_box, self.pstate_box):
            box.setVisible(self._replan is not None)
            choices.addWidget(box)
        choices.addStretch(1)
        row = QHBoxLayout()
        row.addWidget(self.status, 1)
        for button in (self.copy_button, self.save_button, self.close_button):
            row.addWidget(button)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        for label in self.machine:
            lay.addWidget(label)
        lay.addWidget(self.conflicts)
        lay.addLayout(choices)
        lay.addWidget(self.tabs, 1)
        lay.addLayout(row)
        _fit_offscreen(lay)

    def show_plan(self, plan: QuietPlan) -> None:
        """Show `plan` (the machine's facts stay: a re-plan reads the same machine)."""
        self.plan = plan
        self.summary.setText(" ".join(intro_sentences(plan)))
        lines = [f"• {words}: {why}" for words, why in conflict_sentences(plan)]
        self.conflicts.setText("\n".join([conflicts_heading(plan), *lines]) if lines else "")
        self.conflicts.setVisible(bool(lines))
        for box, on in ((self.replace_box, plan.replace),
                        (self.pstate_box, any(p.name == "intel_pstate" for p in plan.params))):
            box.blockSignals(True)
            box.setChecked(on)
            box.blockSignals(False)
        current = self.tabs.currentIndex()
        while self.tabs.count():
            page = self.tabs.widget(0)
            self.tabs.removeTab(0)
            page.deleteLater()
        self.route_keys, self.text = [], None
        for letter, route in zip("AB", plan.routes):
            lines = route_lines(plan, route)
            if route.offered:
                lines += ["", *common_lines(plan), *([""] + [f"Note: {n}" for n in plan.notes] if plan.notes else [])]
            page = _mono(self.tabs, "\n".join(lines) + "\n")
            # A route not offered keeps its tab, which says why: a greyed-out tab would not.
            index = self.tabs.addTab(page, f"{letter}. {route.title.split(':')[0]}"
                                           + ("" if route.offered else " (not offered)"))
            self.tabs.setTabToolTip(index, route.why)
            self.route_keys.append(route.key)
            if route.key == "by-hand":
                self.text = page
        self.tabs.setCurrentIndex(max(current, 0))

    def _on_choice_toggled(self, _on: bool) -> None:
        try:
            plan = self._replan(self.replace_box.isChecked(), self.pstate_box.isChecked())
        except CoremapError as e:
            self._say(f"not planned again: {e}", ok=False)
            self.show_plan(self.plan)          # the boxes go back to what the plan shown was made with
            return
        self.show_plan(plan)
        self._say("planned again: " + ("the running CPU lists replaced" if plan.replace else
                                       "the running CPU lists merged") +
                  (", intel_pstate=disable added" if self.pstate_box.isChecked() else ""), ok=True)

    def rollback_text(self) -> str:
        """The rollback script of the route whose tab is open ("" for a route not offered)."""
        route = self.plan.route(self.route_keys[self.tabs.currentIndex()])
        return rollback_script(self.plan, route) if route.offered else ""

    def save_to(self, folder: Path) -> None:
        """Write the plan's files into `folder` and say so (an error says why, on the status line)."""
        try:
            names = write_plan_folder(folder, self.plan)
        except CoremapError as e:
            self._say(str(e), ok=False)
            return
        scripts = [n for n in names if n.startswith("rollback-")]
        self._say(f"written to {folder}: {len(names)} files, the roll back of each route in "
                  f"{' and '.join(scripts)}", ok=True)
        self.saved.emit(str(folder))

    def _say(self, text: str, ok: bool) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(status_style("ok" if ok else "fail", self))

    def _on_save_button_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Save the plan into", str(reports_dir()))
        if folder:
            self.save_to(Path(folder))

    def _on_copy_button_clicked(self) -> None:
        text = self.rollback_text()
        if not text:
            self._say("this route is not offered: nothing to roll back", ok=False)
            return
        QGuiApplication.clipboard().setText(text)
        self._say(f"copied: the roll back of route {self.tabs.tabText(self.tabs.currentIndex())}", ok=True)


class IrqbalanceFixDialog(QDialog):
    """The banned-CPU line for irqbalance's file, and the one button that writes it (through `write`,
    a HelperClient.ban_irqbalance_cpus)."""

    def __init__(self, root: SysRoot, cpus, write: Callable[[tuple[int, ...]], str],
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.root = root
        self.cpus = tuple(sorted(set(cpus)))
        self._write = write
        self.path = config_path(root)
        self.setWindowTitle("Keep irqbalance off the quiet CPUs")
        st = read_irqbalance(root)
        running = f"irqbalance is running (pid {st.pid})" if st.running else "irqbalance is not running now"
        self.label = QLabel(
            f"{running}. Without this line it spreads IRQs back onto {cpus_word(self.cpus)} on its next pass "
            f"(every 10 s). The line, for {self.path}:", self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.line = _mono(self, banned_line(self.cpus))
        self.line.setMaximumHeight(48)
        try:
            now = read_config_text(root)
        except CoremapError as e:
            now = f"(cannot read it: {e})"
        self.preview = _mono(self, with_banned_cpus(now, self.cpus))
        self.status = QLabel("Written only when you press the button, by coremap-helper (administrator); "
                             "irqbalance reads it when it next starts (systemctl restart irqbalance).", self)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.write_button = QPushButton("Write it", self)
        self.close_button = QPushButton("Close", self)
        row = QHBoxLayout()
        row.addWidget(self.status, 1)
        row.addWidget(self.write_button)
        row.addWidget(self.close_button)
        lay = QVBoxLayout(self)
        lay.addWidget(self.label)
        lay.addWidget(self.line)
        lay.addWidget(QLabel("The file once written:", self))
        lay.addWidget(self.preview, 1)
        lay.addLayout(row)
        _fit_offscreen(lay)
        self.write_button.clicked.connect(self._on_write_button_clicked)
        self.close_button.clicked.connect(self.accept)
        self.resize(720, 460)

    def _on_write_button_clicked(self) -> None:
        try:
            where = self._write(self.cpus)
        except (CoremapError, OSError) as e:
            self.status.setText(f"not written: {e}")
            self.status.setStyleSheet(status_style("fail", self))
            return
        self.status.setText(f"written to {where or self.path}; restart irqbalance for it to take effect")
        self.status.setStyleSheet(status_style("ok", self))
        self.write_button.setEnabled(False)
