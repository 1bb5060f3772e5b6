"""ResidencyPlot: one stepped CPU-over-time curve per chosen thread, and its residency share bars."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from app.machine.sample import MachineSample
from app.machine.threads import TaskSample, ThreadsSample
from app.sampling.machine_state import MachineState
from tests.gui.test_tables import LiveStates
from widgets.residency_plot import ResidencyPlot

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


def test_two_hand_made_trails_two_curves(qtbot):
    plot = ResidencyPlot()
    qtbot.addWidget(plot)
    state = hand_made_state()
    plot.set_state(state)
    plot.set_tids([101, 102])
    a, b = plot.curve(101), plot.curve(102)
    assert a is not None and b is not None and a is not b
    xa, ya = a.getData()
    assert list(ya) == [6, 11, 6, 11]
    assert list(xa) == [-10.0, -9.0, -8.0, -7.0]          # seconds before the state's sample time
    assert list(b.getData()[1]) == [3, 3]
    assert a.opts["stepMode"] == "right"                   # held from one sample to the next
    assert plot.legend.getLabel(a).text == "worker-a (101)"
    assert plot.legend.getLabel(b).text == "worker-b (102)"
    # Integer CPU ticks: exactly the CPUs the threads were seen on.
    ticks = plot.trail_plot.getAxis("left")._tickLevels[0]
    assert [v for v, _ in ticks] == [3, 6, 11] and [s for _, s in ticks] == ["3", "6", "11"]
    assert plot.shares(101) == pytest.approx({6: 0.25, 11: 0.75})
    assert plot.shares(102) == pytest.approx({3: 1.0})

    # Deselect one: its curve, legend entry and bars go; the other is untouched.
    plot.set_tids([102])
    assert plot.curve(101) is None and plot.curve(102) is b
    assert plot.legend.getLabel(a) is None
    assert plot.shares(101) == {}

    # A new tick moves the x data; no curve is recreated.
    plot.set_state(hand_made_state(now=120.0))
    assert plot.curve(102) is b
    assert list(b.getData()[0]) == [-20.0, -17.0]


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
        x, y = plot.curve(tid).getData()
        assert list(y) == [c for _, c in trail]
        assert np.allclose(x, [tt - state.sample.time for tt, _ in trail])
        assert set(plot.shares(tid)) == set(state.residency[tid])
        assert plot.legend.getLabel(plot.curve(tid)).text == f"{state.sample.tasks.tasks[tid].comm} ({tid})"
        assert {int(c) for c in y} <= set(state.topology.online)
    finally:
        stop.set()
        t.join(5)
