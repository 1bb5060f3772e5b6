"""/proc/PID/task/TID/stat (Documentation/filesystems/proc.rst, Table 1-4; fs/proc/array.c
do_task_stat). comm is in parentheses and may itself hold spaces and ')': split at the LAST ')'.
Field 39 (1-based) is `processor`, the CPU the task last ran on; field 9 is `flags` (PF_*).
"""
from __future__ import annotations

from dataclasses import dataclass

PF_KTHREAD = 0x00200000          # include/linux/sched.h
PF_NO_SETAFFINITY = 0x04000000   # include/linux/sched.h: "Userland is not allowed to meddle with cpus_mask"


@dataclass(frozen=True)
class TaskStat:
    tid: int
    comm: str
    state: str          # R, S, D, Z, T, t, X, I
    ppid: int
    flags: int
    minflt: int
    majflt: int
    utime: int          # ticks
    stime: int          # ticks
    priority: int
    nice: int
    num_threads: int
    starttime: int      # ticks after boot
    processor: int      # last CPU (field 39)
    rt_priority: int
    policy: int

    @property
    def kthread(self) -> bool:
        return bool(self.flags & PF_KTHREAD)

    @property
    def no_setaffinity(self) -> bool:
        return bool(self.flags & PF_NO_SETAFFINITY)
