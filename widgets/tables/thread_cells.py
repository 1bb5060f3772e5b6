"""What each row of the process/thread tree shows: per column a (display, sort, tooltip, foreground)
cell for a thread or a process, built from its TaskSample and TaskRate; the dead band that keeps a
row's sort place steady while its rate barely moves; and the grouping of threads by process.
ThreadTreeModel (widgets/tables/threads.py) decides which rows to rebuild and announce."""
from __future__ import annotations

from PySide6.QtGui import QColor

from app.format import command_name, format_cpus, format_percent, format_rate
from app.machine.thread_names import ThreadNames, shown_thread_name
from app.machine.threads import TaskSample, search_text
from app.parse.task_stat import PF_KTHREAD, PF_NO_SETAFFINITY, RT_POLICIES, TaskFlags
from app.sampling.rates import TaskRate
from widgets.tables.sorting import TIE, TIE_ABSOLUTE, near

COL_NAME, COL_ID, COL_CPU, COL_PCT, COL_MIGR, COL_ALLOWED, COL_STATE, COL_POLICY = range(8)
_KTHREAD_FG = QColor(128, 128, 128)

# Documentation/filesystems/proc.rst, Table 1-4 (field 3, state), fs/proc/array.c task_state_array.
_STATE_NAMES = {"R": "running", "S": "sleeping", "D": "disk sleep", "T": "stopped", "t": "tracing stop",
                "X": "dead", "Z": "zombie", "P": "parked", "I": "idle"}


# A row's place in a sort by CPU % or migrations/s moves only when its value leaves a dead band
# around the value it was last placed by: more than a quarter of it, and more than one unit away
# (1% of a core; 1 migration/s): the IRQ table's tie (widgets/tables/sorting.py TIE, TIE_ABSOLUTE).
# Rows with near-equal rates (this window at 0.7% and a daemon at 1.0%) then keep their places
# instead of swapping at every thread read; each swap made Qt's dynamic sort re-lay out and repaint
# the whole tree (8-10 ms, issue 12). With half a unit, the kernel threads and daemons of an idle VM
# that wake now and then still moved the tree 11 times a minute; with one, once. The cells show the
# new values at once; a row that clearly overtakes another moves, and a click on the header sorts by
# the values shown.
_STEADY_COLUMNS = (COL_PCT, COL_MIGR)


def steady(old: tuple | None, cells: tuple) -> tuple:
    """`cells`, with the sort value of each rate column kept from `old` while within the dead band."""
    if old is None:
        return cells
    out = None
    for c in _STEADY_COLUMNS:
        was, now = old[c][1], cells[c][1]
        if was == now or was < 0 or now < 0:         # -1.0: unknown, always placed as it is
            continue
        if near(now, was, TIE, TIE_ABSOLUTE):
            if out is None:
                out = list(cells)
            shown, _, tip, fg = cells[c]
            out[c] = (shown, was, tip, fg)
    return cells if out is None else tuple(out)


def thread_cells(t: TaskSample, proc_comm: str, rate: TaskRate | None, shown: str | None = None,
                 full: str | None = None, unread: str | None = None) -> tuple:
    """(display, sort, tooltip, foreground) per column for one thread; `shown` replaces its name when
    it carries its process's (a runtime that names threads only inside the process); `full` is its
    full Java name where the kernel cut it, `unread` why that name cannot be read (ThreadNames)."""
    if rate is None:
        last_cpu, pct, migr, moved = t.last_cpu, None, None, False
    else:
        last_cpu, pct, migr, moved = rate.last_cpu, rate.cpu_pct, rate.migrations_per_s, rate.moved
    fg = _KTHREAD_FG if t.flags & PF_KTHREAD else None
    cpu_tip = None
    if moved:
        cpu_tip = "moved to this CPU since the previous sample"
    state = t.state
    name = shown_thread_name(full, t.comm) if full else shown if shown and t.comm == proc_comm else t.comm
    return (
        (name, name.lower(), _name_tip(t, proc_comm, full, unread), fg),
        (str(t.tid), t.tid, None, fg),
        (str(last_cpu), last_cpu, cpu_tip, fg),
        (format_percent(pct), pct if pct is not None else -1.0, None, fg),
        (format_rate(migr), migr if migr is not None else -1.0,
         None if migr is not None or rate is None else "migration count unavailable (needs CONFIG_SCHED_DEBUG)",
         fg),
        (format_cpus(t.allowed), _cpus_key(t.allowed),
         "PF_NO_SETAFFINITY: the kernel does not let this thread be moved"
         if t.flags & PF_NO_SETAFFINITY else None, fg),
        (state, state, _STATE_NAMES.get(state), fg),
        _policy_cell(t, fg),
    )


def _policy_cell(t: TaskFlags | None, fg, tip: str = "") -> tuple:
    """The Policy column: "fifo 80" as chrt shows it; sorted real-time first, by RT priority (a sort
    descending puts the highest priority on top, as tuna's list does)."""
    if t is None:
        return ("", -1, None, fg)
    rt = t.policy in RT_POLICIES
    about = (f"SCHED_{t.policy_name.upper()}" + (f", RT priority {t.rt_priority} (1-99, 99 highest)" if rt else "")
             + (f"\n{tip}" if tip else "") + "\nright-click → Set scheduling… to change it")
    return (t.sched_label, 1000 + t.rt_priority if rt else t.policy, about, fg)


