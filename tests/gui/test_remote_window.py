"""The window on a machine over ssh (the real test server of tests/remote/sshd.py): it says which host,
marks a stale state when the link drops and goes live again; File → Connect… switches machines or says
in one line why it cannot; the fleet window's table and grids."""
from __future__ import annotations

import os

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from app.pinning.service import PinRequest, PinTarget
from app.remote.fleet import FleetRow, odd_cells
from app.remote.hosts import parse_host, recent_hosts
from app.host import CaptureHost
from app.remote.host import RemoteHost
from app.remote.pins import RemoteAffinityService
from app.sysroot import SysRoot
from tests.machines import extract
from tests.states import first_state
from tests.remote.conftest import remote_env, sshd  # noqa: F401  (fixtures)
from widgets.application import build_window, show_host
from widgets.fleet.table import ODD_COLOR, FleetTableModel
from widgets.fleet.window import FleetWindow
from widgets.remote.connect import ConnectDialog


@pytest.fixture
def remote_window(qtbot, remote_env):
    host = RemoteHost(parse_host("s1"), interval=0.25)
    host.connect()
    window = build_window(host, interval=0.25)
    qtbot.addWidget(window)
    window.resize(1200, 800)
    window.show()
    window.sampler_thread.start()
    yield window
    window.close()


def _wait_state(qtbot, window, cond, timeout=20000):
    qtbot.waitUntil(lambda: window.state is not None and cond(window.state), timeout=timeout)
    return window.state


def test_the_window_says_which_host_and_pins_and_probes_go_there(qtbot, remote_window):
    w = remote_window
    state = _wait_state(qtbot, w, lambda s: s.rates is not None)
    assert state.host == "s1"
    assert w.windowTitle() == f"{state.topology.hostname} (over ssh s1, live) — coremap"
    assert "over ssh s1" in w.summary.text() and "STALE" not in w.summary.text()
    assert isinstance(w.pin_controller.service, RemoteAffinityService)
    assert w.probe_panel.controller._remote
    # The drop policy asks the server (a CPU the machine lacks is refused there, in its words) without
    # waiting on the network: the first ask lets the drag go on, a later one (drags ask on every move)
    # has the server's answer.
    req = PinRequest((PinTarget("thread", 1),), (4095,))
    assert w.pin_controller.check(req) == []
    qtbot.waitUntil(lambda: bool(w.pin_controller.check(req)), timeout=10000)
    reasons = w.pin_controller.check(req)
    assert reasons and "does not exist on this machine" in reasons[0]


def test_a_dropped_link_is_marked_stale_then_live(qtbot, remote_window, sshd, monkeypatch):
    from app.remote import sampler as sampler_mod
    monkeypatch.setattr(sampler_mod, "BACKOFF", (0.2, 2.0))    # the wait before reconnecting, not checked here
    w = remote_window
    _wait_state(qtbot, w, lambda s: s.rates is not None)
    sshd.drop_connections()
    state = _wait_state(qtbot, w, lambda s: bool(s.stale))
    assert "disconnected — reconnecting" in state.stale
    assert "STALE" in w.summary.text() and "STALE" in w.windowTitle()
    assert w.status_label.text().startswith("disconnected — reconnecting")
    _wait_state(qtbot, w, lambda s: not s.stale and s.sample.tasks is not None, timeout=30000)
    assert "STALE" not in w.summary.text() and w.windowTitle().endswith("(over ssh s1, live) — coremap")


def test_connect_dialog_refuses_what_is_not_a_host(qtbot):
    d = ConnectDialog(["root@node7:2222"])
    qtbot.addWidget(d)
    ok = d.buttons.button(QDialogButtonBox.StandardButton.Ok)
    assert d.combo.currentText() == "root@node7:2222" and ok.isEnabled()
    d.combo.setEditText("-oProxyCommand=touch /tmp/x")
    assert not ok.isEnabled() and "is not a host name" in d.message.text()
    d.combo.setEditText("this machine")
    assert ok.isEnabled() and d.choice() is None


