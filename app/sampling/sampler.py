"""Sampler: one MachineState per tick, for the window (driven by widgets/sampler_thread.py) or any
other consumer. No Qt here.

Each `tick()` reads one MachineSample (counters and threads; the TaskReader is reused so its caches
of command lines survive from tick to tick), computes rates against the previous sample, refreshes
the per-IRQ table (affinity, device) only every few seconds because on a big machine it is thousands
of files, feeds the residency tracker the threads the user selected, and raises the generation.

A captured machine (a fixture or a `coremap snapshot` folder) does not change: its one or two
captures are read on the first tick and later ticks hand out the same figures under a new
generation. With a second capture (`SysRoot.later()`) the rates come from the pair; with one
capture there are no rates (state.rates is None) and the notes say so, so that a count since boot
is never shown as a rate.
"""
from __future__ import annotations

import math
import statistics
import time
from collections import deque
from dataclasses import replace
from collections.abc import Iterable

from app.sampling.cpu_power import PowerReader
from app.sampling.interval import MAX_INTERVAL, MIN_INTERVAL, clamp_interval  # noqa: F401 (others import it here)
from app.sampling.java_names import JavaNameReader
from app.machine.interrupts import read_irqs, refresh_affinities
from app.machine.sample import MachineSample, read_sample, read_snapshot_pair
from app.machine.thread_names import NO_THREAD_NAMES, read_captured_names
from app.machine.threads import TaskReader
from app.machine.topology import Topology, read_topology
from app.parse.interrupts import RowMemo
from app.sampling.rates import rates as compute_rates
from app.sampling.residency import ResidencyTracker
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot

ONE_CAPTURE_NOTE = "one capture only: totals shown, not rates"
THREAD_BUDGET = 0.01        # share of one core the thread list may cost (read time / period)
MAX_THREAD_PERIOD = 5.0
# From THREAD_SLOW_AT threads on, the list is read at most this often even when reading is cheap:
# applying it costs the window's UI thread ~8 ms (the sorting proxy re-sorts and the tree repaints),
# which every second would be ~0.8% of a core on its own (tests/benchmarks/bench_gui.py, CPU use).
SLOW_THREAD_PERIOD = 3.0
THREAD_SLOW_AT = 1000       # threads; below this the thread list is read on every tick
# The IRQs' affinities, nodes and devices are re-read every irq_refresh_seconds, or less often where
# that read would cost more than IRQ_BUDGET of a core: 1,862 IRQs (master.internal) take 140-310 ms,
# which every 5 s would be 3-6% of a core. A pin, undo or restore asks for the next tick's read.
IRQ_BUDGET = 0.01
# Between full reads of the IRQs' folders only their requested and effective CPUs are read again (a
# third of the files); the full read comes when IRQs come or go, after a pin, and this often.
IRQ_FULL_SECONDS = 60.0
DETAIL_BUSIEST = 32        # busiest threads whose migrations/switches are read each thread read


