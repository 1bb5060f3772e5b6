"""FleetGrids: every host's grid, small, side by side, all coloured by ONE scale (so a colour means the
same rate in each: the busiest machine is the brightest), with one legend for all; a host that could
not be read shows why in its place, a host that stands out in the table has an amber frame, and a host
that stopped answering keeps its last grid, greyed, under when it was last seen. A double-click on a tile
(its grid included) or its context menu's Open this host asks for that host in a window of its own
(`open_requested`; widgets/fleet/opener.py opens it).

Streaming (app/sources/stream.py): `set_rows(rows, order)` adds the tiles of hosts not shown yet, updates
the others in place (their grid only recolours, as the window's does per tick) and lays them out in
`order`. In a fleet of more than LAZY_ABOVE hosts a tile builds its grid once it is scrolled into view, so
a thousand hosts cost a thousand labels at first and a grid only for the tiles scrolled into view."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QFrame, QGraphicsOpacityEffect, QGridLayout, QLabel, QMenu, QScrollArea,
                               QSizePolicy, QVBoxLayout, QWidget)

from app.format import printable
from app.remote.fleet import FleetRow
from widgets.colors import ColorScale, Metric, metric_values, scale_for
from widgets.topology.legend import ColorLegend
from widgets.topology.view import TopologyView

TILE_SIZE = (340, 230)
FAILED_CSS = "color: #b00020;"
STALE_CSS = "color: #8a6d00;"
LAZY_ABOVE = 64
STALE_OPACITY = 0.4
OPEN_TEXT = "Open this host"


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
    """One host: its name over its grid (or over why it could not be read, or when it was last seen).
    `open_requested(host)` on a double-click or the context menu's Open this host."""

    open_requested = Signal(str)

    def __init__(self, row: FleetRow, metric: Metric, scale: ColorScale | None, odd: bool, parent=None, *,
                 lazy: bool = False):
        super().__init__(parent)
        self.setObjectName("fleet-tile")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._metric, self.scale, self.lazy = metric, scale, lazy
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(3, 3, 3, 3)
        self._lay.setSpacing(2)
        self.title = QLabel(self)
        self.title.setStyleSheet("font-weight: bold;")
        self._lay.addWidget(self.title)
        self.why = QLabel(self)
        self.why.setWordWrap(True)
        self.why.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self._lay.addWidget(self.why)
        self.view: TopologyView | None = None
        self.row = row
        self.setFixedSize(*TILE_SIZE)
        self.open_action = QAction(OPEN_TEXT, self)
        self.open_action.triggered.connect(lambda: self.open_requested.emit(self.row.host))
        self.set_row(row, scale, odd)

    def mouseDoubleClickEvent(self, event) -> None:
        self.open_requested.emit(self.row.host)
        event.accept()

    def contextMenuEvent(self, event) -> None:
        self.menu_at(event.globalPos())
        event.accept()

    def menu_at(self, pos: QPoint) -> None:
        menu = QMenu(self)
        menu.addAction(self.open_action)
        menu.exec(pos)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # The grid's viewport gets the clicks on most of the tile: its double-click and context menu mean
        # the host here, as on the rest of the tile (a tile's grid has no gesture of its own for either).
        if event.type() == QEvent.Type.MouseButtonDblClick:
            self.open_requested.emit(self.row.host)
            return True
        if event.type() == QEvent.Type.ContextMenu:
            self.menu_at(event.globalPos())
            return True
        return False

    def set_row(self, row: FleetRow, scale: ColorScale | None, odd: bool) -> None:
        self.row, self.scale = row, scale
        self.setStyleSheet("#fleet-tile { border: 2px solid #f0b400; }" if odd else "")
        name = f"{row.host}" + (f" — {row.name}" if row.name and row.name != row.host else "")
        self.title.setText(printable(name))
        self.setToolTip(f"double-click: {printable(row.host)} live in a window of its own"
                        + (f"\n{printable(row.note)}" if row.note else ""))
        if row.state is None:
            self.why.setText(printable(row.error))
            self.why.setStyleSheet(FAILED_CSS)
            self.why.setVisible(True)
            self._lay.setStretchFactor(self.why, 1)
            if self.view is not None:
                self.view.setVisible(False)
            return
        self.why.setText(printable(row.stale))
        self.why.setStyleSheet(STALE_CSS)
        self.why.setVisible(bool(row.stale))
        self._lay.setStretchFactor(self.why, 0)
        if self.view is None and not self.lazy:
            self._build_view()
        elif self.view is not None:
            self._apply()

    def _build_view(self) -> None:
        self.view = TopologyView(self, metric=self._metric)
        self.view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.viewport().installEventFilter(self)
        self._lay.addWidget(self.view, 1)
        self._apply()
        self.view.zoom_fit()

    def _apply(self) -> None:
        v, r = self.view, self.row
        v.setVisible(True)
        v.setEnabled(not r.stale)
        # A host not answering keeps its last grid, faded, so it reads as the past at a glance.
        if r.stale and v.graphicsEffect() is None:
            fade = QGraphicsOpacityEffect(v)
            fade.setOpacity(STALE_OPACITY)
            v.setGraphicsEffect(fade)
        elif not r.stale and v.graphicsEffect() is not None:
            v.setGraphicsEffect(None)
        v.fix_scale(self.scale)
        v.set_state(r.state)
        if r.quiet:
            v.set_quiet_cpus(r.quiet)

    def build_if_shown(self, top: int, bottom: int, y: int) -> bool:
        """A lazy tile at height `y` builds its grid once it meets the rows top..bottom in the viewport."""
        if self.view is not None or self.row.state is None or y > bottom or y + TILE_SIZE[1] < top:
            return False
        self._build_view()
        return True


