"""app.sampling.sampler.Sampler on the live machine and on real fixture machines (no Qt)."""
from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time

import pytest

from app.sampling.sampler import ONE_CAPTURE_NOTE, Sampler, clamp_interval
from app.sysroot import SysRoot
from tests.machines import extract



@pytest.fixture(autouse=True)
def threads_read_every_tick(request, monkeypatch):
    """These tests read the thread list every tick; on a machine busy with other work (thousands of
    threads, e.g. a churn benchmark) the sampler would read it every 3 s instead (app/sampling/sampler.py
    THREAD_SLOW_AT). The test of that slow mode keeps the real threshold."""
    import app.sampling.sampler as sampler_mod
    if "thousands" not in request.node.name:
        monkeypatch.setattr(sampler_mod, "THREAD_SLOW_AT", 1 << 30)

class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_live_first_state_has_no_rates_second_has_rates_for_every_online_cpu():
    s = Sampler(SysRoot("/"), interval=0.25)
    first = s.tick()
    time.sleep(0.05)
    second = s.tick()
    assert (first.generation, second.generation) == (1, 2)
    assert first.rates is None
    assert second.rates is not None
    assert set(second.rates.per_cpu) == set(s.topology.online)
    assert second.live and second.source == "live"
    assert second.sample.tasks is not None and os.getpid() in {t.pid for t in second.sample.tasks.tasks.values()}
    # The process's own thread ran between the ticks: it has a rate.
    assert threading.get_native_id() in second.rates.tasks


def test_irq_table_is_refreshed_every_few_seconds_not_every_tick():
    clock = FakeClock()
    s = Sampler(SysRoot("/"), irq_refresh_seconds=5.0, clock=clock)
    a = s.tick()
    clock.now += 1.0
    b = s.tick()
    assert a.irqs is not None and b.irqs is a.irqs        # the same table object: not re-read
    clock.now += 5.0
    c = s.tick()
    assert c.irqs is not a.irqs


def test_a_dear_irq_read_is_made_less_often_and_again_after_a_pin(monkeypatch):
    """Reading every IRQ's folder costs 140-310 ms on a 1,862-IRQ server: it is re-read at most
    IRQ_BUDGET of a core (here a read made to take 0.08 s: every 8 s, not 5), the state says so, and
    a pin (forget_threads, with no pids for an IRQ) has the next tick read them again."""
    import app.sampling.sampler as sampler_module
    real = sampler_module.read_irqs

    def slow(root):
        time.sleep(0.08)
        return real(root)
    monkeypatch.setattr(sampler_module, "read_irqs", slow)
    clock = FakeClock()
    s = Sampler(SysRoot("/"), irq_refresh_seconds=5.0, clock=clock)
    a = s.tick()
    assert s.irq_period >= 0.08 / sampler_module.IRQ_BUDGET
    assert any("IRQs: their affinities are read every" in n for n in a.notes)
    clock.now += 6.0
    assert s.tick().irqs is a.irqs                         # 6 s: not yet, the read is dear
    s.forget_threads([])
    assert s.tick().irqs is not a.irqs                     # after a pin: read at once


def test_residency_of_a_tracked_busy_thread():
    s = Sampler(SysRoot("/"))
    me = threading.get_native_id()
    s.track([me], [os.getpid()])
    s.tick()
    end = time.thread_time() + 0.15
    while time.thread_time() < end:    # burn CPU so this thread has time to attribute
        pass
    state = s.tick()
    assert me in state.residency
    share = state.residency[me]
    assert abs(sum(share.values()) - 1.0) < 1e-9
    assert set(share) <= set(s.topology.online)
    assert me in state.trails and state.trails[me][-1][1] in s.topology.online
    assert s.tracked == ((me,), (os.getpid(),))


def test_one_capture_fixture_has_totals_only_and_says_so():
    root = SysRoot(extract("worker1.internal"))
    s = Sampler(root)
    a, b = s.tick(), s.tick()
    assert a.rates is None and b.rates is None
    assert ONE_CAPTURE_NOTE in a.notes
    assert not a.live and a.source == str(root.root)
    assert b.generation == a.generation + 1
    assert b.sample is a.sample                     # a capture is read once
    assert a.sample.interrupts is not None and len(a.sample.interrupts.cpus) == 80
    assert a.irqs is not None
    assert a.topology.isolcpus                      # worker1 boots with isolcpus=managed_irq,...


def _bump_loc(text: str, col: int, by: int) -> str:
    """The LOC row with CPU column `col` raised by `by`, keeping the column width."""
    out = []
    for line in text.splitlines(keepends=True):
        m = re.match(r"^(\s*LOC:)(.*)$", line.rstrip("\n"))
        if m:
            fields = re.findall(r"\s+\S+", m.group(2))
            n = fields[col]
            value = int(n)
            fields[col] = str(value + by).rjust(len(n))
            line = m.group(1) + "".join(fields) + "\n"
        out.append(line)
    return "".join(out)