def test_connect_switches_machines_or_says_why_not(qtbot, remote_env):
    window = build_window(None)
    qtbot.addWidget(window)
    show_host(window, CaptureHost(SysRoot(extract("sno"))))
    thread = window.sampler_thread
    _wait_state(qtbot, window, lambda s: True)
    before = window.state
    c = window.connect_controller
    with qtbot.waitSignal(c.failed, timeout=20000) as failed:
        c.connect_to(parse_host("refused"))
    assert failed.args[0].startswith("refused: the connection was refused")
    assert window.state is before and window.sampler_thread is thread
    with qtbot.waitSignal(c.connected, timeout=20000):
        c.connect_to(parse_host("node-a"))
    state = _wait_state(qtbot, window, lambda s: s.host == "node-a")
    assert isinstance(window.host, RemoteHost) and window.sampler_thread is not thread
    assert recent_hosts()[0] == "node-a"
    assert state.topology.hostname == os.uname().nodename
    window.close()


def _rows():
    from app.remote.fleet import top_irq
    rows = []
    for name, host in (("worker1.internal", "w1"), ("worker2.internal", "w2"), ("master.internal", "m")):
        state = first_state(name)          # read once per process (tests/states.py)
        facts = (("Model", state.topology.model_name), ("Kernel", state.topology.kernel_release or "?"))
        rows.append(FleetRow(host, name, facts, top_irq(state), state, seconds=1.0))
    rows.append(FleetRow("gone", error="gone: the connection was refused on its ssh port"))
    return rows


def test_fleet_table_highlights_the_machine_that_differs(qtbot, qtmodeltester):
    rows = _rows()
    model = FleetTableModel(rows)
    qtmodeltester.check(model)
    odd = odd_cells(rows)
    assert odd, "the three captures differ in model or kernel"
    (i, col), why = next(iter(odd.items()))
    idx = model.index(i, model.columns.index(col))
    assert model.data(idx, 8).color() == ODD_COLOR          # BackgroundRole
    assert "stands out" in model.data(idx, 3)               # ToolTipRole
    gone = model.index(3, model.columns.index("Status"))
    assert model.data(gone) == "gone: the connection was refused on its ssh port"


def test_fleet_window_grids_share_one_scale(qtbot):
    w = FleetWindow(_rows(), "irq")
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    views = [t.view for t in w.grids.tiles if t.view is not None]
    assert len(views) == 3
    assert all(v.color_scale == w.grids.scale for v in views)
    assert w.status.text().startswith("4 hosts, 1 unreachable")


def test_a_saved_session_and_a_report_of_a_remote_machine_say_which_host(qtbot, remote_window, tmp_path,
                                                                          monkeypatch):
    from functools import partial

    from app.remote import host as remote_host
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path))
    # The server's two captures of the counters 0.1 s apart (0.5 s in the window): their gap is not checked.
    monkeypatch.setattr(remote_host, "capture_session", partial(remote_host.capture_session, interval=0.1))
    w = remote_window
    state = _wait_state(qtbot, w, lambda s: s.rates is not None)
    session = w.session_controller.session()
    assert session.host == state.topology.hostname
    assert (session.machine_dir / "sys" / "devices" / "system" / "cpu").is_dir()
    path = w.session_controller.export_report("html")
    assert path.name.startswith(f"coremap-{state.topology.hostname.split('.')[0]}-")
    assert state.topology.hostname in path.read_text()


def test_cpus_dropped_on_the_probe_panel_are_checked_against_the_machine_shown(qtbot):
    from dataclasses import replace

    from widgets.probe.panel import ProbePanel
    panel = ProbePanel()
    qtbot.addWidget(panel)
    state = replace(first_state("master.internal"), live=True)
    far = (max(state.topology.online),)            # CPU 111: not one this test process may use
    panel.drop.set_state(state)
    assert "not in coremap's allowed CPUs" in panel.drop.refused(far)
    panel.drop.set_state(replace(state, host="s1"))
    assert panel.drop.refused(far) is None         # the agent's child checks it there
