"""Wakeup latency: sleep to an absolute deadline with clock_nanosleep(TIMER_ABSTIME) at a fixed
interval and measure how late the wakeup was (actual - target), as cyclictest does. Like cyclictest,
it holds /dev/cpu_dma_latency at 0 while it runs unless told not to (--no-dma-latency), and its text
and result say how it ran: policy, priority, timer slack, and whether the hold was in force.

Several CPUs are measured at once, one child pinned to each (cyclictest -t -a). With --attribute, the
latest wakeups are attributed as timerlat -a attributes its: the tracefs events of the CPU between a
wakeup's due time and when it woke (probes/trace.py, the events jitter's gaps are attributed from).

Buckets are log-spaced, 8 per power of two (at most 12.5% wide; exact below 8 ns), in ns."""
from __future__ import annotations

import argparse
import errno
import os
import struct
import time

from app.format import format_count, format_ns
from app.parse.number import bounded
from probes import trace
from probes.common import ProbeArgumentParser, ProbeError, add_common_args, apply_sched, hello, lock_memory, log
from probes.periods import Periods, add_every_argument
from probes.text import format_attribution, percentiles_lines
from probes.wakeup import RECORD

NAME = RECORD.name


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes wakeup", description=__doc__)
    add_common_args(p)
    interval = RECORD.field("interval_us").default
    p.add_argument("--interval-us", type=bounded(1, 10 ** 9, "us", integer=True), default=interval, metavar="US",
                   help=f"wakeup period (default {interval})")
    p.add_argument("--no-dma-latency", action="store_true",
                   help="do not hold /dev/cpu_dma_latency at 0 (by default it is held while the probe runs, "
                        "as cyclictest holds it: the CPUs stay out of deep C-states)")
    p.add_argument("--attribute", action="store_true",
                   help="record interrupts, softirqs, NMIs and task switches on the CPU (tracefs, root) and say "
                        "what ran between each of the latest wakeups' due time and its wakeup (as timerlat -a)")
    add_every_argument(p)
    return p


def hold_dma_latency() -> tuple[int | None, dict]:
    """(the open file holding the request, or None; what the hello line says of it).

    Documentation/power/pm_qos_interface.rst: a 32-bit value written to /dev/cpu_dma_latency is a CPU
    latency QoS request that lasts while the file stays open; reading it gives the value in force.
    cyclictest holds it at 0 unless told otherwise (rt-tests src/cyclictest/cyclictest.c
    set_latency_target), and when it cannot open it, warns and measures anyway: so does this."""
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_RDWR)
    except OSError as e:
        why = ("permission denied (root only)" if e.errno == errno.EACCES or e.errno == errno.EPERM
               else "this kernel has no /dev/cpu_dma_latency" if e.errno == errno.ENOENT else os.strerror(e.errno))
        log(f"/dev/cpu_dma_latency not held: {why}; deep C-states may add to the latency measured")
        return None, {"held": False, "asked": True, "why": why}
    os.write(fd, struct.pack("i", 0))
    try:
        in_force = struct.unpack("i", os.pread(fd, 4, 0))[0]
    except OSError:
        in_force = None       # a kernel that refuses the read still honours the request
    return fd, {"held": True, "asked": True, "value_us": 0, "in_force_us": in_force}


TOP_LATE = 16          # the latest wakeups of each chunk kept to attribute, as the jitter loop's top gaps


def run(args, emit) -> int:
    if args.interval_us < 1:
        raise ProbeError(f"--interval-us {args.interval_us}: must be at least 1")
    apply_sched(args)
    locked = lock_memory()
    if args.no_dma_latency:
        dma_fd, dma = None, {"held": False, "asked": False, "why": "--no-dma-latency"}
    else:
        dma_fd, dma = hold_dma_latency()
    tracer, why_not = trace.session_for(args, args.seconds)
    try:
        emit(hello(NAME, args.cpu_id, {"interval_ns": args.interval_us * 1000, "dma_latency": dma,
                                        "mlocked": locked, "attribute": bool(args.attribute),
                                        "expect_s": args.seconds}))
        late = _measure(args, emit, tracer is not None)
        if tracer is not None:
            text, stats = tracer.stop()
            emit(trace.attribute_run(text, stats, late[1], probe_pid=os.getpid(), started_ns=tracer.started_ns,
                                     t0_ns=late[0], names=trace.thread_names))
        elif args.attribute:
            emit({"type": "attribution", "available": False, "reason": why_not})
        emit({"type": "done", "elapsed_ns": late[3], "wakeups": late[2]})
    finally:
        if tracer is not None:
            tracer.close()
        if dma_fd is not None:
            os.close(dma_fd)
    return 0


