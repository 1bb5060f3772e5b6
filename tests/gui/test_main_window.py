"""MainWindow on the live machine and on every fixture machine; SamplerThread; --screenshot."""
from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtGui import QImage

from app.cli.main import main
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.machines import all_machines, extract
from tests.states import first_state
from app.sources.live import host_of_root
from widgets.application import build_window
from widgets.summary_bar import machine_facts


def _window(qtbot, host=None, **kw):
    w = build_window(host, **kw)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    return w


@pytest.mark.parametrize("m", all_machines(), ids=lambda m: m.name)
def test_window_opens_on_every_fixture_machine(qtbot, m):
    state = first_state(m.name)
    w = _window(qtbot)
    w.show()
    assert w.set_state(state)
    topo = state.topology
    cells = w.topology_view.cells()
    assert sorted(c for c, it in cells.items() if it.online) == sorted(topo.online)
    assert len([c for c in w.topology_view.core_items() if c.core_index >= 0]) == len(topo.cores)
    assert str(extract(m)) in w.windowTitle()
    assert "snapshot" in w.summary.text()
    assert not w.pause_action.isEnabled()         # a capture does not change: nothing to pause


def test_window_on_the_live_machine_and_stale_states_are_dropped(qtbot):
    sampler = Sampler(SysRoot("/"))
    a = sampler.tick()
    b = sampler.tick()
    w = _window(qtbot)
    w.show()
    assert w.set_state(b)
    assert not w.set_state(a)                    # older generation: dropped
    assert w.state is b
    assert "live" in w.windowTitle() and "live, every 1 s" in w.summary.text()
    assert machine_facts(b.topology)[-1].startswith("kernel ")
    assert ("irqbalance running" in w.summary.text()) or ("irqbalance not running" in w.summary.text())


def test_sampler_thread_emits_states_and_follows_controls(qtbot):
    w = _window(qtbot, host_of_root(SysRoot("/"), interval=0.25), interval=0.25)
    thread = w.sampler_thread
    try:
        with qtbot.waitSignal(thread.state_ready, timeout=5000) as first:
            thread.start()
        # Under load the worker may tick again before the UI thread takes the first state; the UI
        # then gets only the newest (stale states are dropped by generation), so >= 1, not == 1.
        assert first.args[0].generation >= 1
        with qtbot.waitSignal(w.state_applied, timeout=5000) as applied:
            pass
        state = applied.args[0]
        assert state.generation > first.args[0].generation and state.rates is not None
        with qtbot.waitSignal(thread.interval_changed, timeout=3000) as changed:
            w.interval_spin.setValue(2.0)
        assert changed.args == [2.0]
        with qtbot.waitSignal(thread.paused_changed, timeout=3000) as paused:
            w.pause_action.trigger()
        assert paused.args == [True]
        # The blocker hears the signal in the worker thread; the window's queued slot runs next.
        qtbot.waitUntil(lambda: "paused" in w.summary.text(), timeout=3000)
        with qtbot.waitSignal(thread.paused_changed, timeout=3000):
            w.pause_action.trigger()
    finally:
        thread.stop()



@pytest.mark.parametrize("where", ["capture", "live"])
def test_the_tick_line_shows_coremaps_cpu_share_only_where_ticks_follow(qtbot, where):
    """A capture is read once: a CPU share measured from the window's start to that one tick (about
    100% while Qt starts) stayed on its status line as coremap's use. A live window's next tick replaces it."""
    # Any capture is read once: sno's first tick, not master.internal's 1,874 IRQ folders (a second).
    root = SysRoot(extract("sno")) if where == "capture" else SysRoot("/")
    w = _window(qtbot, host_of_root(root, interval=0.25), interval=0.25)
    thread = w.sampler_thread
    try:
        with qtbot.waitSignal(thread.tick_seconds, timeout=5000):
            thread.start()
        qtbot.waitUntil(lambda: "tick " in w.statusBar().tick_label.text(), timeout=3000)
        line = w.statusBar().tick_label.text()
        assert ("% CPU" in line) == (where == "live"), line
        assert " MiB · tick " in line
    finally:
        thread.stop()

def test_metric_combo_recolours_the_grid(qtbot):
    state = first_state("master.internal")
    w = _window(qtbot)
    w.set_state(state)
    before = {c: it.figure for c, it in w.topology_view.cells().items()}
    w.metric_combo.setCurrentIndex(w.metric_combo.findData("softirq"))
    assert w.kind_combo.isEnabled()
    w.kind_combo.setCurrentIndex(w.kind_combo.findData("NET_RX"))
    assert w.topology_view.color_metric.key == "softirq:NET_RX"
    after = {c: it.figure for c, it in w.topology_view.cells().items()}
    assert before != after
    assert "NET_RX" in w.legend.title


def test_screenshot_writes_a_png_of_the_requested_size(qtbot, tmp_path):
    out = tmp_path / "shot.png"
    rc = main(["--root", str(extract("worker2.internal")), "--screenshot", str(out), "--size", "1000x700",
               "--color-by", "busy"])
    assert rc == 0
    img = QImage(str(out))
    assert not img.isNull() and (img.width(), img.height()) == (1000, 700)


def test_bad_root_is_one_line_on_stderr_and_exit_2(tmp_path, capsys):
    rc = main(["--root", str(tmp_path / "nowhere"), "--screenshot", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("coremap: ") and "no such folder" in err and "Traceback" not in err
    rc = main(["--root", str(extract("sno")), "--color-by", "bogus", "--screenshot", str(tmp_path / "x.png")])
    assert rc == 2 and "--color-by" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:            # argparse's own refusal: one line, status 2
        main(["--root", str(extract("sno")), "--size", "big", "--screenshot", str(tmp_path / "x.png")])
    assert stop.value.code == 2 and "--size" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_thread_selection_reaches_the_sampler_and_residency_plot(qtbot):
    w = _window(qtbot, host_of_root(SysRoot("/")))
    thread = w.sampler_thread
    sampler = thread.sampler
    state = sampler.tick()
    w.set_state(dataclasses.replace(state))
    me = next(iter(state.sample.tasks.tasks))
    thread._thread.start()
    try:
        w.thread_table.selection_changed.emit([me], [])
        qtbot.waitUntil(lambda: sampler.tracked == ((me,), ()), timeout=3000)
        assert w.residency_plot.tids == [me]
    finally:
        thread.stop()