def test_snapshot_with_second_capture_gives_rates_from_the_pair(tmp_path):
    src = extract("worker1.internal")
    root = tmp_path / "snap"
    (root / "proc").mkdir(parents=True)
    os.symlink(src / "sys", root / "sys")
    for name in os.listdir(src / "proc"):
        p = src / "proc" / name
        if p.is_file():
            shutil.copy(p, root / "proc" / name)
        else:
            os.symlink(p, root / "proc" / name)
    meta = root / ".coremap"
    (meta / "t1" / "proc").mkdir(parents=True)
    (meta / "meta.json").write_text(json.dumps({"interval": 2.0}))
    text = (src / "proc" / "interrupts").read_text()
    (meta / "t1" / "proc" / "interrupts").write_text(_bump_loc(text, 3, 2000))
    shutil.copy(src / "proc" / "softirqs", meta / "t1" / "proc" / "softirqs")

    s = Sampler(SysRoot(root))
    state = s.tick()
    assert state.rates is not None
    assert ONE_CAPTURE_NOTE not in state.notes
    cpu3 = state.sample.interrupts.cpus[3]
    assert state.rates.per_cpu[cpu3].irq_per_s == pytest.approx(1000.0)   # 2000 in 2 s
    others = [r.irq_per_s for c, r in state.rates.per_cpu.items() if c != cpu3]
    assert max(others) == 0.0
    assert s.tick().rates is state.rates


def test_refresh_topology_gives_the_next_state_the_new_topology():
    s = Sampler(SysRoot(extract("master.internal")))
    a = s.tick()
    t = s.refresh_topology()
    b = s.tick()
    assert b.topology is t and a.topology is not t
    assert len(t.online) == 112


def test_interval_is_clamped_to_what_the_window_offers():
    assert clamp_interval(0.01) == 0.25
    assert clamp_interval(60) == 5.0
    assert Sampler(SysRoot(extract("sno")), interval=2).interval == 2.0


def test_thousands_of_threads_are_read_less_often_than_the_counters(monkeypatch):
    import app.sampling.sampler as sampler_mod
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(sampler_mod.THREAD_SLOW_AT)]
    for t in threads:
        t.start()
    try:
        # Any measured cost is over a budget this small: the period goes to its maximum.
        monkeypatch.setattr(sampler_mod, "THREAD_BUDGET", 1e-12)
        clock = FakeClock()
        s = Sampler(SysRoot("/"), interval=1.0, clock=clock)
        a = s.tick()
        assert s.thread_period == sampler_mod.MAX_THREAD_PERIOD
        clock.now += 1.0
        b = s.tick()
        assert b.sample.tasks is a.sample.tasks                  # carried, not re-read
        assert b.sample.interrupts is not a.sample.interrupts    # counters read every tick
        assert b.rates is not None and b.rates.tasks == {}       # no thread rates before a 2nd read
        assert "thread list is read every 5 s" in b.notes[0]
        clock.now += 4.0
        c = s.tick()
        assert c.sample.tasks is not a.sample.tasks
        assert c.rates.tasks and threading.get_native_id() in c.rates.tasks
        clock.now += 1.0
        d = s.tick()
        assert d.rates.tasks is c.rates.tasks                    # thread rates carried between reads
    finally:
        stop.set()


def test_between_full_irq_reads_only_the_affinities_are_read(monkeypatch):
    """Every irq_period the IRQs' requested and effective CPUs are read again (refresh_affinities);
    the whole folders (node, hint, device, managed) at the first tick, every IRQ_FULL_SECONDS and
    after a pin."""
    import app.sampling.sampler as sampler_module
    full, light = [], []
    real_full, real_light = sampler_module.read_irqs, sampler_module.refresh_affinities
    monkeypatch.setattr(sampler_module, "read_irqs", lambda root: full.append(1) or real_full(root))
    monkeypatch.setattr(sampler_module, "refresh_affinities",
                        lambda root, table: light.append(1) or real_light(root, table))
    clock = FakeClock()
    s = Sampler(SysRoot("/"), irq_refresh_seconds=5.0, clock=clock)
    a = s.tick()
    assert (len(full), len(light)) == (1, 0)
    clock.now += 6.0
    b = s.tick()
    assert (len(full), len(light)) == (1, 1)
    assert b.irqs.info.keys() == a.irqs.info.keys()
    assert all(b.irqs.info[k] is a.irqs.info[k] for k in a.irqs.info)   # nothing moved: same objects
    clock.now += sampler_module.IRQ_FULL_SECONDS
    s.tick()
    assert len(full) == 2
    s.forget_threads([])
    s.tick()
    assert len(full) == 3
