"""Rates between two MachineSamples, and totals of one: pure functions, no reads.

Counters are matched by identity, never by position: /proc/interrupts columns by CPU id (its
header lists online CPUs only, so a hot-plug shifts every later column), IRQ rows by label,
softirq columns by CPU id (that file lists possible CPUs), threads by (tid, starttime) because the
kernel reuses tids (Documentation/filesystems/proc.rst, /proc/PID/stat field 22 starttime).

A counter that goes down (an IRQ freed and requested again restarts at 0; 32-bit per-CPU IRQ
counts wrap; /proc/stat iowait is known to step backwards, Documentation/filesystems/proc.rst
"iowait: ... not reliable") gives 0 for that tick and a note in `resets`, never a negative rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from app.errors import CoremapError
from app.machine.sample import MachineSample
from app.parse.interrupts import InterruptTable
from app.parse.json_text import CpuId, NonNegative
from app.parse.stat import CpuTimes


@dataclass(frozen=True)
class IrqRate:
    irq: str
    per_cpu: tuple[NonNegative, ...]      # interrupts/s per CPU, in the order of Rates.cpus; () for ERR/MIS
    total: NonNegative


@dataclass(frozen=True)
class CpuRates:
    cpu: CpuId
    irq_per_s: NonNegative                          # every hard-IRQ row with per-CPU counts (device + LOC, NMI, IPI...)
    softirq_per_s: dict[str, NonNegative] = field(default_factory=dict)
    softirq_total_per_s: NonNegative = 0.0
    busy_pct: NonNegative | None = None             # % of this CPU's elapsed ticks (/proc/stat); None without stat
    user_pct: NonNegative | None = None             # user + nice
    system_pct: NonNegative | None = None
    irq_pct: NonNegative | None = None
    softirq_pct: NonNegative | None = None
    irq_softirq_pct: NonNegative | None = None
    idle_pct: NonNegative | None = None
    iowait_pct: NonNegative | None = None
    steal_pct: NonNegative | None = None


@dataclass(frozen=True)
class TaskRate:
    tid: int
    pid: int
    cpu_pct: NonNegative                      # % of one CPU
    migrations_per_s: NonNegative | None
    last_cpu: CpuId
    moved: bool                         # last_cpu changed since the previous sample
    switches_per_s: NonNegative | None        # voluntary + involuntary context switches


@dataclass(frozen=True)
class Rates:
    seconds: NonNegative
    cpus: tuple[CpuId, ...]
    per_cpu: dict[CpuId, CpuRates]
    irqs: dict[str, IrqRate]
    tasks: dict[int, TaskRate]
    new_irqs: tuple[str, ...] = ()
    vanished_irqs: tuple[str, ...] = ()
    exited_tids: tuple[int, ...] = ()
    resets: tuple[str, ...] = ()


@dataclass(frozen=True)
class IrqTotal:
    irq: str
    per_cpu: tuple[int, ...]        # counts since boot, order of Totals.cpus; () for ERR/MIS
    total: int


@dataclass(frozen=True)
class CpuTotals:
    cpu: int
    irqs: int                                   # hard IRQs since boot landing on this CPU
    softirqs: dict[str, int] = field(default_factory=dict)
    softirq_total: int = 0
    busy_pct: float | None = None               # since boot, % of this CPU's ticks
    irq_softirq_pct: float | None = None
    idle_pct: float | None = None


@dataclass(frozen=True)
class Totals:
    """One capture's counts since boot, shaped like Rates, for when no second capture exists."""
    cpus: tuple[int, ...]
    per_cpu: dict[int, CpuTotals]
    irqs: dict[str, IrqTotal]


def _cpus_of(s: MachineSample) -> tuple[int, ...]:
    if s.interrupts is not None:
        return s.interrupts.cpus
    if s.stat is not None:
        return tuple(sorted(s.stat.cpus))
    if s.softirqs is not None:
        return s.softirqs.cpus
    return ()


def _pct(d: dict[str, int], total: int, *keys: str) -> float | None:
    if total <= 0:
        return None
    return 100.0 * sum(d[k] for k in keys) / total


