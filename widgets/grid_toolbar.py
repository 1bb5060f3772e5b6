"""GridToolBar: the main window's toolbar: what colours the grid (metric, and which of its kinds: a
softirq kind, or one idle state of the machine's), how often the machine is sampled and whether
sampling is paused, and the zoom actions.

Choice made where issue 22 was silent: the kind combo beside the metric serves both metrics that have
kinds. For Softirqs it lists the kernel's softirq kinds; for Idle it lists the idle states this
machine's CPUs have (cpuidle's names, shallow to deep, as the sampler read them: `set_idle_states`),
after "deeper than the shallowest", the default. `--color-by idle:C6` names one too.

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

    Attributes: metric_combo, kind_combo, interval_spin, pause_action, fit_action, zoom_in_action,
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
        self.kind_combo = QComboBox(self)
        self.kind_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.addWidget(self.kind_combo)
        self._idle_states: tuple[str, ...] = ()
        self._fill_kinds("irq", "")
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
        self.metric_combo.currentIndexChanged.connect(self._on_metric_changed)
        self.kind_combo.currentIndexChanged.connect(self._on_kind_changed)

    def _action(self, text: str, keys: QKeySequence, tip: str | None = None) -> QAction:
        a = QAction(text, self)
        a.setShortcut(keys)
        if tip:
            a.setToolTip(tip)
        self.addAction(a)
        return a

    def show_metric(self, m: Metric) -> None:
        """Set the combos to `m` without announcing it (it is already the grid's)."""
        self.metric_combo.blockSignals(True)
        self.metric_combo.setCurrentIndex(max(0, self.metric_combo.findData(m.base)))
        self.metric_combo.blockSignals(False)
        self._fill_kinds(m.base, m.softirq_kind or m.idle_state or "")

    def set_idle_states(self, names) -> None:
        """The idle states this machine's CPUs have, shallow to deep (offered with Colour by: Idle)."""
        names = tuple(names)
        if names != self._idle_states:
            self._idle_states = names
            if self.metric_combo.currentData() == "idle":
                self._fill_kinds("idle", self.kind_combo.currentData() or "")

    def _fill_kinds(self, base: str, chosen: str) -> None:
        """The kinds `base` has, `chosen` selected (kept even when this machine has not shown it yet:
        `--color-by idle:C6` before the first idle read), without announcing it."""
        if base == "softirq":
            items, tip = [("all kinds", ""), *((k, k) for k in SOFTIRQ_KINDS)], "Which softirq kind"
        elif base == "idle":
            names = list(self._idle_states) + ([chosen] if chosen and chosen not in self._idle_states else [])
            items = [("deeper than the shallowest", ""), *((f"in {n}", n) for n in names)]
            tip = ("Time in idle states deeper than the shallowest sleep, or in one idle state"
                   if self._idle_states else "No idle states read here yet")
        else:
            items, tip = [("", "")], "Softirqs and Idle have kinds"
        c = self.kind_combo
        c.blockSignals(True)
        c.clear()
        for label, key in items:
            c.addItem(label, key)
        c.setCurrentIndex(max(0, c.findData(chosen)))
        c.setEnabled(len(items) > 1)
        c.setToolTip(tip)
        c.blockSignals(False)

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

    def _on_metric_changed(self, _index: int) -> None:
        self._fill_kinds(self.metric_combo.currentData(), "")
        self._on_kind_changed(0)

    def _on_kind_changed(self, _index: int) -> None:
        base, kind = self.metric_combo.currentData(), self.kind_combo.currentData()
        self.metric_chosen.emit(parse_metric(f"{base}:{kind}" if kind else base))
