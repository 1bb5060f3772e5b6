"""The editors of a probe's own options, each made from its Field in the probe's record
(probes/catalog.py): a spin box for a number, a combo box for a choice, a line edit for text, a size or
a command, a check box for a flag, a combo box of presets with a custom number beside it.

Every editor says the value it holds as the spec takes it (`field_value()`: None when it is not
given, so the child keeps its default; ProbeSpecError or SizeError when its text cannot be one) and
takes one (`set_field_value`). A spin box with a `special` text offers one value below the field's
lowest, shown as that text, which means "not given".
"""
from __future__ import annotations

import shlex

from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLineEdit, QSpinBox, QWidget

from app.parse.size import parse_size
from probes.record import Field
from probes.spec import ProbeSpecError


def row(parent: QWidget, *widgets) -> QWidget:
    """Widgets side by side, as one form field."""
    w = QWidget(parent)
    lay = QHBoxLayout(w)
    lay.setContentsMargins(0, 0, 0, 0)
    for x in widgets:
        lay.addWidget(x)
    return w


def tooltip(field: Field) -> str:
    return field.help[:1].upper() + field.help[1:]


def short_size(n: int) -> str:
    """A size as the size fields are typed: 1G, 512M, 4096."""
    for unit, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


class IntEditor(QSpinBox):
    def __init__(self, field: Field, parent=None):
        super().__init__(parent)
        self.field = field
        self.setRange(int(field.low) - (1 if field.special else 0), int(field.high))
        self.setSpecialValueText(field.special)
        self.setPrefix(field.prefix)
        self.setSuffix(field.suffix)
        self.set_field_value(field.default)

    def field_value(self) -> int | None:
        return None if self.field.special and self.value() == self.minimum() else self.value()

    def set_field_value(self, value) -> None:
        self.setValue(self.minimum() if value is None else int(value))


class ChoiceEditor(QComboBox):
    def __init__(self, field: Field, parent=None):
        super().__init__(parent)
        self.field = field
        for value, text in field.choices:
            self.addItem(text, value)
        self.set_field_value(field.default)

    def field_value(self):
        return self.currentData()

    def set_field_value(self, value) -> None:
        self.setCurrentIndex(max(0, self.findData(value)))


class TextEditor(QLineEdit):
    """Text (None when empty), a size such as 1G, or a command split as a shell would."""

    def __init__(self, field: Field, parent=None):
        super().__init__(parent)
        self.field = field
        self.setPlaceholderText(field.placeholder)
        # a size starts at its default, shown; text starts empty (the child's default), its placeholder
        # saying what that means
        self.set_field_value(field.default if field.kind == "size" else None)

    def field_value(self):
        text = self.text()
        if self.field.kind == "size":
            return parse_size(text, what=self.field.option)
        if self.field.kind == "command":
            try:
                return tuple(shlex.split(text))
            except ValueError as e:
                raise ProbeSpecError(f"command {text!r}: {e}; check the quotes") from None
        return text.strip() or None

    def set_field_value(self, value) -> None:
        if value is None or value == ():
            self.setText("")
        elif self.field.kind == "size":
            self.setText(short_size(value))
        elif self.field.kind == "command":
            self.setText(shlex.join(value))
        else:
            self.setText(str(value))


class FlagEditor(QCheckBox):
    """Ticked or not; where the field is unavailable here, disabled, unticked, and its tooltip says why;
    where using it asks something of the user (authorisation), unticked until they tick it, and its
    tooltip says what."""

    def __init__(self, field: Field, parent=None):
        super().__init__(field.label, parent)
        self.field = field
        self.why = field.unavailable() if field.unavailable is not None else None
        self.asks = field.asks() if field.asks is not None and self.why is None else None
        self.setEnabled(self.why is None)
        self.setChecked(bool(field.default) and self.why is None and self.asks is None)

    def field_value(self) -> bool:
        return self.isEnabled() and self.isChecked()

    def set_field_value(self, value) -> None:
        self.setChecked(bool(value))


def compact(combo: QComboBox, chars: int = 10) -> QComboBox:
    """A combo box that asks for room for `chars` characters, not for its longest entry, so the probe
    form leaves the docked panel's width to the plots (issue 28: at 610 px the form took 466 and the
    histogram 136); its list still opens wide enough for every entry."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(chars)
    view = combo.view()
    view.setMinimumWidth(view.sizeHintForColumn(0) + 2 * view.frameWidth() + 8)
    return combo


class PresetEditor(QWidget):
    """The field's presets in a combo box; its "not given" entry (None) stands for the custom number
    beside it, which is enabled only then."""

    def __init__(self, field: Field, parent=None):
        super().__init__(parent)
        self.field = field
        self.combo = QComboBox(self)
        for value, text in field.choices:
            self.combo.addItem(text, value)
        compact(self.combo, 8)
        self.spin = QDoubleSpinBox(self)
        self.spin.setRange(field.low, field.high)
        self.spin.setValue(field.custom if field.custom is not None else field.low)
        self.spin.setSuffix(field.suffix)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.combo)
        lay.addWidget(self.spin)
        self.combo.currentIndexChanged.connect(self._on_combo_current_index_changed)
        self.set_field_value(field.default)

    def field_value(self) -> float:
        value = self.combo.currentData()
        return self.spin.value() if value is None else value

    def set_field_value(self, value) -> None:
        i = self.combo.findData(value)
        if i < 0:
            i = self.combo.findData(None)
            self.spin.setValue(float(value))
        self.combo.setCurrentIndex(i)
        self._on_combo_current_index_changed(i)

    def _on_combo_current_index_changed(self, _index: int) -> None:
        self.spin.setEnabled(self.combo.currentData() is None)


_EDITORS = {"int": IntEditor, "choice": ChoiceEditor, "text": TextEditor, "size": TextEditor,
            "command": TextEditor, "flag": FlagEditor, "preset": PresetEditor}


def editor(field: Field, parent: QWidget) -> QWidget:
    """The editor of `field`, its tooltip the field's help (or why it cannot be used here)."""
    w = _EDITORS[field.kind](field, parent)
    asks = getattr(w, "asks", None)
    w.setToolTip(getattr(w, "why", None) or tooltip(field) + (f"\n\n{asks[:1].upper()}{asks[1:]}" if asks else ""))
    return w