_TIME_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _cpu_time_deltas(prev: CpuTimes, cur: CpuTimes, cpu: int, resets: list[str]) -> dict[str, int]:
    d = {}
    for f in _TIME_FIELDS:
        v = getattr(cur, f) - getattr(prev, f)
        if v < 0:
            resets.append(f"stat cpu{cpu} {f}")
            v = 0
        d[f] = v
    return d


def _time_pcts(d: dict[str, int]) -> dict[str, float | None]:
    total = sum(d.values())
    return dict(
        busy_pct=_pct(d, total, "user", "nice", "system", "irq", "softirq", "steal"),
        user_pct=_pct(d, total, "user", "nice"),
        system_pct=_pct(d, total, "system"),
        irq_pct=_pct(d, total, "irq"),
        softirq_pct=_pct(d, total, "softirq"),
        irq_softirq_pct=_pct(d, total, "irq", "softirq"),
        idle_pct=_pct(d, total, "idle"),
        iowait_pct=_pct(d, total, "iowait"),
        steal_pct=_pct(d, total, "steal"),
    )


def _irq_rates(prev: InterruptTable, cur: InterruptTable, cpus: tuple[int, ...], seconds: float,
               resets: list[str]):
    prev_col = {c: i for i, c in enumerate(prev.cpus)}
    cur_col = {c: i for i, c in enumerate(cur.cpus)}
    # (index in current row, index in previous row) per output CPU; None where the CPU is missing
    # from either header (hot-plugged in between: no baseline, so no rate for this tick).
    pairs = [(cur_col.get(c), prev_col.get(c)) for c in cpus]
    prev_rows = {r.irq: r for r in prev.rows}
    cur_labels = set()
    irqs: dict[str, IrqRate] = {}
    new: list[str] = []
    per_cpu_sum = [0.0] * len(cpus)
    for r in cur.rows:
        cur_labels.add(r.irq)
        p = prev_rows.get(r.irq)
        if p is None or (r.numbered and p.description != r.description):
            # New, or the number was freed and handed to another device: no baseline.
            new.append(r.irq)
            continue
        if not r.counts or not p.counts:
            d = r.total - p.total
            if d < 0:
                resets.append(f"IRQ {r.irq}")
                d = 0
            irqs[r.irq] = IrqRate(r.irq, (), d / seconds)
            continue
        rates = []
        reset = False
        rc, pc = r.counts, p.counts
        for k, (ci, pi) in enumerate(pairs):
            if ci is None or pi is None:
                rates.append(0.0)
                continue
            d = rc[ci] - pc[pi]
            if d < 0:
                reset = True
                d = 0
            v = d / seconds
            rates.append(v)
            per_cpu_sum[k] += v
        if reset:
            resets.append(f"IRQ {r.irq}")
        irqs[r.irq] = IrqRate(r.irq, tuple(rates), sum(rates))
    vanished = tuple(r.irq for r in prev.rows if r.irq not in cur_labels)
    return irqs, tuple(new), vanished, per_cpu_sum


