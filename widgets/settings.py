"""WindowSettings: what the window remembers between runs, in an INI file in the XDG config folder
(app/store/folders.py, settings_path: ~/.config/coremap/settings.ini), in QSettings' format (issue 23:
nothing was remembered).

QSettings never touches settings.ini itself (issue 32): it opened a FIFO and waited, read a 2 GB sparse
file until the window aborted, and wrote through a link, replacing /dev/zero with a regular file when
run as root. The file is read through the confined reader (app/inputs.py: a regular file, not a link,
bounded, this user's) into a private copy QSettings works on, and that copy is written back through the
one writer (app/atomic.py: a temporary file beside the target, renamed; never through a link, never
into a device). A settings.ini refused is a note on the status line, and the window opens with defaults.

Remembered: the window's geometry, where its docks and toolbar are (QMainWindow.saveState), the IRQ
table's and the thread tree's columns (widths, order, hidden ones) and sort (QHeaderView.saveState),
the metric that colours the grid, and the probe form as last filled in. Saved when the window closes,
restored once it is built and before it is first shown. What the command line asks for wins over
what is remembered (`--color-by`, `--size`).

A value that cannot be restored (a file from another version, edited by hand) is skipped: Qt's
restore* functions refuse bad bytes themselves, and each probe field is set only when its probe,
option and type still exist and its number is finite and within the field's range.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox, QWidget

from app.atomic import AtomicWriteError, write_atomic
from app.inputs import InputFileError, read_input
from app.parse.json_text import JsonInputError, load_json
from app.store.folders import foreign_folder, settings_path
from widgets.colors import UnknownMetric, parse_metric

MAX_BYTES = 1 << 20         # a settings.ini is a few KiB; a docks' state is the largest value
FORMAT = 1                  # raised when a remembered value changes meaning; older ones are then ignored
STATE_VERSION = 1           # QMainWindow.saveState's version: dock layouts of another version are refused
# The probe form's own fields, by attribute of widgets/probe/form.ProbeForm; each probe's options are
# its editors' field_value / set_field_value (widgets/probe/fields.py).
_FORM_COMMON = ("probe_combo", "cpu_edit", "unbound_check", "seconds_spin", "policy_combo", "priority_spin",
                "slack_spin")


class WindowSettings:
    """Saves and restores one MainWindow's settings in `path` (default: settings_path())."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else settings_path()
        self.notes: list[str] = []          # why settings.ini was not read or not written, for the status line
        self._private = Path(tempfile.mkdtemp(prefix="coremap-settings-"))      # 0700, this process's
        copy = self._private / "settings.ini"
        try:
            foreign = foreign_folder(self.path)
            if foreign:
                raise InputFileError(f"settings {self.path}: is refused: {foreign}")
            # Not `trusted`: what it holds is the window's layout, and with umask 002 every file is
            # group-writable; whose folder it is in is checked above.
            write_atomic(copy, read_input(self.path, what="settings", limit=MAX_BYTES, no_links=True,
                                          hint="the window opens with its defaults; remove it to start afresh"))
        except InputFileError as e:
            if os.path.lexists(self.path):
                self.notes.append(str(e))
        self._q = QSettings(str(copy), QSettings.Format.IniFormat)

    def __del__(self):
        shutil.rmtree(getattr(self, "_private", None) or "/nonexistent", ignore_errors=True)

    def save(self, window) -> None:
        q = self._q
        q.setValue("format", FORMAT)
        q.setValue("window/geometry", window.saveGeometry())
        q.setValue("window/state", window.saveState(STATE_VERSION))
        q.setValue("tables/irqs", window.irq_table.view.horizontalHeader().saveState())
        q.setValue("tables/threads", window.thread_table.view.header().saveState())
        q.setValue("grid/metric", window.topology_view.color_metric.key)
        if window.probe_panel is not None:
            q.setValue("probes/form", json.dumps(form_values(window.probe_panel.form)))
        q.sync()
        self._write(window)

    def _write(self, window) -> None:
        """The private copy QSettings wrote, put in place by the one writer; a note when it cannot be."""
        try:
            why = foreign_folder(self.path)
            if why:
                raise AtomicWriteError(f"{self.path}: {why}")
            data = read_input(self._private / "settings.ini", what="settings", limit=4 * MAX_BYTES)
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_atomic(self.path, data)
        except (AtomicWriteError, InputFileError, OSError) as e:
            why = f"{self.path}: {e.strerror}" if isinstance(e, OSError) else str(e)
            self.notes.append(f"settings not saved: {why}")
            if hasattr(window, "show_message"):
                window.show_message(self.notes[-1])

    def restore(self, window, *, metric: bool = True, geometry: bool = True) -> list[str]:
        """Apply what was saved; `metric` / `geometry` False where the command line chose them.
        Returns the names of the settings restored (for the tests and the status line); why settings.ini
        was refused, if it was, goes to the window's status line."""
        for note in self.notes:
            if hasattr(window, "show_message"):
                window.show_message(note)
        q = self._q
        if _int(q.value("format")) != FORMAT:
            return []
        done = []
        blob = _bytes(q.value("window/geometry"))
        if geometry and blob is not None:
            before = window.geometry()
            if window.restoreGeometry(blob) and _usable(window):
                done.append("geometry")
            else:
                window.setGeometry(before)
                if hasattr(window, "show_message"):
                    window.show_message(f"{self.path}: the saved window size does not fit this screen; "
                                        "the window opens at its default size")
        blob = _bytes(q.value("window/state"))
        if blob is not None and window.restore_layout(blob, STATE_VERSION):
            done.append("docks")
        for key, header in (("tables/irqs", window.irq_table.view.horizontalHeader()),
                            ("tables/threads", window.thread_table.view.header())):
            blob = _bytes(q.value(key))
            if blob is not None and header.restoreState(blob):
                done.append(key)
        key = q.value("grid/metric")
        if metric and isinstance(key, str) and key:
            try:
                chosen = parse_metric(key)
            except UnknownMetric:
                chosen = None           # a metric this coremap does not know
            if chosen is not None:
                window.toolbar.show_metric(chosen)
                window.topology_view.set_metric(chosen)
                done.append("metric")
        text = q.value("probes/form")
        if window.probe_panel is not None and isinstance(text, str):
            try:
                values = load_json(text, what="probes/form", limit=1 << 16)
            except JsonInputError:
                values = None           # a hand edit or another version's: the form keeps its defaults
            if isinstance(values, dict) and set_form_values(window.probe_panel.form, values):
                done.append("probe form")
        return done


