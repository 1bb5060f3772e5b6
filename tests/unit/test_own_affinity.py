"""OwnAffinityGuard (probes/own_affinity.py) on this process: every thread leaves the probed CPUs
and each gets its own mask back. Oracle: os.sched_getaffinity per /proc/self/task entry."""
from __future__ import annotations

import os
import threading

import pytest

from app.machine.topology import read_online_cpus
from app.sysroot import SysRoot
from probes.own_affinity import OwnAffinityGuard

ONLINE = set(read_online_cpus(SysRoot("/")))


def _own_affinities() -> dict[int, set[int]]:
    out = {}
    for t in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            out[int(t)] = set(os.sched_getaffinity(int(t)))
        except ProcessLookupError:
            pass  # a thread that ended while we listed them
    return out


@pytest.mark.usefixtures("live_machine")
def test_no_cpu_left_for_coremap_means_no_move():
    g = OwnAffinityGuard()
    before = _own_affinities()
    note = g.exclude(read_online_cpus(SysRoot("/")))
    assert note is not None and "stay where they are" in note and not g.active
    assert _own_affinities() == before


@pytest.mark.skipif(len(ONLINE & os.sched_getaffinity(0)) < 2, reason="needs two online CPUs this process may use")
@pytest.mark.usefixtures("live_machine")
def test_every_thread_leaves_the_probed_cpu_and_comes_back():
    usable = sorted(ONLINE & os.sched_getaffinity(0))
    probed = usable[-1]
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="own-affinity-test")
    worker.start()
    try:
        # the worker has a mask of its own (only the probed CPU), which it must get back, not the process's
        os.sched_setaffinity(worker.native_id, {probed})
        before = _own_affinities()
        g = OwnAffinityGuard()
        assert g.exclude([probed]) is None and g.active
        during = _own_affinities()
        assert worker.native_id in during and len(during) >= 2
        assert all(probed not in m and m for m in during.values()), during
        g.restore()
        assert not g.active
        after = _own_affinities()
        assert after[worker.native_id] == {probed}
        assert all(after[t] == before[t] for t in before if t in after)
    finally:
        stop.set()
        worker.join()