def rates(previous: MachineSample, current: MachineSample, seconds: float | None = None) -> Rates:
    """Per-IRQ, per-CPU and per-thread rates over the interval between two samples."""
    if seconds is None:
        seconds = current.time - previous.time
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise CoremapError(f"rates need a positive interval between samples, got {seconds!r} s; "
                           "take the second sample after the first")
    resets: list[str] = []
    cpus = _cpus_of(current)
    irqs: dict[str, IrqRate] = {}
    new_irqs: tuple[str, ...] = ()
    vanished: tuple[str, ...] = ()
    irq_sum = [0.0] * len(cpus)
    if previous.interrupts is not None and current.interrupts is not None:
        irqs, new_irqs, vanished, irq_sum = _irq_rates(previous.interrupts, current.interrupts, cpus,
                                                        seconds, resets)

    soft: dict[int, dict[str, float]] = {c: {} for c in cpus}
    if previous.softirqs is not None and current.softirqs is not None:
        pcol = {c: i for i, c in enumerate(previous.softirqs.cpus)}
        ccol = {c: i for i, c in enumerate(current.softirqs.cpus)}
        for kind, counts in current.softirqs.counts.items():
            pcounts = previous.softirqs.counts.get(kind)
            if pcounts is None:
                continue
            for c in cpus:
                ci, pi = ccol.get(c), pcol.get(c)
                if ci is None or pi is None:
                    continue
                d = counts[ci] - pcounts[pi]
                if d < 0:
                    resets.append(f"softirq {kind} cpu{c}")
                    d = 0
                soft[c][kind] = d / seconds

    per_cpu: dict[int, CpuRates] = {}
    pst = previous.stat.cpus if previous.stat is not None else {}
    cst = current.stat.cpus if current.stat is not None else {}
    for k, c in enumerate(cpus):
        pcts: dict[str, float | None] = {}
        if c in pst and c in cst:
            pcts = _time_pcts(_cpu_time_deltas(pst[c], cst[c], c, resets))
        per_cpu[c] = CpuRates(c, irq_sum[k], soft[c], sum(soft[c].values()), **pcts)

    tasks: dict[int, TaskRate] = {}
    exited: tuple[int, ...] = ()
    if previous.tasks is not None and current.tasks is not None:
        tick = float(current.tasks.clk_tck or 100)
        ptasks = previous.tasks.tasks
        gone = []
        for tid, p in ptasks.items():
            t = current.tasks.tasks.get(tid)
            if t is None or t.starttime != p.starttime:
                gone.append(tid)
        exited = tuple(sorted(gone))
        for tid, t in current.tasks.tasks.items():
            p = ptasks.get(tid)
            if p is None or p.starttime != t.starttime:
                continue        # new thread, or a reused tid: no baseline
            dt = t.cpu_ticks - p.cpu_ticks
            if dt < 0:
                resets.append(f"task {tid} cpu time")
                dt = 0
            mig = None
            if t.migrations is not None and p.migrations is not None:
                mig = max(t.migrations - p.migrations, 0) / seconds
            sw = None
            if None not in (t.voluntary_switches, t.involuntary_switches,
                            p.voluntary_switches, p.involuntary_switches):
                dsw = (t.voluntary_switches + t.involuntary_switches
                       - p.voluntary_switches - p.involuntary_switches)
                sw = max(dsw, 0) / seconds
            # One thread runs on one CPU at a time: above 100% is accounting skew, not load
            # (utime/stime advance in whole USER_HZ ticks, and each thread's stat is read at its own
            # moment within a sample while `seconds` spans the samples' time stamps).
            tasks[tid] = TaskRate(tid, t.pid, min(100.0, 100.0 * dt / tick / seconds), mig, t.last_cpu,
                                  t.last_cpu != p.last_cpu, sw)

    return Rates(seconds, cpus, per_cpu, irqs, tasks, new_irqs, vanished, exited, tuple(resets))


def totals(sample: MachineSample) -> Totals:
    """Counts since boot of one capture (no rates without a second one)."""
    cpus = _cpus_of(sample)
    irqs: dict[str, IrqTotal] = {}
    irq_sum = [0] * len(cpus)
    if sample.interrupts is not None:
        col = {c: i for i, c in enumerate(sample.interrupts.cpus)}
        idx = [col.get(c) for c in cpus]
        for r in sample.interrupts.rows:
            if r.counts:
                per = tuple(r.counts[i] if i is not None else 0 for i in idx)
                for k, v in enumerate(per):
                    irq_sum[k] += v
                irqs[r.irq] = IrqTotal(r.irq, per, sum(per))
            else:
                irqs[r.irq] = IrqTotal(r.irq, (), r.total)
    soft: dict[int, dict[str, int]] = {c: {} for c in cpus}
    if sample.softirqs is not None:
        col = {c: i for i, c in enumerate(sample.softirqs.cpus)}
        for kind, counts in sample.softirqs.counts.items():
            for c in cpus:
                if c in col:
                    soft[c][kind] = counts[col[c]]
    per_cpu = {}
    stat = sample.stat.cpus if sample.stat is not None else {}
    for k, c in enumerate(cpus):
        busy = irqsoft = idle = None
        if c in stat:
            t = stat[c]
            d = {f: getattr(t, f) for f in _TIME_FIELDS}
            p = _time_pcts(d)
            busy, irqsoft, idle = p["busy_pct"], p["irq_softirq_pct"], p["idle_pct"]
        per_cpu[c] = CpuTotals(c, irq_sum[k], soft[c], sum(soft[c].values()), busy, irqsoft, idle)
    return Totals(cpus, per_cpu, irqs)
