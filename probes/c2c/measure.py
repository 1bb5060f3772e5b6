"""Core-to-core latency: two threads pinned to CPUs a and b pass one 64-byte-aligned cache line back
and forth (an atomic counter each side bumps in turn). One-way latency = round trip / 2; each pair
runs several batches and reports the median and the minimum batch."""
from __future__ import annotations

import argparse
import itertools
import statistics
import time

from app.parse.cpulist import parse_cpulist
from app.parse.number import bounded
from app.format import format_ns
from probes.common import ProbeArgumentParser, ProbeError, add_common_args, hello, host_facts, run_lines

NAME = "c2c"
# The text's matrix: a row label column, then one right-aligned cell per CPU (wide enough for '29.2 ns').
_LABEL = 6
_CELL = 10


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes c2c", description=__doc__)
    add_common_args(p, cpu_list=True)
    p.add_argument("--pairs", default=None, metavar="A:B,...",
                   help="measure only these pairs (default: every pair of --cpu)")
    p.add_argument("--trips", type=bounded(1, 10 ** 9, "round trips", integer=True), default=20000, help="round trips per batch (default 20000)")
    p.add_argument("--batches", type=bounded(1, 10 ** 6, "batches", integer=True), default=5, help="batches per pair (default 5)")
    return p


def parse_pairs(text: str, allowed) -> list[tuple[int, int]]:
    pairs = []
    for piece in text.split(","):
        a, sep, b = piece.strip().partition(":")
        if not sep:
            raise ProbeError(f"--pairs {text!r}: {piece!r} is not A:B; write pairs like 0:1,0:2")
        (ca,), (cb,) = parse_cpulist(a, what="--pairs"), parse_cpulist(b, what="--pairs")
        for c in (ca, cb):
            if c not in allowed:
                raise ProbeError(f"CPU {c} is not available to this process; choose from "
                                 f"{','.join(map(str, allowed))}")
        if ca == cb:
            raise ProbeError(f"--pairs {piece!r}: a pair needs two different CPUs")
        pairs.append((ca, cb))
    return pairs


def run(args, emit) -> int:
    from probes import _native
    from probes.common import allowed_cpus
    pairs = parse_pairs(args.pairs, allowed_cpus()) if args.pairs else list(itertools.combinations(args.cpu_ids, 2))
    if not pairs:
        raise ProbeError("c2c needs at least two CPUs: pass --cpu 0-1 or --pairs 0:1")
    emit(hello(NAME, list(args.cpu_ids or sorted({c for p in pairs for c in p})),
               {"trips": args.trips, "batches": args.batches}))
    t0 = time.monotonic_ns()
    for a, b in pairs:
        rts = _native.c2c(a, b, args.trips, args.batches)
        one_way = [rt / 2 for rt in rts]
        emit({"type": "interval", "elapsed_ns": time.monotonic_ns() - t0, "pair": [a, b],
              "one_way_ns": one_way, "median_ns": statistics.median(one_way), "min_ns": min(one_way)})
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0, "pairs": len(pairs)})
    return 0


def summarize(lines) -> dict:
    hello_line, ivs = run_lines(lines)
    cpus = sorted({c for iv in ivs for c in iv["pair"]})
    matrix = [[None] * len(cpus) for _ in cpus]
    idx = {c: i for i, c in enumerate(cpus)}
    for iv in ivs:
        a, b = iv["pair"]
        matrix[idx[a]][idx[b]] = matrix[idx[b]][idx[a]] = iv["median_ns"]
    return {"probe": NAME, "cpu": hello_line.get("cpu"), "loop_ns": None, "sampled_seconds": None,
            "achieved_duty": None, "buckets": [], "percentiles": None,
            "pairs": [{"a": iv["pair"][0], "b": iv["pair"][1], "median_ns": iv["median_ns"], "min_ns": iv["min_ns"]}
                      for iv in ivs],
            "matrix_cpus": cpus, "matrix_ns": matrix, "host": host_facts(hello_line)}


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it: the matrix, each row starting with its CPU in a column
    of its own, so every cell keeps its full width under its CPU's header (a wide value such as
    '29.2 ns' used to lose its first digit in the first column)."""
    cpus = r["matrix_cpus"]
    lines = ["core-to-core one-way latency (median of batches):",
             "    " + " " * _LABEL + "".join(f"{c:>{_CELL}}" for c in cpus)]
    for c, row in zip(cpus, r["matrix_ns"]):
        cells = "".join(f"{format_ns(v) if v is not None else '-':>{_CELL}}" for v in row)
        lines.append(f"    {c:<{_LABEL}}{cells}")
    return lines
