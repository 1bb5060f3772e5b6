"""One tick of the machine's counters: what the sampler reads each interval and `rates` compares."""
from __future__ import annotations

from dataclasses import dataclass

from app.machine.threads import ThreadsSample
from app.parse.interrupts import InterruptTable, SoftirqTable
from app.parse.stat import StatSample


@dataclass(frozen=True)
class MachineSample:
    time: float                                 # seconds (time.monotonic() live; capture offset in snapshots)
    interrupts: InterruptTable | None = None
    softirqs: SoftirqTable | None = None
    stat: StatSample | None = None
    tasks: ThreadsSample | None = None
