"""What the tests that move this machine's IRQs, threads and masks use to see them and to put them
back: a reading of every affinity straight from /proc and /sys (not through coremap, so it is an
independent oracle), and a restore that runs in `finally` blocks.

The restore puts back only what still holds the value the test set: another test (or another
helper's suite on the same machine) that pinned something meanwhile keeps its pin.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PF_NO_SETAFFINITY = 0x04000000
PROC = Path("/proc")
WORKQUEUE = Path("/sys/devices/virtual/workqueue/cpumask")
DEFAULT_IRQ = PROC / "irq" / "default_smp_affinity"


def cpulist(text: str) -> frozenset[int]:
    out = set()
    for piece in text.strip().split(","):
        if not piece:
            continue
        lo, _, hi = piece.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def cpumask(text: str) -> frozenset[int]:
    value = int(text.strip().replace(",", "") or "0", 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


@dataclass
class Affinities:
    """Every affinity of the machine at one moment."""
    irqs: dict[int, frozenset[int]] = field(default_factory=dict)             # requested
    effective: dict[int, frozenset[int]] = field(default_factory=dict)
    threads: dict[tuple[int, int], frozenset[int]] = field(default_factory=dict)   # (tid, starttime) -> mask
    pinnable: set[tuple[int, int]] = field(default_factory=set)              # not PF_NO_SETAFFINITY, not a zombie
    pid_of: dict[int, int] = field(default_factory=dict)
    workqueue: frozenset[int] | None = None
    default_irq: frozenset[int] | None = None

    def irqs_on(self, cpu: int) -> set[int]:
        return {n for n, m in self.irqs.items() if cpu in m}

    def threads_on(self, cpu: int, *, pinnable: bool = True) -> set[tuple[int, int]]:
        return {k for k, m in self.threads.items() if cpu in m and (k in self.pinnable or not pinnable)}


def read_affinities() -> Affinities:
    a = Affinities()
    for name in os.listdir(PROC / "irq"):
        if name.isdigit():
            try:
                a.irqs[int(name)] = cpulist((PROC / "irq" / name / "smp_affinity_list").read_text())
                a.effective[int(name)] = cpulist((PROC / "irq" / name / "effective_affinity_list").read_text())
            except FileNotFoundError:
                continue        # freed while reading
    for pid in os.listdir(PROC):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(PROC / pid / "task")
        except FileNotFoundError:
            continue            # exited while listing
        for tid in tids:
            try:
                stat = (PROC / pid / "task" / tid / "stat").read_bytes()
                mask = frozenset(os.sched_getaffinity(int(tid)))
            except (FileNotFoundError, ProcessLookupError):
                continue        # exited while listing
            rest = stat[stat.rfind(b")") + 2:].split()
            key = (int(tid), int(rest[19]))
            a.threads[key] = mask
            a.pid_of[int(tid)] = int(pid)
            if not int(rest[6]) & PF_NO_SETAFFINITY and rest[0] not in (b"Z", b"X"):
                a.pinnable.add(key)
    a.workqueue = cpumask(WORKQUEUE.read_text()) if WORKQUEUE.exists() else None
    a.default_irq = cpumask(DEFAULT_IRQ.read_text()) if DEFAULT_IRQ.exists() else None
    return a


def restore_quiet(service) -> list:
    """Undo whatever the journal says is still changed (AffinityService.restore_all), for `finally`."""
    from app.errors import CoremapError
    try:
        return service.restore_all()
    except CoremapError as e:    # a finally block must not hide the test's own failure
        print(f"restore_all failed: {e}")
        return []


def can_move_machine() -> str | None:
    """Why the live tests cannot move this machine's IRQs and threads, or None when they can."""
    if os.geteuid() != 0:
        return "moving IRQs and every thread needs root"
    if len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0):
        return "needs CPUs 0 and 1"
    return None
