"""FleetGrids: every host's grid, small, side by side, all coloured by ONE scale (so a colour means the
same rate in each: the busiest machine is the brightest), with one legend for all; a host that could
not be read shows why in its place, and a host that stands out in the table has an amber frame."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from app.format import printable
from app.remote.fleet import FleetRow
from widgets.colors import ColorScale, Metric, metric_values, scale_for
from widgets.topology.legend import ColorLegend
from widgets.topology.view import TopologyView

TILE_SIZE = (340, 230)
FAILED_CSS = "color: #b00020;"


def shared_scale(rows: list[FleetRow], metric: Metric) -> tuple[ColorScale | None, str, str, str]:
    """(the one scale for every host's values, the metric's label, unit, note)."""
    merged: dict[int, float] = {}
    label, unit, totals = metric.label, "", False
    for r in rows:
        if r.state is None:
            continue
        vals = metric_values(r.state, metric)
        label, unit, totals = vals.label, vals.unit, totals or vals.totals
        for v in vals.values.values():
            merged[len(merged)] = v
    scale = scale_for(merged, metric, totals) if merged else None
    note = "one scale for every host" + (" (totals since boot)" if totals else "")
    return scale, label, unit, note


class HostTile(QFrame):
    """One host: its name over its grid (or over why it could not be read)."""

    def __init__(self, row: FleetRow, metric: Metric, scale: ColorScale | None, odd: bool, parent=None):
        super().__init__(parent)
        self.row = row
        self.setObjectName("fleet-tile")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        if odd:
            self.setStyleSheet("#fleet-tile { border: 2px solid #f0b400; }")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(3, 3, 3, 3)
        lay.setSpacing(2)
        name = f"{row.host}" + (f" — {row.name}" if row.name and row.name != row.host else "")
        self.title = QLabel(printable(name), self)
        self.title.setStyleSheet("font-weight: bold;")
        lay.addWidget(self.title)
        self.view: TopologyView | None = None
        if row.ok and row.state is not None:
            self.view = TopologyView(self, metric=metric)
            self.view.fix_scale(scale)
            self.view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            self.view.set_state(row.state)
            lay.addWidget(self.view, 1)
        else:
            why = QLabel(printable(row.error), self)
            why.setWordWrap(True)
            why.setStyleSheet(FAILED_CSS)
            why.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
            lay.addWidget(why, 1)
        self.setFixedSize(*TILE_SIZE)


class FleetGrids(QWidget):
    """The tiles in rows of `columns`, under the shared legend."""

    def __init__(self, rows: list[FleetRow], metric: Metric, odd_rows: set[int], parent=None, *, columns: int = 4):
        super().__init__(parent)
        scale, label, unit, note = shared_scale(rows, metric)
        self.scale = scale
        self.legend = ColorLegend(self)
        hybrid = any(r.state is not None and r.state.topology.hybrid for r in rows)
        self.legend.set_scale(label, scale, unit, note, hybrid)
        inner = QWidget(self)
        grid = QGridLayout(inner)
        grid.setContentsMargins(4, 4, 4, 4)
        grid.setSpacing(6)
        self.tiles = [HostTile(r, metric, scale, i in odd_rows, inner) for i, r in enumerate(rows)]
        for i, tile in enumerate(self.tiles):
            grid.addWidget(tile, i // columns, i % columns)
        grid.setColumnStretch(columns, 1)
        grid.setRowStretch(len(self.tiles) // columns + 1, 1)
        self.scroll = QScrollArea(self)
        self.scroll.setWidget(inner)
        self.scroll.setWidgetResizable(True)
        self.scroll.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.legend)
        lay.addWidget(self.scroll, 1)

    def fit(self) -> None:
        for t in self.tiles:
            if t.view is not None:
                t.view.zoom_fit()
