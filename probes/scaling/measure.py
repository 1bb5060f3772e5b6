"""Scaling: does adding CPUs help or hurt? The same fixed amount of work, run on 1, 2, 4, ... CPUs of
--cpus (the first w CPUs of the list; thread i pinned to the i-th of them, round robin, so a width's
threads run side by side even when a neighbour keeps one of its CPUs busy, where a scheduler would
stack them on the other) and unpinned (every CPU this process may use, no pin), in --rounds rounds of
alternated order, compared by the median of each width.

Work (probes/scaling/_loop.c): --threads threads (default: the widest width) sharing a pool of operations
(each takes the next batch of 256 until none is left), each operation a little private arithmetic and
  lock     an update of four shared cache lines under one pthread mutex (a database's hot lock),
  atomic   a compare-and-swap on one shared word,
  private  the same update on the thread's own lines (no sharing: what ideal scaling looks like).
The pool is sized by a calibration on one CPU so that all runs would take --seconds if every width
ran as fast as one CPU. Reported per width: operations per second, the time the
threads spent waiting for the lock or retrying the swap (measured only when an operation had to
wait), their user and system time, context switches and migrations (/proc/self/task/TID).

`scaling -- COMMAND`: the command instead, started once per width with its affinity limited to those
CPUs (inherited from this probe's thread, which sets it just before the fork), counted as the
counters probe counts (perf_event_open: task-clock, context switches, migrations; getrusage of the
child where perf is refused), with its wall time; throughput is runs per second. --rounds defaults
to 3 for the work and 1 for a command.

Negative scaling: a width whose median throughput is at least 10% below that of a narrower width
(the best of them) is flagged, with the factor by which it is slower. The 10% keeps the noise of a
shared machine from flagging a width that merely gains nothing.

One CPU: a width's CPUs used is its CPU time over its wall time. A command that keeps under
ONE_CPU of them at every width of two CPUs or more (a single-threaded program) cannot scale, and the
verdict says that, instead of calling its 1.0x "scaling".

Neighbours: a width's threads share their CPUs with whatever else runs there, and a busy neighbour
on one CPU of a 2-CPU width lets its two threads overlap only part of the time. Measured on this
2-vCPU VM with two busy-looping shells: lock work's 1 -> 2 CPU factor fell from 2.3-2.8 to 1.0-1.2.
`--policy fifo --priority 1` (root, or an RLIMIT_RTPRIO) puts the threads, and a command, ahead of
every normal-priority task, as it does for the sweep.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import time

from app.format import format_compact, format_cpus, format_factor, format_ns
from app.parse.number import bounded
from probes.common import (ProbeArgumentParser, ProbeError, add_common_args, allowed_cpus, alternated, apply_sched,
                           counter_delta, hello, host_facts, loop_tsc_hz, run_lines, thread_counters)
from probes.scaling import RECORD
from probes.text import count_text, share_text

NAME = RECORD.name
WORKS = RECORD.field("work").values()
ROUNDS_WORK = 3
ROUNDS_COMMAND = 1
NEGATIVE = 1.10            # flagged when a narrower width is this many times faster
ONE_CPU = 1.2              # CPUs used (CPU time / wall time) under which a width used one CPU at most
CALIBRATE_NS = 20_000_000  # a calibration run lasts at least this long


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes scaling", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p, cpu_list=True)
    p.add_argument("--cpus", dest="cpu", metavar="LIST", help="the same as --cpu")
    p.add_argument("--work", choices=WORKS, default=None, help="lock (default), atomic or private")
    p.add_argument("--threads", type=bounded(1, 65536, "threads", integer=True), default=None, metavar="N", help="threads (default: the widest width)")
    p.add_argument("--rounds", type=bounded(1, 10 ** 9, "rounds", integer=True), default=None,
                   help=f"rounds of alternated order (default {ROUNDS_WORK}, or {ROUNDS_COMMAND} for a command)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return p


def widths(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself."""
    out, w = [], 1
    while w < n:
        out.append(w)
        w *= 2
    return out + [n]


