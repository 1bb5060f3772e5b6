"""Open this host from the streaming fleet window, on a real Prometheus scraping node_exporter here and on the
captured 12-vCPU `sno` machine (tests/engines.py): a double-click on a tile opens that host live in a main
window whose grid shows that host's CPUs, read-only, in this process; Enter on its table row raises the same
window instead of opening a second; a fleet window with no way to reach its hosts says how to open one."""
from __future__ import annotations

import argparse

import pytest
from PySide6.QtCore import Qt

from app.machine.topology import read_topology
from app.remote.fleet import FleetRow
from app.cli.fleet_sources import host_opener_of
from app.sources.prometheus import Prometheus
from app.sources.stream import FleetStream, prometheus_rounds
from app.sysroot import SysRoot
from tests.machines import extract
from widgets.fleet.window import FleetWindow
from widgets.main_window import MainWindow


@pytest.fixture(scope="module")
def prom(prometheus_stack):
    return prometheus_stack


def test_a_double_click_on_a_tile_opens_that_host_live_in_a_main_window(qtbot, prom):
    url, there = prom.urls["prometheus"], prom.urls["fixture"]
    stream = FleetStream(prometheus_rounds(Prometheus(url)), interval=1.0)
    w = FleetWindow([], "irq", stream=stream, sort="host", samplers=host_opener_of(
        argparse.Namespace(prometheus=url, pcp=None, source_config=None, captures=None, match="")))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    w.start()
    qtbot.waitUntil(lambda: there in w.grids.by_host and w.grids.by_host[there].view is not None, timeout=20000)
    tile = w.grids.by_host[there]
    qtbot.mouseDClick(tile.view.viewport(), Qt.MouseButton.LeftButton)
    window = w.opener.windows.get(there)
    assert isinstance(window, MainWindow)
    qtbot.waitUntil(lambda: window.state is not None, timeout=20000)
    fixture = read_topology(SysRoot(extract("sno")))
    assert sorted(window.topology_view.cells()) == list(fixture.online)          # that host's 12 CPUs
    assert window.state.rates is not None and not window.state.live              # coloured, read-only
    assert "prometheus" in window.windowTitle() and there in window.windowTitle()
    # Enter on its row raises the window already open rather than opening a second.
    row = next(i for i, r in enumerate(w.model.rows) if r.host == there)
    w.table.setFocus()
    w.table.setCurrentIndex(w.model.index(row, 0))
    qtbot.keyClick(w.table, Qt.Key.Key_Return)
    assert w.opener.windows == {there: window}
    assert "opened" in w.statusBar().currentMessage()
    window.close()
    assert not window.sampler_thread.running and there not in w.opener.windows
    w.close()


def test_a_fleet_window_with_no_way_to_its_hosts_says_how_to_open_one(qtbot):
    w = FleetWindow([FleetRow("node7", error="node7: refused")], "irq")
    qtbot.addWidget(w)
    assert w.open_host("node7") is None
    assert w.statusBar().currentMessage().startswith("open node7 with `coremap --host node7`")
