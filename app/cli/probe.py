"""`coremap probe PROBE [options] [-- COMMAND]`: run a probe headless.

  jitter|wakeup|sweep|c2c|counters --cpu LIST      latency, per-CPU speed, core to core, counters
  messaging --placement auto|A:B,... --transport shm|pipe|udp --seconds S
  first-touch --cpu N --size 1G [--node M] [--thp never|madvise|always]
  scaling --cpus LIST --work lock|atomic|private [--threads N]   or   scaling --cpus LIST -- COMMAND

The same engine as the window: the options become a ProbeSpec (probes/spec.py), whose jobs are
`python -m probes ...` children (probes/runner.py), one CPU at a time for jitter, wakeup, counters
and first-touch; sweep, c2c and scaling take the whole list in one child, messaging its placements.
The results print as probes/text.py lays them out.
"""
from __future__ import annotations

import argparse
import sys

from app.cli.common import OneLineParser, add_json_arguments, bounded, bounded_size, write_json
from app.errors import CoremapError
from app.parse.cpulist import format_cpulist, parse_cpulist
from probes.spec import CPUS_OPTIONAL, HISTOGRAM_PROBES, PROBE_NAMES, ProbeSpec, ProbeSpecError


def register(subparsers) -> None:
    # The options' help is the epilog, written when help is asked for (OneLineParser.format_help):
    # formatting it brings argparse's formatter and shutil into every `coremap` run (issue 12).
    p = subparsers.add_parser("probe", help="measure jitter, wakeup latency, per-CPU speed, core-to-core latency, "
                                             "counters, messaging placements, first-touch cost, scaling",
                              description=__doc__, epilog=lambda: options_parser().format_help(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", choices=PROBE_NAMES, metavar="PROBE", help="one of " + ", ".join(PROBE_NAMES))
    # Options and "-- COMMAND" are parsed in run(): argparse cannot give a subcommand both options and
    # a "--"-separated command (the top-level parser rejects the "--"), so everything after PROBE is
    # taken as is and split here.
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options (below), then -- COMMAND for counters and scaling")
    p.set_defaults(func=run)


def options_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="coremap probe", add_help=False)
    p.add_argument("--cpu", "--cpus", dest="cpu", metavar="LIST", default=None,
                   help="CPUs to measure, e.g. 1 or 2-3,5 (scaling: the CPUs to widen over; default all)")
    p.add_argument("--unbound", action="store_true", help="run one probe without pinning it")
    p.add_argument("--seconds", type=bounded(0.01, 86400), default=1.0, metavar="S",
                   help="per CPU (default 1); messaging: per placement; scaling: the work's size at one CPU's speed")
    p.add_argument("--duty", type=bounded(0.1, 100, "percent"), default=None, metavar="P",
                   help="jitter: percent of time sampling (default 100)")
    add_json_arguments(p, "print one JSON object (a list for several CPUs)")
    p.add_argument("--hlog", metavar="FILE", help="jitter/wakeup: write the intervals as an HdrHistogram log")
    p.add_argument("--threshold-ns", type=bounded(1, 10 ** 9, "ns", integer=True), default=None, metavar="NS",
                   help="jitter: fine-bin gaps from here (default 1000)")
    p.add_argument("--interval-us", type=bounded(10, 10 ** 7, "µs", integer=True), default=None, metavar="US",
                   help="wakeup: period (default 1000)")
    p.add_argument("--policy", choices=("fifo", "other"), default=None, help="scheduling policy of the probe")
    p.add_argument("--priority", type=bounded(1, 99, "(SCHED_FIFO priority)", integer=True), default=None,
                   metavar="P", help="SCHED_FIFO priority (default 80)")
    p.add_argument("--slack-ns", type=bounded(0, 10 ** 9, "ns", integer=True), default=None, metavar="NS",
                   help="timer slack (prctl PR_SET_TIMERSLACK)")
    p.add_argument("--dma-latency", action="store_true", help="wakeup: hold /dev/cpu_dma_latency at 0")
    p.add_argument("--attribute", action="store_true",
                   help="jitter: trace IRQs, softirqs, NMIs and task switches on the CPU and say what "
                        "ran in each large gap (root, tracefs)")
    p.add_argument("--rounds", type=bounded(2, 100_000, "rounds", integer=True), default=None,
                   help="sweep: work units per CPU (default 120); messaging: rounds of alternated order "
                        "(default 2); scaling: the same (default 3, and 1 for a command)")
    p.add_argument("--pairs", default=None, metavar="A:B,...", help="c2c: only these pairs")
    p.add_argument("--placement", default=None, metavar="auto|A:B,...",
                   help="messaging: auto (every kind this machine offers) or sender:receiver pairs and "
                        "'unpinned' (default auto)")
    p.add_argument("--transport", choices=("shm", "pipe", "udp"), default=None,
                   help="messaging: shared-memory ring (default), pipe or UDP on loopback")
    p.add_argument("--size", type=bounded_size(1, 1 << 50), default=None, metavar="SIZE",
                   help="first-touch: memory to map and touch, e.g. 512M or 1G (default 1G)")
    p.add_argument("--node", type=bounded(0, 1023, "(NUMA node)", integer=True), default=None, metavar="M",
                   help="first-touch: bind the memory to node M (default: each node with memory)")
    p.add_argument("--thp", choices=("never", "madvise", "always"), default=None,
                   help="first-touch: transparent huge pages for the mapping (default: no hint)")
    p.add_argument("--work", choices=("lock", "atomic", "private"), default=None,
                   help="scaling: what the threads share (default lock)")
    p.add_argument("--threads", type=bounded(1, 1024, "threads", integer=True), default=None, metavar="N",
                   help="scaling: threads (default: as many as CPUs in the list)")
    return p


def parse_rest(args) -> None:
    """Split `rest` at the first "--" and parse the options into `args`."""
    rest = list(args.rest)
    command = []
    if "--" in rest:
        i = rest.index("--")
        rest, command = rest[:i], rest[i + 1:]
    elif rest and not rest[0].startswith("-"):
        # `coremap probe scaling -- make -j`: right after PROBE, argparse takes the "--" for itself
        # and hands over the command alone; no option starts without a dash, so this is the command
        rest, command = [], rest
    ns, unknown = options_parser().parse_known_args(rest)
    if unknown:
        raise CoremapError(f"coremap probe {args.name}: unrecognized arguments: {' '.join(unknown)} "
                           "(see coremap probe --help)")
    for k, v in vars(ns).items():
        setattr(args, k, v)
    args.command = command


def run(args) -> int:
    # imported here: the runner, the result files (hdrh) and the text layout are needed only when a
    # probe runs, not by every other `coremap` command that imports this module to register itself
    from probes.common import allowed_cpus, check_cpus
    from probes.files import check_result_path, write_runs_hlog
    from probes.own_affinity import OwnAffinityGuard
    from probes.runner import ProbeRun
    from probes.text import format_result

    parse_rest(args)
    if args.hlog and args.name not in HISTOGRAM_PROBES:
        raise ProbeSpecError(f"--hlog applies to {' and '.join(HISTOGRAM_PROBES)}, not {args.name}")
    if args.hlog:
        check_result_path(args.hlog, "--hlog")      # before the run, not after a minute of measuring
    # A host's runner (coremap --host H probe, app/cli/host.py): its CPUs are checked there, by the child.
    start = getattr(args, "start_probe", None)
    if args.cpu is None and not args.unbound and args.name not in CPUS_OPTIONAL:
        raise CoremapError("pass --cpu LIST" + (f" (choose from {format_cpulist(allowed_cpus())})" if start is None
                                                else "") + " or --unbound")
    quiet = _quiet_cpus() if start is None else ()
    cpus = () if args.cpu is None else check_cpus(args.cpu, also=quiet) if start is None \
        else parse_cpulist(args.cpu, what="--cpu")
    spec = ProbeSpec(args.name, cpus, unbound=args.unbound,
                     seconds=args.seconds, duty=args.duty, threshold_ns=args.threshold_ns,
                     interval_us=args.interval_us, policy=args.policy, priority=args.priority,
                     slack_ns=args.slack_ns, dma_latency=args.dma_latency, attribute=args.attribute,
                     rounds=args.rounds, pairs=args.pairs, command=tuple(args.command),
                     placement=args.placement, transport=args.transport, size=args.size, node=args.node,
                     thp=args.thp, work=args.work, threads=args.threads)
    own = OwnAffinityGuard()
    own.lent = frozenset(quiet)
    results, runs = [], []
    for job in spec.jobs():
        if start is not None:
            run_ = start(job.probe, job.args)
        else:
            with own.spawning(job.cpus):
                run_ = ProbeRun.start(job.probe, job.args)
        try:
            run_.wait()
        except (KeyboardInterrupt, SystemExit):      # Ctrl+C, or SIGTERM/SIGHUP (app/cli/main.py)
            run_.cancel()
            raise
        failure = run_.failure(job.label)
        if failure:
            raise CoremapError(failure)
        results.append(job.summarize(run_.lines))
        runs.append(run_.lines)

    if args.hlog:
        write_runs_hlog(args.hlog, runs)
    if args.json:
        write_json(results[0] if len(results) == 1 else results, args)
    else:
        for r in results:
            sys.stdout.write(format_result(r) + "\n")
    return 0


def _quiet_cpus() -> tuple[int, ...]:
    """The CPUs an isolate in effect made quiet (the journal says): this shell was moved off them
    with everything else, but probing them is what they are kept for."""
    # imported here: only a probe run reads the journal
    from app.pinning.service import AffinityService
    from app.pinning.journal import Journal
    from app.quiet.ledger import read_quiet_state
    from app.store.folders import journal_path
    from app.sysroot import SysRoot
    with Journal(journal_path(create=False), readonly=True) as journal:
        return read_quiet_state(AffinityService(SysRoot("/"), journal)).cpus