def check_command(cmd: list[str]) -> list[str]:
    """The command, or ProbeError when its program does not exist (before anything starts)."""
    if os.sep in cmd[0]:
        found = cmd[0] if os.path.isfile(cmd[0]) and os.access(cmd[0], os.X_OK) else None
    else:
        found = shutil.which(cmd[0])
    if found is None:
        raise ProbeError(f"{cmd[0]}: command not found; give a program on PATH or its path")
    return cmd


def run(args, emit) -> int:
    cmd = list(args.command[1:] if args.command[:1] == ["--"] else args.command)
    if cmd and (args.work is not None or args.threads is not None):
        raise ProbeError("--work and --threads set the built-in work; a command brings its own: drop them "
                         "or the command")
    args.work = args.work or "lock"
    # threads inherit the policy of the thread that creates them, and a command that of its parent
    apply_sched(args)
    rounds = args.rounds if args.rounds is not None else (ROUNDS_COMMAND if cmd else ROUNDS_WORK)
    if rounds < 1:
        raise ProbeError(f"--rounds {rounds}: at least 1")
    allowed = list(allowed_cpus())
    cpus = list(args.cpu_ids) or allowed
    runs = [{"label": f"{w} CPU{'s' if w > 1 else ''}", "width": w, "cpus": cpus[:w], "pinned": True}
            for w in widths(len(cpus))]
    runs.append({"label": "unpinned", "width": len(allowed), "cpus": allowed, "pinned": False})
    threads = args.threads if args.threads is not None else runs[-2]["width"]
    if not cmd and not 1 <= threads <= 1024:
        raise ProbeError(f"--threads {threads}: give 1 to 1024")
    if cmd:
        check_command(cmd)
    extra = {"mode": "command" if cmd else "work", "command": cmd or None, "work": None if cmd else args.work,
             "threads": None if cmd else threads, "rounds": rounds, "cpus": cpus, "runs": runs}
    h = hello(NAME, None, extra)
    tsc_hz = loop_tsc_hz(h, across_cpus=False)
    if not cmd:
        h["ops"] = _calibrate(args.work, threads, cpus[:1], tsc_hz,
                                         args.seconds / (rounds * len(runs)))
    emit(h)
    order = alternated(len(runs), rounds)
    t0 = time.monotonic_ns()
    for step, (rnd, i) in enumerate(order):
        r = runs[i]
        if cmd:
            m = _run_command(cmd, r["cpus"] if r["pinned"] else None)
        else:
            m = _run_work(args.work, threads, r["cpus"] if r["pinned"] else None, h["ops"], tsc_hz)
        emit({"type": "interval", "run": i, "round": rnd, "width": r["width"], **m,
              "progress": (step + 1) / len(order)})
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0})
    return 0


def _calibrate(work: str, threads: int, cpus, tsc_hz: float, budget_s: float) -> int:
    """Operations in the pool for a run of `budget_s` on one CPU (at least one)."""
    ops = 1000 * threads
    while True:
        m = _run_work(work, threads, cpus, ops, tsc_hz)
        if m["wall_ns"] >= CALIBRATE_NS or ops >= 1 << 40:
            return max(1, int(ops * budget_s * 1e9 / m["wall_ns"]))
        ops *= 4


def _run_work(work: str, threads: int, cpus, ops: int, tsc_hz: float) -> dict:
    from probes import _native
    run_ = _native.scaling_start(work, threads, cpus, tsc_hz)
    try:
        tids = _native.scaling_tids(run_)
        before = thread_counters(tids)
        r = _native.scaling_go(run_, ops)
        after = thread_counters(tids)
    finally:
        _native.scaling_release(run_)
    ts = r["threads"]
    total = sum(t["ops"] for t in ts)
    busy = sum(t["wall_ns"] for t in ts)
    wait = sum(t["wait_ns"] for t in ts)
    return {"wall_ns": r["wall_ns"], "ops": total, "throughput": total * 1e9 / r["wall_ns"] if r["wall_ns"] else None,
            "wait_ns": wait, "wait_share": wait / busy if busy else None,
            "contended": sum(t["contended"] for t in ts), "cpu_ns": sum(t["cpu_ns"] for t in ts),
            "user_ns": sum(t["user_ns"] for t in ts), "sys_ns": sum(t["sys_ns"] for t in ts),
            "voluntary": counter_delta(before, after, "voluntary"),
            "involuntary": counter_delta(before, after, "involuntary"),
            "migrations": counter_delta(before, after, "migrations")}


