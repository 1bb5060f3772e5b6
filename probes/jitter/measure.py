"""Jitter: a busy loop reading the TSC (CLOCK_MONOTONIC without an invariant TSC) on one CPU; every
time the loop is held off (interrupt, softirq, another task, SMI, hypervisor) shows up as a gap
between two reads. Like oslat, but streamed per chunk and with a duty cycle."""
from __future__ import annotations

import argparse
import os
import time

from app.format import format_count, format_ns
from app.parse.number import bounded
from probes import trace
from probes.common import ProbeArgumentParser, add_common_args, apply_sched, duty_split, hello, lock_memory
from probes.jitter import RECORD
from probes.periods import Periods, add_every_argument
from probes.text import format_attribution, gap_lines

NAME = RECORD.name


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes jitter", description=__doc__)
    add_common_args(p)
    duty, threshold = RECORD.field("duty").default, RECORD.field("threshold_ns").default
    p.add_argument("--duty", type=bounded(0.1, 100, "percent"), default=duty, metavar="P",
                   help=f"percent of time spent sampling: 100 = always, 50 = 1 ms on/1 ms off (default {duty:g})")
    p.add_argument("--threshold-ns", type=bounded(1, 10 ** 12, "ns", integer=True), default=threshold, metavar="NS",
                   help=f"gaps at least this long are binned finely and kept as top gaps (default {threshold})")
    p.add_argument("--top", type=bounded(0, 10000, "gaps", integer=True), default=16, help="largest gaps kept per interval (default 16)")
    p.add_argument("--no-tsc", action="store_true", help="read CLOCK_MONOTONIC even where rdtsc is usable")
    p.add_argument("--attribute", action="store_true",
                   help="record interrupts, softirqs, NMIs and task switches on the CPU (tracefs, root) "
                        "and say what ran during each large gap")
    add_every_argument(p)
    return p


def run(args, emit) -> int:
    on_ns, off_ns = duty_split(args.duty)
    apply_sched(args)
    locked = lock_memory()
    tracer, why_not = trace.session_for(args, args.seconds)
    try:
        return _measure(args, emit, on_ns, off_ns, locked, tracer, why_not)
    finally:
        if tracer is not None:
            tracer.close()


def _measure(args, emit, on_ns, off_ns, locked, tracer, why_not) -> int:
    from probes import _native
    emit(hello(NAME, args.cpu_id, {"duty": args.duty, "on_ns": on_ns, "off_ns": off_ns,
                                    "threshold_ns": args.threshold_ns, "top": args.top, "mlocked": locked,
                                    "attribute": bool(args.attribute), "expect_s": args.seconds}))
    chunk_ns = int(args.chunk_ms * 1e6)
    total_ns = int(args.seconds * 1e9)
    t0 = time.monotonic_ns()
    sampled = iterations = 0
    all_gaps: list[tuple[int, int]] = []
    periods = Periods(args.every, args.cpu_id)
    while True:
        elapsed = time.monotonic_ns() - t0
        if elapsed >= total_ns:
            break
        r = _native.jitter_chunk(min(chunk_ns, total_ns - elapsed), args.threshold_ns, on_ns, off_ns,
                                 args.top, not args.no_tsc)
        if tracer is not None:
            all_gaps.extend((t, g) for t, g in r["top_gaps"])
        sampled += r["sampled_ns"]
        iterations += r["iterations"]
        line = {"type": "interval", "elapsed_ns": time.monotonic_ns() - t0, "chunk_ns": r["elapsed_ns"],
                "sampled_ns": r["sampled_ns"], "iterations": r["iterations"], "loop_ns": r["loop_ns"],
                "tsc": r["tsc"], "buckets": r["buckets"], "at_least": r["at_least"],
                "top_gaps": sorted([[t - t0, g] for t, g in r["top_gaps"]])}
        emit(line)
        _emit_some(emit, periods.add(line))
    _emit_some(emit, periods.end(time.monotonic_ns() - t0))
    done = {"type": "done", "elapsed_ns": time.monotonic_ns() - t0, "sampled_ns": sampled,
            "iterations": iterations, "loop_ns": sampled / iterations if iterations else None}
    if tracer is not None:
        text, stats = tracer.stop()
        emit(trace.attribute_run(text, stats, all_gaps, probe_pid=os.getpid(),
                                 started_ns=tracer.started_ns, t0_ns=t0, names=trace.thread_names))
    elif args.attribute:
        emit({"type": "attribution", "available": False, "reason": why_not})
    emit(done)
    return 0