class Sampler:
    """Turns a SysRoot into a stream of MachineStates; see the module docstring."""

    def __init__(self, root: SysRoot, *, interval: float = 1.0, irq_refresh_seconds: float = 5.0,
                 residency_window: float = 60.0, clock=time.monotonic):
        self.root = root
        self.live = root.is_live
        self.interval = clamp_interval(interval)
        self.irq_refresh_seconds = irq_refresh_seconds
        self.irq_period = irq_refresh_seconds   # grows with the read's cost (IRQ_BUDGET)
        self.source = "live" if self.live else str(root.root)
        self._clock = clock
        self.topology: Topology = read_topology(root)
        self.generation = 0
        self._reader = TaskReader(root, clock=clock) if self.live else None
        # Full Java thread names (app/sampling/java_names.py): read seldom, by a worker of its own.
        self._java = JavaNameReader(root, clock=clock) if self.live else None
        # idle states and frequency (issue 22); MSRs only of CPUs no one asked to keep quiet
        quiet = set(self.topology.isolated) | set(self.topology.nohz_full)
        self._power = PowerReader(root, self.topology.online, interval=self.interval, clock=clock,
                                  msr_cpus=[c for c in self.topology.online if c not in quiet])
        # A capture's Java names were read when it was taken, and it stores them (app/store/capture_threads.py).
        self._thread_names = NO_THREAD_NAMES if self.live else read_captured_names(root)
        self._memo = RowMemo() if self.live else None     # unchanged lines of proc/interrupts
        self._previous: MachineSample | None = None
        self._irqs = None
        self._irqs_at: float | None = None
        self._irqs_full_at: float | None = None
        self._tracker = ResidencyTracker(residency_window)
        self._tids: tuple[int, ...] = ()
        self._pids: tuple[int, ...] = ()
        self._frozen: tuple | None = None      # (sample, rates, notes) of a captured machine
        self._task_sample: MachineSample | None = None   # the last sample that read the threads
        self._task_rates = None                          # Rates between the last two thread reads
        # pid -> {tid: TaskRate} of the processes the last read reused (TaskReader.same), to hand out again
        self._rates_of: dict[int, dict] = {}
        self._costs: deque[float] = deque(maxlen=5)      # seconds the last thread reads took (with rates)
        self._tasks_due = 0.0
        self.thread_period = self.interval

    # -- control -----------------------------------------------------------------------------------
    def track(self, tids: Iterable[int], pids: Iterable[int] = ()) -> None:
        """Follow where these threads (and every thread of these processes) run."""
        self._tids = tuple(dict.fromkeys(int(t) for t in tids))
        self._pids = tuple(dict.fromkeys(int(p) for p in pids))

    @property
    def tracked(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self._tids, self._pids

    def forget_threads(self, pids: Iterable[int] | None = None) -> None:
        """Read these processes' threads (all when None) afresh at the next thread read instead of
        reusing them (app/machine/threads.py), and the IRQs at the next tick: call it after changing
        their affinity or priority, or an IRQ's (with no pids)."""
        if self._reader is not None:
            self._reader.forget(None if pids is None else [int(p) for p in pids])
        self._tasks_due = 0.0
        self._irqs_at = self._irqs_full_at = None   # an IRQ the pin moved shows its new affinity next tick

    def refresh_topology(self) -> Topology:
        """Re-read the topology (after a CPU went on/offline); the next state carries the new one."""
        self.topology = read_topology(self.root)
        self._irqs_at = self._irqs_full_at = None
        return self.topology

    def set_interval(self, seconds: float) -> float:
        self.interval = clamp_interval(seconds)
        self.thread_period = max(self.thread_period, self.interval)
        self._tasks_due = 0.0       # re-measure the thread read at the new pace
        return self.interval

    # -- one tick ----------------------------------------------------------------------------------
    def tick(self) -> MachineState:
        if not self.live:
            return self._tick_captured()
        now = self._clock()
        want_tasks = self._task_sample is None or now >= self._tasks_due
        t0 = time.perf_counter()
        if want_tasks:
            self._reader.detail_tids = self._detail_tids()
        sample = read_sample(self.root, tasks=want_tasks, reader=self._reader, memo=self._memo)
        cost = time.perf_counter() - t0
        previous, self._previous = self._previous, sample
        rates = None
        if previous is not None and sample.time > previous.time:
            rates = compute_rates(_counters_of(previous), _counters_of(sample), sample.time - previous.time)
        if want_tasks:
            self._read_tasks_done(sample, now, cost)
            self._thread_names = (self._java.update(sample.tasks) if sample.tasks is not None
                                  else self._java.collect())
        else:
            self._thread_names = self._java.collect()
            sample = replace(sample, tasks=self._task_sample.tasks)
        if rates is not None and self._task_rates is not None:
            rates = replace(rates, tasks=self._task_rates.tasks, exited_tids=self._task_rates.exited_tids)
        if self._irqs_at is None or now - self._irqs_at >= self.irq_period:
            t1 = time.perf_counter()
            if self._irqs is None or self._irqs_full_at is None or now - self._irqs_full_at >= IRQ_FULL_SECONDS \
                    or _numbered(sample) != self._irqs.info.keys():
                self._irqs = read_irqs(self.root)
                self._irqs_full_at = now
            else:
                self._irqs = refresh_affinities(self.root, self._irqs)
            self._irqs_at = now
            self.irq_period = max(self.irq_refresh_seconds, (time.perf_counter() - t1) / IRQ_BUDGET)
        notes: list[str] = []
        if self.thread_period > self.interval:
            n = len(sample.tasks.tasks) if sample.tasks is not None else 0
            notes.append(f"{n:,} threads: the thread list is read every {self.thread_period:g} s, "
                         f"counters every {self.interval:g} s (keeps coremap's own CPU use low)")
        if self.irq_period > self.irq_refresh_seconds and self._irqs is not None:
            notes.append(f"{len(self._irqs.info):,} IRQs: their affinities are read every {self.irq_period:.0f} s "
                         "(and after every pin), counts every tick")
        notes.extend(self.topology.notes)
        return self._state(sample, rates, tuple(notes))

    def _read_tasks_done(self, sample: MachineSample, now: float, cost: float) -> None:
        """Rates and residency of threads between this thread read and the previous one; when the
        next read is due. Reading every thread's stat costs ~10 us a thread (open+read+close of
        /proc/PID/task/TID/stat), so with thousands of threads it is read less often than the
        counters: at most THREAD_BUDGET of one core, and at least every MAX_THREAD_PERIOD.

        Most reads reuse the processes that did not run and cost a few ms; a read that re-reads a big
        process (its reuse expired, app/machine/threads.py REUSE_SECONDS) or the first one costs tens.
        The pace follows the median cost of the last few reads, so such a read does not slow the
        list down for seconds; the rare dear ones stay within the budget on average."""
        t0 = time.perf_counter()
        prev, self._task_sample = self._task_sample, sample
        if (prev is not None and prev.tasks is not None and sample.tasks is not None
                and sample.time > prev.time):
            self._task_rates = self._thread_rates(prev, sample)
            self._tracker.add(sample.time, prev.tasks, sample.tasks, self._tracked_tids(sample))
        else:
            self._rates_of = {}     # no rates for this pair: none to hand out next
        n = len(sample.tasks.tasks) if sample.tasks is not None else 0
        self._costs.append(cost + time.perf_counter() - t0)
        cost = statistics.median(self._costs)
        # Below THREAD_SLOW_AT threads the list is cheap: read it every tick, whatever the load.
        period = self.interval if n < THREAD_SLOW_AT else min(
            MAX_THREAD_PERIOD, max(self.interval, SLOW_THREAD_PERIOD, cost / THREAD_BUDGET))
        ticks = max(1, math.ceil(period / self.interval - 1e-9))
        self.thread_period = ticks * self.interval
        # Half a tick early, so timer jitter does not push the read one tick later.
        self._tasks_due = now + (ticks - 0.5) * self.interval if ticks > 1 else now

    def _thread_rates(self, prev: MachineSample, sample: MachineSample):
        """Rates of the threads between two thread reads, computed only for processes that ran.

        The TaskReader reuses a process's TaskSample objects when none of its threads ran
        (app/machine/threads.py) and names those processes (`TaskReader.same`): their deltas are zero,
        CPU 0 %, no migrations or switches, same CPU, not moved, whatever the interval. If that held
        for the previous pair as well, the previous TaskRates equal the new ones: they are handed out
        again (the same objects, so the thread table sees an unchanged process by identity), a dict
        per process, and app.sampling.rates computes only the other processes' threads."""
        same = self._reader.same
        known_pids = same & self._rates_of.keys()
        known: dict = {}
        for pid in known_pids:
            known.update(self._rates_of[pid])
        p, c = _tasks_of(prev), _tasks_of(sample)
        if known_pids:
            p = replace(p, tasks=replace(p.tasks, tasks=_tasks_but(prev.tasks, known_pids)))
            c = replace(c, tasks=replace(c.tasks, tasks=_tasks_but(sample.tasks, known_pids)))
        r = compute_rates(p, c, sample.time - prev.time)
        r.tasks.update(known)       # still private to this sampler: no state holds r yet
        rates_of = {}
        for pid in same:
            had = self._rates_of.get(pid) if pid in known_pids else None
            if had is None:
                tids = sample.tasks.processes[pid].tids
                if any(t not in r.tasks for t in tids):
                    continue        # a thread without a rate (new in the first read): not handed out
                had = {t: r.tasks[t] for t in tids}
            rates_of[pid] = had
        self._rates_of = rates_of
        return r

    def _tick_captured(self) -> MachineState:
        if self._frozen is None:
            notes: list[str] = []
            pair = read_snapshot_pair(self.root)
            if pair is not None:
                first, second = pair
                seconds = second.time - first.time
                rates = compute_rates(first, second, seconds) if seconds > 0 else None
                # The second capture holds only counters; the threads are the first capture's.
                sample = replace(second, tasks=first.tasks)
                if rates is None:
                    notes.append(ONE_CAPTURE_NOTE)
            else:
                sample = read_sample(self.root, tasks=True)
                rates = None
                notes.append(ONE_CAPTURE_NOTE)
            notes.extend(self.topology.notes)
            # Captures without proc/interrupts (hwloc's trees) have no IRQs to describe.
            self._irqs = read_irqs(self.root) if sample.interrupts is not None else None
            self._frozen = (sample, rates, tuple(notes))
        sample, rates, notes = self._frozen
        return self._state(sample, rates, notes)

    def _detail_tids(self) -> frozenset[int]:
        """Threads whose migrations and context switches are read this time: the tracked ones (and
        every thread of a tracked process) and the DETAIL_BUSIEST busiest of the last read."""
        tids = set(self._tids)
        if self._task_sample is not None and self._task_sample.tasks is not None:
            tids.update(self._tracked_tids(self._task_sample))
        if self._task_rates is not None:
            busiest = sorted(self._task_rates.tasks.values(), key=lambda r: r.cpu_pct, reverse=True)
            tids.update(r.tid for r in busiest[:DETAIL_BUSIEST] if r.cpu_pct > 0)
        return frozenset(tids)

    def _tracked_tids(self, sample: MachineSample) -> list[int]:
        tids = list(self._tids)
        if self._pids and sample.tasks is not None:
            for pid in self._pids:
                tids.extend(t.tid for t in sample.tasks.threads_of(pid))
        return list(dict.fromkeys(tids))

    def _state(self, sample: MachineSample, rates, notes: tuple[str, ...]) -> MachineState:
        self.generation += 1
        residency, trails = {}, {}
        for ident in (*self._tids, *self._pids):
            share = self._tracker.share(ident)
            if share:
                residency[ident] = share
        for tid in self._tids:
            trail = self._tracker.trail(tid)
            if trail:
                trails[tid] = tuple(trail)
        return MachineState(
            generation=self.generation,
            topology=self.topology,
            sample=sample,
            rates=rates,
            irqs=self._irqs,
            live=self.live,
            source=self.source,
            notes=notes,
            residency=residency,
            trails=trails,
            thread_names=self._thread_names,
            power=self._power.tick(),
        )


def _counters_of(s: MachineSample) -> MachineSample:
    return replace(s, tasks=None)


def _tasks_but(threads, pids: frozenset[int]) -> dict:
    """The threads of a ThreadsSample but those of `pids`, gathered by process (the few that ran)
    when every thread belongs to a listed process, else thread by thread."""
    tasks, processes = threads.tasks, threads.processes
    if sum(len(info.tids) for info in processes.values()) == len(tasks):
        return {t: tasks[t] for pid, info in processes.items() if pid not in pids for t in info.tids}
    return {tid: t for tid, t in tasks.items() if t.pid not in pids}


def _tasks_of(s: MachineSample) -> MachineSample:
    return replace(s, interrupts=None, softirqs=None, stat=None)


def _numbered(sample: MachineSample) -> set[str]:
    """The numbered IRQs of a sample's /proc/interrupts (those with a proc/irq folder)."""
    if sample.interrupts is None:
        return set()
    return {r.irq for r in sample.interrupts.rows if r.numbered}
