"""One tick of the machine's counters: what the sampler reads each interval and `rates` compares."""
from __future__ import annotations

import time
from dataclasses import dataclass

from app.errors import SysRootReadError
from app.machine.threads import TaskReader, ThreadsSample
from app.parse.interrupts import InterruptTable, RowMemo, SoftirqTable
from app.parse.stat import StatSample
from app.sysroot import SysRoot


@dataclass(frozen=True)
class MachineSample:
    time: float                                 # seconds (time.monotonic() live; capture offset in snapshots)
    interrupts: InterruptTable | None = None
    softirqs: SoftirqTable | None = None
    stat: StatSample | None = None
    tasks: ThreadsSample | None = None


def read_sample(root: SysRoot, *, tasks: bool = True, reader: TaskReader | None = None,
                time_offset: float = 0.0, memo: RowMemo | None = None) -> MachineSample:
    """The counters now: interrupts, softirqs, stat and (with `tasks`) every thread.

    Live, `time` is time.monotonic() taken midway through the counter reads; for a capture it is
    `time_offset` (0 for the first capture; see read_snapshot_pair). Pass the sampler's own TaskReader
    as `reader` so its per-process cache lives across ticks, and its RowMemo as `memo` (interrupts'
    unchanged lines keep their rows). Files a capture does not hold give None
    (hwloc's trees have no proc/); on the live machine a missing /proc/interrupts is an error.
    """
    from app.machine.interrupts import read_interrupts, read_softirqs, read_stat
    live = root.is_live if reader is None else reader.live
    t0 = time.monotonic()
    try:
        interrupts = read_interrupts(root, memo)
    except SysRootReadError as e:
        if live or e.reason != "missing":
            raise
        interrupts = None
    softirqs = read_softirqs(root)
    stat = read_stat(root)
    t = (t0 + time.monotonic()) / 2 if live else time_offset
    threads = None
    if tasks:
        threads = (reader or TaskReader(root)).sample()
        if not live and not threads.tasks:
            threads = None      # a capture without proc/PID: unknown, not "no threads"
    return MachineSample(t, interrupts, softirqs, stat, threads)


def read_snapshot_pair(root: SysRoot) -> tuple[MachineSample, MachineSample] | None:
    """(first, second) capture of a `coremap snapshot` that holds a second one (`SysRoot.later()`),
    timed 0 and `interval`; None for a live root or a capture without one. Threads come from the first
    capture only (the second holds just the counters)."""
    if root.is_live:
        return None
    later = root.later()
    if later is None:
        return None
    second_root, interval = later
    first = read_sample(root, tasks=True)
    second = read_sample(second_root, tasks=False, time_offset=interval)
    return first, second
