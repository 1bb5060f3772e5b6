"""Processes and threads: TaskSample per thread, read from /proc/PID/task/TID/*.

Per-thread values always come from task/TID/stat, never /proc/TID/stat (which, for a thread id,
reports the whole thread group's times: fs/proc/base.c proc_tgid_stat vs proc_tid_stat).

The sampler calls `TaskReader.sample()` every tick on every thread of the machine, so the "fast" path
is written for speed: os.open/os.read on bytes, path strings built once from the root, only the stat
fields the UI shows are converted, and per-process text (cmdline) is cached in the reader across
ticks. It must cost no more than `ps -eLo tid,psr` on the same threads
(tests/benchmarks/bench_threads.py measures it). Every read is still bounded (the _LIMITS below) and,
in a capture, confined like any other read of it (SysRoot.read_small, listdir_small: never through a
link out of the capture, regular files only): a capture's cmdline linked to /etc/shadow, /dev/zero or
a FIFO, or a task/ linked into the live /proc, is read as missing.

Most threads of a machine sleep through most ticks, so on the live machine a process whose threads
did not run since the last read is not read again: its CPU clock (clock_gettime on the process's
CPU-time clock id, one syscall, no file) is the sum of its threads' run times, dead ones included
(kernel/sched/cputime.c thread_group_cputime). Unchanged means none of them ran, and what stat shows
changes only when a thread runs: times, last CPU (fs/proc/array.c task_cpu), state, and the thread set
(clone and exit are done by a thread of the process). The exceptions: nice, policy, RT priority or
affinity changed by another process while the thread sleeps, which a check every CHECK_SECONDS
catches with four syscalls a thread (getpriority, sched_getscheduler, sched_getparam,
sched_getaffinity: ~2 us, against ~15 us for reading and parsing its stat) and answers with a read;
and a thread woken but not yet run (S shown for R, and the CPU chosen at wake-up), which only a read
shows, bounded by REUSE_SECONDS after which every process is read afresh.
Processes with a running (R) thread are never reused: on a nohz_full CPU the clock of a thread that
runs without a tick can lag its stat times by up to a second (sched_tick_remote).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from app.errors import CoremapError, ParseError
from app.machine.thread_names import ThreadNames
from app.parse.json_text import Count, CpuId
from app.parse.task_stat import TaskFlags, parse_status, parse_task_stat, sched_counts
from app.sysroot import SysRoot


@dataclass(frozen=True)
class TaskSample(TaskFlags):
    pid: int                     # thread group id (process)
    tid: int
    comm: str
    state: str
    last_cpu: CpuId                # stat field 39
    utime: Count                   # ticks (USER_HZ)
    stime: Count                   # ticks
    flags: int                   # PF_* (app.parse.task_stat)
    starttime: Count               # ticks after boot; with tid, identifies a thread across tid reuse
    nice: int = 0
    rt_priority: int = 0
    policy: int = 0
    voluntary_switches: Count | None = None     # status: voluntary_ctxt_switches
    involuntary_switches: Count | None = None   # status: nonvoluntary_ctxt_switches
    migrations: Count | None = None             # sched: se.nr_migrations (CONFIG_SCHED_DEBUG / schedstats)
    allowed: tuple[CpuId, ...] | None = None    # status: Cpus_allowed_list


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


class TaskGone(CoremapError):
    """A thread or process that is not there (any more): it exited, or the capture never held it."""

    def __init__(self, pid: int, tid: int | None = None, *, live: bool = True):
        self.pid = pid
        self.tid = tid
        what = f"thread {tid}" if tid is not None else f"process {pid}"
        if live:
            msg = f"{what} has exited; refresh the list"
        else:
            msg = f"{what} is not in this capture; choose one from `coremap threads`"
        super().__init__(msg)


_DETAILS = ("fast", "full")

# USER_HZ: the unit of utime/stime. sysconf gives this machine's; for a capture of another machine it
# is an assumption, but USER_HZ is 100 on every mainstream architecture (include/asm-generic/param.h).
try:
    _CLK_TCK = os.sysconf("SC_CLK_TCK")
except (ValueError, OSError):
    _CLK_TCK = 100

# How long a process whose threads did not run is shown from its last read (see the module docstring).
# CHECK_SECONDS bounds how late nice, policy, RT priority and affinity changed from outside show
# (TaskReader.forget() drops a process at once, e.g. after coremap pins); REUSE_SECONDS bounds the
# rest (a thread woken and not yet run). Re-reading 2,000 threads costs ~30 ms (stat alone is ~9 us a
# thread in the kernel); their check ~4 ms. Checked every 15-30 s and re-read every 60-120 s, a
# 2,000-thread process costs ~0.05% of a core, against 0.13% re-read every 15-30 s (issue 12). A
# process of more than REUSE_THREADS threads is checked and re-read proportionally less often, so its
# cost stays the same: a 10,000-thread process re-read every 15-30 s was 1.3% of a core, most of the
# window's cost at 10,000 threads (issue 12: at most 2%).
CHECK_SECONDS = 30.0
REUSE_SECONDS = 120.0
REUSE_THREADS = 2000

_STATES = {bytes([c]): chr(c) for c in b"RSDZTtXxKWPI"}
# What one read of a task's file may return. stat is one line of ~52 numbers and a 64-byte comm at most
# (proc_task_name); status and sched are a page or two; cmdline is the whole argument area (up to
# ARG_MAX, 2 MiB and more), of which a row shows a few words: cut at 64 KiB.
STAT_LIMIT = 4096
DETAIL_LIMIT = 64 * 1024
CMDLINE_LIMIT = 64 * 1024
# sched_getscheduler(2) ORs this into the policy of a thread that has it; stat's policy field does not.
_RESET_ON_FORK = 0x40000000
_GONE = (FileNotFoundError, ProcessLookupError)


class _Kept(NamedTuple):
    """A process's last read, kept while none of its threads runs (module docstring)."""
    cpu_ns: int                         # its CPU clock then
    check_at: float                     # when its threads' nice, policy and affinity are checked next
    tasks: dict[int, TaskSample]        # tid -> sample
    info: ProcessInfo
    cmdline_key: tuple | None           # (pid, start time) of its cached command line
    read_at: float                      # when it is read again in full, whatever the checks say


