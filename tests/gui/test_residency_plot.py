"""ResidencyPlot: one stepped CPU-over-time curve per chosen thread, each in its own band and colour
and named, its residency share bars to 100%, a selected process as its busiest threads, and words
where there is nothing to draw (issue 23)."""
from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from app.machine.sample import MachineSample
from app.machine.threads import ProcessInfo, TaskSample, ThreadsSample
from app.sampling.machine_state import MachineState
from tests.gui.test_tables import LiveStates
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLayout

from widgets.residency_plot import EMPTY_HINT, ResidencyPlot
from widgets.residency_trails import offset

pytestmark = pytest.mark.qt_log_level_fail("WARNING")


def _task(tid, comm, cpu):
    return TaskSample(pid=100, tid=tid, comm=comm, state="R", last_cpu=cpu, utime=0, stime=0, flags=0,
                      starttime=1)


def hand_made_state(now=110.0):
    # Hand-made trails (the brief's test case): thread 101 hops between CPUs 6 and 11; 102 stays on 3.
    trails = {101: ((100.0, 6), (101.0, 11), (102.0, 6), (103.0, 11)),
              102: ((100.0, 3), (103.0, 3))}
    residency = {101: {6: 0.25, 11: 0.75}, 102: {3: 1.0}}
    tasks = ThreadsSample({101: _task(101, "worker-a", 11), 102: _task(102, "worker-b", 3)})
    return MachineState(generation=1, topology=None, sample=MachineSample(time=now, tasks=tasks),
                        trails=trails, residency=residency)


def _shown(qtbot) -> ResidencyPlot:
    plot = ResidencyPlot()
    qtbot.addWidget(plot)
    # A top-level widget offscreen: no minimum size from its layout (see widgets/pictures.offscreen).
    plot.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
    plot.resize(900, 300)
    plot.show()
    return plot


def test_two_hand_made_trails_two_curves(qtbot):
    plot = ResidencyPlot()
    qtbot.addWidget(plot)
    state = hand_made_state()
    plot.set_state(state)
    plot.set_tids([101, 102])
    a, b = plot.curve(101), plot.curve(102)
    assert a is not None and b is not None and a is not b
    xa, ya = a.getData()
    assert plot.trail(101) == [6, 11, 6, 11]
    assert list(xa) == [-10.0, -9.0, -8.0, -7.0]          # seconds before the state's sample time
    assert plot.trail(102) == [3, 3]
    assert a.opts["stepMode"] == "right"                   # held from one sample to the next
    # Each thread in its own band of its CPU's row (issue 23: trails on the same CPUs lay on one line).
    assert list(ya) == pytest.approx([c + offset(0, 2) for c in (6, 11, 6, 11)])
    assert list(b.getData()[1]) == pytest.approx([3 + offset(1, 2)] * 2)
    assert offset(0, 2) != offset(1, 2) and abs(offset(0, 2)) < 0.5 and abs(offset(1, 2)) < 0.5
    # Distinct colours, and each trail named at its newest end.
    assert a.opts["pen"].color() != b.opts["pen"].color()
    assert plot.label(101) == "worker-a (101)" and plot.label(102) == "worker-b (102)"
    # Integer CPU ticks: exactly the CPUs the threads were seen on.
    ticks = plot.plots.trail_plot.getAxis("left")._tickLevels[0]
    assert [v for v, _ in ticks] == [3, 6, 11] and [s for _, s in ticks] == ["3", "6", "11"]
    assert plot.shares(101) == pytest.approx({6: 0.25, 11: 0.75})
    assert plot.shares(102) == pytest.approx({3: 1.0})

    # Deselect one: its curve, label and bars go; the other is untouched.
    plot.set_tids([102])
    assert plot.curve(101) is None and plot.curve(102) is b
    assert plot.label(101) is None
    assert plot.shares(101) == {}

    # A new tick moves the x data; no curve is recreated.
    plot.set_state(hand_made_state(now=120.0))
    assert plot.curve(102) is b
    assert list(b.getData()[0]) == [-20.0, -17.0]


def test_the_share_axis_reaches_100_percent(qtbot):
    plot = _shown(qtbot)
    plot.set_state(hand_made_state())
    plot.set_tids([102])
    qtbot.waitUntil(lambda: plot.plots is not None)
    share = plot.plots.share_plot
    lo, hi = share.getViewBox().viewRange()[0]
    assert lo <= 0.0 and hi >= 1.0                         # issue 23: the axis was cut off before 1.0
    assert (1.0, "100%") in share.getAxis("bottom")._tickLevels[0]