def _usable(window) -> bool:
    """Whether a restored geometry can be used: Qt keeps a window on a screen, but not at a usable size
    (settings.ini held a 24 x 12 window and Qt opened it so; issue 32). Usable: as large as the window's
    own minimum size hint, or half its screen, whichever is less."""
    screen = window.screen().availableGeometry()
    hint = window.minimumSizeHint()
    return (window.width() >= min(hint.width(), screen.width() // 2)
            and window.height() >= min(hint.height(), screen.height() // 2))


def _int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _bytes(v) -> QByteArray | None:
    return v if isinstance(v, QByteArray) and not v.isEmpty() else None


# -- the probe form ---------------------------------------------------------------------------------
def _value(w: QWidget):
    """A field's raw state (the text as typed, not parsed: a half-typed size must not stop the save)."""
    if isinstance(w, QLineEdit):
        return w.text()
    if isinstance(w, QComboBox):
        return w.currentData()
    if isinstance(w, QCheckBox):
        return w.isChecked()
    if isinstance(w, (QSpinBox, QDoubleSpinBox)):
        return w.value()
    if hasattr(w, "field_value"):         # a composite editor (a preset and its number)
        return w.field_value()
    return None


def _set(w: QWidget, value) -> bool:
    """Set one field; False (and nothing changed) when `value` is not of the field's kind."""
    if isinstance(w, QLineEdit):
        if isinstance(value, str):
            w.setText(value)
        return isinstance(value, str)
    if isinstance(w, QComboBox):
        i = w.findData(value)
        if i >= 0:
            w.setCurrentIndex(i)
        return i >= 0
    if isinstance(w, QCheckBox):
        if isinstance(value, bool) and w.isEnabled():
            w.setChecked(value)
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False            # nan and inf stopped the window with a ValueError (issue 32)
    if isinstance(w, QSpinBox):
        if value != int(value) or not w.minimum() <= value <= w.maximum():
            return False
        w.setValue(int(value))
        return True
    if isinstance(w, QDoubleSpinBox):
        if not w.minimum() <= value <= w.maximum():
            return False
        w.setValue(float(value))
        return True
    if hasattr(w, "set_field_value"):
        w.set_field_value(value)
        return True
    return False


def form_values(form) -> dict:
    """What the probe form holds: its common fields, and every probe's options."""
    return {"common": {name: _value(getattr(form, name)) for name in _FORM_COMMON if hasattr(form, name)},
            "options": {probe: {opt: _value(ed) for opt, ed in fields.items()} for probe, fields in form.fields.items()}}


def set_form_values(form, values: dict) -> bool:
    """Fill the form from form_values' dict; a field that is gone or of another kind is left as it is.
    The probe is set first, so its page is the one shown. True when anything was set."""
    common = values.get("common") if isinstance(values.get("common"), dict) else {}
    options = values.get("options") if isinstance(values.get("options"), dict) else {}
    done = False
    for probe, fields in options.items():
        editors = form.fields.get(probe) if isinstance(fields, dict) else None
        for opt, value in (fields.items() if editors is not None else ()):
            if opt in editors:
                done |= _set(editors[opt], value)
    for name in _FORM_COMMON:             # probe_combo first: it switches the page
        if name in common and hasattr(form, name) and common[name] is not None:
            done |= _set(getattr(form, name), common[name])
    return done
