"""rates() and totals() on known inputs (exact answers), resets, CPU hot-plug, tid reuse, and
hypothesis for no crash and no negative rate."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings, strategies as st

from app.errors import CoremapError
from app.machine.sample import MachineSample, read_sample
from app.machine.threads import TaskSample, ThreadsSample
from app.parse.interrupts import InterruptRow, InterruptTable, SoftirqTable, parse_interrupts
from app.parse.stat import CpuTimes, StatSample
from app.sampling.rates import rates, totals
from app.sysroot import SysRoot
from tests.machines import INTERRUPTS_DIR


def _row(irq, counts, desc="IO-APIC 1-edge x"):
    return InterruptRow(irq, tuple(counts), sum(counts), description=desc)


def _stat(per_cpu):
    cpus = {c: CpuTimes(*v) for c, v in per_cpu.items()}
    tot = CpuTimes(*[sum(getattr(t, f) for t in cpus.values()) for f in
                     ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")])
    return StatSample(tot, cpus)


def _task(tid, utime, cpu, start=100, pid=None, mig=None, vol=None, inv=None):
    return TaskSample(pid or tid, tid, "t", "R", cpu, utime, 0, 0, start, migrations=mig,
                      voluntary_switches=vol, involuntary_switches=inv)


def test_known_rates_exact():
    a = MachineSample(
        10.0,
        InterruptTable((0, 1), (_row("24", [100, 0]), _row("LOC", [1000, 2000], "Local timer"),
                                InterruptRow("ERR", (), 3))),
        SoftirqTable((0, 1), {"NET_RX": (10, 20), "TIMER": (5, 5)}),
        _stat({0: (100, 0, 50, 800, 10, 5, 5, 0, 0, 0), 1: (0, 0, 0, 1000, 0, 0, 0, 0, 0, 0)}),
        ThreadsSample({7: _task(7, 100, 0, mig=3, vol=10, inv=2)}, clk_tck=100),
    )
    b = MachineSample(
        12.0,
        InterruptTable((0, 1), (_row("24", [300, 10]), _row("LOC", [3000, 2500], "Local timer"),
                                InterruptRow("ERR", (), 7))),
        SoftirqTable((0, 1), {"NET_RX": (30, 20), "TIMER": (9, 5)}),
        _stat({0: (150, 10, 70, 900, 10, 10, 0 + 5 + 5, 0, 0, 0), 1: (0, 0, 0, 1200, 0, 0, 0, 0, 0, 0)}),
        ThreadsSample({7: _task(7, 150, 1, mig=7, vol=15, inv=3)}, clk_tck=100),
    )
    r = rates(a, b)
    assert r.seconds == 2.0 and r.cpus == (0, 1)
    assert r.irqs["24"].per_cpu == (100.0, 5.0) and r.irqs["24"].total == 105.0
    assert r.irqs["LOC"].per_cpu == (1000.0, 250.0)
    assert r.irqs["ERR"].per_cpu == () and r.irqs["ERR"].total == 2.0
    c0 = r.per_cpu[0]
    assert c0.irq_per_s == 1100.0 and r.per_cpu[1].irq_per_s == 255.0
    assert c0.softirq_per_s == {"NET_RX": 10.0, "TIMER": 2.0} and c0.softirq_total_per_s == 12.0
    # cpu0 ticks: user 50 nice 10 system 20 idle 100 iowait 0 irq 5 softirq 5 = 190
    assert c0.busy_pct == pytest.approx(100 * 90 / 190)
    assert c0.user_pct == pytest.approx(100 * 60 / 190)
    assert c0.irq_softirq_pct == pytest.approx(100 * 10 / 190)
    assert c0.idle_pct == pytest.approx(100 * 100 / 190)
    assert r.per_cpu[1].busy_pct == 0.0 and r.per_cpu[1].idle_pct == 100.0
    t = r.tasks[7]
    assert t.cpu_pct == 25.0 and t.migrations_per_s == 2.0 and t.switches_per_s == 3.0
    assert t.moved and t.last_cpu == 1
    assert r.resets == () and r.new_irqs == () and r.vanished_irqs == ()
    assert rates(a, b, seconds=4.0).irqs["24"].total == 52.5


def test_resets_new_vanished_and_changed_owner():
    a = MachineSample(0.0, InterruptTable((0, 1), (_row("24", [100, 50]), _row("25", [1, 1]),
                                                   _row("26", [5, 5], "PCI-MSI 1-edge eth0"))))
    b = MachineSample(1.0, InterruptTable((0, 1), (_row("24", [10, 60]), _row("27", [1, 1]),
                                                   _row("26", [9, 9], "PCI-MSI 1-edge nvme0q1"))))
    r = rates(a, b)
    assert r.irqs["24"].per_cpu == (0.0, 10.0)
    assert r.resets == ("IRQ 24",)
    assert r.new_irqs == ("27", "26") and r.vanished_irqs == ("25",)
    assert "26" not in r.irqs


def test_cpu_hotplug_matches_columns_by_id():
    # CPU 1 goes offline between samples: the header shifts CPU 2's column left.
    a = MachineSample(0.0, InterruptTable((0, 1, 2), (_row("24", [10, 20, 30]),)),
                      SoftirqTable((0, 1, 2), {"SCHED": (1, 2, 3)}),
                      _stat({0: (1, 0, 0, 1, 0, 0, 0, 0, 0, 0), 1: (1, 0, 0, 1, 0, 0, 0, 0, 0, 0),
                             2: (1, 0, 0, 1, 0, 0, 0, 0, 0, 0)}))
    b = MachineSample(1.0, InterruptTable((0, 2), (_row("24", [11, 33]),)),
                      SoftirqTable((0, 1, 2), {"SCHED": (2, 2, 13)}),
                      _stat({0: (2, 0, 0, 2, 0, 0, 0, 0, 0, 0), 2: (1, 0, 0, 5, 0, 0, 0, 0, 0, 0)}))
    r = rates(a, b)
    assert r.cpus == (0, 2)
    assert r.irqs["24"].per_cpu == (1.0, 3.0) and r.resets == ()
    assert r.per_cpu[2].softirq_per_s == {"SCHED": 10.0}
    assert r.per_cpu[2].idle_pct == 100.0
    # ...and back online: CPU 1 has no baseline in the previous header, so 0 for this tick.
    r2 = rates(b, a, 1.0)
    assert r2.cpus == (0, 1, 2) and r2.irqs["24"].per_cpu[1] == 0.0
    assert r2.irqs["24"].per_cpu == (0.0, 0.0, 0.0) and "IRQ 24" in r2.resets
    assert r2.per_cpu[1].busy_pct is None


def test_tid_reuse_and_exit():
    a = MachineSample(0.0, tasks=ThreadsSample({5: _task(5, 10, 0, start=100), 6: _task(6, 10, 0)}))
    b = MachineSample(1.0, tasks=ThreadsSample({5: _task(5, 0, 0, start=999), 8: _task(8, 1, 0)}))
    r = rates(a, b)
    assert r.tasks == {} and r.exited_tids == (5, 6)


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_interval(seconds):
    s = MachineSample(1.0)
    with pytest.raises(CoremapError):
        rates(s, s, seconds)
    with pytest.raises(CoremapError):
        rates(MachineSample(2.0), MachineSample(1.0))


def test_totals_on_a_real_file():
    t = parse_interrupts((INTERRUPTS_DIR / "node_exporter" / "interrupts").read_text())
    tot = totals(MachineSample(0.0, t))
    assert tot.irqs["LOC"].per_cpu == (174326351, 135776678, 168393257, 130980079)
    assert tot.irqs["ERR"].per_cpu == () and tot.irqs["ERR"].total == 0
    assert tot.per_cpu[0].irqs == sum(r.counts[0] for r in t.rows if r.counts)
    assert tot.per_cpu[0].busy_pct is None


def test_live_two_samples():
    root = SysRoot("/")
    a = read_sample(root, tasks=True)
    time.sleep(0.2)
    b = read_sample(root, tasks=True)
    r = rates(a, b)
    assert r.cpus and r.per_cpu[r.cpus[0]].busy_pct is not None
    assert all(v >= 0 for q in r.irqs.values() for v in q.per_cpu)
    assert r.tasks and all(t.cpu_pct >= 0 for t in r.tasks.values())


_counts = st.integers(0, 2**32)


@st.composite
def _samples(draw):
    cpus = tuple(sorted(draw(st.sets(st.integers(0, 6), min_size=1, max_size=5))))
    labels = draw(st.lists(st.sampled_from(["0", "1", "24", "LOC", "NMI", "ERR"]), unique=True))
    rows = []
    for label in labels:
        if label == "ERR":
            rows.append(InterruptRow("ERR", (), draw(_counts)))
        else:
            rows.append(_row(label, draw(st.lists(_counts, min_size=len(cpus), max_size=len(cpus)))))
    soft_cpus = tuple(sorted(draw(st.sets(st.integers(0, 6), min_size=1, max_size=7))))
    soft = SoftirqTable(soft_cpus, {k: tuple(draw(st.lists(_counts, min_size=len(soft_cpus),
                                                             max_size=len(soft_cpus))))
                                    for k in draw(st.sets(st.sampled_from(["NET_RX", "TIMER"])))})
    stat = _stat({c: tuple(draw(st.lists(st.integers(0, 10**6), min_size=10, max_size=10)))
                  for c in draw(st.sets(st.integers(0, 6)))})
    tasks = ThreadsSample({tid: _task(tid, draw(st.integers(0, 10**4)), draw(st.integers(0, 6)),
                                      start=draw(st.sampled_from([1, 2])),
                                      mig=draw(st.none() | st.integers(0, 100)))
                           for tid in draw(st.sets(st.integers(1, 5)))})
    return MachineSample(draw(st.floats(0, 100)), InterruptTable(cpus, tuple(rows)), soft, stat, tasks)


@settings(max_examples=200, deadline=None)
@given(_samples(), _samples(), st.floats(0.001, 100))
def test_never_negative_never_crashes(a, b, seconds):
    r = rates(a, b, seconds)
    assert all(v >= 0 for q in r.irqs.values() for v in q.per_cpu) and all(q.total >= 0 for q in r.irqs.values())
    for c in r.per_cpu.values():
        assert c.irq_per_s >= 0 and all(v >= 0 for v in c.softirq_per_s.values())
        for f in ("busy_pct", "idle_pct", "irq_softirq_pct", "iowait_pct", "steal_pct"):
            v = getattr(c, f)
            assert v is None or 0 <= v <= 100 + 1e-9
    assert all(t.cpu_pct >= 0 and (t.migrations_per_s is None or t.migrations_per_s >= 0)
               for t in r.tasks.values())
    totals(b)


def test_a_thread_never_reads_above_one_cpu():
    # 40 ticks of CPU time over 0.3 s at USER_HZ 100 would read 133%: tick skew, clamped to 100.
    from app.machine.sample import MachineSample
    from app.machine.threads import TaskSample, ThreadsSample
    from app.sampling.rates import rates
    a = TaskSample(1, 2, "spin", "R", 0, 100, 0, 0, 5)
    b = TaskSample(1, 2, "spin", "R", 0, 140, 0, 0, 5)
    r = rates(MachineSample(0.0, tasks=ThreadsSample({2: a})), MachineSample(0.3, tasks=ThreadsSample({2: b})))
    assert r.tasks[2].cpu_pct == 100.0