def test_nothing_selected_says_so_in_words(qtbot):
    plot = _shown(qtbot)
    plot.set_state(hand_made_state())
    assert plot.showing_hint and plot.hint.text() == EMPTY_HINT
    assert plot.plots is None                              # no empty plot with a 0.1…0.9 axis is built
    plot.set_tids([999])                                   # chosen, but nothing read of it yet
    assert plot.showing_hint and plot.hint.text().startswith("Following thread 999: ")
    plot.set_tids([101])
    assert not plot.showing_hint and plot.curve(101) is not None
    plot.set_tids([])
    assert plot.showing_hint and plot.hint.text() == EMPTY_HINT


def _process_states():
    """Three thread reads of process 100 with four threads: 101-103 hop between CPUs 0 and 1, 104
    sleeps; what the plot feeds its own tracker for a selected process."""
    out = []
    for i, now in enumerate((10.0, 11.0, 12.0)):
        tasks = {tid: TaskSample(pid=100, tid=tid, comm=f"w{tid}", state="R", last_cpu=(tid + i) % 2,
                                 utime=(0 if tid == 104 else 50 * (i + 1) * (tid - 100)), stime=0, flags=0, starttime=1)
                 for tid in (101, 102, 103, 104)}
        sample = ThreadsSample(tasks, {100: ProcessInfo(100, "server", "server --port 1", tuple(tasks))})
        out.append(MachineState(generation=i + 1, topology=None, sample=MachineSample(time=now, tasks=sample)))
    return out


def test_a_selected_process_shows_its_busiest_threads(qtbot, monkeypatch):
    monkeypatch.setattr("widgets.residency_plot.MAX_SHOWN", 3)
    plot = _shown(qtbot)
    states = _process_states()
    plot.set_state(states[0])
    plot.set_selection([], [100])
    # The busiest three, by CPU time so far (no rates yet); the sleeper is left out.
    assert plot.tids == [103, 102, 101]
    assert plot.showing_hint and "process server (100)" in plot.hint.text()
    for s in states[1:]:
        plot.set_state(s)
    assert not plot.showing_hint
    assert plot.trail(103) == [0, 1] and plot.trail(101) == [0, 1]
    assert plot.shares(103) == pytest.approx({0: 0.5, 1: 0.5})
    assert plot.label(102) == "w102 (102)"
    assert "its 3 busiest of 4 threads" in plot.caption.text()
    # One of them exits: the pick is made again from the threads still there.
    gone = dataclasses.replace(states[2], generation=4, sample=MachineSample(time=13.0, tasks=ThreadsSample(
        {t: v for t, v in states[2].sample.tasks.tasks.items() if t != 102},
        {100: ProcessInfo(100, "server", "", (101, 103, 104))})))
    plot.set_state(gone)
    assert sorted(plot.tids) == [101, 103, 104]


def test_plots_follow_a_dark_palette(qtbot):
    plot = _shown(qtbot)
    plot.set_state(hand_made_state())
    plot.set_tids([101])
    qtbot.waitUntil(lambda: plot.plots is not None)
    light = plot.plots.trail_plot.backgroundBrush().color()
    dark = QPalette(plot.palette())
    dark.setColor(QPalette.ColorRole.Base, QColor(25, 25, 28))
    dark.setColor(QPalette.ColorRole.Text, QColor(235, 235, 235))
    plot.setPalette(dark)                                  # what a switch to a dark theme sends
    assert plot.plots.trail_plot.backgroundBrush().color() == QColor(25, 25, 28) != light
    assert plot.plots.trail_plot.getAxis("left").textPen().color() == QColor(235, 235, 235)


def test_live_trail_of_a_thread(qtbot):
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            sum(range(2000))
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        tid = t.native_id
        sampler = LiveStates(track=[tid])
        plot = ResidencyPlot()
        qtbot.addWidget(plot)
        plot.set_tids([tid])
        for _ in range(4):
            state = sampler.tick()
            plot.set_state(state)
            time.sleep(0.1)
        trail = state.trails[tid]
        x, _y = plot.curve(tid).getData()
        y = plot.trail(tid)
        assert y == [c for _, c in trail]
        assert np.allclose(x, [tt - state.sample.time for tt, _ in trail])
        assert set(plot.shares(tid)) == set(state.residency[tid])
        assert plot.label(tid) == f"{state.sample.tasks.tasks[tid].comm} ({tid})"
        assert {int(c) for c in y} <= set(state.topology.online)
    finally:
        stop.set()
        t.join(5)
