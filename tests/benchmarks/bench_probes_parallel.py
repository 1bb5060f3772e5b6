"""Every CPU measured at once (issue 30): `coremap probe jitter -c A,B` against `oslat -c A,B` in the
same run, alternated pairs, medians. For the note:

  wall time, two CPUs       coremap -c A,B against oslat -c A,B (same -D)
  wall time, two against one coremap -c A,B against coremap -c B: one after another it was 2x;
                            at once it is ~1x (the done-when: half the time of one after the other)
  gaps >= 10 us per second  each CPU, coremap's exact count against oslat's histogram ([k-1, k) us
                            buckets, so k >= 11 is >= 10 us: probes/histogram.py read_oslat_json)
  longest gap               each CPU, both tools' max

Both are run as a user runs them: coremap's CLI (its wall time includes Python's start, the 1 s look
at what else is busy on the CPUs, and summarising) and oslat with its defaults (its main thread on
CPU 0, its 1 s pre-heat); the measured seconds are printed beside the wall time. On a 2-CPU machine
both tools measure every CPU, so neither has a free CPU for its main thread.

Run: `python -m tests.benchmarks bench_probes_parallel` (root for oslat's mlockall and FIFO; rt-tests
installed). BENCH_PAIRS (default 3) pairs; BENCH_SECONDS (default 5) each run's duration. Prints
figures; asserts nothing.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from probes import histogram as H

PAIRS = int(os.environ.get("BENCH_PAIRS", "3"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
CPUS = sorted(os.sched_getaffinity(0))[:2]
LIST = ",".join(map(str, CPUS))
TMP = Path(tempfile.mkdtemp(prefix="bench_parallel_"))
STEP_NS = 10_000


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def run_coremap(cpus: str) -> tuple[float, dict[int, dict]]:
    """(wall seconds, {cpu: {per_s, max_ns, sampled_s}}) of `coremap probe jitter -c cpus --json`."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "app", "probe", "jitter", "-c", cpus, "--seconds", str(SECONDS),
                        "--json"], capture_output=True, text=True, check=True)
    wall = time.monotonic() - t0
    doc = json.loads(r.stdout)
    out = {}
    for res in doc.get("results", [doc]):
        row = H.step_row(res["gaps"], STEP_NS)
        out[res["cpu"]] = {"per_s": row["per_second"], "max_ns": res["gaps"]["max_ns"],
                           "sampled_s": res["sampled_seconds"]}
    return wall, out


def run_oslat(i: int) -> tuple[float, dict[int, dict]]:
    out_file = TMP / f"oslat{i}.json"
    t0 = time.monotonic()
    subprocess.run(["oslat", "-c", LIST, "-D", f"{SECONDS:g}", "-q", f"--json={out_file}"], check=True,
                   capture_output=True)
    wall = time.monotonic() - t0
    out = {}
    for t in H.read_oslat_json(out_file.read_text()).values():
        n = sum(c for lo, _hi, c in t["buckets"] if lo >= STEP_NS)
        out[t["cpu"]] = {"per_s": n / t["duration_s"], "max_ns": t["max_ns"], "sampled_s": t["duration_s"]}
    return wall, out


def line(name, ours, peer, unit):
    r = med(ours) / med(peer) if med(peer) else float("nan")
    print(f"{name:<44} coremap {med(ours):>10.4g}{unit}  peer {med(peer):>10.4g}{unit}  ratio {r:6.3f}   "
          f"(coremap {['%.4g' % x for x in ours]}, peer {['%.4g' % x for x in peer]})", flush=True)


def main() -> int:
    if len(CPUS) < 2:
        print("needs two CPUs; skipped")
        return 0
    if not shutil.which("oslat"):
        print("oslat: not installed; skipped")
        return 0
    both, one, oslat = [], [], []
    ours_cpu: dict[int, list] = {c: [] for c in CPUS}
    peer_cpu: dict[int, list] = {c: [] for c in CPUS}
    for i in range(PAIRS):
        order = ("oslat", "coremap") if i % 2 == 0 else ("coremap", "oslat")
        for who in order:
            if who == "oslat":
                wall, figs = run_oslat(i)
                oslat.append(wall)
                for c in CPUS:
                    peer_cpu[c].append(figs[c])
            else:
                wall, figs = run_coremap(LIST)
                both.append(wall)
                for c in CPUS:
                    ours_cpu[c].append(figs[c])
        one.append(run_coremap(str(CPUS[-1]))[0])
    print(f"{PAIRS} pairs, {SECONDS:g} s each, CPUs {LIST}, alternated; medians")
    line(f"wall s, -c {LIST}: coremap vs oslat", both, oslat, " s")
    line(f"wall s, coremap -c {LIST} vs coremap -c {CPUS[-1]}", both, one, " s")
    print(f"  (one after another, -c {LIST} took about {med(one) + SECONDS:.4g} s: one more CPU's {SECONDS:g} s)")
    for c in CPUS:
        line(f"CPU {c}: gaps >= 10 us per second", [f["per_s"] for f in ours_cpu[c]],
             [f["per_s"] for f in peer_cpu[c]], "/s")
        line(f"CPU {c}: longest gap", [f["max_ns"] / 1000 for f in ours_cpu[c]],
             [f["max_ns"] / 1000 for f in peer_cpu[c]], " us")
        line(f"CPU {c}: seconds measured", [f["sampled_s"] for f in ours_cpu[c]],
             [f["sampled_s"] for f in peer_cpu[c]], " s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
