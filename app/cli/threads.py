"""`coremap threads [--root DIR] [--pid P] [--name SUBSTR] [--kind KIND] [--interval S] [--json]`: every thread
with its process, name, state, last CPU, allowed CPUs, scheduling policy and RT priority (as chrt and
ps's cls/rtprio show them) and kernel-thread / no-setaffinity flags.

--name finds threads by their own names, which is how Java, Go and database threads are told apart
("GC Thread#0", "market-data-feed-handler-0"): every word of it must occur, any case, in the thread's
comm or, in a JVM coremap has verified, in its full Java name (the kernel cuts comm to 15 bytes;
app/machine/java.py reads the full names, app/machine/threads.py name_matcher is the one test the
window's filter uses too). Where a name was cut, NAME shows both: "market-data-feed-handler-0
(market-data-fee)". With --interval S (live machine only) each thread's CPU use over S seconds is
shown, from app.sampling.rates.
"""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from app.cli.common import PID_MAX, add_command, add_json_arguments, bounded, opened_host, whole, write_json
from app.errors import CoremapError
from app.format import printable
from app.parse.cpulist import format_cpulist
from app.parse.task_stat import RT_POLICIES, THREAD_KINDS

if TYPE_CHECKING:
    from app.machine.sample import MachineSample
    from app.machine.thread_names import ThreadNames
    from app.machine.threads import TaskSample, ThreadsSample


class NoThreads(CoremapError):
    """A root that holds no proc/PID/task folders (most fixtures, older snapshots)."""


def register(subparsers) -> None:
    p = add_command(subparsers, "threads", "list threads: process, name, state, last CPU, allowed CPUs, policy",
                    "List every thread (or those of --pid, or whose name contains --name) with its "
                    "last CPU, allowed CPUs, scheduling policy and RT priority, and flags (K = kernel thread, N = affinity cannot be "
                    "changed, PF_NO_SETAFFINITY). On this machine, threads of verified JVMs show their "
                    "full Java names.",
                    root="a captured machine (folder holding proc/PID/task/) instead of this one")
    p.add_argument("--pid", type=whole(1, PID_MAX, "(a process id)"), action="append", metavar="P",
                   help="only the threads of process P (repeatable)")
    p.add_argument("--name", metavar="SUBSTR",
                   help="only threads whose name holds every word of SUBSTR, any case: the full Java "
                        "name in a verified JVM, else the kernel's (cut to 15 bytes)")
    p.add_argument("--kind", action="append", choices=tuple(THREAD_KINDS), metavar="KIND",
                   help="only threads of this kind (repeatable): " + "; ".join(f"{k}: {v}" for k, v in THREAD_KINDS.items()))
    # Own dest: the top-level --interval (default 1) is the window's sampling interval.
    p.add_argument("--interval", dest="threads_interval", type=bounded(0.01, 3600, zero=True), default=0.0, metavar="S",
                   help="also show CPU %% over S seconds (live machine only; default 0 = no)")
    add_json_arguments(p, 'one JSON document, the threads a list under "threads"')
    p.set_defaults(func=run)


def run(args) -> int:
    with opened_host(args) as host:
        return _list(args, host.root)


def _list(args, root) -> int:
    # Imported here, not at the top: every `coremap` run imports this module to build its parser,
    # and only this command needs the model behind it (issue 12: start-up time).
    from app.machine.sample import MachineSample
    from app.machine.java import thread_names_of
    from app.machine.threads import TaskGone, TaskReader, find_threads_by_name
    interval = args.threads_interval
    if interval < 0:
        raise CoremapError(f"--interval {interval}: give a positive number of seconds (or 0 for none)")
    if interval > 0 and not root.is_live:
        raise CoremapError(f"--interval needs the live machine; {root.root} is a capture with one sample")
    reader = TaskReader(root, detail="full")
    t0 = time.monotonic()
    sample = reader.sample(args.pid)
    cpu_pct: dict[int, float] | None = None
    if interval > 0:
        time.sleep(interval)
        t1 = time.monotonic()
        later = reader.sample(args.pid)
        cpu_pct = _cpu_pct(MachineSample(t0, tasks=sample), MachineSample(t1, tasks=later), t1 - t0)
        sample = later
    if not sample.tasks:
        if args.pid:
            raise TaskGone(args.pid[0], None, live=root.is_live)
        raise NoThreads(f"{root.root} holds no proc/PID/task/ folders (a capture taken with --no-threads, "
                        "by coremap before issue 30 or by another tool); run on the live machine")
    # Full Java names: read from each verified JVM with cut names (app/machine/java.py), live only.
    names = thread_names_of(sample, root)
    cpusets = _cpusets(root, sample)
    tasks = find_threads_by_name(sample, args.name, names) if args.name else \
        sorted(sample.tasks.values(), key=lambda t: (t.pid, t.tid))
    if args.kind:
        tasks = [t for t in tasks if t.kind in args.kind]
    if args.json:
        write_json([_as_json(t, sample, cpu_pct, names, cpusets) for t in tasks], args, items="threads")
    elif tasks:
        sys.stdout.write(format_table(tasks, sample, cpu_pct, names, cpusets))
    if args.name and not tasks:
        print(f"coremap: no thread name holds {printable(args.name)!r}{_unread(names)}", file=sys.stderr)
        return 1
    if args.kind and not tasks:
        print(f"coremap: no thread is of kind {', '.join(args.kind)}", file=sys.stderr)
        return 1
    return 0


