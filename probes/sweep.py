"""Sweep: the same fixed CPU-bound work unit (an L1-resident LCG/hash loop, ~2 ms) run on each
selected CPU in turn, for several rounds. Rounds are interleaved across CPUs (round r runs the unit
on every CPU before round r+1 starts), so frequency drift or a neighbour's load over time hits all
CPUs alike, and a CPU that is slower on average is slower because of something on that CPU.

Flag rule: best = the CPU with the lowest mean unit time. A CPU is flagged when its mean exceeds the
best mean by more than max(k x SE, 3% of the best mean), with SE = sqrt(sd_i^2/n_i + sd_best^2/n_best)
the standard error of the difference of the two means (k = 2.5, --k). The mean (not the median) is
used so that a CPU where one unit in three is held off shows up, which a median would hide; the
brief's "k x MAD of the CPU means above their median" was not used because with two CPUs the
deviation of each from the median equals the MAD, so nothing could ever be flagged.
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

from probes.common import ProbeArgumentParser, ProbeError, add_common_args, apply_sched, hello, pin
from probes.jitter import _host

NAME = "sweep"
TARGET_UNIT_NS = 2_000_000


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p, cpu_list=True)
    p.add_argument("--rounds", type=int, default=20, help="work units per CPU (default 20)")
    p.add_argument("--unit-ms", type=float, default=TARGET_UNIT_NS / 1e6, help="work unit length (default 2)")
    p.add_argument("--k", type=float, default=2.5, help="flag threshold in standard errors (default 2.5)")
    return p


def calibrate(unit_ns: int) -> int:
    from probes import _native
    iters = 100_000
    for _ in range(3):
        # the fastest of three: a unit that was preempted says nothing about the unit's own length
        ns = min(_native.work_unit(iters)[0] for _ in range(3))
        iters = max(1000, int(iters * unit_ns / max(ns, 1)))
    return iters


def run(args, emit) -> int:
    from probes import _native
    cpus = args.cpu_ids
    if args.rounds < 2:
        raise ProbeError(f"--rounds {args.rounds}: need at least 2 to see a spread")
    apply_sched(args)
    pin(cpus[0])
    iters = calibrate(int(args.unit_ms * 1e6))
    emit(hello(NAME, list(cpus), {"rounds": args.rounds, "iterations": iters, "k": args.k}))
    t0 = time.monotonic_ns()
    for r in range(args.rounds):
        samples = {}
        for c in cpus:
            pin(c)
            _native.work_unit(iters // 10)  # settle after the migration: caches, the frequency governor
            ns, _ = _native.work_unit(iters)
            samples[str(c)] = ns
        emit({"type": "interval", "elapsed_ns": time.monotonic_ns() - t0, "round": r, "samples": samples})
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0})
    return 0


def analyse(samples: dict[int, list[float]], k: float = 2.5) -> dict:
    """Per CPU mean, sd, cv, loss vs the best CPU, flag (see the module docstring for the rule)."""
    stats = {}
    for c, v in samples.items():
        mean = statistics.fmean(v)
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        stats[c] = (mean, sd, len(v))
    best = min(stats, key=lambda c: stats[c][0])
    bmean, bsd, bn = stats[best]
    out = {}
    for c, v in sorted(samples.items()):
        mean, sd, n = stats[c]
        se = math.sqrt(sd * sd / n + bsd * bsd / bn)
        limit = max(k * se, 0.03 * bmean)
        out[c] = {"cpu": c, "mean_ns": mean, "median_ns": statistics.median(v), "sd_ns": sd,
                  "cv": sd / mean if mean else None, "loss_vs_best": mean / bmean - 1.0,
                  "excess_ns": mean - bmean, "limit_ns": limit, "flagged": mean - bmean > limit, "n": n}
    return {"per_cpu": out, "baseline_ns": bmean, "best_cpu": best, "k": k}


def summarize(lines) -> dict:
    hello_line = next((l for l in lines if l.get("type") == "hello"), {})
    samples: dict[int, list[float]] = {}
    for l in lines:
        if l.get("type") == "interval":
            for c, ns in l["samples"].items():
                samples.setdefault(int(c), []).append(ns)
    res = analyse(samples, hello_line.get("k", 2.5)) if samples else {"per_cpu": {}}
    return {"probe": NAME, "cpu": hello_line.get("cpu"), "loop_ns": None,
            "sampled_seconds": sum(sum(v) for v in samples.values()) / 1e9, "achieved_duty": None,
            "buckets": [], "percentiles": None, "rounds": hello_line.get("rounds"),
            "cpus": list(res["per_cpu"].values()), "flagged": [c for c, r in res["per_cpu"].items() if r["flagged"]],
            "baseline_ns": res.get("baseline_ns"), "best_cpu": res.get("best_cpu"), "host": _host(hello_line)}
