"""/proc/PID/task/TID/stat, status and sched.

stat: Documentation/filesystems/proc.rst, Table 1-4; fs/proc/array.c do_task_stat. comm is in
parentheses and may itself hold spaces, '(' , ')' and even a newline (do_task_stat prints it with
proc_task_name(..., escape=false)): split at the LAST ')'. Field 39 (1-based) is `processor`, the CPU
the task last ran on; field 9 is `flags` (PF_*); fields 40 and 41 are `rt_priority` (1-99 under
SCHED_FIFO and SCHED_RR, 0 otherwise) and `policy` (SCHED_* of include/uapi/linux/sched.h, without
SCHED_RESET_ON_FORK, which stat does not print).

status: Documentation/filesystems/proc.rst, Table 1-2; fs/proc/array.c proc_pid_status. "Key:\\tvalue"
lines; Name is escaped there (escape=true), unlike stat.

sched: kernel/sched/debug.c proc_sched_show_task, present only with CONFIG_SCHED_DEBUG. A header line
"comm (tid, #threads: n)", a dashed line, then "key    :    value" lines (integers, or "secs.nsecs"
floats for times).
"""
from __future__ import annotations

from dataclasses import dataclass

from app.errors import CpuListError, ParseError, excerpt
from app.parse.cpulist import parse_cpulist
from app.parse.number import is_ascii_int

PF_KTHREAD = 0x00200000          # include/linux/sched.h
PF_NO_SETAFFINITY = 0x04000000   # include/linux/sched.h: "Userland is not allowed to meddle with cpus_mask"

# The stat line after "pid (comm) " is split on whitespace; field N (1-based, as in proc.rst) is at
# index N - 3 of that list. Field 41 (policy) is the last one this module reads.
_MIN_FIELDS_AFTER_COMM = 41 - 2


# include/uapi/linux/sched.h. 4 (SCHED_ISO) is reserved and never set; the names are chrt's and tuna's.
SCHED_POLICIES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}
RT_POLICIES = (1, 2)       # the policies whose tasks have an RT priority (sched(7))
RT_PRIORITY = (1, 99)      # sched_get_priority_min/max(SCHED_FIFO and SCHED_RR) on Linux


def policy_name(policy: int) -> str:
    """The name of a SCHED_* number ("fifo"); "policy N" for one this kernel header does not name."""
    return SCHED_POLICIES.get(policy) or f"policy {policy}"


def sched_label(policy: int, rt_priority: int) -> str:
    """A task's policy as chrt and tuna show it: "fifo 80", "rr 1", or the name alone where the
    policy has no RT priority ("other", "batch")."""
    name = policy_name(policy)
    return f"{name} {rt_priority}" if policy in RT_POLICIES else name


# What kind of thread a tuna, tuned or rtla user looks for first (issue 30), by its kernel name: the
# threaded IRQ handlers (kernel/irq/manage.c setup_irq_thread names them "irq/%d-%s"), the softirq
# daemons (kernel/softirq.c "ksoftirqd/%u"), RCU's callback and grace-period threads
# (kernel/rcu/tree.c "rcuc/%u", tree_nocb.h "rcuo%c/%d" and "rcuog/%d", "rcu_preempt"...), workqueue
# workers ("kworker/..."), the other kernel threads, and user threads.
THREAD_KINDS = {"irq": "threaded IRQ handlers (irq/N-name)", "softirq": "softirq daemons (ksoftirqd/N)",
                "rcu": "RCU threads (rcuc, rcuo, rcu_*)", "kworker": "workqueue workers (kworker)",
                "kernel": "other kernel threads", "user": "user threads"}
_KIND_PREFIXES = (("irq/", "irq"), ("ksoftirqd/", "softirq"), ("rcuc/", "rcu"), ("rcuo", "rcu"), ("rcu_", "rcu"),
                  ("rcub/", "rcu"), ("kworker/", "kworker"))


def thread_kind(comm: str, kthread: bool) -> str:
    """One of THREAD_KINDS for a thread by its comm and whether it is a kernel thread (PF_KTHREAD: a
    user thread may call itself "irq/1-x", which does not make it one)."""
    if not kthread:
        return "user"
    return next((kind for prefix, kind in _KIND_PREFIXES if comm.startswith(prefix)), "kernel")


