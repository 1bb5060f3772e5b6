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

Flag rule (analyse): a paired, trimmed comparison of each CPU with the best one, round by round.
  1. Pairing. d_r = (CPU c's sample in round r) - (the best CPU's sample in round r). Both were taken
     within one round (milliseconds apart), so slow drift (frequency, a host's load on the VM) that
     hits both cancels in d_r instead of widening the spread.
  2. Trimming (Yuen's test for paired data, 10% trimmed). The statistic is the 10% trimmed mean of
     the d_r; its standard error comes from the 10% winsorized sd: se = sd_w / ((1 - 2g) sqrt(n)),
     df = n - 2 floor(g n) - 1 (Wilcox, "Introduction to Robust Estimation and Hypothesis Testing",
     s. 5.9.1). A handful of multi-millisecond stalls from some other task (seen on this VM: 1-30 ms,
     a few per sweep, on either CPU) no longer decide the outcome: they are trimmed from the mean and
     winsorized in the spread. What survives is a loss that hits many rounds: a 10% FIFO hog in 1 ms
     bursts every 10 ms hits ~(2.2 + 1) / 10 = 32% of ~2.2 ms windows, so most hits are kept.
  3. Significance: one-sided p of t = trimmed mean / se (Student t, df as above), Bonferroni
     corrected over the CPUs compared: flagged only if p < alpha / (number of CPUs - 1),
     alpha = 0.01 (--alpha). On a machine where all CPUs are alike, d_r is symmetric about 0 and a
     sweep flags any CPU in at most 1 of 100 sweeps through this gate alone.
  4. Effect floor: the trimmed mean loss must also exceed 3% (--floor) of the best CPU's trimmed
     mean unit. A consistent but tiny difference (a sibling's cache traffic, 0.5-2% on this VM) is
     significant with enough rounds; it is not what "stands out" means.
  Best CPU = the lowest 10% trimmed mean sample (a CPU with one long stall stays eligible).

Why not the plain mean, the median, or a sign test. The mean with k x SE (the rule before this
one) is right on a quiet machine but one 20 ms stall on the best CPU moves its mean by ~8% of a 2 ms
unit over 120 rounds and its SE with it: in the benchmark that hid the hog in ~1 sweep of 6. The
median, or a sign test on "CPU c slower in round r", cannot see this load at all: a 2.2 ms window
lands entirely between 1 ms bursts 10 ms apart in ~68% of rounds, so the median round loses nothing
and "c slower" is a coin toss in those rounds; measured: median loss 0.1-2.3% and 60-80 of 120 rounds
positive with the hog (15 sweeps): the median was under 3% in 11 of them, and a sign test at
p < 0.01 (>= 73 of 120 positive) flagged 6 of 15.
A unit longer than the load's period (>= 10 ms here) would make every round see a burst, but the
period of an unknown load is unknown (a 10 ms burst every 100 ms would need 100 ms units), and at
10 ms a 120-round sweep costs 2.4 s on 2 CPUs and 77 s on 64. Trimming 10% keeps a load that hits
well over 10% of units; its limit: a load that touches under ~12% of units (long bursts with a long
period, e.g. 10 ms every 100 ms) is mostly trimmed away and is found by the `loss_vs_best` column
(the plain mean), not by the flag.

Rounds (default 120): a round costs ~3.3 ms per CPU (unit, settle, pause), so 120 rounds take
~0.8 s on 2 CPUs and ~25 s on 64 (measured: 1.0-1.3 s per 2-CPU sweep with the process start).
Each result states its limit (`limit_ns`), the smallest trimmed excess that run could have flagged:
max(t_crit x se, floor x baseline).

Measured on this shared 2-vCPU VM, the same raw sweeps judged by both rules (60 windows of 120
rounds with the hog, 60 without): the hog flagged in 48 (was 43), hog-free windows flagged while
other tasks loaded a CPU 6 of 48 (was 10), and with the machine quiet 9 of 10 and 0 of 12 (both
rules). What neither rule can tell from a hog: another task's load during the sweep, and a vCPU that
the host runs 5-18% slower for a second (seen with the sweep at SCHED_FIFO 1 and nothing else busy in
the guest, p < 1e-6): those are real losses on that CPU during that sweep, and are flagged as such.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from app.format import format_cpus, format_ns
from app.parse.number import bounded
from probes.common import (ProbeArgumentParser, ProbeError, add_common_args, apply_sched, allowed_cpus, hello,
                           host_facts, pin, run_lines)
from probes.sweep import RECORD

NAME = RECORD.name
TARGET_UNIT_NS = 2_000_000
TRIM = 0.10     # share trimmed from each end of the paired differences (see Flag rule, 2.)
ALPHA = 0.01    # family-wise significance level over the CPUs compared (Flag rule, 3.)
FLOOR = 0.03    # smallest loss, as a share of the best CPU's unit, that can stand out (Flag rule, 4.)
DEFAULT_ROUNDS = RECORD.field("rounds").default  # see Rounds above


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p, cpu_list=True)
    p.add_argument("--rounds", type=bounded(1, 10 ** 9, "rounds", integer=True), default=DEFAULT_ROUNDS,
                   help=f"work units per CPU (default {DEFAULT_ROUNDS}; see Rounds above)")
    p.add_argument("--unit-ms", type=bounded(0.001, 60000, "ms"), default=TARGET_UNIT_NS / 1e6, help="work unit length (default 2)")
    p.add_argument("--alpha", type=bounded(0.0, 1.0, ""), default=ALPHA,
                   help=f"significance level over all CPUs compared (default {ALPHA}; see Flag rule)")
    p.add_argument("--floor", type=bounded(0.0, 1.0, ""), default=FLOOR,
                   help=f"smallest loss vs the best CPU that is flagged, as a share (default {FLOOR})")
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
    if not cpus:
        raise ProbeError(f"no CPU given; pass --cpu LIST (choose from "
                         f"{','.join(map(str, allowed_cpus()))}): the sweep compares CPUs")
    if args.rounds < 2:
        raise ProbeError(f"--rounds {args.rounds}: need at least 2 to see a spread")
    if not 0 < args.alpha < 1:
        raise ProbeError(f"--alpha {args.alpha}: a significance level lies between 0 and 1 (e.g. 0.01)")
    if not 0 <= args.floor < 1:
        raise ProbeError(f"--floor {args.floor}: a share of the best CPU's unit, 0 to 1 (e.g. 0.03)")
    apply_sched(args)
    pin(cpus[0])
    iters = calibrate(int(args.unit_ms * 1e6))
    emit(hello(NAME, list(cpus), {"rounds": args.rounds, "iterations": iters, "alpha": args.alpha,
                                   "floor": args.floor}))
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


def trimmed_mean(xs, g: float = TRIM) -> float:
    """Mean after dropping floor(g n) values from each end."""
    v = sorted(xs)
    k = int(g * len(v))
    return statistics.fmean(v[k:len(v) - k])


def _betai(a: float, b: float, x: float, y: float) -> float:
    """Regularized incomplete beta I_x(a, b) with y = 1 - x given separately (1 - x rounds to 1 for
    tiny x), by its continued fraction (Numerical Recipes 3rd ed., s. 6.4, betacf): the Student t
    tail below needs it and numpy has no special functions."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast only on this side
        return 1.0 - _betai(b, a, y, x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y))
    return front * h / a


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom (one-sided upper tail)."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    # P(|T| > t) = I_x(df/2, 1/2) with x = df / (df + t^2) (Abramowitz & Stegun 26.7.1, 26.5.27)
    p = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t), t * t / (df + t * t))
    return p if t > 0 else 1.0 - p


def t_isf(p: float, df: float) -> float:
    """The t with P(T > t) = p (0 < p < 0.5), by bisection on t_sf."""
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > p:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if t_sf(mid, df) > p else (lo, mid)
    return (lo + hi) / 2.0


def yuen_paired(d, g: float = TRIM) -> dict:
    """Yuen's trimmed-mean test on paired differences d (Flag rule, 2.): trimmed mean, its standard
    error from the winsorized sd, degrees of freedom, t, and the one-sided p of "mean > 0"."""
    n = len(d)
    v = sorted(d)
    k = int(g * n)
    tm = trimmed_mean(v, g)
    lo, hi = v[k], v[n - k - 1]
    sw = statistics.stdev([min(max(x, lo), hi) for x in d]) if n > 1 else 0.0
    se = sw / ((1.0 - 2.0 * g) * math.sqrt(n))
    df = max(1, n - 2 * k - 1)
    if se > 0:
        t = tm / se
    else:  # every winsorized difference equal: no spread, so any nonzero shift is certain
        t = math.inf if tm > 0 else (-math.inf if tm < 0 else 0.0)
    return {"trimmed_mean": tm, "se": se, "df": df, "t": t, "p": t_sf(t, df) if t else 0.5}


def analyse(samples: dict[int, list[float]], alpha: float = ALPHA, floor: float = FLOOR,
            trim: float = TRIM) -> dict:
    """Per CPU mean, sd, cv, loss vs the best CPU, and the flag (module docstring, Flag rule).

    samples[c][r] is CPU c's sample in round r; rounds are paired by index (every round runs every
    CPU), up to the shortest list, so a live sweep can be analysed between rounds."""
    n_pair = min(len(v) for v in samples.values())
    tmean = {c: trimmed_mean(v[:n_pair], trim) for c, v in samples.items()}
    best = min(sorted(tmean), key=lambda c: tmean[c])
    base = samples[best][:n_pair]
    bmean = statistics.fmean(samples[best])
    tests = max(1, len(samples) - 1)  # Bonferroni: each CPU but the best is one test
    level = alpha / tests
    out = {}
    for c, v in sorted(samples.items()):
        mean = statistics.fmean(v)
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        row = {"cpu": c, "mean_ns": mean, "median_ns": statistics.median(v), "sd_ns": sd,
               "cv": sd / mean if mean else None, "loss_vs_best": mean / bmean - 1.0, "n": len(v),
               "trimmed_ns": tmean[c], "excess_ns": 0.0, "trimmed_loss": 0.0, "p_value": None,
               "limit_ns": None, "flagged": False}
        if c != best and n_pair >= 2:
            y = yuen_paired([a - b for a, b in zip(v[:n_pair], base)], trim)
            limit = max(t_isf(level, y["df"]) * y["se"], floor * tmean[best])
            row.update(excess_ns=y["trimmed_mean"], trimmed_loss=y["trimmed_mean"] / tmean[best],
                       p_value=y["p"], limit_ns=limit,
                       flagged=y["p"] < level and y["trimmed_mean"] > floor * tmean[best])
        out[c] = row
    return {"per_cpu": out, "baseline_ns": bmean, "baseline_trimmed_ns": tmean[best], "best_cpu": best,
            "alpha": alpha, "floor": floor, "trim": trim, "rounds_paired": n_pair}


def summarize(lines) -> dict:
    hello_line, ivs = run_lines(lines)
    samples: dict[int, list[float]] = {}
    for l in ivs:
        for c, ns in l["samples"].items():
            samples.setdefault(int(c), []).append(ns)
    # sweeps saved before the rule changed carry "k" instead: analysed with today's defaults
    res = (analyse(samples, hello_line.get("alpha", ALPHA), hello_line.get("floor", FLOOR))
           if samples else {"per_cpu": {}})
    return {"probe": NAME, "cpu": hello_line.get("cpu"), "loop_ns": None,
            "sampled_seconds": sum(sum(v) for v in samples.values()) / 1e9, "achieved_duty": None,
            "buckets": [], "percentiles": None, "rounds": hello_line.get("rounds"),
            "cpus": list(res["per_cpu"].values()), "flagged": [c for c, r in res["per_cpu"].items() if r["flagged"]],
            "baseline_ns": res.get("baseline_ns"), "baseline_trimmed_ns": res.get("baseline_trimmed_ns"),
            "best_cpu": res.get("best_cpu"), "alpha": res.get("alpha"), "floor": res.get("floor"),
            "host": host_facts(hello_line)}


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
    lines = [f"sweep over CPUs {format_cpus(c['cpu'] for c in r['cpus'])}: {r['rounds']} rounds, "
             f"best CPU {r['best_cpu']} at {format_ns(r['baseline_ns'])} per unit",
             f"    {'cpu':>4}{'mean':>12}{'sd':>12}{'cv':>8}{'loss':>9}  flag"]
    for c in r["cpus"]:
        lines.append(f"    {c['cpu']:>4}{format_ns(c['mean_ns']):>12}{format_ns(c['sd_ns']):>12}"
                     f"{100 * c['cv']:>7.2f}%{100 * c['loss_vs_best']:>8.2f}%  {'SLOW' if c['flagged'] else ''}")
    return lines
