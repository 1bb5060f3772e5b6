"""What else runs on a CPU a probe is about to measure: threads that were busy there, and managed IRQs
still delivered on quiet CPUs. One rule for the window's probe panel, its IRQ table and grid, and
`coremap probe` (issue 28, item 5: a jitter run on quiet CPU 1 showed 44% of its time lost to a Java
thread pinned there at 66%, and nothing said so; the managed disk IRQ 36 stayed on the quiet CPU at up
to 9,388/s, unmarked).

Busy threads: a thread's CPU time between two thread reads (utime + stime, /proc/PID/task/TID/stat)
charged to the CPU it was last seen on, as app/sampling/residency.py charges it. A thread that used at
least BUSY_PCT of one CPU over the last seconds and sits on a probed CPU will take that share of the
probe's time too; a thread whose affinity lies within the probed CPUs cannot leave them at all.

Managed IRQs: an IRQ the kernel manages (IRQD_AFFINITY_MANAGED in debugfs, app/machine/interrupts.py
irq_is_managed) refuses every write of its affinity, so a Make quiet cannot move it off; only
isolcpus=managed_irq at boot keeps it off (Documentation/admin-guide/kernel-parameters.txt, isolcpus).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from app.format import cpus_word, format_percent, format_rate, plural
from app.machine.interrupts import IrqTable
from app.machine.sample import MachineSample
from app.machine.thread_names import NO_THREAD_NAMES, ThreadNames
from app.machine.threads import TaskReader, ThreadsSample
from app.sampling.rates import Rates, rates
from app.sysroot import SysRoot

BUSY_PCT = 10.0          # % of one CPU: a thread below this costs a probe little it cannot tell apart
BUSY_WINDOW_S = 5.0      # how far back the window looks ("the last few seconds")
CLI_WINDOW_S = 1.0       # what `coremap probe` waits to see who runs (it has no earlier samples)
SHOWN = 3                # threads named in the line; the rest are counted

MANAGED_WHY = ("the kernel manages its affinity (its driver spreads it over the CPUs) and refuses to move it; "
               "isolcpus=managed_irq,CPUS on the kernel command line keeps it off those CPUs from boot")


@dataclass(frozen=True)
class BusyThread:
    cpu: int                 # the probed CPU it was last seen on
    pid: int
    tid: int
    name: str                # the full name (a Java thread's whole name where one was read), else comm
    pct: float               # % of one CPU over the window
    confined: bool           # its affinity lies within the probed CPUs: it cannot be moved off by the scheduler


def thread_shares(earlier: ThreadsSample, later: ThreadsSample, seconds: float) -> dict[int, float]:
    """% of one CPU per tid between two thread reads `seconds` apart (threads matched by tid and start
    time, app/sampling/rates.py)."""
    r = rates(MachineSample(0.0, tasks=earlier), MachineSample(seconds, tasks=later), seconds)
    return {tid: t.cpu_pct for tid, t in r.tasks.items()}


def busy_on(cpus, later: ThreadsSample, shares: dict[int, float], names: ThreadNames = NO_THREAD_NAMES,
            *, skip_pids=()) -> list[BusyThread]:
    """The threads of `later` last seen on one of `cpus` that used at least BUSY_PCT of a CPU (`shares`,
    thread_shares), busiest first; those of `skip_pids` (coremap itself: the probe keeps it off) left out."""
    probed, skip = set(cpus), set(skip_pids)
    out = []
    for tid, pct in shares.items():
        t = later.tasks.get(tid)
        if t is None or t.pid in skip or t.last_cpu not in probed or pct < BUSY_PCT:
            continue
        name = names.name(t.pid, tid, t.comm)
        confined = t.allowed is not None and bool(t.allowed) and set(t.allowed) <= probed
        out.append(BusyThread(t.last_cpu, t.pid, tid, name, pct, confined))
    out.sort(key=lambda b: (-b.pct, b.tid))
    return out


def busy_line(busy: list[BusyThread], seconds: float) -> str | None:
    """The one line a probe's user reads before measuring a CPU others use; None when none is busy."""
    if not busy:
        return None
    parts = []
    for b in busy[:SHOWN]:
        where = f"may run only on {cpus_word(sorted({b.cpu}))}" if b.confined else f"was last on CPU {b.cpu}"
        parts.append(f"thread {b.tid} {b.name} (process {b.pid}) used {format_percent(b.pct)} of a CPU "
                     f"and {where}")
    more = f"; and {plural(len(busy) - SHOWN, 'more thread')}" if len(busy) > SHOWN else ""
    cpus = sorted({b.cpu for b in busy})
    return (f"{cpus_word(cpus)} {'is' if len(cpus) == 1 else 'are'} not idle over the last {seconds:.0f} s: "
            + "; ".join(parts) + more
            + ". The probe shares the CPU with it and counts its time as lost: move it off first for the CPU's own figures")


