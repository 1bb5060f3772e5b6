"""File → Connect…: open another machine over ssh in this window (or this machine again), with the hosts
connected to before offered first.

The dialog checks what is typed as it is typed (app.remote.hosts.parse_host: `[user@]server[:port]`),
so OK is off for something that cannot be a host. Connecting happens off the UI thread (ssh's connect
timeout is ten seconds), on the one thread kept for it for the life of the process: the ssh started
there dies with that thread (PR_SET_PDEATHSIG follows the thread that started it), so it must not be
a thread that ends. When the agent has said hello the window switches to the machine; a host that
cannot be reached leaves the window as it was, with one line on the status line (refused, login
refused, unknown host key, ...). No password is ever asked for: ssh runs in batch mode.
"""
from __future__ import annotations

import threading
from argparse import Namespace
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QLabel, QLayout, QMenu, QVBoxLayout,
                               QWidget)

from app.errors import CoremapError
from app.host import Host
from app.remote.hosts import HostError, HostSpec, parse_host, recent_hosts, remember_host
from app.sources.live import open_host
from widgets.theme import status_style

THIS_MACHINE = "this machine"
# One thread, kept for the process's life, starts every ssh of File → Connect… (see the docstring).
_connector = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coremap-connect")


class ConnectDialog(QDialog):
    """A host to open: typed, or one of the recent ones, or this machine."""

    def __init__(self, recent: list[str], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Connect to a machine")
        self.combo = QComboBox(self)
        self.combo.setEditable(True)
        self.combo.addItems([*recent, THIS_MACHINE])
        self.combo.setCurrentIndex(0)
        self.combo.setToolTip("[user@]server[:port], or a Host of your ~/.ssh/config; ssh never asks for a "
                              "password here (batch mode), so use a key or your ssh agent")
        self.combo.setMinimumContentsLength(32)
        self.message = QLabel(self)
        self.message.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Machine to show (over ssh):", self))
        lay.addWidget(self.combo)
        lay.addWidget(self.message)
        lay.addWidget(self.buttons)
        if QGuiApplication.platformName() == "offscreen":
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)   # see widgets/main_window.py
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.combo.editTextChanged.connect(self._on_combo_text_changed)
        self._on_combo_text_changed(self.combo.currentText())

    def choice(self) -> HostSpec | None:
        """The host chosen (None: this machine); HostError when the text is not a host."""
        text = self.combo.currentText().strip()
        return None if text == THIS_MACHINE else parse_host(text)

    def _on_combo_text_changed(self, text: str) -> None:
        try:
            host = self.choice()
        except HostError as e:
            self.message.setText(str(e))
            self.message.setStyleSheet(status_style("fail", self))
            self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(False)
            return
        self.message.setStyleSheet("")
        self.message.setText("the machine coremap runs on" if host is None else
                             f"ssh {host}: the installed coremap there, or coremap's agent shipped over the "
                             "connection (only Python 3 is needed there)")
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(True)


class ConnectController(QObject):
    """File → Connect… (Ctrl+K). `show(host)` (the composition root's) puts a connected host over ssh, or
    this machine's LocalHost, in the window; `status` is the status sink."""

    connected = Signal(object)          # the Host just shown
    failed = Signal(str)
    _connect_finished = Signal()        # from the connect thread: a result waits in _results

    def __init__(self, menu: QMenu, parent: QWidget, *, show: Callable[[Host], None],
                 status: Callable[[str], None], interval: Callable[[], float]):
        super().__init__(parent)
        self._parent, self._show, self._status, self._interval = parent, show, status, interval
        self.dialog: ConnectDialog | None = None
        self._connecting: Host | None = None
        # (host, error or None) from the connect thread; no Python object rides a queued signal
        # (see widgets/sampler_thread.py for why)
        self._results: list[tuple] = []
        self._lock = threading.Lock()
        self.action = QAction("&Connect…", menu)
        self.action.setShortcut(QKeySequence("Ctrl+K"))
        self.action.setToolTip("Show another machine, live over ssh (or this one again)")
        self.action.triggered.connect(self.open_dialog)
        first = menu.actions()[0] if menu.actions() else None
        menu.insertAction(first, self.action)
        menu.insertSeparator(first)
        self._connect_finished.connect(self._on_connect_finished, Qt.ConnectionType.QueuedConnection)

    def open_dialog(self) -> ConnectDialog:
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        self.dialog = ConnectDialog(recent_hosts(), self._parent)
        self.dialog.accepted.connect(self._on_dialog_accepted)
        self.dialog.open()
        return self.dialog

    def _on_dialog_accepted(self) -> None:
        try:
            host = self.dialog.choice()
        except HostError as e:
            self._status(str(e))
            return
        self.connect_to(host)

    def connect_to(self, host: HostSpec | None) -> Future | None:
        """Connect to `host` off the UI thread, then show it; None: show this machine now."""
        if host is None:
            shown = open_host(Namespace(interval=self._interval()))
            self._show(shown)
            self.connected.emit(shown)
            return None
        if self._connecting is not None:
            self._connecting.close()
        # Opened as the command line opens `--host`, but connected on the connect thread below.
        remote = open_host(Namespace(host=str(host), interval=self._interval()), check=False)
        self._connecting = remote
        self._status(f"connecting to {host}…")

        def connect():
            error = None
            try:
                remote.connect()
            except CoremapError as e:
                error = e
            with self._lock:
                self._results.append((remote, host, error))
            self._connect_finished.emit()
        return _connector.submit(connect)

    def _on_connect_finished(self) -> None:
        with self._lock:
            results, self._results = self._results, []
        for remote, spec, error in results:
            self._take(remote, spec, error)

    def _take(self, remote: Host, spec: HostSpec, error) -> None:
        if remote is not self._connecting:
            remote.close()              # superseded by a later Connect…
            return
        self._connecting = None
        if error is not None:
            self._status(str(error))
            self.failed.emit(str(error))
            return
        try:
            remember_host(spec)
        except CoremapError as e:       # the state folder is read-only: connecting still works
            self._status(f"connected to {spec}; not remembered: {e}")
        self._show(remote)
        self.connected.emit(remote)

    def close(self) -> None:
        if self._connecting is not None:
            self._connecting.close()
            self._connecting = None