def _unread(names: ThreadNames) -> str:
    """Why some full names are not known, for the line that says nothing matched."""
    if names.unavailable:
        pid, why = next(iter(sorted(names.unavailable.items())))
        more = f" (and {len(names.unavailable) - 1} more JVMs)" if len(names.unavailable) > 1 else ""
        return f"; the full Java names of JVM {pid}{more} cannot be read: {printable(why)}"
    return " (the kernel keeps 15 bytes of a name; outside a verified JVM, search for its start)"


def _cpu_pct(prev: MachineSample, cur: MachineSample, seconds: float) -> dict[int, float]:
    """% of one CPU per tid, from app.sampling.rates (which matches threads by (tid, starttime))."""
    from app.sampling.rates import rates
    return {tid: r.cpu_pct for tid, r in rates(prev, cur, seconds).tasks.items()}


def _cpusets(root, sample: ThreadsSample) -> dict[int, tuple[str, tuple[int, ...] | None]]:
    """tid -> (its cpuset cgroup, that cpuset's effective CPUs), each cgroup's CPUs read once; a
    capture answers from the cgroup files it kept (app/store/capture_threads.py). A thread whose cpuset
    cannot be read (exited, or a capture without it) is left out."""
    from app.machine.cpusets import cpuset_cpus_at, read_cpuset_path
    cpus_at: dict[str, tuple[int, ...] | None] = {}
    out = {}
    for t in sample.tasks.values():
        where = read_cpuset_path(root, t.pid, t.tid)
        if where is not None:
            if where not in cpus_at:
                cpus_at[where] = cpuset_cpus_at(root, where)
            out[t.tid] = (where, cpus_at[where])
    return out


def _flags(t: TaskSample) -> str:
    return ("K" if t.kthread else "") + ("N" if t.no_setaffinity else "") or "-"


def _as_json(t: TaskSample, s: ThreadsSample, cpu_pct, names: ThreadNames, cpusets=None) -> dict:
    p = s.processes.get(t.pid)
    d = {"pid": t.pid, "tid": t.tid, "name": names.name(t.pid, t.tid, t.comm),
         "name_unread": names.note(t.pid, t.comm), "comm": t.comm, "process": p.comm if p else None,
         "cmdline": p.cmdline if p else None, "state": t.state, "last_cpu": t.last_cpu,
         "allowed": list(t.allowed) if t.allowed is not None else None,
         "kthread": t.kthread, "no_setaffinity": t.no_setaffinity, "nice": t.nice,
         "rt_priority": t.rt_priority, "policy": t.policy, "policy_name": t.policy_name,
         "kind": t.kind,
         "utime_s": t.utime / s.clk_tck, "stime_s": t.stime / s.clk_tck,
         "voluntary_switches": t.voluntary_switches, "involuntary_switches": t.involuntary_switches,
         "migrations": t.migrations}
    if cpu_pct is not None:
        d["cpu_pct"] = cpu_pct.get(t.tid)
    where, cpus = (cpusets or {}).get(t.tid, (None, None))
    d["cpuset"], d["cpuset_cpus"] = where, list(cpus) if cpus is not None else None
    return d


def format_table(tasks: list[TaskSample], s: ThreadsSample, cpu_pct=None, names: ThreadNames | None = None,
                 cpusets=None) -> str:
    from app.machine.thread_names import NO_THREAD_NAMES, shown_thread_name
    names = names or NO_THREAD_NAMES
    head = ["PID", "TID", "NAME", "S", "CPU", "ALLOWED", "CPUSET", "POLICY", "PRIO", "FLAGS"] + \
        (["CPU%"] if cpu_pct is not None else [])
    rows = []
    for t in tasks:
        name = shown_thread_name(names.full_name(t.pid, t.tid, t.comm), t.comm)
        row = [str(t.pid), str(t.tid), name, t.state, str(t.last_cpu),
               format_cpulist(t.allowed) if t.allowed is not None else "?", _cpuset_cell((cpusets or {}).get(t.tid)),
               t.policy_name,
               str(t.rt_priority) if t.policy in RT_POLICIES else "-", _flags(t)]
        if cpu_pct is not None:
            v = cpu_pct.get(t.tid)
            row.append(f"{v:.1f}" if v is not None else "-")     # new thread: no baseline
        # printable(): a thread names itself (prctl PR_SET_NAME), escapes and newlines included.
        rows.append([printable(c) for c in row])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    right = {0, 1, 4, 8, 10}
    lines = ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
             .rstrip() for r in [head] + rows]
    return "\n".join(lines) + "\n"


def _cpuset_cell(cpuset) -> str:
    """A thread's cpuset in the table: its CPUs, and its cgroup where that is not the root one."""
    if cpuset is None:
        return "?"
    where, cpus = cpuset
    shown = format_cpulist(cpus) if cpus is not None else "?"
    return shown if where == "/" else f"{shown} {where}"
