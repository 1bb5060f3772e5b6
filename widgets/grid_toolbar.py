"""GridToolBar: the main window's toolbar: what colours the grid (metric, softirq kind), how often the
machine is sampled and whether sampling is paused, and the zoom actions.

It owns its controls and says what the user chose (`metric_chosen`); MainWindow connects the
interval, pause and zoom controls to the sampler and the grid, and shows back what the sampler did
(`show_paused`, `set_live`).
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QLabel, QToolBar, QWidget

from app.sampling.interval import MAX_INTERVAL, MIN_INTERVAL
from widgets.colors import METRIC_BASES, SOFTIRQ_KINDS, Metric, parse_metric


class GridToolBar(QToolBar):
    """Colour by (metric, softirq kind), the sampling interval and pause, and Fit / Zoom in / Zoom out.

    Attributes: metric_combo, softirq_combo, interval_spin, pause_action, fit_action, zoom_in_action,
    zoom_out_action."""

    metric_chosen = Signal(object)        # the Metric the combos now name

    def __init__(self, interval: float, parent: QWidget | None = None):
        super().__init__("Grid", parent)
        self.setObjectName("grid-toolbar")
        self.setMovable(False)
        self.addWidget(QLabel(" Colour by ", self))
        self.metric_combo = QComboBox(self)
        for key, label in METRIC_BASES:
            self.metric_combo.addItem(label, key)
        self.metric_combo.setToolTip("What colours each CPU cell")
        self.addWidget(self.metric_combo)
        self.softirq_combo = QComboBox(self)
        self.softirq_combo.addItem("all kinds", "")
        for kind in SOFTIRQ_KINDS:
            self.softirq_combo.addItem(kind, kind)
        self.softirq_combo.setToolTip("Which softirq kind (with Colour by: Softirqs)")
        self.addWidget(self.softirq_combo)
        self.addSeparator()
        self.addWidget(QLabel(" Every ", self))
        self.interval_spin = QDoubleSpinBox(self)
        self.interval_spin.setRange(MIN_INTERVAL, MAX_INTERVAL)
        self.interval_spin.setSingleStep(0.25)
        self.interval_spin.setDecimals(2)
        self.interval_spin.setSuffix(" s")
        self.interval_spin.setValue(interval)
        self.interval_spin.setToolTip("Sampling interval")
        self.addWidget(self.interval_spin)
        self.pause_action = self._action("Pause", QKeySequence(Qt.Key.Key_Space), "Pause / resume sampling (Space)")
        self.pause_action.setCheckable(True)
        self.addSeparator()
        self.fit_action = self._action("Fit", QKeySequence("Ctrl+0"),
                                       "Zoom the grid to fit (Ctrl+0); Ctrl+wheel or +/- to zoom")
        self.zoom_in_action = self._action("Zoom in", QKeySequence(QKeySequence.StandardKey.ZoomIn))
        self.zoom_out_action = self._action("Zoom out", QKeySequence(QKeySequence.StandardKey.ZoomOut))
        self.metric_combo.currentIndexChanged.connect(self._on_metric_combo_changed)
        self.softirq_combo.currentIndexChanged.connect(self._on_metric_combo_changed)

    def _action(self, text: str, keys: QKeySequence, tip: str | None = None) -> QAction:
        a = QAction(text, self)
        a.setShortcut(keys)
        if tip:
            a.setToolTip(tip)
        self.addAction(a)
        return a

    def show_metric(self, m: Metric) -> None:
        """Set the combos to `m` without announcing it (it is already the grid's)."""
        for w in (self.metric_combo, self.softirq_combo):
            w.blockSignals(True)
        self.metric_combo.setCurrentIndex(max(0, self.metric_combo.findData(m.base)))
        self.softirq_combo.setCurrentIndex(max(0, self.softirq_combo.findData(m.softirq_kind or "")))
        self.softirq_combo.setEnabled(m.base == "softirq")
        for w in (self.metric_combo, self.softirq_combo):
            w.blockSignals(False)

    def show_paused(self, paused: bool) -> None:
        """The pause action shows what the sampler did, without toggling it again."""
        self.pause_action.blockSignals(True)
        self.pause_action.setChecked(paused)
        self.pause_action.setText("Resume" if paused else "Pause")
        self.pause_action.blockSignals(False)

    def set_live(self, live: bool) -> None:
        """Pause and the interval apply only to a live machine (a capture does not change)."""
        self.pause_action.setEnabled(live)
        self.interval_spin.setEnabled(live)

    def _on_metric_combo_changed(self, _index: int) -> None:
        base = self.metric_combo.currentData()
        kind = self.softirq_combo.currentData() if base == "softirq" else ""
        self.softirq_combo.setEnabled(base == "softirq")
        self.metric_chosen.emit(parse_metric(f"{base}:{kind}" if kind else base))
