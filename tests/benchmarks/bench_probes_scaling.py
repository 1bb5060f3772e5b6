"""The scaling probe, BENCH_PAIRS rounds (default 6) in alternated order:

  1. built-in work, 1 -> 2 CPUs: lock must scale negatively and private must not; at normal priority
     and at SCHED_FIFO 1 (root), with the factor and the flag of each.
  2. a user's command (tests/benchmarks/workload.c: 2 threads, each 1,000 fresh pages, 1,000 sleeps of
     20 us and ~10 ms of arithmetic) run at each width by `coremap probe scaling -- COMMAND`, against
     `taskset -c CPUS perf stat` of the same command at the same width, alternating: task-clock,
     context switches, page faults within 5%; migrations and wall time reported. The command's counts
     do not depend on where its threads run: a contended lock's do (its threads side by side or
     stacked on one CPU by the scheduler: 2.1 s or 0.28 s of task-clock, seen run to run in both
     tools), which compares the scheduler's choice, not the counting.

Run: `make bench ARGS=probes_scaling` (root for the FIFO runs; linux-perf and a C compiler).
"""
from __future__ import annotations

import os
import time

from probes.scaling.measure import summarize, widths
from tests.benchmarks.peers import CPUS, PAIRS, compile_peer, find_perf, perf_counts, probe, report, whole_affinity

EVENTS = ["task-clock", "context-switches", "cpu-migrations", "page-faults"]
WORKLOAD = ("2", "1000", "1000")      # threads, pages per thread, sleeps per thread


def work(fifo: bool) -> None:
    cpus = f"{CPUS[0]},{CPUS[1]}"
    sched = ["--policy", "fifo", "--priority", "1"] if fifo else []
    for kind in ("lock", "atomic", "private"):
        s = summarize(probe("scaling", ["--cpus", cpus, "--work", kind, "--seconds", 2, "--rounds", PAIRS, *sched]))
        cells = "  ".join(f"{w['label']} {w['throughput'] / 1e6:6.1f}M ops/s ({w['speedup']:.2f}x"
                          + (f", FLAGGED {w['factor']:.2f}x slower" if w["flagged"] else "") + ")"
                          for w in s["widths"])
        print(f"scaling {kind:<8} {'fifo 1' if fifo else 'other ':<7} {cells}", flush=True)


def command(perf: str) -> None:
    exe = compile_peer("workload.c", "-lpthread")
    cmd = [str(exe), *WORKLOAD]
    ws = widths(len(CPUS))
    ours = {w: {e: [] for e in EVENTS + ["wall"]} for w in ws}
    peer = {w: {e: [] for e in EVENTS + ["wall"]} for w in ws}

    def run_ours():
        s = summarize(probe("scaling", ["--cpus", ",".join(map(str, CPUS)), "--", *cmd]))
        for row in s["widths"]:
            if row["pinned"]:
                for e in EVENTS:
                    ours[row["width"]][e].append(row["counts"][e])
                ours[row["width"]]["wall"].append(row["wall_ns"])

    def run_perf():
        whole_affinity()
        for w in ws:
            t0 = time.monotonic_ns()
            counts = perf_counts(perf, EVENTS, cmd, cpus=CPUS[:w])
            peer[w]["wall"].append(time.monotonic_ns() - t0)
            for e in EVENTS:
                peer[w][e].append(counts[e])

    for i in range(PAIRS):
        for step in ((run_ours, run_perf) if i % 2 == 0 else (run_perf, run_ours)):
            step()
    for w in ws:
        for e in EVENTS:
            tight = e != "cpu-migrations"
            report(f"scaling -- workload, {w} CPU{'s' if w > 1 else ''}: {e}", ours[w][e], peer[w][e],
                   0.95 if tight else 0.0, 1.05 if tight else float("inf"), paired=True)
        # perf's wall time includes starting perf itself: reported, not a target
        report(f"scaling -- workload, {w} CPU{'s' if w > 1 else ''}: wall (ns)", ours[w]["wall"], peer[w]["wall"],
               0.0, float("inf"), paired=True)


def main() -> None:
    print(f"bench_probes_scaling: CPUs {CPUS}, {PAIRS} rounds; kernel {os.uname().release}", flush=True)
    if len(CPUS) < 2:
        raise SystemExit("needs two CPUs")
    work(fifo=False)
    if os.geteuid() == 0:
        work(fifo=True)
    perf = find_perf()
    if perf is None:
        print("perf: not found (apt install linux-perf); the command's peer skipped")
        return
    command(perf)


if __name__ == "__main__":
    main()
