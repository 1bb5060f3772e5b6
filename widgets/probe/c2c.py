"""C2CHeatmap: the core-to-core probe's one-way latency matrix as an image, CPUs in topology order on
both axes, with a colour bar and the value under the mouse.

`set_matrix(cpus, matrix_ns, order)` takes probes.c2c.measure.summarize's `matrix_cpus` / `matrix_ns` (None
where a pair was not measured, and on the diagonal) and reorders rows and columns by `order`.

Contract of the graphics items used here:
- the ImageItem uses axisOrder="row-major": image[row, col] is drawn at x = col, y = row, one unit
  per CPU slot, so slot i spans [i, i + 1) on both axes; the y axis is inverted so row 0 (the first
  CPU) is at the top, as a matrix is read. Unmeasured cells are NaN, which ImageItem leaves
  transparent; levels come from the finite values only.
- the ColorBarItem shares the image's colormap and levels (setImageItem keeps them in step); it is
  created once and given new levels on each update.
- axis ticks sit at slot centres (i + 0.5) and are labelled with CPU ids.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.format import format_ns
from widgets.probe.axes import EmptyHint, ProbePlot, label_axes, titled


def reorder(cpus, matrix, order=None) -> tuple[list[int], np.ndarray]:
    """(cpus in `order` (unknown ones after, by id), matrix as float ns with NaN for unmeasured)."""
    cpus = [int(c) for c in cpus]
    pos = {c: i for i, c in enumerate(order or ())}
    new = sorted(cpus, key=lambda c: (pos.get(c, len(pos)), c))
    idx = {c: i for i, c in enumerate(cpus)}
    m = np.full((len(new), len(new)), np.nan)
    for r, a in enumerate(new):
        for k, b in enumerate(new):
            v = matrix[idx[a]][idx[b]]
            if v is not None:
                m[r, k] = float(v)
    return new, m


class C2CHeatmap(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.plot = ProbePlot(self)
        item = self.plot.getPlotItem()
        label_axes(item, titled("CPU", "id"), titled("CPU", "id"))
        self.plot.set_title("one-way latency (median of batches)")
        item.invertY(True)
        item.setAspectLocked(True)
        item.hideButtons()
        self.colormap = pg.colormap.get("viridis")
        self.image = pg.ImageItem(axisOrder="row-major")
        item.addItem(self.image)
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=self.colormap, label="ns", interactive=False)
        self.colorbar.setImageItem(self.image, insert_in=item)
        self.plot.apply_colors()                # the colour bar's axis, added after the plot's
        self.hover_label = QLabel(self)
        self.hover_label.setText("hover a cell for its latency")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.hover_label)
        self._cpus: list[int] = []
        self._m = np.zeros((0, 0))
        self.plot.scene().sigMouseMoved.connect(self._on_scene_mouse_moved)
        self.empty_hint = EmptyHint(self.plot, "Run core to core, or drop CPUs here")

    @property
    def cpus(self) -> list[int]:
        return list(self._cpus)

    @property
    def matrix(self) -> np.ndarray:
        return self._m.copy()

    def show_result(self, result: dict, order) -> None:
        """A c2c result object (its record's view; probes/catalog.py): its matrix."""
        self.set_matrix(result["matrix_cpus"], result["matrix_ns"], order)

    def set_matrix(self, cpus, matrix_ns, order=None) -> None:
        self._cpus, self._m = reorder(cpus, matrix_ns, order)
        n = len(self._cpus)
        finite = self._m[np.isfinite(self._m)]
        self.empty_hint.set_empty(n == 0)
        if n == 0:
            self.image.clear()
            return
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if hi <= lo:
            hi = lo + 1.0
        self.image.setImage(self._m, levels=(lo, hi), autoLevels=False)
        self.image.setRect(0, 0, n, n)
        self.colorbar.setLevels((lo, hi))
        ticks = [[(i + 0.5, str(c)) for i, c in enumerate(self._cpus)], []]
        item = self.plot.getPlotItem()
        item.getAxis("bottom").setTicks(ticks)
        item.getAxis("left").setTicks(ticks)
        item.setRange(xRange=(0, n), yRange=(0, n), padding=0.02)

    def text_at(self, x: float, y: float) -> str:
        """What the hover line says for view coordinates (x, y)."""
        n = len(self._cpus)
        if not (0 <= x < n and 0 <= y < n):
            return ""
        col, row = int(math.floor(x)), int(math.floor(y))
        v = self._m[row, col]
        a, b = self._cpus[row], self._cpus[col]
        if not np.isfinite(v):
            return f"CPU {a} → CPU {b}: not measured" if a != b else f"CPU {a}"
        return f"CPU {a} ↔ CPU {b}: {format_ns(round(v, 1))} one way"

    def _on_scene_mouse_moved(self, pos) -> None:
        vb = self.plot.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(pos):
            return
        p = vb.mapSceneToView(pos)
        text = self.text_at(p.x(), p.y())
        if text:
            self.hover_label.setText(text)


# What the probe panel finds here by the probe's name (probes/record.py: view).
View = C2CHeatmap
