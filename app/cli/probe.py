"""`coremap probe jitter|wakeup|sweep|c2c|counters --cpu LIST ...`: run a latency probe headless.

The same engine as the window: each run is a `python -m probes ...` child (probes/runner.py), one CPU
at a time for jitter, wakeup and counters; sweep and c2c take the whole list in one child.
"""
from __future__ import annotations

import argparse
import json
import sys

from app.errors import CoremapError
from app.format import format_ns
from app.parse.cpulist import format_cpulist

PROBE_NAMES = ("jitter", "wakeup", "sweep", "c2c", "counters")
PER_CPU = ("jitter", "wakeup", "counters")


def register(subparsers) -> None:
    opts = options_parser()
    p = subparsers.add_parser("probe", help="measure jitter, wakeup latency, per-CPU speed, core-to-core latency, counters",
                              description=__doc__, epilog=opts.format_help(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", choices=PROBE_NAMES, metavar="PROBE", help="one of " + ", ".join(PROBE_NAMES))
    # Options and "-- COMMAND" are parsed in run(): argparse cannot give a subcommand both options and
    # a "--"-separated command (the top-level parser rejects the "--"), so everything after PROBE is
    # taken as is and split here.
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options (below), then -- COMMAND for counters")
    p.set_defaults(func=run)


def options_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="coremap probe PROBE", add_help=False)
    p.add_argument("--cpu", metavar="LIST", default=None, help="CPUs to measure, e.g. 1 or 2-3,5")
    p.add_argument("--unbound", action="store_true", help="run one probe without pinning it")
    p.add_argument("--seconds", type=float, default=1.0, metavar="S", help="per CPU (default 1)")
    p.add_argument("--duty", type=float, default=None, metavar="P", help="jitter: percent of time sampling (default 100)")
    p.add_argument("--json", action="store_true", help="print one JSON object (a list for several CPUs)")
    p.add_argument("--hlog", metavar="FILE", help="jitter/wakeup: write the intervals as an HdrHistogram log")
    p.add_argument("--threshold-ns", type=int, default=None, metavar="NS", help="jitter: fine-bin gaps from here (default 1000)")
    p.add_argument("--interval-us", type=int, default=None, metavar="US", help="wakeup: period (default 1000)")
    p.add_argument("--policy", choices=("fifo", "other"), default=None, help="scheduling policy of the probe")
    p.add_argument("--priority", type=int, default=None, metavar="P", help="SCHED_FIFO priority (default 80)")
    p.add_argument("--slack-ns", type=int, default=None, metavar="NS", help="timer slack (prctl PR_SET_TIMERSLACK)")
    p.add_argument("--dma-latency", action="store_true", help="wakeup: hold /dev/cpu_dma_latency at 0")
    p.add_argument("--attribute", action="store_true",
                   help="jitter: trace IRQs, softirqs, NMIs and task switches on the CPU and say what "
                        "ran in each large gap (root, tracefs)")
    p.add_argument("--rounds", type=int, default=None, help="sweep: work units per CPU (default 120)")
    p.add_argument("--pairs", default=None, metavar="A:B,...", help="c2c: only these pairs")
    return p


def parse_rest(args) -> None:
    """Split `rest` at the first "--" and parse the options into `args`."""
    rest = list(args.rest)
    command = []
    if "--" in rest:
        i = rest.index("--")
        rest, command = rest[:i], rest[i + 1:]
    ns, unknown = options_parser().parse_known_args(rest)
    if unknown:
        raise CoremapError(f"coremap probe {args.name}: unrecognized arguments: {' '.join(unknown)} "
                           "(see coremap probe --help)")
    for k, v in vars(ns).items():
        setattr(args, k, v)
    args.command = command


def _child_args(args, cpu_text: str | None) -> list[str]:
    a: list[str] = []
    if cpu_text is not None:
        a += ["--cpu", cpu_text]
    if args.unbound:
        a.append("--unbound")
    a += ["--seconds", str(args.seconds)]
    opts = {"--duty": args.duty, "--threshold-ns": args.threshold_ns, "--interval-us": args.interval_us,
            "--policy": args.policy, "--priority": args.priority, "--slack-ns": args.slack_ns,
            "--rounds": args.rounds, "--pairs": args.pairs}
    allowed = {"jitter": {"--duty", "--threshold-ns"}, "wakeup": {"--interval-us", "--dma-latency"},
               "sweep": {"--rounds"}, "c2c": {"--pairs"}, "counters": set()}[args.name]
    allowed |= {"--policy", "--priority", "--slack-ns"} if args.name in ("jitter", "wakeup", "sweep") else set()
    for opt, val in opts.items():
        if val is None:
            continue
        if opt not in allowed:
            raise CoremapError(f"{opt} does not apply to the {args.name} probe")
        a += [opt, str(val)]
    if args.dma_latency:
        if args.name != "wakeup":
            raise CoremapError(f"--dma-latency does not apply to the {args.name} probe")
        a.append("--dma-latency")
    if args.attribute:
        if args.name != "jitter":
            raise CoremapError(f"--attribute applies to the jitter probe only, not {args.name}")
        a.append("--attribute")
    command = args.command
    if command:
        if args.name != "counters":
            raise CoremapError(f"a command after -- applies to the counters probe only, not {args.name}")
        a += ["--", *command]
    return a


def run(args) -> int:
    from probes import histogram
    from probes.common import check_cpus
    from probes.runner import ProbeRun
    import importlib

    parse_rest(args)
    if args.hlog and args.name not in ("jitter", "wakeup"):
        raise CoremapError(f"--hlog applies to jitter and wakeup, not {args.name}")
    if args.cpu is None and not args.unbound:
        raise CoremapError(f"pass --cpu LIST (choose from {format_cpulist(_allowed())}) or --unbound")
    cpus = check_cpus(args.cpu) if args.cpu is not None else ()
    mod = importlib.import_module(f"probes.{args.name}")

    if args.name in PER_CPU and cpus:
        jobs = [str(c) for c in cpus]
    else:
        jobs = [format_cpulist(cpus) if cpus else None]
    results, runs = [], []
    for cpu_text in jobs:
        run_ = ProbeRun.start(args.name, _child_args(args, cpu_text))
        try:
            rc = run_.wait()
        except KeyboardInterrupt:
            run_.cancel()
            raise
        if run_.error():
            raise CoremapError(run_.error())
        if rc != 0:
            tail = "; ".join(run_.stderr_lines[-3:])
            raise CoremapError(f"the {args.name} probe on CPU {cpu_text} exited with status {rc}: {tail}")
        results.append(mod.summarize(run_.lines))
        runs.append(run_)

    if args.hlog:
        _write_hlog(args.hlog, runs, histogram)
    if args.json:
        out = results[0] if len(results) == 1 else results
        json.dump(out, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        for r in results:
            sys.stdout.write(format_result(r) + "\n")
    return 0


def _allowed():
    from probes.common import allowed_cpus
    return allowed_cpus()


def _write_hlog(path, runs, histogram) -> None:
    intervals = []
    start = None
    for run_ in runs:
        hello = next((l for l in run_.lines if l.get("type") == "hello"), {})
        tag = f"cpu{hello.get('cpu')}" if len(runs) > 1 else None
        prev = 0
        for l in run_.lines:
            if l.get("type") != "interval":
                continue
            h = histogram.buckets_to_histogram(l["buckets"])
            intervals.append((prev / 1e9, (l["elapsed_ns"] - prev) / 1e9, h, tag))
            prev = l["elapsed_ns"]
    try:
        histogram.write_hlog(path, intervals, start_time_s=start,
                             comment="coremap probe histogram log; values in ns")
    except OSError as e:
        raise CoremapError(f"{path}: cannot write the histogram log ({e.strerror})") from None




def format_attribution(a: dict | None, *, longest: int = 10) -> list[str]:
    """What ran during the largest gaps, as the CLI prints it."""
    if a is None:
        return []
    if not a.get("available"):
        return [f"  gaps not attributed: {a.get('reason')}"]
    out = [f"  what ran in the {a['attributed_gaps']} largest gaps ({a['cpu_events']:,} events traced"
           + (f", {a['untraced_gaps']} gaps before the trace buffer's oldest event" if a["untraced_gaps"] else "")
           + "):"]
    out.append(f"    {'cause':<40}{'gaps':>6}{'time':>12}")
    for row in a["by_cause"][:12]:
        out.append(f"    {row['cause'][:39]:<40}{row['gaps']:>6}{format_ns(row['ns']):>12}")
    out.append(f"  the {min(longest, len(a['gaps']))} longest:")
    for g in a["gaps"][:longest]:
        out.append(f"    {format_ns(g['gap_ns']):>9} at {g['t_ns'] / 1e9:8.4f} s  {g['verdict']}")
    return out


def format_result(r: dict) -> str:
    name = r["probe"]
    lines = []
    if name == "jitter":
        lines.append(f"jitter on CPU {r['cpu']}: {r['sampled_seconds']:.3f} s sampled "
                     f"(duty {100 * (r['achieved_duty'] or 0):.1f}%), loop {format_ns(r['loop_ns'])}, "
                     f"{r['iterations']:,} reads")
    elif name == "wakeup":
        lines.append(f"wakeup on CPU {r['cpu']}: {r['wakeups']:,} wakeups every {format_ns(r['interval_ns'])}, "
                     f"mean latency {format_ns(r['mean_ns'])}, min {format_ns(r['min_ns'])}")
    if r.get("percentiles"):
        p = r["percentiles"]
        lines.append("  " + "  ".join(f"{k} {format_ns(p[k])}" for k in ("p50", "p90", "p99", "p99.9", "max")))
    if name == "jitter":
        lines.append(f"  gaps per CPU-hour (of {r['sampled_seconds']:.3f} s sampled):")
        lines.append(f"    {'length':<16}{'count':>8}{'per CPU-hour':>16}")
        for row in r["gaps_per_cpu_hour"]:
            if row["count"]:
                rng = f"{format_ns(row['lo_ns'])}-{format_ns(row['hi_ns'])}" if row["hi_ns"] else f">= {format_ns(row['lo_ns'])}"
                lines.append(f"    {rng:<16}{row['count']:>8}{row['per_hour']:>16,.0f}")
        if r["lost_share"] is not None:
            lines.append(f"  time lost in gaps >= 2 us: {100 * r['lost_share']:.4f}%")
        lines.extend(format_attribution(r.get("attribution")))
    elif name == "sweep":
        lines.append(f"sweep over CPUs {format_cpulist(c['cpu'] for c in r['cpus'])}: {r['rounds']} rounds, "
                     f"best CPU {r['best_cpu']} at {format_ns(r['baseline_ns'])} per unit")
        lines.append(f"    {'cpu':>4}{'mean':>12}{'sd':>12}{'cv':>8}{'loss':>9}  flag")
        for c in r["cpus"]:
            lines.append(f"    {c['cpu']:>4}{format_ns(c['mean_ns']):>12}{format_ns(c['sd_ns']):>12}{100 * c['cv']:>7.2f}%"
                         f"{100 * c['loss_vs_best']:>8.2f}%  {'SLOW' if c['flagged'] else ''}")
    elif name == "c2c":
        lines.append("core-to-core one-way latency (median of batches):")
        cpus = r["matrix_cpus"]
        lines.append("    " + "".join(f"{c:>10}" for c in cpus))
        for c, row in zip(cpus, r["matrix_ns"]):
            lines.append(f"    {c:<4}" + "".join(f"{format_ns(v) if v is not None else '-':>10}" for v in row)[4:])
    elif name == "counters":
        lines.append(f"counters for {' '.join(r['command'] or [])!s} (CPU {r['cpu']}):")
        lines.append(f"    {'event':<18}{'pinned':>16}{'unpinned':>16}{'ratio':>8}")
        for ev, c in r["compare"].items():
            cell = lambda v: "n/a" if v is None else f"{v:,}"
            ratio = f"{c['ratio']:.2f}" if c["ratio"] is not None else "-"
            lines.append(f"    {ev:<18}{cell(c['pinned']):>16}{cell(c['unpinned']):>16}{ratio:>8}")
    return "\n".join(lines)
