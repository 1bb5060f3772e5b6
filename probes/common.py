"""What every probe process shares: the JSON-lines writer, CPU checks, pinning, scheduling setup,
and the `hello` line.

The protocol (one JSON object per line on stdout, flushed at once; logs go to stderr):
  {"type": "hello", kernel, clocksource, tsc_hz, tsc_usable, timer_slack_ns, policy, priority, cpu,
   isolated, pid, probe, ...}
  {"type": "interval", elapsed_ns, ...probe-specific...}      one per chunk (~100 ms) or step
  {"type": "done", ...summary...}                             the last line of a good run
  {"type": "error", "message": "..."}                         the last line of a failed run (exit 2)
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from app.errors import CoremapError
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.parse.number import bounded
from app.parse.task_stat import parse_sched, parse_status, policy_name
from app.machine.boot import read_clocksource
from app.machine.topology import read_online_cpus
from app.sysroot import SysRoot

EXIT_BAD_INPUT = 2


class ProbeError(CoremapError):
    """A probe that cannot start as asked (bad CPU, no permission for SCHED_FIFO, ...)."""


def emit(obj: dict, stream=None) -> None:
    """Write one protocol line and flush it, so a reader sees each chunk as soon as it is done."""
    out = stream or sys.stdout
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    out.flush()


def log(msg: str) -> None:
    print(f"probe[{os.getpid()}]: {msg}", file=sys.stderr, flush=True)


def add_common_args(p: argparse.ArgumentParser, *, cpu_list: bool = False) -> None:
    p.add_argument("--cpu", default=None, metavar="LIST" if cpu_list else "N",
                   help="CPUs to measure on" if cpu_list else "the CPU to pin the probe to")
    p.add_argument("--unbound", action="store_true", help="do not pin; let the scheduler place the probe")
    p.add_argument("--seconds", type=bounded(0.001, 86400), default=1.0, metavar="S", help="how long to measure (default 1)")
    p.add_argument("--chunk-ms", type=bounded(0.01, 60000, "ms"), default=100.0, metavar="MS",
                   help="one interval line per this many ms (default 100)")
    p.add_argument("--policy", choices=("other", "fifo"), default="other",
                   help="scheduling policy of the probe (default other)")
    p.add_argument("--priority", type=bounded(1, 99, "(SCHED_FIFO priority)", integer=True), default=None, metavar="P",
                   help="SCHED_FIFO priority 1-99 (default 80 with --policy fifo)")
    p.add_argument("--slack-ns", type=bounded(0, 10 ** 9, "ns", integer=True), default=None, metavar="NS",
                   help="timer slack for the probe (prctl PR_SET_TIMERSLACK); default: leave as inherited")


class ProbeArgumentParser(argparse.ArgumentParser):
    """argparse that raises ProbeError, so a bad option becomes an `error` line like any other."""

    def error(self, message):
        raise ProbeError(f"{self.prog}: {message}")


def allowed_cpus(root: SysRoot | None = None) -> tuple[int, ...]:
    """CPUs this process may run on and that are online (an offline CPU can stay in the mask)."""
    online = set(read_online_cpus(root or SysRoot("/")))
    return tuple(sorted(c for c in os.sched_getaffinity(0) if c in online))


def check_cpus(text: str | None, *, root: SysRoot | None = None, also=()) -> tuple[int, ...]:
    """Parse a CPU list and make sure every CPU is usable here. Raises ProbeError naming the CPU.
    `also`: CPUs coremap made quiet, which this process was moved off but a probe may use."""
    allowed = tuple(sorted(set(allowed_cpus(root)) | set(also)))
    if text is None:
        raise ProbeError(f"no CPU given; pass --cpu N (choose from {format_cpulist(allowed)}) or --unbound")
    cpus = parse_cpulist(str(text), what="--cpu")
    if not cpus:
        raise ProbeError(f"--cpu {text!r} names no CPU; choose from {format_cpulist(allowed)}")
    for c in cpus:
        if c not in allowed:
            raise ProbeError(f"CPU {c} is not available to this process; choose from {format_cpulist(allowed)}")
    return cpus


def pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


def apply_sched(args) -> None:
    """Scheduling policy, priority and timer slack for this process, set before any loop."""
    from probes import _native
    if args.slack_ns is not None:
        if args.slack_ns < 0:
            raise ProbeError(f"--slack-ns {args.slack_ns}: must be >= 0 (1 = as small as the kernel allows)")
        _native.set_timer_slack(args.slack_ns)
    if args.policy == "fifo":
        prio = 80 if args.priority is None else args.priority
        if not 1 <= prio <= 99:
            raise ProbeError(f"--priority {prio}: SCHED_FIFO priorities run 1-99")
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
        except PermissionError:
            raise ProbeError("SCHED_FIFO needs root or CAP_SYS_NICE (or an RLIMIT_RTPRIO); "
                             "run as root or use --policy other") from None
    elif args.priority is not None:
        raise ProbeError("--priority applies to --policy fifo only")


def lock_memory() -> bool:
    """mlockall(MCL_CURRENT | MCL_FUTURE), as oslat and cyclictest do, so a page fault or reclaim
    never shows up as a gap or a late wakeup. Without root/CAP_IPC_LOCK the kernel refuses past
    RLIMIT_MEMLOCK (mlock(2)); the probe then runs unlocked and says so in its hello line."""
    from probes import _native
    try:
        _native.lock_memory()
    except OSError as e:
        log(f"mlockall refused ({e.strerror}); measuring without locked memory")
        return False
    return True


def duty_split(percent: float) -> tuple[int, int]:
    """(on_ns, off_ns) for a duty cycle: 100% = always on (on_ns 0 means no sleep), else 1 ms off and
    on = 1 ms * P / (100 - P): 50% -> 1 ms on / 1 ms off, 10% -> 0.111 ms on / 1 ms off."""
    if not 0 < percent <= 100:
        raise ProbeError(f"--duty {percent}: give a percentage in (0, 100]")
    if percent >= 100:
        return 0, 0
    off = 1_000_000
    return int(round(off * percent / (100.0 - percent))), off


def alternated(n: int, rounds: int) -> list[tuple[int, int]]:
    """(round, index) for `n` things measured in `rounds` rounds, forward in even rounds and backward
    in odd ones: drift over the run (a neighbour's load, the host, the frequency) falls on every one
    alike instead of on whichever always runs last."""
    return [(r, i) for r in range(rounds) for i in (range(n) if r % 2 == 0 else reversed(range(n)))]


def loop_tsc_hz(hello_line: dict, *, across_cpus: bool) -> float:
    """The TSC rate a native loop should count in, or 0.0 for CLOCK_MONOTONIC (probes/_loops.h):
    rdtsc where the hello line found an invariant TSC, and, when readings taken on two CPUs are
    compared (a message's send and receive times), only where the TSC is also the kernel's
    clocksource (the kernel has then checked that every CPU's TSC agrees)."""
    if not hello_line.get("tsc_usable") or not hello_line.get("tsc_hz"):
        return 0.0
    if across_cpus and hello_line.get("clocksource") != "tsc":
        return 0.0
    return float(hello_line["tsc_hz"])


def thread_counters(tids, root: SysRoot | None = None) -> dict[int, dict]:
    """Migrations and voluntary / involuntary context switches of threads of this process, from
    /proc/self/task/TID/sched (se.nr_migrations; CONFIG_SCHED_DEBUG) and status, read as the thread
    table reads them (app/parse/task_stat.py); None where the kernel does not say. A probe reads its
    native threads while they wait to be released (probes/_loops.h)."""
    root = root or SysRoot("/")
    pid = os.getpid()
    out = {}
    for tid in tids:
        sched = root.read_optional(root.task_dir(pid, tid, "sched"))
        status = root.read_optional(root.task_dir(pid, tid, "status"))
        st = parse_status(status, what=f"thread {tid} status") if status is not None else {}
        migrations = parse_sched(sched).get("se.nr_migrations") if sched is not None else None
        out[tid] = {"migrations": int(migrations) if migrations is not None else None,
                    "voluntary": st.get("voluntary_ctxt_switches"),
                    "involuntary": st.get("nonvoluntary_ctxt_switches")}
    return out


def counter_delta(before: dict, after: dict, key: str) -> int | None:
    """after[key] - before[key] summed over the threads of thread_counters; None when unknown."""
    total = 0
    for tid, a in after.items():
        b = before.get(tid, {})
        if a.get(key) is None or b.get(key) is None:
            return None
        total += a[key] - b[key]
    return total


def run_lines(lines) -> tuple[dict, list[dict]]:
    """A run's `hello` line ({} when it sent none) and its `interval` lines, in order."""
    hello_line = next((l for l in lines if l.get("type") == "hello"), {})
    return hello_line, [l for l in lines if l.get("type") == "interval"]


def host_facts(hello_line: dict) -> dict:
    """What a result object keeps of the machine a run measured (from its hello line)."""
    return {k: hello_line.get(k) for k in ("kernel", "clocksource", "tsc_hz", "tsc_usable", "timer_slack_ns",
                                           "policy", "priority", "isolated", "pid", "mlocked",
                                           "hostname", "machine_id", "cpu_model")}


def _identity(root: SysRoot) -> dict:
    """Which machine the run measures (app/machine/identity.py): what a report or an export of
    another machine checks a stored result against (issue 30)."""
    from app.machine.identity import read_identity
    try:
        return read_identity(root).as_record()
    except CoremapError as e:
        # a machine whose topology cannot be read still runs the probe: its result says host unknown
        log(f"host not recorded: {e}")
        return {}



def hello(probe: str, cpu, extra: dict | None = None, root: SysRoot | None = None) -> dict:
    from probes import _native
    root = root or SysRoot("/")
    tsc = _native.tsc_info()
    pol = os.sched_getscheduler(0)
    isolated = root.read_optional(root.cpu_dir("isolated"))
    clocksource = read_clocksource(root).current
    d = {"type": "hello", "probe": probe, "kernel": os.uname().release, "clocksource": clocksource,
         "tsc_hz": tsc["hz"] if tsc["usable"] else None, "tsc_usable": tsc["usable"],
         "rdtsc_ns": tsc["rdtsc_ns"] if tsc["usable"] else None, "clock_gettime_ns": tsc["clock_gettime_ns"],
         "timer_slack_ns": _native.get_timer_slack(), "policy": policy_name(pol),
         "priority": os.sched_getparam(0).sched_priority, "cpu": cpu,
         "isolated": list(parse_cpulist(isolated, what="isolated CPUs")) if isolated else [],
         "pid": os.getpid(), **_identity(root)}
    if extra:
        d.update(extra)
    return d
