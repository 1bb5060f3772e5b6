"""FleetWindow: `coremap fleet`'s window — the hosts' grids side by side above the table of their facts.

`run_fleet_window(rows, args)`: shown until closed, or with --screenshot rendered offscreen, saved,
and closed (widgets/pictures.py's offscreen, as the main window's screenshots are).
"""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHeaderView, QLabel, QLayout, QMainWindow, QSplitter, QTableView

from app.errors import CoremapError
from app.remote.fleet import FleetRow
from widgets.application import DEFAULT_SIZE, parse_size
from widgets.colors import Metric, parse_metric
from widgets.fleet.grids import FleetGrids
from widgets.fleet.table import FleetTableModel
from widgets.harness import application
from widgets.pictures import offscreen, settle


class FleetWindow(QMainWindow):
    def __init__(self, rows: list[FleetRow], metric: Metric | str | None = None, parent=None):
        super().__init__(parent)
        self.setObjectName("coremap-fleet-window")
        metric = metric if isinstance(metric, Metric) else parse_metric(metric)
        self.model = FleetTableModel(rows, self)
        odd_rows = {i for i, _ in self.model.odd}
        self.grids = FleetGrids(rows, metric, odd_rows, self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setWordWrap(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.grids)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.setCentralWidget(split)
        bad = sum(not r.ok for r in rows)
        self.status = QLabel(self._summary(rows, bad), self)
        self.statusBar().addWidget(self.status, 1)
        self.setWindowTitle(f"fleet of {len(rows)} hosts — coremap")
        if QGuiApplication.platformName() == "offscreen":
            # As widgets/main_window.py: the offscreen platform warns about a top-level minimum size.
            self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)

    def _summary(self, rows: list[FleetRow], bad: int) -> str:
        odd = len(self.model.odd)
        text = f"{len(rows)} hosts" + (f", {bad} unreachable (in red, with why)" if bad else ", every one read")
        return text + (f" · {odd} cells set a machine apart (amber)" if odd else " · no host differs from the others")


def run_fleet_window(rows: list[FleetRow], args) -> int:
    metric = parse_metric(getattr(args, "color_by", None))
    size = parse_size(getattr(args, "size", None)) if getattr(args, "size", None) else DEFAULT_SIZE
    out = getattr(args, "screenshot", None)
    if out:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        application()
        with offscreen(lambda: FleetWindow(rows, metric), size) as window:
            window.grids.fit()
            settle()
            if not window.grab().save(str(Path(out))):
                raise CoremapError(f"--screenshot {out}: could not write the image; check the folder's permissions")
        print(f"{out}: fleet of {len(rows)} hosts")
        return 0
    app = application()
    window = FleetWindow(rows, metric)
    window.resize(*size)
    window.show()
    window.grids.fit()
    return int(app.exec())
