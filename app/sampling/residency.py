"""Where threads run: per-CPU residency shares and CPU trails over a sliding window. Pure: fed the
ThreadsSamples the sampler already reads, never touches the machine.

Attribution is an approximation. /proc/PID/task/TID/stat gives only the CPU time used so far
(utime+stime) and the CPU the thread last ran on (field 39, `processor`; fs/proc/array.c
do_task_stat -> task_cpu()). The CPU time a thread used during one tick is charged wholly to the CPU
it was seen on at the END of the tick; a thread that ran on two CPUs within one tick is attributed to
the last. Short ticks make this closer to the truth; exact per-CPU accounting would need sched_switch
tracing (perf sched), which this module deliberately does not need.
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Iterable

from app.machine.threads import ThreadsSample


class ResidencyTracker:
    """Feed it consecutive ThreadsSamples with `add`; ask `share` and `trail` for any tracked thread."""

    def __init__(self, window_seconds: float = 60.0):
        if not window_seconds > 0:
            raise ValueError("window_seconds must be positive")
        self.window_seconds = float(window_seconds)
        self._runs: dict[int, deque] = defaultdict(deque)      # tid -> (time, cpu, cpu seconds)
        self._trails: dict[int, deque] = defaultdict(deque)    # tid -> (time, cpu)
        self._pid_of: dict[int, int] = {}
        self._latest: float | None = None

    def add(self, sample_time: float, previous: ThreadsSample, current: ThreadsSample,
            tids: Iterable[int] | None = None) -> None:
        """Attribute each tracked thread's CPU time between `previous` and `current` (taken at
        `sample_time`) to the CPU it was last seen on in `current`. `tids=None` tracks every thread
        in `current`. A thread absent from `previous`, or whose tid was reused (another starttime),
        contributes its position to the trail but no time: its earlier time is unknown.
        """
        if self._latest is not None and sample_time < self._latest:
            raise ValueError(f"samples must come in time order ({sample_time} < {self._latest})")
        self._latest = sample_time
        hz = current.clk_tck or 100
        cur_tasks, prev_tasks = current.tasks, previous.tasks
        for tid in (cur_tasks if tids is None else tids):
            cur = cur_tasks.get(tid)
            if cur is None:
                continue         # exited (or not yet started): nothing seen this tick
            if self._pid_of.get(tid, cur.pid) != cur.pid:
                # The tid now belongs to another process: the old thread's history is not this one's.
                self._runs.pop(tid, None)
                self._trails.pop(tid, None)
            self._pid_of[tid] = cur.pid
            self._trails[tid].append((sample_time, cur.last_cpu))
            prev = prev_tasks.get(tid)
            if prev is None or prev.starttime != cur.starttime or prev.pid != cur.pid:
                continue
            ticks = cur.cpu_ticks - prev.cpu_ticks
            if ticks > 0:
                self._runs[tid].append((sample_time, cur.last_cpu, ticks / hz))
        self._expire(sample_time - self.window_seconds)

    def _expire(self, oldest: float) -> None:
        for store in (self._runs, self._trails):
            for tid in list(store):
                q = store[tid]
                while q and q[0][0] < oldest:
                    q.popleft()
                if not q:
                    del store[tid]
        live = self._runs.keys() | self._trails.keys()
        for tid in [t for t in self._pid_of if t not in live]:
            del self._pid_of[tid]

    def threads_of(self, pid: int) -> list[int]:
        """Tracked tids of process `pid` (with history in the window)."""
        return sorted(t for t, p in self._pid_of.items() if p == pid)

    def seconds(self, tid_or_pid: int) -> dict[int, float]:
        """CPU seconds per CPU over the window, for a thread or (see `share`) a whole process."""
        tids = self.threads_of(tid_or_pid) if self._is_process(tid_or_pid) else [tid_or_pid]
        out: dict[int, float] = defaultdict(float)
        for tid in tids:
            for _, cpu, secs in self._runs.get(tid, ()):
                out[cpu] += secs
        return dict(out)

    def share(self, tid_or_pid: int) -> dict[int, float]:
        """{cpu: fraction} of the CPU time used over the window, summing to 1; {} when none was used.

        An id that is the pid of a tracked process with more than its main thread means the whole
        process (all its threads); otherwise the one thread (a single-threaded process is both).
        """
        secs = self.seconds(tid_or_pid)
        total = sum(secs.values())
        if total <= 0:
            return {}
        return {cpu: s / total for cpu, s in sorted(secs.items())}

    def trail(self, tid: int) -> list[tuple[float, int]]:
        """(time, cpu) at each tick in the window where the thread was seen: the hopping line."""
        return list(self._trails.get(tid, ()))

    def _is_process(self, ident: int) -> bool:
        return any(p == ident and t != ident for t, p in self._pid_of.items())
