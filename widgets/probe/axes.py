"""The probe plots' axes: black titles and ticks on their white background, and ticks at whole
decades for the log axes (labelled in words by app/format.py: '10 µs', '1M')."""
from __future__ import annotations

import math

import pyqtgraph as pg


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
