"""The probe plots' axes: black titles and ticks on their white background, a unit on every axis
title, ticks at whole decades for the log axes (labelled in words by app/format.py: '10 µs', '1M'),
and what an empty plot says (issue 12: an empty plot showed pyqtgraph's bare log ticks 2…9 and no
hint)."""
from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget


# The units of a time axis whose ticks name their own ("10 µs", "1 ms").
TIME_UNITS = "ns … s"
EMPTY_HINT = "Run a probe, or drop CPUs here"
# What an empty log axis of time or of counts spans until a run gives it data: enough decades to
# show their units, about what a jitter run fills.
EMPTY_TIME_NS = (1e2, 1e7)
EMPTY_COUNT = (1.0, 1e6)


def titled(quantity: str, unit: str) -> str:
    """An axis title with its unit: "gap length (ns … s)", "CPU time (µs)"."""
    return f"{quantity} ({unit})"


def label_axes(item: pg.PlotItem, bottom: str, left: str, *, worded_ticks: bool = False) -> None:
    """Title the bottom and left axes and draw both in black. With `worded_ticks` the ticks carry
    their own unit ("10 µs", "1M"), so pyqtgraph's SI factor on the title (which would lie) is off."""
    item.setLabel("bottom", bottom)
    item.setLabel("left", left)
    for axis in ("left", "bottom"):
        item.getAxis(axis).setTextPen("k")
        item.getAxis(axis).setPen("k")
        if worded_ticks:
            item.getAxis(axis).enableAutoSIPrefix(False)


def empty_log_ticks(item: pg.PlotItem, axis: str, span: tuple[float, float], label) -> None:
    """Decade ticks over `span` on a log axis that has no data yet, and the view over them, so an
    empty plot shows its units ("100 ns", "1 ms") rather than pyqtgraph's bare 2…9."""
    item.getAxis(axis).setTicks(decade_ticks(span[0], span[1], label))
    lo, hi = math.log10(span[0]), math.log10(span[1])
    if axis == "bottom":
        item.setXRange(lo, hi, padding=0.02)
    else:
        item.setYRange(lo, hi, padding=0.02)


class EmptyHint(QLabel):
    """EMPTY_HINT over the middle of a plot widget while it has nothing to draw; `set_empty(empty)`."""

    def __init__(self, plot: QWidget, text: str = EMPTY_HINT):
        super().__init__(text, plot)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setStyleSheet("color: #555; background: rgba(255, 255, 255, 210); padding: 6px 10px; "
                           "border: 1px solid #bbb; border-radius: 4px;")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)   # drops reach the panel
        plot.installEventFilter(self)
        self._place()

    def set_empty(self, empty: bool) -> None:
        self.setVisible(empty)
        if empty:
            self._place()
            self.raise_()

    def eventFilter(self, obj, event) -> bool:
        if event.type() == event.Type.Resize:
            self._place()
        return False

    def _place(self) -> None:
        self.adjustSize()
        parent = self.parentWidget()
        self.move((parent.width() - self.width()) // 2, (parent.height() - self.height()) // 2)


def decade_ticks(lo: float, hi: float, label, max_labels: int | None = None) -> list:
    """Ticks at whole decades spanning [lo, hi] (values > 0), labelled by `label(10**d)`; positions
    are log10 values, as a log-mode axis expects. With `max_labels`, only every k-th decade is
    labelled (the others stay as unlabelled minor ticks) so the labels do not run into each other."""
    if not (lo > 0 and hi > 0):
        return [[], []]
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = list(range(d0, max(d1, d0 + 1) + 1))
    step = max(1, math.ceil(len(decades) / max_labels)) if max_labels else 1
    major = [(d, label(10.0 ** d)) for d in decades if (d - d0) % step == 0]
    minor = [(d, "") for d in decades if (d - d0) % step != 0]
    return [major, minor]