class TaskReader:
    """Reads every thread of a root, tick after tick. Owns the per-process cache (cmdline keyed by
    (pid, starttime of the process), so a recycled pid is read afresh), so keep one per sampler.

    detail="fast" reads task/TID/stat only (plus proc/PID/cmdline once per process when `cmdline`);
    "full" also reads task/TID/status (context switches, allowed CPUs) and task/TID/sched (migrations).
    """

    def __init__(self, root: SysRoot, *, detail: str = "fast", cmdline: bool = True, clock=time.monotonic):
        if detail not in _DETAILS:
            raise ValueError(f"detail must be one of {_DETAILS}, not {detail!r}")
        self.root = root
        self.detail = detail
        self.cmdline = cmdline
        self.live = root.is_live
        self._base = str(root.proc()) + "/"
        self._cmdlines: dict[tuple[int, int], str] = {}
        self.clk_tck = _CLK_TCK if self.live else 100
        # Threads that get status and sched read even in "fast" mode (the sampler names the tracked
        # and the busiest ones): migrations and switches for the rows a user looks at, without
        # paying ~50 us a thread for all of them.
        self.detail_tids: frozenset[int] = frozenset()
        # Reuse of processes that did not run (module docstring): live, "fast" detail only.
        self.reuse = self.live and detail == "fast"
        self._clock = clock
        self._kept: dict[int, _Kept] = {}       # pid -> its last read, while its threads sleep
        self.reused = 0                         # threads taken from the previous read by the last sample()
        # Processes whose threads the last sample() holds as the very objects of the one before (a
        # reused process none of whose threads was read afresh as a detail thread, then or now).
        self.same: frozenset[int] = frozenset()
        self._fresh: set[int] = set()           # reused processes with a detail thread read afresh

    def forget(self, pids=None) -> None:
        """Read these processes (all when None) afresh next time, e.g. after changing their affinity."""
        if pids is None:
            self._kept.clear()
        else:
            for p in pids:
                self._kept.pop(int(p), None)

    def sample(self, pids=None) -> ThreadsSample:
        """Every thread now (or only those of `pids`). Threads that exit while being read are skipped."""
        tasks: dict[int, TaskSample] = {}
        processes: dict[int, ProcessInfo] = {}
        seen_keys: set = set()
        # Allowed CPUs: most threads share a handful of masks, so each is converted once a tick.
        masks: dict[frozenset, tuple[int, ...]] = {}
        reuse = self.reuse and pids is None
        kept, new_kept = self._kept, {}
        now = self._clock()
        reused = 0
        same, fresh = set(), set()
        for pid_s in self._pid_names(pids):
            if not (pid_s.isdigit() and pid_s.isascii()):
                continue
            pid = int(pid_s)
            cpu_ns = _process_cpu_ns(pid) if reuse else None
            if cpu_ns is not None:
                k = kept.get(pid)
                # None of its threads ran since k was read: k's values are still the kernel's, but for
                # what another process may change meanwhile, checked when due.
                if (k is not None and k.cpu_ns == cpu_ns and now < k.read_at
                        and (now < k.check_at or self._as_kept(k.tasks.values()))):
                    if now >= k.check_at:
                        k = k._replace(check_at=now + _spread(CHECK_SECONDS, pid, len(k.tasks)))
                    new_kept[pid] = k
                    n, renewed = self._take_kept(pid, k, tasks, processes, seen_keys)
                    reused += n
                    (fresh if renewed else same).add(pid)
                    continue
            tids = self._read_threads(pid, pid_s, tasks, masks)
            if not tids:
                continue
            info = self._process_info(pid, pid_s, tids, tasks, seen_keys)
            if info is None:
                continue
            processes[pid] = info
            if cpu_ns is not None:
                mine = {t: tasks[t] for t in tids}
                if all(t.state != "R" for t in mine.values()):
                    new_kept[pid] = _Kept(cpu_ns, now + _spread(CHECK_SECONDS, pid, len(tids)), mine, info,
                                          (pid, _start_of(pid, tids, tasks)) if self.cmdline else None,
                                          now + _spread(REUSE_SECONDS, pid, len(tids)))
        if reuse:
            self._kept = new_kept
        self.reused = reused
        self.same = frozenset(same - self._fresh)
        self._fresh = fresh
        if self.cmdline and pids is None:
            # Forget processes that are gone so the cache does not grow with every pid ever seen.
            for key in [k for k in self._cmdlines if k not in seen_keys]:
                del self._cmdlines[key]
        return ThreadsSample(tasks, processes, self.clk_tck)

    def _pid_names(self, pids) -> list[str]:
        if pids is not None:
            return [str(int(p)) for p in pids]
        return self.root.listdir_small(self._base)

    @staticmethod
    def _as_kept(kept) -> bool:
        """Whether no other process changed the nice, policy, RT priority or allowed CPUs of these
        sleeping threads since they were read (see the module docstring); False when one exited."""
        aff, prio, sched, param, who = (os.sched_getaffinity, os.getpriority, os.sched_getscheduler,
                                        os.sched_getparam, os.PRIO_PROCESS)
        try:
            for t in kept:
                tid = t.tid
                if (prio(who, tid) != t.nice or sched(tid) & ~_RESET_ON_FORK != t.policy
                        or param(tid).sched_priority != t.rt_priority or t.allowed is None
                        or len(t.allowed) != len(a := aff(tid)) or not a.issuperset(t.allowed)):
                    return False
        except OSError:         # ESRCH: it exited (and so ran); anything else: read it and see
            return False
        return True

    def _take_kept(self, pid: int, k: _Kept, tasks: dict, processes: dict, seen_keys: set) -> tuple[int, bool]:
        """Put a reused process's last read into this sample (its detail threads read afresh);
        returns how many threads were reused, and whether one was read afresh."""
        mine = k.tasks
        tasks.update(mine)              # in C: a 2,000-thread process costs no Python loop
        renewed = False
        for tid in self.detail_tids:
            if tid in mine:
                fresh = self._read_one(pid, tid)
                if fresh is not None:
                    tasks[tid], renewed = fresh, True
        processes[pid] = k.info
        if k.cmdline_key is not None:
            seen_keys.add(k.cmdline_key)
        return len(mine), renewed

    def _read_threads(self, pid: int, pid_s: str, tasks: dict, masks: dict) -> list[int]:
        """Read task/TID/stat of every thread of one process into `tasks`; their tids, sorted.

        The hot loop of every tick (~2 us a thread): names are bound to locals, and only the stat
        fields the UI shows are converted (field numbers: proc(5), fs/proc/array.c do_task_stat)."""
        tdir = self._base + pid_s + "/task/"
        # [] when the process exited between listing proc/ and here (normal churn), or a capture holds
        # it without a task/ folder (or with one that leads out of it): nothing per-thread to read.
        tid_names = self.root.listdir_small(tdir)
        _open, _read, _close, rdonly = os.open, os.read, os.close, os.O_RDONLY | os.O_CLOEXEC
        live, read_small = self.live, self.root.read_small
        states, make, detail_tids = _STATES, TaskSample, self.detail_tids
        full = self.detail == "full"
        # Allowed CPUs on the live machine from sched_getaffinity(2): ~0.4 us a thread against ~25 us
        # for parsing task/TID/status.
        getaff = os.sched_getaffinity if self.live else None
        tids = []
        for tid_s in tid_names:
            path = tdir + tid_s + "/stat"
            if live:
                # The hot path: procfs's own file, one open and one read, no fstat.
                try:
                    fd = _open(path, rdonly)
                    try:
                        data = _read(fd, STAT_LIMIT)
                    finally:
                        _close(fd)
                except _GONE:
                    # The thread exited between listdir and open/read (ESRCH once it is reaped): normal.
                    continue
            elif not (tid_s.isdigit() and tid_s.isascii()) or (data := read_small(path, STAT_LIMIT)) is None:
                continue            # not a thread's folder, or a stat that is missing or refused (noted)
            r = data.rfind(b")")
            rest = data[r + 2:].split()
            try:
                t = make(pid, int(tid_s), data[data.find(b"(") + 1:r].decode("utf-8", "replace"),
                         states.get(rest[0]) or rest[0].decode("ascii", "replace"),
                         int(rest[36]), int(rest[11]), int(rest[12]), int(rest[6]), int(rest[19]),
                         int(rest[16]), int(rest[37]), int(rest[38]))
            except (IndexError, ValueError):
                raise _bad_stat(path, data) from None
            if full or t.tid in detail_tids:
                t = self._add_detail(t, tdir + tid_s)
                if t is None:
                    continue
            elif getaff is not None:
                try:
                    m = frozenset(getaff(t.tid))
                except ProcessLookupError:
                    continue        # exited since its stat was read: normal churn
                allowed = masks.get(m)
                if allowed is None:
                    allowed = masks[m] = tuple(sorted(m))
                t = _with_allowed(t, allowed)
            tasks[t.tid] = t
            tids.append(t.tid)
        tids.sort()
        return tids

    def _process_info(self, pid: int, pid_s: str, tids: list[int], tasks: dict,
                      seen_keys: set) -> ProcessInfo | None:
        """Name and command line of a process whose threads were just read; None when it is gone."""
        leader = tasks.get(pid)
        comm = leader.comm if leader is not None else None
        if comm is None:
            # The group leader exited (a zombie leader has no task entry) while its threads run on.
            comm = _read_small(self.root, self._base + pid_s + "/comm", STAT_LIMIT)
            if comm is None:
                return None
            comm = comm.rstrip("\n")
        cmd = ""
        if self.cmdline:
            key = (pid, _start_of(pid, tids, tasks))
            seen_keys.add(key)
            cmd = self._cmdlines.get(key)
            if cmd is None:
                cmd = self._cmdlines[key] = _read_cmdline(self.root, self._base + pid_s + "/cmdline")
        return ProcessInfo(pid, comm, cmd, tuple(tids))

    def _read_one(self, pid: int, tid: int, detail: bool = True) -> TaskSample | None:
        """One thread's stat (with status and sched when `detail`), parsed by the full parser; None
        when it is gone. For a single thread (read_task) and for the detail threads of a process
        whose last read is reused."""
        tpath = f"{self._base}{int(pid)}/task/{int(tid)}"
        data = _read_small(self.root, tpath + "/stat", STAT_LIMIT)
        if data is None:
            return None
        st = parse_task_stat(data, what=tpath + "/stat")
        t = TaskSample(int(pid), st.tid, st.comm, st.state, st.processor, st.utime, st.stime, st.flags,
                       st.starttime, st.nice, st.rt_priority, st.policy)
        return self._add_detail(t, tpath) if detail else t

    def _add_detail(self, t: TaskSample, tpath: str) -> TaskSample | None:
        """t with its switches, migrations and allowed CPUs; None when the thread exited meanwhile.

        On the live machine `sched` alone has the three counts (CONFIG_SCHED_DEBUG) and
        sched_getaffinity the CPUs: status (~25 us to parse) is read only where sched is missing
        or lacks the switch counts, and in captures (which hold no affinity to ask for)."""
        from dataclasses import replace

        sched_text = _read_small(self.root, tpath + "/sched", DETAIL_LIMIT)
        migrations = vol = invol = None
        if sched_text is not None:
            migrations, vol, invol = sched_counts(sched_text)
        allowed = None
        if self.live and vol is not None and invol is not None:
            try:
                allowed = tuple(sorted(os.sched_getaffinity(t.tid)))
            except ProcessLookupError:
                return None    # stat was there a moment ago: the thread exited meanwhile
        else:
            status = _read_small(self.root, tpath + "/status", DETAIL_LIMIT)
            if status is None and self.live:
                return None    # stat was there a moment ago: the thread exited meanwhile
            # A capture may hold stat without status (prometheus/procfs's tree does): unknown, not gone.
            st = parse_status(status, what=tpath + "/status") if status is not None else {}
            vol, invol = st.get("voluntary_ctxt_switches"), st.get("nonvoluntary_ctxt_switches")
            allowed = st.get("Cpus_allowed_list")
        return replace(t, voluntary_switches=vol, involuntary_switches=invol, migrations=migrations,
                       allowed=allowed)


