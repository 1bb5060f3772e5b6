"""Counters: run a command under perf_event_open counters (software: context-switches,
cpu-migrations, page-faults, task-clock; hardware: cycles, instructions where the PMU allows),
once pinned to a CPU and once unpinned, and compare. A counter the kernel or PMU refuses
(EOPNOTSUPP, ENOENT, EACCES) is reported as not available, never as an error.

Without a command, the command counted is a jitter probe of --seconds (run unbound, so the pin comes
only from the affinity set before exec)."""
from __future__ import annotations

import argparse
import sys
import time

from probes.common import ProbeArgumentParser, ProbeError, add_common_args, hello, host_facts, run_lines
from probes.text import count_text

NAME = "counters"


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes counters", description=__doc__)
    add_common_args(p)
    p.add_argument("--modes", default="pinned,unpinned", help="pinned, unpinned or both (default both)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return p


def default_command(seconds: float) -> list[str]:
    return [sys.executable, "-m", "probes", "jitter", "--unbound", "--seconds", str(seconds)]


def run(args, emit) -> int:
    from probes import _native
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        cmd = default_command(args.seconds)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in ("pinned", "unpinned"):
            raise ProbeError(f"--modes: {m!r} is neither pinned nor unpinned")
    if "pinned" in modes and args.cpu_id is None:
        raise ProbeError("pinned mode needs --cpu N")
    emit(hello(NAME, args.cpu_id, {"command": cmd, "modes": modes}))
    t0 = time.monotonic_ns()
    for m in modes:
        try:
            # the command's stdout goes to our stderr: our stdout carries only protocol lines
            r = _native.count_command(cmd, args.cpu_id if m == "pinned" else -1, 2)
        except FileNotFoundError:
            raise ProbeError(f"{cmd[0]}: command not found") from None
        emit({"type": "interval", "elapsed_ns": time.monotonic_ns() - t0, "mode": m, **r})
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0})
    return 0


def summarize(lines) -> dict:
    hello_line, ivs = run_lines(lines)
    runs = {l["mode"]: l for l in ivs}
    names = sorted({k for r in runs.values() for k in r["counts"]})
    compare = {}
    for n in names:
        p = runs.get("pinned", {}).get("counts", {}).get(n)
        u = runs.get("unpinned", {}).get("counts", {}).get(n)
        compare[n] = {"pinned": p, "unpinned": u,
                      "ratio": (p / u) if (p is not None and u) else None}
    return {"probe": NAME, "cpu": hello_line.get("cpu"), "loop_ns": None, "sampled_seconds": None,
            "achieved_duty": None, "buckets": [], "percentiles": None, "command": hello_line.get("command"),
            "runs": runs, "compare": compare, "host": host_facts(hello_line)}


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
    lines = [f"counters for {' '.join(r['command'] or [])!s} (CPU {r['cpu']}):",
             f"    {'event':<18}{'pinned':>16}{'unpinned':>16}{'ratio':>8}"]
    for ev, c in r["compare"].items():
        ratio = f"{c['ratio']:.2f}" if c["ratio"] is not None else "-"
        lines.append(f"    {ev:<18}{count_text(c['pinned']):>16}{count_text(c['unpinned']):>16}{ratio:>8}")
    return lines