def _run_command(cmd: list[str], cpus) -> dict:
    """The command once, its affinity limited to `cpus` (None: this process's own)."""
    from probes import _native
    saved = os.sched_getaffinity(0)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        if cpus is not None:
            # this thread's mask, inherited by the fork in count_command; given back at once
            os.sched_setaffinity(0, cpus)
        try:
            # the command's stdout goes to our stderr: our stdout carries only protocol lines
            r = _native.count_command(cmd, -1, 2)
        except FileNotFoundError:
            raise ProbeError(f"{cmd[0]}: command not found; give a program on PATH or its path") from None
    finally:
        os.sched_setaffinity(0, saved)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counts = r["counts"]
    return {"wall_ns": r["wall_ns"], "throughput": 1e9 / r["wall_ns"] if r["wall_ns"] else None,
            "exit_status": r["exit_status"], "counts": counts, "unavailable": r["unavailable"],
            "cpu_ns": round((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e9),
            "voluntary": after.ru_nvcsw - before.ru_nvcsw, "involuntary": after.ru_nivcsw - before.ru_nivcsw,
            "migrations": counts.get("cpu-migrations")}


# -- the result ------------------------------------------------------------------------------------
def summarize(lines) -> dict:
    """The result object; also of a run still going (the panel redraws from it)."""
    hello_line, ivs = run_lines(lines)
    rows = [_row(r, [l for l in ivs if l.get("run") == i]) for i, r in enumerate(hello_line.get("runs", []))]
    base = next((r["throughput"] for r in rows if r["width"] == 1 and r["pinned"] and r["throughput"]), None)
    for r in rows:
        r["cpus_used"] = r["cpu_ns"] / r["wall_ns"] if r.get("cpu_ns") is not None and r.get("wall_ns") else None
        r["speedup"] = r["throughput"] / base if base and r["throughput"] else None
        narrower = [x for x in rows if x["pinned"] and x["width"] < r["width"] and x["throughput"]]
        best = max(narrower, key=lambda x: x["throughput"], default=None)
        r["factor"] = best["throughput"] / r["throughput"] if best and r["throughput"] else None
        r["compared_with"] = best["label"] if best else None
        r["flagged"] = r["factor"] is not None and r["factor"] >= NEGATIVE
    mode, work, cmd = hello_line.get("mode"), hello_line.get("work"), hello_line.get("command")
    what = f"`{' '.join(cmd)}`" if cmd else f"{work} work"
    cpus = hello_line.get("cpus") or []
    return {"probe": NAME, "cpu": None, "title": f"scaling of {what} on CPUs {format_cpus(cpus)}",
            "loop_ns": None, "sampled_seconds": sum(l["wall_ns"] for l in ivs) / 1e9, "achieved_duty": None,
            "buckets": [], "percentiles": None, "mode": mode, "work": work, "command": cmd,
            "threads": hello_line.get("threads"), "rounds": hello_line.get("rounds"), "cpus": cpus,
            "ops": hello_line.get("ops"), "widths": rows,
            "negative": [{"label": r["label"], "width": r["width"], "factor": r["factor"]} for r in rows if r["flagged"]],
            "verdict": verdict(rows, what), "host": host_facts(hello_line)}


def _row(r: dict, ivs: list[dict]) -> dict:
    def med(key):
        values = [l[key] for l in ivs if l.get(key) is not None]
        return statistics.median(values) if values else None
    row = {"label": r["label"], "width": r["width"], "cpus": r["cpus"], "pinned": r["pinned"],
           "rounds": len(ivs), "throughput": med("throughput"), "throughputs": [l["throughput"] for l in ivs],
           "wall_ns": med("wall_ns"), "cpu_ns": med("cpu_ns"), "voluntary": med("voluntary"),
           "involuntary": med("involuntary"), "migrations": med("migrations")}
    if ivs and "wait_share" in ivs[0]:
        row.update(wait_share=med("wait_share"), contended=med("contended"), user_ns=med("user_ns"),
                   sys_ns=med("sys_ns"))
    if ivs and "counts" in ivs[0]:
        counts = {k: statistics.median(v) for k in ivs[0]["counts"]
                  if (v := [l["counts"][k] for l in ivs if l["counts"].get(k) is not None])}
        row.update(counts=counts, exit_status=[l["exit_status"] for l in ivs],
                   unavailable=ivs[0].get("unavailable", {}))
    return row


def one_cpu(rows: list[dict]) -> float | None:
    """The most CPUs a run used at any pinned width of two or more, when that stays under ONE_CPU (it
    never used more than one); None when it used more, or nothing says."""
    used = [r["cpus_used"] for r in rows if r["pinned"] and r["width"] >= 2 and r.get("cpus_used") is not None]
    return max(used) if used and max(used) < ONE_CPU else None


def verdict(rows: list[dict], what: str) -> str:
    """The one sentence: a run that used one CPU at most says so; else the worst negative scaling
    among the pinned widths and its factor, or how close to ideal the widest got; then what unpinned
    gave."""
    pinned = [r for r in rows if r["pinned"] and r["speedup"] is not None]
    if not pinned:
        return "nothing was measured"
    flagged = [r for r in pinned if r["flagged"]]
    single = one_cpu(rows)
    if single is not None:
        wide = pinned[-1]
        text = (f"{what} does not use more than one CPU ({single:.2f} CPUs busy at most, CPU time over wall time, "
                f"given {wide['width']}): it cannot scale; {wide['label']} give {format_factor(wide['speedup'])} "
                "of one")
        if flagged:
            worst = max(flagged, key=lambda r: r["factor"])
            text += f", and {worst['label']} ran {format_factor(worst['factor'])} slower than {worst['compared_with']}"
        return text
    if flagged:
        worst = max(flagged, key=lambda r: r["factor"])
        text = (f"negative scaling: {what} on {worst['label']} runs {format_factor(worst['factor'])} slower than "
                f"on {worst['compared_with']}")
    else:
        wide = pinned[-1]
        text = f"{what} scales: {wide['label']} give {format_factor(wide['speedup'])} of one CPU (ideal {wide['width']}x)"
    unpinned = next((r for r in rows if not r["pinned"] and r["speedup"] is not None), None)
    if unpinned is not None:
        text += (f"; unpinned {format_factor(unpinned['factor'])} slower than {unpinned['compared_with']}"
                 if unpinned["flagged"] else f"; unpinned {format_factor(unpinned['speedup'])} of one CPU")
    return text


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
    command = r["mode"] == "command"
    unit = "runs/s" if command else "ops/s"
    lines = [f"{r['title']}" + ("" if command else f": {r['threads']} threads") + f", {r['rounds']} round"
             f"{'s' if r['rounds'] != 1 else ''} in alternated order (medians)",
             f"    {'CPUs':<12}{unit:>10}{'speedup':>9}{'ideal':>7}{'waiting' if not command else 'wall':>9}"
             f"{'CPU time':>10}{'CPUs used':>10}{'switches':>10}{'migrations':>12}  flag"]
    for w in r["widths"]:
        fourth = format_ns(w["wall_ns"]) if command else share_text(w.get("wait_share"))
        switches = None if w["voluntary"] is None else w["voluntary"] + (w["involuntary"] or 0)
        flag = f"{format_factor(w['factor'])} slower" if w["flagged"] else ""
        lines.append(f"    {w['label']:<12}{format_compact(w['throughput']):>10}{format_factor(w['speedup']):>9}"
                     f"{str(w['width']) + 'x':>7}{fourth:>9}{format_ns(w['cpu_ns']):>10}"
                     f"{'-' if w.get('cpus_used') is None else format(w['cpus_used'], '.2f'):>10}{count_text(switches):>10}"
                     f"{count_text(w['migrations']):>12}  {flag}")
    return lines
