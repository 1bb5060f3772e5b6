"""CPU idle states from cpuidle: which states each CPU has (read once) and how long it has spent in
each (read every tick), for the grid's idle metrics and `coremap cpus` (issue 22).

Format: Documentation/ABI/testing/sysfs-devices-system-cpu and Documentation/admin-guide/pm/cpuidle.rst.
Under cpuN/cpuidle/stateK/: `name` (POLL, C1, C1E, C6, ...), `desc`, `latency` (exit latency, µs),
`residency` (target residency, µs), `usage` (times entered), `time` (µs spent in it), `disable`. The
driver is cpu/cpuidle/current_driver ("none" where there is none: many VMs). `time` grows when the
CPU leaves the state, so a CPU asleep across a whole tick shows that sleep when it wakes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from app.errors import SysRootReadError
from app.sysroot import SysRoot

POLL = "POLL"       # drivers/cpuidle/poll_state.c: a busy loop with interrupts on, not a sleep


@dataclass(frozen=True)
class IdleState:
    index: int
    name: str
    desc: str
    latency_us: int             # exit latency
    residency_us: int           # target residency: worth entering only for this long or longer

    @property
    def sleeps(self) -> bool:
        """Whether the CPU sleeps in it (POLL keeps it running a loop)."""
        return self.name != POLL


@dataclass(frozen=True)
class IdleLayout:
    """The states of every CPU that has cpuidle (a CPU without is absent), and the driver."""
    driver: str | None
    states: dict[int, tuple[IdleState, ...]]

    def why_none(self) -> str:
        """Why no CPU has idle states here."""
        if self.driver in (None, "none"):
            return "this kernel has no cpuidle driver here (cpuidle/current_driver: none), as in many VMs"
        return f"the cpuidle driver {self.driver} lists no states"


@dataclass(frozen=True)
class IdleSample:
    """Microseconds spent in each state and times entered, per CPU, in the layout's state order, at
    `time` (monotonic seconds)."""
    time: float
    time_us: dict[int, tuple[int, ...]]
    usage: dict[int, tuple[int, ...]]


def read_idle_layout(root: SysRoot, cpus) -> IdleLayout:
    """The states of `cpus` (those with a cpuidle folder)."""
    driver = root.read_first_line(root.cpu_dir("cpuidle", "current_driver"))
    states: dict[int, tuple[IdleState, ...]] = {}
    for cpu in cpus:
        folder = root.cpu_dir(f"cpu{cpu}", "cpuidle")
        names = sorted((n for n in root.listdir(folder) if n.startswith("state") and n[5:].isdigit()),
                       key=lambda n: int(n[5:]))
        found = []
        for n in names:
            d = folder / n
            try:
                found.append(IdleState(int(n[5:]), root.read_first_line(d / "name") or n,
                                        root.read_first_line(d / "desc") or "", root.read_int(d / "latency") or 0,
                                        root.read_int(d / "residency") or 0))
            except SysRootReadError:
                continue        # a state whose files went away (a CPU going offline): left out
        if found:
            states[cpu] = tuple(found)
    return IdleLayout(driver, states)


def read_idle_sample(root: SysRoot, layout: IdleLayout, *, clock=time.monotonic) -> IdleSample:
    """Each state's `time` and `usage` now; a CPU whose files went away is left out."""
    spent: dict[int, tuple[int, ...]] = {}
    entered: dict[int, tuple[int, ...]] = {}
    now = clock()
    for cpu, states in layout.states.items():
        folder = root.cpu_dir(f"cpu{cpu}", "cpuidle")
        try:
            t = tuple(root.read_int(folder / f"state{s.index}" / "time") or 0 for s in states)
            u = tuple(root.read_int(folder / f"state{s.index}" / "usage") or 0 for s in states)
        except SysRootReadError:
            continue
        spent[cpu], entered[cpu] = t, u
    return IdleSample(now, spent, entered)