def _spread(seconds: float, pid: int, threads: int) -> float:
    """When a kept process is next due (a check or a read): `seconds` x 0.5-1 by pid, so that the
    processes' turns do not all fall on one tick, and longer in proportion for more than
    REUSE_THREADS threads."""
    return seconds * (0.5 + (pid % 64) / 128) * max(1.0, threads / REUSE_THREADS)


def _start_of(pid: int, tids: list[int], tasks: dict) -> int:
    """A process's start time (with its pid, it names the process across pid reuse): its leader's,
    or its first thread's when the leader has exited."""
    leader = tasks.get(pid)
    return (leader if leader is not None else tasks[tids[0]]).starttime


def _process_cpu_ns(pid: int) -> int | None:
    """The process's CPU time in ns from its CPU-time clock: MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    from include/linux/posix-timers.h, what glibc's clock_getcpuclockid() returns. None when it exited
    since proc/ was listed (EINVAL): the read that follows skips it."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)
    except OSError:
        return None


def _with_allowed(t: TaskSample, allowed: tuple[int, ...]) -> TaskSample:
    # dataclasses.replace costs ~3 us; a frozen dataclass can be set once through object.__setattr__
    # while it is still private to this reader.
    object.__setattr__(t, "allowed", allowed)
    return t


def _bad_stat(path: str, data: bytes) -> ParseError:
    try:
        parse_task_stat(data, what=path)
    except ParseError as e:
        return e
    return ParseError(path, "not the kernel's stat format")


def _read_small(root: SysRoot, path: str, limit: int) -> str | None:
    """Text of a small proc file, at most `limit` bytes, or None when the task is gone (or, in a
    capture, the file is missing or refused: SysRoot.read_small)."""
    data = root.read_small(path, limit)
    return None if data is None else data.decode("utf-8", "replace")


def _read_cmdline(root: SysRoot, path: str) -> str:
    # proc/PID/cmdline: argv NUL-separated (fs/proc/base.c get_mm_cmdline); empty for kernel threads
    # and zombies. A process gone meanwhile also gives "", which is what its row will show until the
    # next tick drops it.
    text = _read_small(root, path, CMDLINE_LIMIT)
    if not text:
        return ""
    return text.replace("\0", " ").strip()


def read_tasks(root: SysRoot, *, detail: str = "fast", pids=None, cmdline: bool = True) -> ThreadsSample:
    """Every process and thread under root's proc/PID/task/TID (or only `pids`), one shot.

    A sampler that reads every tick should keep a TaskReader instead, which caches cmdlines.
    """
    return TaskReader(root, detail=detail, cmdline=cmdline).sample(pids)


def read_task(root: SysRoot, pid: int, tid: int, detail: str = "full") -> TaskSample:
    """One thread. Raises TaskGone when it exited (or the capture does not hold it)."""
    reader = TaskReader(root, detail=detail, cmdline=False)
    t = reader._read_one(pid, tid, detail == "full")
    if t is None:
        raise TaskGone(pid, tid, live=reader.live)
    return t


def read_tgid(root: SysRoot, tid: int) -> int | None:
    """The process of thread `tid` (status Tgid; proc/TID resolves for any thread id,
    fs/proc/base.c proc_pid_lookup); None when it has exited."""
    text = root.read_optional(root.proc(tid, "status"))
    for line in (text or "").splitlines():
        if line.startswith("Tgid:"):
            value = line.split()[1:2]
            return int(value[0]) if value and value[0].isascii() and value[0].isdigit() else None
    return None


def name_matcher(query: str) -> Callable[[str], bool]:
    """The one test of a thread's names against what a user typed, for the window's filter and
    `coremap threads --name`: true when every word of `query` (split on white space) occurs, ignoring
    case, in a text made by `search_text` from the thread's names (and, in the window, its process's).

    A thread's names are its full Java name where one was read (app/machine/thread_names.py) and its
    comm, which the kernel cuts to 15 bytes (TASK_COMM_LEN 16 with the NUL, include/linux/sched.h):
    "market-data-feed-handler-0" is found by its full name in a verified JVM, and by its start
    anywhere. (Workqueue workers are the exception the other way: proc_task_name() prints their
    longer "kworker/R-..." name from wq_worker_comm().)"""
    words = tuple(query.casefold().split())
    return lambda text: all(w in text for w in words)


def search_text(*parts: str | None) -> str:
    """What name_matcher looks in: the parts that are there, joined by spaces, case-folded."""
    return " ".join(p for p in parts if p).casefold()


def find_threads_by_name(sample: ThreadsSample, pattern: str, names: ThreadNames | None = None) -> list[TaskSample]:
    """Threads whose names match `pattern` (name_matcher: its full Java name from `names`, or its
    comm), ordered by (pid, tid)."""
    matches = name_matcher(pattern)
    full = names.full_name if names is not None else (lambda pid, tid, comm: None)
    return sorted((t for t in sample.tasks.values() if matches(search_text(full(t.pid, t.tid, t.comm), t.comm))),
                  key=lambda t: (t.pid, t.tid))