def _measure(args, emit, keep_late: bool) -> tuple[int, list, int, int]:
    """Sleep and wake for --seconds, a line per chunk (and per --every period); (t0, the late wakeups
    kept as (due, latency) in CLOCK_MONOTONIC ns, how many wakeups, ns measured)."""
    from probes import _native
    chunk_ns = max(int(args.chunk_ms * 1e6), args.interval_us * 1000)
    total_ns = int(args.seconds * 1e9)
    periods = Periods(args.every, args.cpu_id)
    late: list[tuple[int, int]] = []
    t0 = time.monotonic_ns()
    n = 0
    while time.monotonic_ns() - t0 < total_ns:
        left = total_ns - (time.monotonic_ns() - t0)
        r = _native.wakeup_chunk(max(min(chunk_ns, left), args.interval_us * 1000), args.interval_us * 1000,
                                 top_n=TOP_LATE if keep_late else 0)
        n += r["wakeups"]
        late.extend((due, lat) for due, lat in r["late"])
        line = {"type": "interval", "elapsed_ns": time.monotonic_ns() - t0, "chunk_ns": r["elapsed_ns"],
                "sampled_ns": r["elapsed_ns"], "iterations": r["wakeups"], "buckets": r["buckets"],
                "min_ns": r["min_ns"], "max_ns": r["max_ns"], "sum_ns": r["sum_ns"], "at_least": r["at_least"],
                "top_gaps": []}
        emit(line)
        period = periods.add(line)
        if period is not None:
            emit(period)
    elapsed = time.monotonic_ns() - t0
    period = periods.end(elapsed)
    if period is not None:
        emit(period)
    return t0, late, n, elapsed


def summarize(lines) -> dict:
    """The result object: the latency figures, and how the run was set up (policy, priority, the
    timer slack in force, the /dev/cpu_dma_latency hold), which decide what a wakeup costs."""
    # imported here: the probe's own process (python -m probes) never summarizes, and so runs on a
    # server with nothing but Python 3 (issue 15: the agent shipped over ssh has no hdrh there)
    from probes import histogram
    run = histogram.LatencyRun.of(lines)
    n = run.total("iterations")
    if n:
        # the loop knows the exact min and max; the histogram only knows a bucket's value, which can lie
        # outside them: no percentile reads later than the latest wakeup or earlier than the earliest (a
        # narrow run printed min 69.9 µs above its p50 of 69.7 µs)
        mx = max(iv["max_ns"] for iv in run.intervals)
        mn = min((iv["min_ns"] for iv in run.intervals if iv["iterations"]), default=0)
        run.percentiles = {k: max(min(v, mx), mn) for k, v in run.percentiles.items()} | {"max": mx}
    h = run.hello
    policy = h.get("policy")
    dma = h.get("dma_latency")
    if not isinstance(dma, dict):
        # a run of an older coremap said only whether --dma-latency was given
        dma = {"held": bool(dma), "asked": bool(dma), "why": None if dma else "not asked (an older coremap's run)"}
    return run.result(NAME, loop_ns=None, interval_ns=h.get("interval_ns"), wakeups=n,
                      sampled_seconds=run.total("chunk_ns") / 1e9, achieved_duty=None,
                      mean_ns=run.total("sum_ns") / n if n else None,
                      min_ns=min((iv["min_ns"] for iv in run.intervals if iv["iterations"]), default=None),
                      policy=policy, priority=h.get("priority"), timer_slack_ns=h.get("timer_slack_ns"),
                      # hrtimer: a real-time task's sleeps get no slack (kernel/time/hrtimer.c, rt_task)
                      effective_slack_ns=0 if policy in ("fifo", "rr") else h.get("timer_slack_ns"),
                      dma_latency=dma, attribution=trace.attribution_of(lines))


def setup_text(r: dict) -> str:
    """`SCHED_FIFO 80, timer slack 0 (a real-time task gets none), /dev/cpu_dma_latency held at 0 µs`."""
    policy = r.get("policy")
    sched = f"SCHED_{(policy or '?').upper()}" + (f" {r['priority']}" if policy in ("fifo", "rr") else "")
    if policy in ("fifo", "rr"):
        slack = "timer slack none (a real-time task's timers get none)"
    else:
        slack = f"timer slack {format_ns(r.get('timer_slack_ns'))}"
    dma = r.get("dma_latency") if isinstance(r.get("dma_latency"), dict) else {}
    if dma.get("held"):
        hold = "/dev/cpu_dma_latency held at 0 µs (as cyclictest holds it)"
    else:
        hold = f"/dev/cpu_dma_latency not held ({dma.get('why') or 'not asked'}): deep C-states may add to each wakeup"
    return f"{sched}, {slack}, {hold}"


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
    return [f"wakeup on CPU {r['cpu']}: {format_count(r['wakeups'])} wakeups every {format_ns(r['interval_ns'])}, "
            f"mean latency {format_ns(r['mean_ns'])}, min {format_ns(r['min_ns'])}",
            f"  {setup_text(r)}", *percentiles_lines(r),
            *format_attribution(r.get("attribution"), what="late wakeups")]