class TaskFlags:
    """What a task's PF_* flags (stat field 9) and policy (field 41) say, for any value with `flags`,
    `policy` and `rt_priority` fields."""
    __slots__ = ()
    comm: str
    flags: int
    policy: int
    rt_priority: int

    @property
    def kthread(self) -> bool:
        return bool(self.flags & PF_KTHREAD)

    @property
    def no_setaffinity(self) -> bool:
        return bool(self.flags & PF_NO_SETAFFINITY)

    @property
    def policy_name(self) -> str:
        return policy_name(self.policy)

    @property
    def sched_label(self) -> str:
        return sched_label(self.policy, self.rt_priority)

    @property
    def kind(self) -> str:
        """One of THREAD_KINDS (thread_kind of its comm and flags)."""
        return thread_kind(self.comm, self.kthread)


@dataclass(frozen=True)
class TaskStat(TaskFlags):
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



def parse_task_stat(text: str | bytes, *, what: str = "task stat") -> TaskStat:
    """One stat line (proc/PID/stat or proc/PID/task/TID/stat) as a TaskStat.

    Raises ParseError naming `what` when the line is not the kernel's format.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    open_ = text.find("(")
    close = text.rfind(")")
    if open_ < 0 or close < open_:
        raise ParseError(what, "no '(comm)' in the line; expected 'pid (comm) state ...'")
    head = text[:open_].strip()
    if not is_ascii_int(head):
        raise ParseError(what, f"{excerpt(head, 20)} is not a task id")
    tid = int(head)
    comm = text[open_ + 1:close]
    tail = text[close + 1:]
    if not tail.isascii() or "_" in tail or "+" in tail:
        # int() would take other scripts' digits, "1_0" and "+1": the kernel prints none of them.
        raise ParseError(what, "a numeric field is not ASCII digits")
    rest = tail.split()
    if len(rest) < _MIN_FIELDS_AFTER_COMM:
        raise ParseError(what, f"only {len(rest) + 2} fields; the kernel prints at least 41 since 2.6")
    try:
        return TaskStat(
            tid=tid, comm=comm, state=rest[0], ppid=int(rest[1]), flags=int(rest[6]),
            minflt=int(rest[7]), majflt=int(rest[9]), utime=int(rest[11]), stime=int(rest[12]),
            priority=int(rest[15]), nice=int(rest[16]), num_threads=int(rest[17]),
            starttime=int(rest[19]), processor=int(rest[36]), rt_priority=int(rest[37]),
            policy=int(rest[38]))
    except ValueError as e:
        raise ParseError(what, f"a numeric field is not a number ({e})") from None


# status keys this project uses; everything else in the file is ignored.
_STATUS_INT = ("Tgid", "Pid", "PPid", "Threads", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")


def parse_status(text: str, *, what: str = "task status") -> dict:
    """The few status fields coremap needs, typed: "Name" (str, kernel-escaped), "State" (one letter),
    "Tgid", "Pid", "PPid", "Threads", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches" (int),
    "Cpus_allowed_list" (tuple of CPU ids). Keys absent from the text are absent from the dict.
    """
    out: dict = {}
    for n, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        value = value.strip()
        if key in _STATUS_INT:
            if not is_ascii_int(value):
                raise ParseError(what, f"{key} {excerpt(value, 20)} is not a number", n)
            out[key] = int(value)
        elif key == "Cpus_allowed_list":
            try:
                out[key] = parse_cpulist(value, what=f"{what} Cpus_allowed_list")
            except CpuListError as e:
                raise ParseError(what, str(e), n) from None
        elif key == "Name":
            out[key] = value
        elif key == "State":
            out[key] = value[:1]
    return out


_SCHED_COUNTS = ("se.nr_migrations", "nr_voluntary_switches", "nr_involuntary_switches")


def sched_counts(text: str) -> tuple[int | None, int | None, int | None]:
    """(migrations, voluntary switches, involuntary switches) from proc/PID/task/TID/sched; None for
    a line the kernel did not write. The detail read of the busiest threads every few seconds wants
    only these three: parse_sched's every-line conversion cost as much as the rest of that read."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith(("se.nr_migrations", "nr_vol", "nr_invol")):
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        value = value.strip()
        if sep and key in _SCHED_COUNTS and is_ascii_int(value):
            found[key] = int(value)
    return tuple(found.get(k) for k in _SCHED_COUNTS)


def parse_sched(text: str) -> dict[str, int | float]:
    """proc/PID/task/TID/sched as {key: number}, e.g. {"se.nr_migrations": 5, "se.vruntime": 149.79}.

    Lines without " : " (the header, the dashes, "current_node=0, numa_group_id=0") and values that are
    not numbers are skipped: the file is a debugging aid whose lines vary by kernel version and config.
    """
    out: dict[str, int | float] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        value = value.strip()
        if not key or " " in key or "(" in key or not value.isascii() or "_" in value:
            continue
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                continue
    return out
