"""The fleet window streaming from a real Prometheus (tests/engines.py): tiles appear as hosts answer, keep
updating round after round, sort by what the Sort box says, and a host whose exporter stops keeps its last
grid, greyed, under when it was last seen."""
from __future__ import annotations

import pytest

from app.sources.prometheus import Prometheus
from app.sources.stream import FleetStream, prometheus_rounds
from tests.engines import wait_scrapes
from widgets.fleet.window import FleetWindow


@pytest.fixture(scope="module")
def prom(prometheus_stack):
    return prometheus_stack


def test_tiles_stream_in_keep_updating_sort_and_show_when_a_host_was_last_seen(qtbot, prom):
    # Rounds 0.3 s apart (the window's default is 5 s): two more rounds are waited for below, and the
    # stopped host is seen at the first round after Prometheus' next scrape.
    stream = FleetStream(prometheus_rounds(Prometheus(prom.urls["prometheus"])), interval=0.3)
    w = FleetWindow([], "irq", stream=stream, sort="busiest")
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    w.start()
    here, there = prom.urls["here"], prom.urls["fixture"]
    qtbot.waitUntil(lambda: set(w.grids.by_host) == {here, there}, timeout=20000)
    first = stream.round
    qtbot.waitUntil(lambda: stream.round >= first + 2, timeout=20000)          # it keeps reading
    # Busiest first: this machine's timer interrupts against a capture whose counters never move.
    assert [t.row.host for t in w.grids.tiles] == [here, there]
    assert w.model.rows[0].host == here
    w.sort_box.setCurrentIndex(w.sort_box.findData("host"))
    assert [t.row.host for t in w.grids.tiles] == sorted([here, there])
    prom.procs[1].terminate()                                                   # the capture's exporter stops
    prom.procs[1].wait(10)
    try:
        _the_stopped_host_fades(qtbot, w, there)
    finally:
        prom.restart(1)                         # the stack is the run's (tests/conftest.py): others read it
        wait_scrapes(prom.urls["prometheus"], 2)


def _the_stopped_host_fades(qtbot, w, there) -> None:
    tile = w.grids.by_host[there]
    qtbot.waitUntil(lambda: bool(tile.row.stale), timeout=30000)
    assert tile.why.isVisible() and tile.why.text().startswith("no answer since ")
    assert tile.view is not None and not tile.view.isEnabled()                  # its last grid, faded
    assert tile.view.graphicsEffect() is not None
    status = w.model.text(w.model.rows.index(tile.row), "Status")
    assert status == tile.row.stale
    assert "not answering now (last seen shown)" in w.status.text()
    w.close()
    assert not w.stream_thread.isRunning()
