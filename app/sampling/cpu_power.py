"""Per tick, per CPU: how it idled (the share of the interval in each cpuidle state, and in states
deeper than its shallowest sleeping one) and its current frequency (issue 22). `PowerReader` reads
app/machine/cpuidle.py and app/machine/frequency.py on each tick and hands out one immutable
CpuPower, which the sampler puts in the MachineState and `coremap cpus` prints.

Deep: deeper than the shallowest state the CPU sleeps in (POLL is a busy loop, not a sleep; C1 is the
shallowest sleep on x86): a CPU there pays that state's exit latency on its next interrupt. A
latency-critical CPU should not sleep deep; `deep_sleepers` names the quiet ones that do.

Cost: a CPU's states are one file each for time and usage, so a 256-CPU machine with ten states is
5,000 reads; like the IRQ table's, the read happens at most every `period` seconds, which grows with
its cost to stay within BUDGET of a core, and the figures in between are the last ones.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.machine.cpuidle import IdleLayout, IdleSample, read_idle_layout, read_idle_sample
from app.machine.frequency import FreqSample, busy_mhz, read_frequency
from app.parse.json_text import CpuId, NonNegative
from app.sysroot import SysRoot

BUDGET = 0.005              # share of one core the reads may cost
DEEP_SLEEP = 0.5            # a quiet CPU asleep deep this share of the time or more "sleeps deep"


@dataclass(frozen=True)
class CpuIdle:
    shares: tuple[tuple[str, float], ...]       # (state name, share of the interval), shallow to deep
    deep_share: float | None                    # in states deeper than the shallowest sleeping one
    shallowest: str | None                      # the shallowest sleeping state's name


@dataclass(frozen=True)
class CpuPower:
    seconds: float                              # the interval of the idle shares (0: none yet)
    idle: dict[CpuId, CpuIdle] = field(default_factory=dict)
    mhz: dict[CpuId, NonNegative] = field(default_factory=dict)
    mhz_source: str = ""                        # "scaling_cur_freq" or "APERF/MPERF"
    idle_why: str = ""                          # why there are no idle figures, where there are none
    mhz_why: str = ""                           # why there is no frequency, where there is none

    def state_names(self) -> tuple[str, ...]:
        """The idle states the CPUs have, shallow to deep (in a CPU's order; a state only a later CPU
        has comes after)."""
        names: dict[str, None] = {}
        for i in self.idle.values():
            for n, _ in i.shares:
                names.setdefault(n, None)
        return tuple(names)

    def deep_sleepers(self, cpus) -> list[tuple[int, float]]:
        """(cpu, deep share) of those of `cpus` asleep deep DEEP_SLEEP of the time or more."""
        return [(c, self.idle[c].deep_share) for c in sorted(cpus)
                if c in self.idle and (self.idle[c].deep_share or 0) >= DEEP_SLEEP]


def idle_rates(layout: IdleLayout, before: IdleSample, after: IdleSample) -> dict[int, CpuIdle]:
    """Each CPU's share of the interval in each state, and deeper than its shallowest sleep. A share
    is clamped to [0, 1]: a state's time is counted when the CPU leaves it (see app/machine/cpuidle.py)."""
    wall_us = (after.time - before.time) * 1e6
    out = {}
    if wall_us <= 0:
        return out
    for cpu, states in layout.states.items():
        a, b = before.time_us.get(cpu), after.time_us.get(cpu)
        if a is None or b is None or len(a) != len(states) or len(b) != len(states):
            continue
        shares = [min(1.0, max(0.0, (y - x) / wall_us)) for x, y in zip(a, b)]
        sleeping = [s for s in states if s.sleeps]
        shallow = min(sleeping, key=lambda s: (s.latency_us, s.index)) if sleeping else None
        deep = (min(1.0, sum(sh for s, sh in zip(states, shares) if s.sleeps and s.latency_us > shallow.latency_us))
                if shallow is not None else None)
        out[cpu] = CpuIdle(tuple((s.name, sh) for s, sh in zip(states, shares)), deep,
                           shallow.name if shallow else None)
    return out


def frequency_rates(before: FreqSample | None, after: FreqSample) -> tuple[dict[int, float], str, str]:
    """(MHz per CPU, the source, why none) from two samples (one is enough for scaling_cur_freq)."""
    if after.khz:
        return {c: k / 1000.0 for c, k in after.khz.items()}, "scaling_cur_freq", ""
    if after.msr and before is not None and before.msr:
        seconds = after.time - before.time
        mhz = {c: v for c in after.msr if c in before.msr
               if (v := busy_mhz(before.msr[c], after.msr[c], seconds)) is not None}
        return mhz, "APERF/MPERF", "" if mhz else "APERF/MPERF did not move (no CPU ran)"
    why = after.msr_why or "no cpufreq driver here (no scaling_cur_freq)"
    if after.msr:
        why = "APERF/MPERF: a second reading gives the first frequency"
    return {}, "", why


class PowerReader:
    """The idle states and frequency of `cpus`, read at most every `period` seconds (see the module
    docstring); `msr_cpus`: the CPUs whose MSRs may be read where there is no cpufreq."""

    def __init__(self, root: SysRoot, cpus, *, msr_cpus=(), interval: float = 1.0, clock=time.monotonic,
                 idle: bool | None = None):
        self.root, self.cpus, self.msr_cpus, self._clock = root, tuple(cpus), tuple(msr_cpus), clock
        self.interval = interval
        self.period = interval
        # A capture's idle times do not move between ticks (they would read as 0% idle): the live
        # machine only, unless a test hands in a tree it changes itself (`idle`).
        self._reads_idle = root.is_live if idle is None else idle
        self.layout = read_idle_layout(root, self.cpus) if self._reads_idle else IdleLayout(None, {})
        self._idle: IdleSample | None = None
        self._freq: FreqSample | None = None
        self._due = 0.0
        self.last: CpuPower | None = None

    def tick(self, *, now_due: bool = False) -> CpuPower:
        """The figures of the interval since the last read (the last ones when no read is due, unless
        `now_due`: `coremap cpus` reads at the end of its interval whatever the reads cost)."""
        now = self._clock()
        if self.last is not None and now < self._due and not now_due:
            return self.last
        t0 = time.perf_counter()
        idle = read_idle_sample(self.root, self.layout, clock=self._clock) if self.layout.states else None
        freq = read_frequency(self.root, self.cpus, msr_cpus=self.msr_cpus, clock=self._clock)
        cost = time.perf_counter() - t0
        self.period = max(self.interval, cost / BUDGET)
        self._due = now + self.period - 0.5 * self.interval    # half a tick early, as the thread list
        before_idle, before_freq = self._idle, self._freq
        self._idle, self._freq = idle, freq
        rates = idle_rates(self.layout, before_idle, idle) if idle is not None and before_idle is not None else {}
        mhz, source, mhz_why = frequency_rates(before_freq, freq)
        if not self.layout.states:
            idle_why = self.layout.why_none() if self._reads_idle else "a capture holds no cpuidle times"
        else:
            idle_why = "" if rates else "idle shares need a second reading"
        self.last = CpuPower(idle.time - before_idle.time if rates else 0.0, rates, mhz, source, idle_why, mhz_why)
        return self.last
