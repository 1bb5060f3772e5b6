"""`coremap sched (--tid T | --pid P | --java NAME --pid P) --policy fifo|rr|other|batch|idle
[--priority N] [--dry-run]`: a thread's (or each thread of a process's) scheduling policy and RT
priority, as tuna -p and chrt -p set them, and as the window's Set scheduling… does.

It goes through the one pin flow (app/pinning/service.py schedule: read before, journal, write, read
back, journal), so `coremap undo`, `coremap restore` and a give-back put the policy back. One line per
thread; exit 0 all set, 1 a thread refused (the line names why: RLIMIT_RTPRIO, sched_rt_runtime_us, a
cgroup without RT time, the CPU's stopper thread), 2 bad input (a priority out of range, deadline).
"""
from __future__ import annotations

from app.cli.common import PID_MAX, add_command, opened_host, whole
from app.errors import CoremapError
from app.parse.task_stat import RT_PRIORITY, SCHED_POLICIES


class SchedInputError(CoremapError):
    """A policy or priority the kernel does not take (exit 2; what names no thread is a PinInputError)."""


def register(subparsers) -> None:
    p = add_command(subparsers, "sched", "set a thread's scheduling policy and RT priority (the window's Set scheduling…)",
                    "Set the scheduling policy and real-time priority of a thread, every thread of a process, or "
                    "a Java thread, as chrt -p and tuna -p do. The previous policy is journalled first, so "
                    "`coremap undo` and `coremap restore` put it back. SCHED_DEADLINE is not set here (chrt "
                    "--deadline takes its runtime, deadline and period).",
                    root="a captured machine: refused, scheduling is set on this machine only")
    p.add_argument("--tid", type=whole(1, PID_MAX, "(a thread id)"), metavar="T", help="one thread")
    p.add_argument("--pid", type=whole(1, PID_MAX, "(a process id)"), metavar="P",
                   help="every thread of a process (or the JVM for --java)")
    p.add_argument("--java", metavar="NAME", help="the Java thread of this full name in JVM --pid")
    # deadline is a choice so that asking for it is told why not (sched_value), not "invalid choice".
    p.add_argument("--policy", required=True, choices=tuple(SCHED_POLICIES.values()),
                   help="other, batch and idle are time-shared (priority 0); fifo and rr are real-time; "
                        "deadline is refused (chrt --deadline sets it)")
    p.add_argument("--priority", type=whole(0, RT_PRIORITY[1], "(an RT priority)"), metavar="N",
                   help=f"the RT priority for fifo and rr, {RT_PRIORITY[0]}-{RT_PRIORITY[1]} (99 highest; default "
                        f"{RT_PRIORITY[0]}); 0 or none for the others")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be set, and why not where it would not go; write and journal nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    from app.cli.pin import _report, _report_plan, _targets, pins_of
    from app.pinning.sched import sched_value
    try:
        value = sched_value(args.policy, args.priority)
    except ValueError as e:
        raise SchedInputError(str(e)) from None
    with opened_host(args) as host:
        service = pins_of(host, dry_run=args.dry_run)
        target = _targets(args, service.root)[0]     # as `coremap pin` reads them
        if args.dry_run:
            return _report_plan(service.plan_schedule([target], value))
        return _report(service.schedule([target], value, origin="cli"), "nothing to set", named=True)
