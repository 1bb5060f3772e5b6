"""Gap attribution (jitter --attribute): what tracing costs, how many gaps it explains, and whether
the trace clock and the probe's gap times line up.

    sudo PYTHONPATH=. python -m tests.benchmarks.bench_attribution [--cpu N] [--seconds 5] [--pairs 4]

1. Cost: alternate runs of the same jitter probe without and with --attribute (A/B, --pairs
   pairs); median of the per-pair ratios of gaps >= 10 us per second and of the share of time
   lost in gaps. Tracing adds work to every interrupt on the CPU (each event is written to the
   ring buffer), so the ratio shows what a user pays for the explanation.
2. Coverage: of the attributed gaps >= 10 us, the share with at least one event in them; the
   rest are "hardware / hypervisor" (on a VM, mostly the host taking the vCPU away).
3. Alignment: for every detailed gap that holds a local timer interrupt, the time from the gap's
   start to the handler's entry, and from the handler's exit to the gap's end. The probe's gap
   times come from the TSC, the trace's from the `mono` clock printed to the microsecond. The loop
   resumes right after the handler returns, so exit-to-end near 0 says the clocks agree; entry
   comes later than the gap's start by what happens before the guest's handler runs (on a VM, the
   exit to the host and the interrupt's injection: that part of the gap is "no event").
Needs root and tracefs; says so and exits 0 otherwise.
"""
from __future__ import annotations

import argparse
import os
import statistics

from probes import trace
from probes.runner import run_to_end
from probes.jitter import measure as jitter


def one(cpu: int, seconds: float, attribute: bool) -> dict:
    args = ["--cpu", str(cpu), "--seconds", str(seconds)] + (["--attribute"] if attribute else [])
    rc, lines, run = run_to_end("jitter", args, timeout=seconds * 4 + 30)
    if rc != 0:
        raise SystemExit(f"jitter probe failed ({rc}): {run.error() or run.stderr_lines[-3:]}")
    return jitter.summarize(lines)


def per_s_10us(r: dict) -> float:
    n = sum(b["count"] for b in r["buckets"] if b["lo_ns"] >= 10_000)
    return n / r["sampled_seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--pairs", type=int, default=4)
    args = ap.parse_args()
    why = trace.unavailable_reason()
    if why:
        print(f"bench_attribution: skipped: {why}")
        return
    print(f"gap attribution on CPU {args.cpu}: {args.pairs} pairs of {args.seconds:g} s runs, "
          "without (A) and with (B) --attribute")
    ratios_gaps, ratios_lost, covered, offsets = [], [], [], []
    print(f"  {'pair':>4} {'A gaps>=10us/s':>15} {'B gaps>=10us/s':>15} {'A lost %':>10} {'B lost %':>10}"
          f" {'B events':>9} {'B covered':>10}")
    for i in range(args.pairs):
        a = one(args.cpu, args.seconds, False)
        b = one(args.cpu, args.seconds, True)
        att = b["attribution"]
        big = [g for g in att["gaps"] if g["gap_ns"] >= 10_000 and g["traced"]]
        cov = sum(1 for g in big if g["causes"]) / len(big) if big else float("nan")
        covered.append(cov)
        ga, gb = per_s_10us(a), per_s_10us(b)
        ratios_gaps.append(gb / ga if ga else float("nan"))
        ratios_lost.append(b["lost_share"] / a["lost_share"] if a["lost_share"] else float("nan"))
        offsets.extend(_timer_offsets(args.cpu, b))
        print(f"  {i + 1:>4} {ga:>15.1f} {gb:>15.1f} {100 * a['lost_share']:>10.4f} {100 * b['lost_share']:>10.4f}"
              f" {att['cpu_events']:>9,} {100 * cov:>9.1f}%")
    med = statistics.median
    print(f"  cost: gaps >= 10 us per second B/A median {med(ratios_gaps):.2f}; "
          f"time lost B/A median {med(ratios_lost):.2f}")
    print(f"  coverage: median {100 * med(covered):.1f}% of the {att['attributed_gaps']}-odd attributed gaps "
          ">= 10 us hold an event; the rest are 'hardware / hypervisor'")
    if len(offsets) >= 2:
        for what, xs in (("timer entry - gap start", [a for a, _ in offsets]),
                         ("gap end - timer exit", [b for _, b in offsets])):
            q = statistics.quantiles(xs, n=20)
            print(f"  alignment, {what} over {len(xs)} gaps: median {med(xs) / 1e3:.1f} us, "
                  f"5th percentile {q[0] / 1e3:.1f} us, 95th {q[-1] / 1e3:.1f} us")


def _timer_offsets(cpu, result) -> list[tuple[int, int]]:
    """For each detailed gap whose only cause is one local timer interrupt that began inside it:
    (entry - gap start, gap end - exit). `ns` is the handler's time clipped to the gap, so an exit
    after the gap's end (clocks apart) would show as 0, never below."""
    out = []
    for g in result["attribution"]["gaps"]:
        if len(g["causes"]) == 1 and g["causes"][0]["name"] == "local timer" and g["causes"][0]["from_ns"] >= 0:
            c = g["causes"][0]
            out.append((c["from_ns"], g["gap_ns"] - c["from_ns"] - c["ns"]))
    return out


if __name__ == "__main__":
    main()
