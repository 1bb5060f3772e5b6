"""Wakeup latency: sleep to an absolute deadline with clock_nanosleep(TIMER_ABSTIME) at a fixed
interval and measure how late the wakeup was (actual - target), as cyclictest does.

Buckets are log-spaced, 8 per power of two (at most 12.5% wide; exact below 8 ns), in ns."""
from __future__ import annotations

import argparse
import os
import struct
import time

from app.format import format_count, format_ns
from app.parse.number import bounded
from probes.catalog import RECORDS
from probes.common import ProbeArgumentParser, ProbeError, add_common_args, apply_sched, hello, lock_memory
from probes.text import percentiles_lines

NAME = "wakeup"
RECORD = RECORDS[NAME]


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes wakeup", description=__doc__)
    add_common_args(p)
    interval = RECORD.field("interval_us").default
    p.add_argument("--interval-us", type=bounded(1, 10 ** 9, "us", integer=True), default=interval, metavar="US",
                   help=f"wakeup period (default {interval})")
    p.add_argument("--dma-latency", action="store_true",
                   help="hold /dev/cpu_dma_latency at 0 while running (keeps CPUs out of deep C-states)")
    return p


def _hold_dma_latency():
    # Documentation/power/pm_qos_interface.rst: writing a 32-bit value to /dev/cpu_dma_latency sets a
    # CPU latency QoS request that lasts while the file stays open.
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    except PermissionError:
        raise ProbeError("/dev/cpu_dma_latency: permission denied; run as root or drop --dma-latency") from None
    except FileNotFoundError:
        raise ProbeError("/dev/cpu_dma_latency does not exist on this kernel; drop --dma-latency") from None
    os.write(fd, struct.pack("i", 0))
    return fd


def run(args, emit) -> int:
    from probes import _native
    if args.interval_us < 1:
        raise ProbeError(f"--interval-us {args.interval_us}: must be at least 1")
    apply_sched(args)
    locked = lock_memory()
    dma_fd = _hold_dma_latency() if args.dma_latency else None
    try:
        emit(hello(NAME, args.cpu_id, {"interval_ns": args.interval_us * 1000, "dma_latency": args.dma_latency,
                                        "mlocked": locked}))
        chunk_ns = max(int(args.chunk_ms * 1e6), args.interval_us * 1000)
        total_ns = int(args.seconds * 1e9)
        t0 = time.monotonic_ns()
        n = 0
        while time.monotonic_ns() - t0 < total_ns:
            left = total_ns - (time.monotonic_ns() - t0)
            r = _native.wakeup_chunk(max(min(chunk_ns, left), args.interval_us * 1000), args.interval_us * 1000)
            n += r["wakeups"]
            emit({"type": "interval", "elapsed_ns": time.monotonic_ns() - t0, "chunk_ns": r["elapsed_ns"],
                  "sampled_ns": r["elapsed_ns"], "iterations": r["wakeups"], "buckets": r["buckets"],
                  "min_ns": r["min_ns"], "max_ns": r["max_ns"], "sum_ns": r["sum_ns"], "top_gaps": []})
        emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0, "wakeups": n})
    finally:
        if dma_fd is not None:
            os.close(dma_fd)
    return 0


def summarize(lines) -> dict:
    # imported here: the probe's own process (python -m probes) never summarizes, and so runs on a
    # server with nothing but Python 3 (issue 15: the agent shipped over ssh has no hdrh there)
    from probes import histogram
    run = histogram.LatencyRun.of(lines)
    n = run.total("iterations")
    if n:
        # the loop knows the exact max; the histogram only knows the bucket's midpoint
        run.percentiles["max"] = max(iv["max_ns"] for iv in run.intervals)
    return run.result(NAME, loop_ns=None, interval_ns=run.hello.get("interval_ns"), wakeups=n,
                      sampled_seconds=run.total("chunk_ns") / 1e9, achieved_duty=None,
                      mean_ns=run.total("sum_ns") / n if n else None,
                      min_ns=min((iv["min_ns"] for iv in run.intervals if iv["iterations"]), default=None))


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
    return [f"wakeup on CPU {r['cpu']}: {format_count(r['wakeups'])} wakeups every {format_ns(r['interval_ns'])}, "
            f"mean latency {format_ns(r['mean_ns'])}, min {format_ns(r['min_ns'])}", *percentiles_lines(r)]