class FleetGrids(QWidget):
    """The tiles in rows of `columns`, under the shared legend; `open_requested(host)` from any tile."""

    open_requested = Signal(str)

    def __init__(self, rows: list[FleetRow], metric: Metric, odd_rows: set[int], parent=None, *, columns: int = 4,
                 lazy: bool | None = None):
        """`lazy`: build grids only once scrolled into view (default: when more than LAZY_ABOVE rows)."""
        super().__init__(parent)
        self.lazy = len(rows) > LAZY_ABOVE if lazy is None else lazy
        self._metric, self.columns = metric, columns
        self.scale: ColorScale | None = None
        self.legend = ColorLegend(self)
        self._inner = QWidget(self)
        self._grid = QGridLayout(self._inner)
        self._grid.setContentsMargins(4, 4, 4, 4)
        self._grid.setSpacing(6)
        self._grid.setColumnStretch(columns, 1)
        self.by_host: dict[str, HostTile] = {}
        self.tiles: list[HostTile] = []
        self.scroll = QScrollArea(self)
        self.scroll.setWidget(self._inner)
        self.scroll.setWidgetResizable(True)
        self.scroll.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.legend)
        lay.addWidget(self.scroll, 1)
        self._lazy_timer = QTimer(self)
        self._lazy_timer.setSingleShot(True)
        self._lazy_timer.setInterval(0)
        self._lazy_timer.timeout.connect(self.build_shown)
        self.scroll.verticalScrollBar().valueChanged.connect(self._lazy_timer.start)
        self.set_rows(rows, {rows[i].host for i in odd_rows})

    def build_shown(self) -> int:
        """Build the grids of the lazy tiles now in view (after a scroll, a resize or new rows). Where a tile
        is comes from its place in the order, not its geometry: new tiles sit at (0, 0) until the layout
        has run, every one of them "in view"."""
        top = self.scroll.verticalScrollBar().value()
        bottom = top + self.scroll.viewport().height()
        m = self._grid.contentsMargins().top()
        step = TILE_SIZE[1] + self._grid.verticalSpacing()
        return sum(t.build_if_shown(top, bottom, m + (i // self.columns) * step) for i, t in enumerate(self.tiles))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._lazy_timer.start()

    def set_rows(self, rows: list[FleetRow], odd_hosts: set[str]) -> None:
        """Show `rows` in their order: new hosts get a tile, known ones are updated in place."""
        scale, label, unit, note = shared_scale(rows, self._metric)
        self.scale = scale
        hybrid = any(r.state is not None and r.state.topology.hybrid for r in rows)
        self.legend.set_scale(label, scale, unit, note, hybrid)
        lazy = self.lazy or len(rows) > LAZY_ABOVE
        order = []
        for r in rows:
            tile = self.by_host.get(r.host)
            if tile is None:
                tile = self.by_host[r.host] = HostTile(r, self._metric, scale, r.host in odd_hosts, self._inner, lazy=lazy)
                tile.open_requested.connect(self.open_requested)
            else:
                tile.set_row(r, scale, r.host in odd_hosts)
            order.append(tile)
        if order != self.tiles:
            for tile in self.tiles:
                self._grid.removeWidget(tile)
            for i, tile in enumerate(order):
                self._grid.addWidget(tile, i // self.columns, i % self.columns)
            self._grid.setRowStretch(len(order) // self.columns + 1, 1)
        self.tiles = order
        self._lazy_timer.start()

    def fit(self) -> None:
        for t in self.tiles:
            if t.view is not None:
                t.view.zoom_fit()