def _name_tip(t: TaskSample, proc_comm: str, full: str | None, unread: str | None) -> str:
    where = f"(tid {t.tid}) in {proc_comm} (pid {t.pid})"
    if full:
        return f"{full} {where}\nkernel name (comm, cut to 15 bytes): {t.comm}"
    if unread:
        return (f"{t.comm} {where}\nthe kernel keeps 15 bytes of a name; the full Java name cannot be "
                f"read: {unread}")
    return f"{t.comm} {where}"


def process_cells(pid, comm, cmdline, threads, rlist, shown: str | None = None, names_line: str | None = None) -> tuple:
    """Cells of a process row from its threads and their rates (rlist, in the same order); `shown`
    replaces its name (see shown_name); `names_line` says when its Java names were read, or why not."""
    pct_sum = 0.0
    pct_known = False
    migr_sum = 0.0
    migr_known = False
    cpus = set()
    leader = None
    for t, rate in zip(threads, rlist):
        if t.tid == pid:
            leader = t
        if rate is None:
            cpus.add(t.last_cpu)
        else:
            cpus.add(rate.last_cpu)
            pct_sum += rate.cpu_pct
            pct_known = True
            m = rate.migrations_per_s
            if m is not None:
                migr_sum += m
                migr_known = True
    leader = leader or (threads[0] if threads else None)
    kthread = bool(leader.flags & PF_KTHREAD) if leader is not None else False
    fg = _KTHREAD_FG if kthread else None
    pct = pct_sum if pct_known else None
    migr = migr_sum if migr_known else None
    allowed = leader.allowed if leader is not None else None
    state = leader.state if leader is not None else ""
    n = len(threads)
    tip = (cmdline or f"[{comm}] (kernel thread)" if kthread else cmdline or comm)
    tip = f"{tip}\n{n} thread{'s' if n != 1 else ''}" + (f"\n{names_line}" if names_line else "")
    name = shown or comm
    return (
        (name, name.lower(), tip, fg),
        (str(pid), pid, None, fg),
        (format_cpus(cpus) if cpus else "", min(cpus) if cpus else -1,
         "the CPUs its threads last ran on" if n > 1 else None, fg),
        (format_percent(pct), pct if pct is not None else -1.0, "sum over its threads" if n > 1 else None, fg),
        (format_rate(migr), migr if migr is not None else -1.0, None, fg),
        (format_cpus(allowed), _cpus_key(allowed), "the main thread's Cpus_allowed_list", fg),
        (state, state, _STATE_NAMES.get(state), fg),
        _policy_cell(leader, fg, "the main thread's" if n > 1 else ""),
    )


def threads_by_pid(tasks: dict, processes: dict) -> dict[int, list]:
    """pid -> its threads in ascending tid order. The reader's ProcessInfo already lists each
    process's tids sorted; a sample without them (or not covering every thread) is grouped here."""
    if processes and sum(len(p.tids) for p in processes.values()) == len(tasks):
        try:
            out = {pid: [tasks[t] for t in p.tids] for pid, p in processes.items() if p.tids}
        except KeyError:
            out = None
        if out is not None and all(p.tids == tuple(sorted(p.tids)) for p in processes.values()):
            return out
    by_pid: dict[int, list] = {}
    for t in tasks.values():
        by_pid.setdefault(t.pid, []).append(t)
    for threads in by_pid.values():
        threads.sort(key=lambda t: t.tid)
    return by_pid


def shown_name(comm: str, cmdline: str, threads) -> str | None:
    """The name the tree shows for a process whose every thread is called by the process's name, as
    Python's, Node's and other runtimes' are (app.format.command_name: "python3 serve.py"), so such
    processes can be told apart; None for the others (a JVM's threads name themselves)."""
    if cmdline and threads and all(t.comm == comm for t in threads):
        name = command_name(comm, cmdline)
        return name if name != comm else None
    return None


def thread_rows(threads: list, rlist: list, comm: str, built: dict[int, tuple], shown: str | None,
                names: ThreadNames):
    """({tid: (inputs, cells, filter text)}, {tid: cells}, {tid: filter text}) of one process's
    threads, in tid order; a thread whose task, rate, process name and full name are unchanged keeps
    its cells from `built`. The filter text is app/machine/threads.py search_text of its names."""
    nb: dict[int, tuple] = {}
    tc: dict[int, tuple] = {}
    tf: dict[int, str] = {}
    cut = names.names or names.unavailable        # any JVM names at all: else skip the lookups
    for t, rate in zip(threads, rlist):
        tid = t.tid
        full = unread = None
        if cut:
            full, unread = names.full_name(t.pid, tid, t.comm), names.note(t.pid, t.comm)
        inputs = (t, rate, comm, shown, full, unread)
        prev = built.get(tid)
        if prev is None or prev[0] != inputs:
            cells = steady(prev[1] if prev is not None else None, thread_cells(t, comm, rate, shown, full, unread))
            prev = (inputs, cells, search_text(full, t.comm, str(tid)))
        nb[tid] = prev
        tc[tid] = prev[1]
        tf[tid] = prev[2]
    return nb, tc, tf


def _cpus_key(cpus) -> str:
    return ",".join(f"{c:05d}" for c in cpus) if cpus else ""

