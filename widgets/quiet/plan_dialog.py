"""Two small windows of the Quiet menu, neither of which changes the machine on its own:

- PlanDialog, "Make it permanent…": `coremap plan --quiet LIST` in a window (app/quiet/boot_plan.py) — the
  kernel command line, tuned, irqbalance and systemd pieces, said against the running command line —
  with "Save to folder…" (the same files `--out` writes). Nothing is applied.
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
from PySide6.QtWidgets import (QDialog, QFileDialog, QHBoxLayout, QLabel, QLayout, QPlainTextEdit, QPushButton,
                               QVBoxLayout, QWidget)

from app.errors import CoremapError
from app.format import cpus_word
from app.machine.irqbalance import banned_line, config_path, read_config_text, read_irqbalance, with_banned_cpus
from app.quiet.boot_plan import QuietPlan, plan_text, write_plan_folder
from app.store.folders import reports_dir
from app.sysroot import SysRoot
from widgets.pinning.feedback import FAIL_COLOR, OK_COLOR


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


class PlanDialog(QDialog):
    """The plan that keeps the quiet CPUs quiet after a reboot; "Save to folder…" writes its files."""

    saved = Signal(str)

    def __init__(self, plan: QuietPlan, parent: QWidget | None = None):
        super().__init__(parent)
        self.plan = plan
        self.setWindowTitle(f"Make {cpus_word(plan.quiet)} quiet after a reboot")
        self.text = _mono(self, plan_text(plan))
        self.status = QLabel("Nothing is applied: review it, then add each piece where it says.", self)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.save_button = QPushButton("Save to folder…", self)
        self.close_button = QPushButton("Close", self)
        row = QHBoxLayout()
        row.addWidget(self.status, 1)
        row.addWidget(self.save_button)
        row.addWidget(self.close_button)
        lay = QVBoxLayout(self)
        lay.addWidget(self.text, 1)
        lay.addLayout(row)
        _fit_offscreen(lay)
        self.save_button.clicked.connect(self._on_save_button_clicked)
        self.close_button.clicked.connect(self.accept)
        self.resize(860, 620)

    def save_to(self, folder: Path) -> None:
        """Write the plan's files into `folder` and say so (an error says why, on the status line)."""
        try:
            write_plan_folder(folder, self.plan)
        except CoremapError as e:
            self._say(str(e), ok=False)
            return
        self._say(f"written to {folder}: cmdline.txt, plan.txt and one file per piece", ok=True)
        self.saved.emit(str(folder))

    def _say(self, text: str, ok: bool) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {OK_COLOR if ok else FAIL_COLOR};")

    def _on_save_button_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Save the plan into", str(reports_dir()))
        if folder:
            self.save_to(Path(folder))


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
            self.status.setStyleSheet(f"color: {FAIL_COLOR};")
            return
        self.status.setText(f"written to {where or self.path}; restart irqbalance for it to take effect")
        self.status.setStyleSheet(f"color: {OK_COLOR};")
        self.write_button.setEnabled(False)
