"""ResidencyTracker with hand-built samples: known CPU-time deltas on known CPUs."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from app.machine.threads import TaskSample, ThreadsSample
from app.sampling.residency import ResidencyTracker


def _t(tid, cpu, ticks, *, pid=100, start=5):
    return TaskSample(pid=pid, tid=tid, comm="w", state="R", last_cpu=cpu, utime=ticks, stime=0,
                      flags=0, starttime=start)


def _s(*tasks, hz=100):
    return ThreadsSample({t.tid: t for t in tasks}, {}, hz)


def test_delta_goes_to_the_last_seen_cpu_and_shares_sum_to_one():
    tr = ResidencyTracker(window_seconds=60)
    s0 = _s(_t(101, 0, 0), _t(102, 1, 0))
    s1 = _s(_t(101, 2, 30), _t(102, 1, 10))     # 101: 30 ticks, seen on CPU 2
    s2 = _s(_t(101, 3, 40), _t(102, 1, 10))     # 101: 10 ticks on CPU 3; 102 idle
    tr.add(1.0, s0, s1)
    tr.add(2.0, s1, s2)
    assert tr.share(101) == pytest.approx({2: 0.75, 3: 0.25})
    assert tr.seconds(101) == pytest.approx({2: 0.3, 3: 0.1})
    assert tr.share(102) == {1: 1.0}
    # pid 100 (no thread 100 tracked, so the whole process): 30 on 2, 10 on 3, 10 on 1
    assert tr.share(100) == pytest.approx({1: 0.2, 2: 0.6, 3: 0.2})
    assert tr.trail(101) == [(1.0, 2), (2.0, 3)]
    assert tr.trail(999) == [] and tr.share(999) == {}


def test_pid_means_all_threads_even_when_the_main_thread_is_tracked():
    tr = ResidencyTracker()
    s0 = _s(_t(100, 0, 0), _t(101, 1, 0))
    s1 = _s(_t(100, 0, 10), _t(101, 1, 30))
    tr.add(1.0, s0, s1)
    assert tr.share(100) == pytest.approx({0: 0.25, 1: 0.75})
    assert tr.threads_of(100) == [100, 101]


def test_only_tracked_tids_and_window_expiry():
    tr = ResidencyTracker(window_seconds=10)
    s0 = _s(_t(101, 0, 0), _t(102, 0, 0))
    s1 = _s(_t(101, 0, 50), _t(102, 1, 50))
    tr.add(1.0, s0, s1, tids=[101])
    assert tr.share(102) == {} and tr.trail(102) == []
    s2 = _s(_t(101, 1, 60))
    tr.add(5.0, s1, s2, tids=[101])
    assert tr.share(101) == pytest.approx({0: 50 / 60, 1: 10 / 60})
    s3 = _s(_t(101, 1, 70))
    tr.add(12.0, s2, s3, tids=[101])           # the tick at t=1 is now out of the 10 s window
    assert tr.share(101) == pytest.approx({1: 1.0})
    assert tr.trail(101) == [(5.0, 1), (12.0, 1)]


def test_new_thread_and_reused_tid_contribute_no_time():
    tr = ResidencyTracker()
    s0 = _s(_t(101, 0, 500, start=5))
    s1 = _s(_t(101, 1, 10, start=900), _t(103, 2, 70))   # 101 is a new thread with the same tid
    tr.add(1.0, s0, s1)
    assert tr.share(101) == {} and tr.share(103) == {}
    assert tr.trail(101) == [(1.0, 1)]
    s2 = _s(_t(101, 1, 20, start=900))                    # 103 exited: skipped, no error
    tr.add(2.0, s1, s2, tids=[101, 103])
    assert tr.share(101) == {1: 1.0}


def test_clk_tck_scales_seconds_and_order_is_enforced():
    tr = ResidencyTracker()
    tr.add(1.0, _s(_t(1, 0, 0), hz=250), _s(_t(1, 0, 250), hz=250))
    assert tr.seconds(1) == pytest.approx({0: 1.0})
    with pytest.raises(ValueError):
        tr.add(0.5, _s(), _s())
    with pytest.raises(ValueError):
        ResidencyTracker(window_seconds=0)


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 1000)), min_size=1, max_size=40))
def test_shares_always_sum_to_one(steps):
    tr = ResidencyTracker(window_seconds=1e9)
    prev, ticks = _s(_t(7, 0, 0)), 0
    expect: dict[int, int] = {}
    for i, (cpu, d) in enumerate(steps):
        ticks += d
        cur = _s(_t(7, cpu, ticks))
        tr.add(float(i + 1), prev, cur)
        if d:
            expect[cpu] = expect.get(cpu, 0) + d
        prev = cur
    sh = tr.share(7)
    if ticks == 0:
        assert sh == {}
    else:
        assert sum(sh.values()) == pytest.approx(1.0)
        assert sh == pytest.approx({c: v / ticks for c, v in expect.items()})
