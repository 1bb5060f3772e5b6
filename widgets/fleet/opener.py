"""HostOpener: Open this host, from the fleet window — the host's grid live in a main window of its own, in
this process, the window the command line opens for it.

- A fleet read from PCP or Prometheus opens a host as `coremap --pcp URL --host NAME` / `coremap
  --prometheus URL --host INSTANCE` does (widgets/application.py open_window, on the host the CLI's
  `samplers` factory opens: app/sources/live.py open_host), read-only as that one is. The sampler's first
  tick runs on its own thread, so a slow source never holds the fleet window up; a host the source has lost
  shows the source's one line in that window's status bar.
- An ssh fleet opens a host as `coremap --host H` does: the main window, connected off the UI thread by the
  one connect path File → Connect… takes (widgets/remote/connect.py), so the ssh runs on the thread kept for
  it; a host that cannot be reached leaves a line on that window's status bar. Its ssh is closed with it
  (the window closes the host it shows).
- A host already open is raised, not opened twice. A host that never answered (no grid) is not opened:
  the fleet's status line says why, since its window could only show the same failure.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject

from app.errors import CoremapError
from app.remote.fleet import FleetRow
from app.remote.hosts import parse_host
from widgets.application import DEFAULT_SIZE, build_window, open_window
from widgets.colors import Metric
from widgets.main_window import MainWindow


class HostOpener(QObject):
    """Opens fleet hosts in main windows. `samplers(host)`: the source's Host of a host, opened by
    app/sources/live.py open_host (None: the fleet came over ssh); `status`: the fleet window's status sink."""

    def __init__(self, samplers: Callable[[str], object] | None, status: Callable[[str], None], parent=None, *,
                 metric: Metric | str | None = None, size=DEFAULT_SIZE):
        super().__init__(parent)
        self.samplers, self._status, self.metric, self.size = samplers, status, metric, size
        self.windows: dict[str, MainWindow] = {}

    def open(self, row: FleetRow) -> MainWindow | None:
        """The window showing `row`'s host live (an open one raised), or None with why on the status line."""
        shown = self.windows.get(row.host)
        if shown is not None:
            shown.raise_()
            shown.activateWindow()
            return shown
        if row.state is None:
            self._status(f"{row.host} has not answered, so there is nothing to open: {row.error}")
            return None
        try:
            window = self._source(row) if self.samplers is not None else self._ssh(row)
        except CoremapError as e:
            self._status(str(e))
            return None
        self.windows[row.host] = window
        window.closing.connect(lambda host=row.host: self.windows.pop(host, None))
        self._status(f"opened {row.host} in a window of its own" +
                     (" (read-only: its metrics, not the host)" if self.samplers is not None else ""))
        return window

    def _source(self, row: FleetRow) -> MainWindow:
        return open_window(self.samplers(row.host), metric=self.metric, size=self.size)

    def _ssh(self, row: FleetRow) -> MainWindow:
        host = parse_host(row.host)
        window = build_window(None, metric=self.metric)
        window.resize(*self.size)
        window.show()
        window.connect_controller.connect_to(host)
        return window
