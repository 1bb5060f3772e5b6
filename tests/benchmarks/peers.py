"""What the second-wave probe benchmarks (bench_probes_messaging, bench_probes_first_touch,
bench_probes_scaling) share: a probe child run to its end, a C peer compiled from a source kept in
tests/benchmarks/, perf found, and one line per comparison (the median of each side, their ratio,
the target, every value). Not a benchmark itself (no bench_ prefix)."""
from __future__ import annotations

import glob
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from probes.runner import ProbeRun

HERE = Path(__file__).resolve().parent
PAIRS = int(os.environ.get("BENCH_PAIRS", "6"))
CPUS = sorted(os.sched_getaffinity(0))


def med(xs):
    return statistics.median(xs)


def report(name: str, ours, peer, lo: float, hi: float, unit: str = "", *, paired: bool = False) -> float:
    """One line: medians, ratio (of medians, or the median of the pairs' ratios), target, values."""
    if med(ours) == 0 and med(peer) == 0:
        print(f"{name:<44} ours 0  peer 0  (both zero)   (ours {list(ours)}, peer {list(peer)})", flush=True)
        return 1.0
    # paired: a pair whose peer counted 0 has no ratio; the other pairs still say how the two agree
    ratios = [o / p for o, p in zip(ours, peer) if p]
    if paired:
        r = med(ratios) if ratios else float("nan")
    else:
        r = med(ours) / med(peer) if med(peer) else float("nan")
    ok = "ok" if lo <= r <= hi else "OUT OF RANGE"
    print(f"{name:<44} ours {med(ours):>11.4g}{unit}  peer {med(peer):>11.4g}{unit}  ratio {r:6.3f}  "
          f"target [{lo}, {hi}] {ok}   (ours {['%.4g' % x for x in ours]}, peer {['%.4g' % x for x in peer]})",
          flush=True)
    return r


def whole_affinity(limit_s: float = 120.0) -> None:
    """Wait until this process may run on every CPU it started with again. Another tool may move it
    away for a while (seen: a probe run elsewhere on this shared VM moved every movable thread off
    the CPU it measured, this benchmark's too, for the length of its run); a child started meanwhile
    would inherit the narrower mask and measure something else."""
    end = time.monotonic() + limit_s
    noted = False
    while set(os.sched_getaffinity(0)) != set(CPUS) and time.monotonic() < end:
        if not noted:
            print(f"  (this process was moved to CPUs {sorted(os.sched_getaffinity(0))}; waiting to get {CPUS} back)",
                  flush=True)
            noted = True
        time.sleep(0.2)


def probe(name: str, args, timeout: float = 300) -> list[dict]:
    """A probe child's lines; SystemExit with its error when it fails."""
    whole_affinity()
    run = ProbeRun.start(name, [str(a) for a in args])
    try:
        rc = run.wait(timeout)
    finally:
        if run.running:
            run.cancel()
    if rc != 0:
        raise SystemExit(f"{name} {args}: exit {rc}: {run.error() or run.stderr_lines[-3:]}")
    return run.lines


def compile_peer(source: str, *libs: str) -> Path:
    """tests/benchmarks/<source> compiled with -O2 into a temporary folder (never a fetched program)."""
    if not shutil.which("cc"):
        raise SystemExit("cc: not found; install a C compiler (build-essential)")
    out = Path(tempfile.mkdtemp(prefix="coremap_peer_")) / Path(source).stem
    subprocess.run(["cc", "-O2", "-o", str(out), str(HERE / source), *libs], check=True)
    return out


def find_perf() -> str | None:
    for p in ["/usr/bin/perf", *sorted(glob.glob("/usr/bin/perf_*"))]:
        if os.access(p, os.X_OK) and subprocess.run([p, "--version"], capture_output=True).returncode == 0:
            return p
    return None


def perf_counts(perf: str, events: list[str], cmd: list[str], *, cpus=None) -> dict[str, float]:
    """`perf stat -x, -e EVENTS -- CMD` (under `taskset -c CPUS` when given): {event: count}, task-clock
    in ns (perf prints msec), and the wall time perf measured as `wall_ns`."""
    pre = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
    r = subprocess.run([*pre, perf, "stat", "-x,", "-e", ",".join(events), "--", *cmd], capture_output=True,
                       text=True)
    out: dict[str, float] = {}
    for line in r.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].split(":")[0] in events and f[0] not in ("<not supported>", "<not counted>"):
            v = float(f[0])
            out[f[2].split(":")[0]] = v * 1e6 if f[2].startswith("task-clock") else v
    return out
