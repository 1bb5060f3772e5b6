"""MachineState: the one immutable value the window draws.

The sampler (app/sampling/sampler.py, driven by a QThread in widgets/) produces one MachineState per tick with
a rising `generation`; every widget's `set_state(state)` only applies it. Widgets never read /proc or
/sys themselves and never mutate a state.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# At run time, not only for annotations: the wire (app/remote/decode.py) decodes a MachineState through
# msgspec, which resolves each field's class from this module.
from app.machine.interrupts import IrqTable
from app.machine.sample import MachineSample
from app.machine.thread_names import NO_THREAD_NAMES, ThreadNames
from app.machine.topology import Topology
from app.parse.json_text import CpuId, Finite, NonNegative
from app.sampling.cpu_power import CpuPower
from app.sampling.rates import Rates


@dataclass(frozen=True)
class MachineState:
    generation: int                       # rises by one per tick; stale states are dropped by it
    topology: "Topology"
    sample: "MachineSample"               # the newest counters
    rates: "Rates | None" = None          # None until two samples exist (or a one-capture snapshot)
    irqs: "IrqTable | None" = None        # per-IRQ affinity/device info (refreshed every few ticks)
    live: bool = True                     # False for a snapshot or a reopened session: no live actions
    source: str = "/"                     # root path, or session file, shown in the title
    notes: tuple[str, ...] = ()           # e.g. "one capture only: totals shown, not rates"
    residency: dict[int, dict[CpuId, NonNegative]] = field(default_factory=dict)   # tid/pid -> {cpu: share} for tracked threads
    trails: dict[int, tuple[tuple[Finite, CpuId], ...]] = field(default_factory=dict)      # tid -> ((time, cpu), ...)
    host: str = ""                        # the ssh host it came from (app/remote); "" for this machine
    stale: str = ""                       # why it is not current (the link to `host` is down); "" when it is
    # Full names of Java threads whose comm the kernel cut to 15 bytes (app/sampling/java_names.py);
    # the same object from tick to tick while no JVM was read again.
    thread_names: ThreadNames = NO_THREAD_NAMES
    # Each CPU's idle-state shares and frequency (app/sampling/cpu_power.py); None where not read.
    power: CpuPower | None = None