def busy_brief(busy: list[BusyThread]) -> str | None:
    """busy_line's few words, for a bar beside a form: "CPU 1 is busy: market-data-feed-handler-0
    (thread 28206) at 66%, which may run only there"."""
    if not busy:
        return None
    named = ", ".join(f"{b.name} (thread {b.tid}) at {format_percent(b.pct)}"
                      + (", which may run only there" if b.confined else "") for b in busy[:SHOWN])
    more = f", and {plural(len(busy) - SHOWN, 'more thread')}" if len(busy) > SHOWN else ""
    cpus = sorted({b.cpu for b in busy})
    return f"{cpus_word(cpus)} {'is' if len(cpus) == 1 else 'are'} busy: {named}{more}. The probe would count its time as lost."


def read_busy(root: SysRoot, cpus, seconds: float = CLI_WINDOW_S, *, skip_pids=None,
              sleep=time.sleep) -> tuple[list[BusyThread], float]:
    """Who runs on `cpus` now: two thread reads `seconds` apart, full Java names read for the busy
    threads only (a JVM is asked for its names only when one of its threads is named). For `coremap
    probe`, which has no earlier samples; the window uses the sampler's."""
    from app.machine.java import thread_names_of       # only when a busy thread may be a Java one
    reader = TaskReader(root)
    t0 = time.monotonic()
    earlier = reader.sample()
    sleep(seconds)
    later = reader.sample()
    took = max(time.monotonic() - t0, 1e-3)
    skip = {os.getpid()} if skip_pids is None else set(skip_pids)
    busy = busy_on(cpus, later, thread_shares(earlier, later, took), skip_pids=skip)
    if not busy:
        return [], took
    mine = {b.tid: later.tasks[b.tid] for b in busy}
    procs = {b.pid: later.processes[b.pid] for b in busy if b.pid in later.processes}
    names = thread_names_of(ThreadsSample(mine, procs, later.clk_tck), root)
    return busy_on(cpus, later, {b.tid: b.pct for b in busy}, names, skip_pids=skip), took


@dataclass(frozen=True)
class ManagedIrq:
    irq: str
    cpus: tuple[int, ...]                 # the quiet CPUs it is delivered on
    per_s: dict[int, float | None]        # its rate on each of them (None before a second sample)

    def rate_text(self, cpu: int | None = None) -> str:
        """"1,234/s" on `cpu` (or summed over its quiet CPUs); "" with no rate yet."""
        vals = [v for c, v in self.per_s.items() if (cpu is None or c == cpu) and v is not None]
        return format_rate(sum(vals)) if vals else ""

    def sentence(self, cpu: int | None = None) -> str:
        rate = self.rate_text(cpu)
        on = f"CPU {cpu}" if cpu is not None else cpus_word(self.cpus)
        return (f"managed IRQ {self.irq} is still delivered on quiet {on}" + (f" ({rate})" if rate else "")
                + f": {MANAGED_WHY}")


def managed_on_quiet(irqs: IrqTable | None, rates_: Rates | None, quiet, refused=frozenset()) -> dict[str, ManagedIrq]:
    """The managed IRQs delivered on a quiet CPU (its effective affinity, or a rate there), by label.
    Managed as debugfs says, or, where it cannot say (not mounted), as the kernel said by refusing a Make
    quiet's move of it (`refused`: IRQ numbers, app/pinning/ledger.py Ledger.refused_managed)."""
    quiet = set(quiet)
    if irqs is None or not quiet:
        return {}
    cols = {c: i for i, c in enumerate(rates_.cpus)} if rates_ is not None else {}
    out = {}
    for irq, info in irqs.info.items():
        if not (info.managed or (info.managed is None and irq.isdigit() and int(irq) in refused)):
            continue
        r = rates_.irqs.get(irq) if rates_ is not None else None
        per_s: dict[int, float | None] = {}
        for c in sorted(quiet):
            v = r.per_cpu[cols[c]] if r is not None and c in cols and cols[c] < len(r.per_cpu) else None
            if c in (info.effective or ()) or (v or 0) > 0:
                per_s[c] = v
        if per_s:
            out[irq] = ManagedIrq(irq, tuple(per_s), per_s)
    return out


def managed_by_cpu(found: dict[str, ManagedIrq]) -> dict[int, list[ManagedIrq]]:
    out: dict[int, list[ManagedIrq]] = {}
    for m in found.values():
        for c in m.cpus:
            out.setdefault(c, []).append(m)
    return out


def managed_sentence(irqs: list[ManagedIrq], cpu: int) -> str:
    """"IRQ 36 (1,234/s), IRQ 37: managed, ..." for one quiet CPU's mark."""
    named = ", ".join(f"IRQ {m.irq}" + (f" ({m.rate_text(cpu)})" if m.rate_text(cpu) else "") for m in irqs)
    return f"{plural(len(irqs), 'managed IRQ')} still delivered on quiet CPU {cpu}: {named}. {MANAGED_WHY[:1].upper()}{MANAGED_WHY[1:]}"