def _emit_some(emit, line: dict | None) -> None:
    if line is not None:
        emit(line)


def summarize(lines) -> dict:
    """The CLI's result object for one jitter run. Its `percentiles` are of gap lengths (intervals of
    at least the threshold), `gaps` holds what a jitter user reads first (probes/histogram.py
    gap_figures), and `buckets` every read-to-read interval, as oslat's histogram holds them."""
    # imported here: the probe's own process (python -m probes) never summarizes, and so runs on a
    # server with nothing but Python 3 (issue 15: the agent shipped over ssh has no hdrh there)
    from probes import histogram
    run = histogram.LatencyRun.of(lines)
    sampled, elapsed, iters = run.total("sampled_ns"), run.total("chunk_ns"), run.total("iterations")
    top = sorted((g for iv in run.intervals for g in iv["top_gaps"]), key=lambda g: -g[1])[:run.hello.get("top", 16)]
    threshold = run.hello.get("threshold_ns") or histogram.DEFAULT_GAP_NS
    # the loop knows the exact longest gap; the histogram only knows its bucket's midpoint
    gaps = histogram.gap_figures(run.buckets, sampled, from_ns=threshold, max_ns=top[0][1] if top else None,
                                 exact=_exact_steps(run.intervals))
    rows = histogram.gaps_per_hour(run.buckets, sampled)["rows"]
    run.percentiles = gaps["percentiles"]
    return run.result(NAME, loop_ns=sampled / iters if iters else None, sampled_seconds=sampled / 1e9,
                      elapsed_seconds=elapsed / 1e9, achieved_duty=sampled / elapsed if elapsed else None,
                      requested_duty=run.hello.get("duty"), iterations=iters, threshold_ns=threshold,
                      gaps=gaps, gaps_per_cpu_hour=rows, lost_share=gaps["lost_share"],
                      top_gaps=[{"t_ns": t, "gap_ns": g} for t, g in top], attribution=trace.attribution_of(lines))


def _exact_steps(intervals) -> dict:
    """{step_ns: (gaps, ns lost)} summed over the interval lines, for the steps every line counted
    (a child of an older coremap counts none: the buckets are read instead)."""
    out: dict[int, list] = {}
    for iv in intervals:
        for step, n, lost in iv.get("at_least") or ():
            acc = out.setdefault(int(step), [0, 0, 0])
            acc[0] += int(n)
            acc[1] += float(lost)
            acc[2] += 1
    return {step: (n, lost) for step, (n, lost, lines) in out.items() if lines == len(intervals)}


def fleet_figures(result: dict) -> dict:
    """What `coremap fleet --jitter-cpu` keeps of a host's run (app/remote/fleet.py jitter_text)."""
    from probes.histogram import step_row
    gaps = result.get("gaps") or {}
    row10, row100 = step_row(gaps, 10_000), step_row(gaps, 100_000)
    return {"p99_ns": (result.get("percentiles") or {}).get("p99"), "max_ns": gaps.get("max_ns"),
            "gaps10_per_s": row10["per_second"] if row10 else None,
            "gaps100_per_s": row100["per_second"] if row100 else None, "lost_share": gaps.get("lost_share")}


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict): first what a jitter
    user reads (gaps per second and per CPU-hour, time lost, the longest), then the gap lengths'
    percentiles and the table by length."""
    lines = [f"jitter on CPU {r['cpu']}: {r['sampled_seconds']:.3f} s sampled "
             f"(duty {100 * (r['achieved_duty'] or 0):.1f}%), loop {format_ns(r['loop_ns'])}, "
             f"{format_count(r['iterations'])} reads", *gap_lines(r.get("gaps"))]
    lines += [f"  gaps per CPU-hour by length (of {r['sampled_seconds']:.3f} s sampled):",
              f"    {'length':<16}{'count':>8}{'per CPU-hour':>16}"]
    for row in r["gaps_per_cpu_hour"]:
        if row["count"]:
            rng = (f"{format_ns(row['lo_ns'])}-{format_ns(row['hi_ns'])}" if row["hi_ns"]
                   else f">= {format_ns(row['lo_ns'])}")
            lines.append(f"    {rng:<16}{row['count']:>8}{row['per_hour']:>16,.0f}")
    lines.extend(format_attribution(r.get("attribution")))
    return lines
