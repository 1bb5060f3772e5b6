"""FleetWindow: `coremap fleet`'s window — the hosts' grids side by side above the table of their facts.

Given a FleetStream (app/sources/stream.py: a fleet read from PCP or Prometheus), the window runs it in a
FleetStreamThread and shows hosts as they answer: rows arrive as a signal, are gathered for UPDATE_MS and
applied together (a thousand hosts answering in batches cost a few layouts, not a thousand), sorted by what
the Sort box says (app.remote.fleet.SORTS: IRQs on quiet CPUs, the busiest CPU, jitter gaps/s, host name).

A double-click on a host's tile or row, Enter on a row, or Open this host in either's context menu opens
that host live in a main window of its own (widgets/fleet/opener.py): through the source's `samplers`
for a fleet read from PCP or Prometheus, over ssh for an ssh fleet (`ssh=True`); without either, the
status line says how to open it.

`run_fleet_window(rows, args, stream=None, samplers=None, ssh=False)`: shown until closed, or with --screenshot rendered offscreen,
saved, and closed (widgets/pictures.py's offscreen, as the main window's screenshots are).
"""
from __future__ import annotations

import os
import threading

from PySide6.QtCore import QThread, QTimer, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QComboBox, QHeaderView, QLabel, QLayout, QMainWindow, QSplitter, QTableView, QToolBar

from app.atomic import write_atomic
from app.remote.fleet import SORTS, FleetRow, sort_rows
from widgets.application import DEFAULT_SIZE, parse_size
from widgets.colors import Metric, parse_metric
from widgets.fleet.grids import OPEN_TEXT, FleetGrids
from widgets.fleet.opener import HostOpener
from widgets.fleet.table import FleetTableModel
from widgets.export import png_bytes
from widgets.harness import application
from widgets.pictures import offscreen, settle

UPDATE_MS = 200


class FleetStreamThread(QThread):
    """Runs a FleetStream's rounds off the UI thread. Each batch of rows goes into a locked list and
    `rows_posted` (which carries no Python object) tells the UI thread to `take()` them: as
    widgets/sampler_thread.py found, a MachineState carried by a queued signal crashed the interpreter in
    the UI thread's garbage collection (PySide6 6.11)."""

    rows_posted = Signal()

    def __init__(self, stream, parent=None):
        super().__init__(parent)
        self.stream = stream
        self._rows: list[FleetRow] = []
        self._lock = threading.Lock()
        stream.on_rows = self._post

    def _post(self, rows: list[FleetRow]) -> None:
        with self._lock:
            self._rows.extend(rows)
        self.rows_posted.emit()

    def take(self) -> list[FleetRow]:
        with self._lock:
            rows, self._rows = self._rows, []
        return rows

    def run(self) -> None:
        self.stream.run()

    def stop(self) -> None:
        self.stream.stop()
        self.wait()


