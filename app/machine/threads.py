"""Processes and threads: TaskSample per thread, read from /proc/PID/task/TID/*.

Per-thread values always come from task/TID/stat, never /proc/TID/stat (which, for a thread id,
reports the whole thread group's times: fs/proc/base.c proc_tgid_stat vs proc_tid_stat).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskSample:
    pid: int                     # thread group id (process)
    tid: int
    comm: str
    state: str
    last_cpu: int                # stat field 39
    utime: int                   # ticks (USER_HZ)
    stime: int                   # ticks
    flags: int                   # PF_* (app.parse.task_stat)
    starttime: int               # ticks after boot; with tid, identifies a thread across tid reuse
    nice: int = 0
    rt_priority: int = 0
    policy: int = 0
    voluntary_switches: int | None = None     # status: voluntary_ctxt_switches
    involuntary_switches: int | None = None   # status: nonvoluntary_ctxt_switches
    migrations: int | None = None             # sched: se.nr_migrations (CONFIG_SCHED_DEBUG / schedstats)
    allowed: tuple[int, ...] | None = None    # status: Cpus_allowed_list

    @property
    def kthread(self) -> bool:
        from app.parse.task_stat import PF_KTHREAD
        return bool(self.flags & PF_KTHREAD)

    @property
    def no_setaffinity(self) -> bool:
        from app.parse.task_stat import PF_NO_SETAFFINITY
        return bool(self.flags & PF_NO_SETAFFINITY)

    @property
    def cpu_ticks(self) -> int:
        return self.utime + self.stime


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    comm: str
    cmdline: str                 # NUL-separated argv joined by spaces; "" for kernel threads
    tids: tuple[int, ...]


@dataclass(frozen=True)
class ThreadsSample:
    tasks: dict[int, TaskSample]                 # tid -> sample
    processes: dict[int, ProcessInfo] = field(default_factory=dict)
    clk_tck: int = 100

    def threads_of(self, pid: int) -> list[TaskSample]:
        p = self.processes.get(pid)
        if p is None:
            return [t for t in self.tasks.values() if t.pid == pid]
        return [self.tasks[t] for t in p.tids if t in self.tasks]
