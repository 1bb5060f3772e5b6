"""Sweep: the same fixed CPU-bound work unit (an L1-resident LCG/hash loop, ~2 ms) run on each
selected CPU in turn, for several rounds. Rounds are interleaved across CPUs (round r runs the unit
on every CPU, in a shuffled order, before round r+1 starts), so frequency drift or a neighbour's load
over time hits all CPUs alike, and a CPU that is slower on average is slower because of something on
that CPU.

What one sample is: the wall time from asking for CPU c (sched_setaffinity) until the unit on c has
finished, i.e. the wait to get onto c, a short settle unit, and the unit itself. The wait must be
inside the window: a task that holds c when we ask (a SCHED_FIFO hog, an IRQ thread) delays our
*arrival*, and a sample that starts its clock only once we run on c starts right after that task
has gone to sleep and so never sees it (measured: a 10% FIFO hog, 1 ms every 10 ms, cost CPU 1 0%
in 3 of 4 sweeps timed that way).

Random phase: before each unit the probe sleeps a random 0 to --unit-ms on the CPU it is leaving.
Without it, a round takes a near-constant time, and a periodic load whose period is close to a
multiple of the round length is always hit or always missed by one CPU's units (aliasing; measured:
with a 5 ms round and a 10 ms hog period, every other unit lost the whole burst, the rest nothing).
With random phases the mean unit time is an unbiased estimate of the time the CPU loses, whatever
the load's period.

Flag rule: best = the CPU with the lowest mean sample. A CPU is flagged when its mean exceeds the
best mean by more than max(k x SE, 3% of the best mean), with SE = sqrt(sd_i^2/n_i + sd_best^2/n_best)
the standard error of the difference of the two means (k = 2.5, --k). So a CPU that loses ~10% vs
its peers with a small standard error is an outlier; the 3% floor keeps tiny but consistent
differences (a sibling's cache traffic) from being flagged. The mean (not the median) is used so
that a CPU where one unit in three is held off shows up, which a median would hide; the brief's
"k x MAD of the CPU means above their median" was not used because with two CPUs the deviation of
each from the median equals the MAD, so nothing could ever be flagged.

Rounds (default 120): a periodic load that is short against the unit takes all or nothing of a
unit, so the per-unit sd is large: for a 10% hog in 1 ms bursts and a ~2.2 ms window, sd ~ 0.45 ms
(20% of the window, measured). The SE of a CPU's mean is then ~20%/sqrt(n), and k x SE must sit well
below a 10% loss for the loss to be flagged reliably. To flag it with ~99% power, SE <= 10% /
(k + 2.33) ~ 2.1%, so n >= ~100: n = 30 gives limits of 7-10% (a 10% loss missed about one sweep in
three), n = 60 limits of 6-7.5% (missed one sweep in six in the benchmark, measured at 5.0%),
n = 120 limits of 4.5-6% (12 of 12 flagged). A round costs ~3.3 ms per CPU (unit, settle, pause),
so 120 rounds take ~0.8 s on 2 CPUs and ~25 s on 64. Each result states its limit (`limit_ns`), the
smallest excess that run could have flagged.
"""
from __future__ import annotations

import argparse
import math
import random
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
    p.add_argument("--rounds", type=int, default=120, help="work units per CPU (default 120; see Rounds above)")
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
    cpus = list(args.cpu_ids)
    if args.rounds < 2:
        raise ProbeError(f"--rounds {args.rounds}: need at least 2 to see a spread")
    apply_sched(args)
    pin(cpus[0])
    iters = calibrate(int(args.unit_ms * 1e6))
    emit(hello(NAME, list(cpus), {"rounds": args.rounds, "iterations": iters, "k": args.k}))
    rng = random.Random()  # seeded from os.urandom: no two sweeps share a schedule
    pause_s = args.unit_ms / 1e3
    t0 = time.monotonic_ns()
    for r in range(args.rounds):
        samples, work = {}, {}
        rng.shuffle(cpus)
        for c in cpus:
            # A random pause before each unit, spent asleep on the CPU we are leaving, so the units
            # start at random phases of any periodic load (see the module docstring: aliasing).
            time.sleep(rng.uniform(0.0, pause_s))
            asked = time.monotonic_ns()
            pin(c)  # returns once we run on c: after whatever held c when we asked
            _native.work_unit(iters // 10)  # caches and the frequency governor, inside the timed window
            ns, _ = _native.work_unit(iters)
            samples[str(c)] = time.monotonic_ns() - asked
            work[str(c)] = ns
        emit({"type": "interval", "elapsed_ns": time.monotonic_ns() - t0, "round": r, "samples": samples,
              "work_ns": work})
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