class FleetWindow(QMainWindow):
    def __init__(self, rows: list[FleetRow], metric: Metric | str | None = None, parent=None, *, stream=None,
                 sort: str = "host", samplers=None, ssh: bool = False):
        super().__init__(parent)
        self.setObjectName("coremap-fleet-window")
        metric = metric if isinstance(metric, Metric) else parse_metric(metric)
        self.sort = sort
        self.rows: dict[str, FleetRow] = {r.host: r for r in rows}
        shown = sort_rows(rows, sort) if stream is not None else list(rows)
        self.model = FleetTableModel(shown, self)
        odd_rows = {i for i, _ in self.model.odd}
        # A stream may bring a thousand hosts: its tiles build their grids as they are scrolled to.
        self.grids = FleetGrids(shown, metric, odd_rows, self, lazy=True if stream is not None else None)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setWordWrap(False)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)     # a row is a host: Enter opens it
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # Columns fit the first rows, not all: with a thousand hosts, fitting every row asked the model for
        # 190,000 cells per layout and held the first tiles back by seconds (bench_fleet_sources.py).
        self.table.horizontalHeader().setResizeContentsPrecision(100)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.grids)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.setCentralWidget(split)
        self.sort_box = QComboBox(self)
        for key, (label, _) in SORTS.items():
            self.sort_box.addItem(label, key)
        self.sort_box.setCurrentIndex(list(SORTS).index(sort))
        self.sort_box.currentIndexChanged.connect(self._on_sort_changed)
        bar = QToolBar("Fleet", self)
        bar.setObjectName("fleet-toolbar")
        bar.addWidget(QLabel(" Sort by: ", self))
        bar.addWidget(self.sort_box)
        self.addToolBar(bar)
        self.status = QLabel(self._summary(shown), self)
        self.statusBar().addWidget(self.status, 1)
        self.setWindowTitle(f"fleet of {len(rows)} hosts — coremap")
        if QGuiApplication.platformName() == "offscreen":
            # As widgets/main_window.py: the offscreen platform warns about a top-level minimum size.
            self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.opener = HostOpener(samplers, self._show_message, self, metric=metric) if samplers is not None or ssh \
            else None
        self.open_action = QAction(OPEN_TEXT, self.table)
        self.open_action.setShortcuts([QKeySequence(Qt.Key.Key_Return), QKeySequence(Qt.Key.Key_Enter)])
        self.open_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.open_action.triggered.connect(self._on_open_action_triggered)
        self.table.addAction(self.open_action)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.table.doubleClicked.connect(lambda index: self.open_host(self.model.rows[index.row()].host))
        self.grids.open_requested.connect(self.open_host)
        self.stream_thread: FleetStreamThread | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(UPDATE_MS)
        self._timer.timeout.connect(self._apply)
        if stream is not None:
            self.stream_thread = FleetStreamThread(stream, self)
            self.stream_thread.rows_posted.connect(self._on_rows_posted)

    def start(self) -> None:
        if self.stream_thread is not None:
            self.stream_thread.start()

    def closeEvent(self, event) -> None:
        if self.stream_thread is not None:
            self.stream_thread.stop()
        super().closeEvent(event)

    def open_host(self, host: str):
        """Open `host` live in a window of its own (the module docstring); that window, or None."""
        row = self.rows.get(host)
        if row is None:
            return None
        if self.opener is None:
            self._show_message(f"open {host} with `coremap --host {host}` (this fleet window was given no way "
                               "to reach its hosts)")
            return None
        return self.opener.open(row)

    def _on_open_action_triggered(self) -> None:
        index = self.table.currentIndex()
        if index.isValid():
            self.open_host(self.model.rows[index.row()].host)

    def _show_message(self, text: str) -> None:
        self.statusBar().showMessage(text, 15000)

    def _on_rows_posted(self) -> None:
        for r in self.stream_thread.take():
            self.rows[r.host] = r
        if not self._timer.isActive():
            self._timer.start()

    def _on_sort_changed(self, index: int) -> None:
        self.sort = self.sort_box.itemData(index)
        self._apply()

    def _apply(self) -> None:
        shown = sort_rows(list(self.rows.values()), self.sort)
        self.model.set_rows(shown)
        self.grids.set_rows(shown, {shown[i].host for i, _ in self.model.odd})
        self.status.setText(self._summary(shown))
        self.setWindowTitle(f"fleet of {len(shown)} hosts — coremap")

    def _summary(self, rows: list[FleetRow]) -> str:
        bad = sum(not r.ok for r in rows)
        stale = sum(bool(r.stale) for r in rows)
        odd = len(self.model.odd)
        text = f"{len(rows)} hosts" + (f", {bad} unreachable (in red, with why)" if bad else ", every one read")
        if stale:
            text += f", {stale} not answering now (last seen shown)"
        return text + (f" · {odd} cells set a machine apart (amber)" if odd else " · no host differs from the others")


def run_fleet_window(rows: list[FleetRow], args, stream=None, samplers=None, ssh: bool = False) -> int:
    metric = parse_metric(getattr(args, "color_by", None))
    size = parse_size(getattr(args, "size", None)) if getattr(args, "size", None) else DEFAULT_SIZE
    sort = getattr(args, "sort", None) or "host"
    out = getattr(args, "screenshot", None)
    if out:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        application()
        # A screenshot shows the fleet as one round found it: the rows given, no stream running.
        with offscreen(lambda: FleetWindow(rows, metric, sort=sort, stream=None), size) as window:
            window.grids.fit()
            settle()
            write_atomic(out, png_bytes(window))     # the one writer (app/atomic.py)
        print(f"{out}: fleet of {len(rows)} hosts")
        return 0
    app = application()
    window = FleetWindow(rows, metric, stream=stream, sort=sort, samplers=samplers, ssh=ssh)
    window.resize(*size)
    window.show()
    window.grids.fit()
    window.start()
    return int(app.exec())
