"""/proc/stat (Documentation/filesystems/proc.rst, "1.7 Miscellaneous kernel statistics").

Times are in USER_HZ ticks (sysconf(_SC_CLK_TCK), 100 on every mainstream architecture).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuTimes:
    user: int
    nice: int
    system: int
    idle: int
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0
    guest: int = 0
    guest_nice: int = 0

    @property
    def total(self) -> int:
        # guest and guest_nice are already counted in user and nice (kernel/sched/cputime.c).
        return (self.user + self.nice + self.system + self.idle + self.iowait + self.irq
                + self.softirq + self.steal)

    @property
    def busy(self) -> int:
        return self.total - self.idle - self.iowait


@dataclass(frozen=True)
class StatSample:
    total: CpuTimes
    cpus: dict[int, CpuTimes]     # only CPUs that have a cpuN line (online ones)
    ctxt: int | None = None
    btime: int | None = None
    processes: int | None = None
    procs_running: int | None = None
    procs_blocked: int | None = None
    intr_total: int | None = None
    softirq_total: int | None = None
