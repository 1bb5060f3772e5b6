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

import time
from dataclasses import replace
from collections.abc import Iterable

from app.machine.interrupts import read_irqs
from app.machine.sample import MachineSample, read_sample, read_snapshot_pair
from app.machine.threads import TaskReader
from app.machine.topology import Topology, read_topology
from app.rates import rates as compute_rates
from app.residency import ResidencyTracker
from app.state import MachineState
from app.sysroot import SysRoot

ONE_CAPTURE_NOTE = "one capture only: totals shown, not rates"
MIN_INTERVAL, MAX_INTERVAL = 0.25, 5.0


class Sampler:
    """Turns a SysRoot into a stream of MachineStates; see the module docstring."""

    def __init__(self, root: SysRoot, *, interval: float = 1.0, irq_refresh_seconds: float = 5.0,
                 residency_window: float = 60.0, clock=time.monotonic):
        self.root = root
        self.live = root.is_live
        self.interval = clamp_interval(interval)
        self.irq_refresh_seconds = irq_refresh_seconds
        self.source = "live" if self.live else str(root.root)
        self._clock = clock
        self.topology: Topology = read_topology(root)
        self.generation = 0
        self._reader = TaskReader(root) if self.live else None
        self._previous: MachineSample | None = None
        self._irqs = None
        self._irqs_at: float | None = None
        self._tracker = ResidencyTracker(residency_window)
        self._tids: tuple[int, ...] = ()
        self._pids: tuple[int, ...] = ()
        self._frozen: tuple | None = None      # (sample, rates, notes) of a captured machine

    # -- control -----------------------------------------------------------------------------------
    def track(self, tids: Iterable[int], pids: Iterable[int] = ()) -> None:
        """Follow where these threads (and every thread of these processes) run."""
        self._tids = tuple(dict.fromkeys(int(t) for t in tids))
        self._pids = tuple(dict.fromkeys(int(p) for p in pids))

    @property
    def tracked(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self._tids, self._pids

    def refresh_topology(self) -> Topology:
        """Re-read the topology (after a CPU went on/offline); the next state carries the new one."""
        self.topology = read_topology(self.root)
        self._irqs_at = None
        return self.topology

    def set_interval(self, seconds: float) -> float:
        self.interval = clamp_interval(seconds)
        return self.interval

    # -- one tick ----------------------------------------------------------------------------------
    def tick(self) -> MachineState:
        if not self.live:
            return self._tick_captured()
        sample = read_sample(self.root, tasks=True, reader=self._reader)
        previous, self._previous = self._previous, sample
        rates = None
        notes: list[str] = []
        if previous is not None:
            seconds = sample.time - previous.time
            if seconds > 0:
                rates = compute_rates(previous, sample, seconds)
            if previous.tasks is not None and sample.tasks is not None:
                self._tracker.add(sample.time, previous.tasks, sample.tasks, self._tracked_tids(sample))
        now = self._clock()
        if self._irqs_at is None or now - self._irqs_at >= self.irq_refresh_seconds:
            self._irqs = read_irqs(self.root)
            self._irqs_at = now
        notes.extend(self.topology.notes)
        return self._state(sample, rates, tuple(notes))

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
        )


def clamp_interval(seconds: float) -> float:
    """The sampling interval the window offers: 0.25 s (finer floods the UI thread with states on a
    1000-CPU machine) to 5 s."""
    return min(MAX_INTERVAL, max(MIN_INTERVAL, float(seconds)))
