"""`coremap probe PROBE [options] [-- COMMAND]`: run a probe headless.

The same engine as the window: the options become a ProbeSpec (probes/spec.py), whose jobs are
`python -m probes ...` children (probes/runner.py), one CPU at a time for a per-CPU probe, else one
for the whole list. Which options each probe takes, their bounds, defaults and help come from its
record (probes/catalog.py), so this parser and the window's form offer the same. The results print
as each probe lays them out (probes/text.py).
"""
from __future__ import annotations

import argparse
import sys

from app.cli.common import OneLineParser, add_json_arguments, bounded, bounded_size, write_json
from app.errors import CoremapError
from app.format import format_size
from app.parse.cpulist import format_cpulist, parse_cpulist
from probes.catalog import RECORDS, SECONDS_MEAN
from probes.spec import APPLIES, PROBE_NAMES, ProbeSpec, ProbeSpecError, record


def register(subparsers) -> None:
    # The options' help is the epilog, written when help is asked for (OneLineParser.format_help):
    # formatting it brings argparse's formatter and shutil into every `coremap` run (issue 12).
    p = subparsers.add_parser("probe", help="run a probe: " + ", ".join(PROBE_NAMES),
                              description=_description(), epilog=lambda: options_parser().format_help(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", choices=PROBE_NAMES, metavar="PROBE", help="one of " + ", ".join(PROBE_NAMES))
    # Options and "-- COMMAND" are parsed in run(): argparse cannot give a subcommand both options and
    # a "--"-separated command (the top-level parser rejects the "--"), so everything after PROBE is
    # taken as is and split here.
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options (below), then -- COMMAND where a probe takes one")
    p.set_defaults(func=run)


def _description() -> str:
    return __doc__ + "\n" + "\n".join(f"  {r.name:<12} {r.title}\n  {'':<12} {r.usage}" for r in RECORDS.values())


def _for(what) -> str:
    """`probe: what(record)` for each probe whose record has something to say, joined."""
    return "; ".join(f"{r.name}: {text}" for r in RECORDS.values() if (text := what(r)))


def options_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="coremap probe", add_help=False)
    p.add_argument("--cpu", "--cpus", dest="cpu", metavar="LIST", default=None,
                   help="CPUs to measure, e.g. 1 or 2-3,5; " + _for(lambda r: r.cpus_means))
    p.add_argument("--unbound", action="store_true",
                   help=f"run one probe without pinning it ({', '.join(APPLIES['unbound'])})")
    p.add_argument("--seconds", type=bounded(0.01, 86400), default=1.0, metavar="S",
                   help="how long to measure, per CPU (default 1); " + _for(
                       lambda r: r.seconds_means[:1].lower() + r.seconds_means[1:]
                       if r.takes_option("seconds") and r.seconds_means != SECONDS_MEAN else ""))
    add_json_arguments(p, "print one JSON object (a list for several CPUs)")
    histogram = [r.name for r in RECORDS.values() if r.histogram]
    p.add_argument("--hlog", metavar="FILE",
                   help=f"{' and '.join(histogram)}: write the intervals as an HdrHistogram log")
    p.add_argument("--policy", choices=("fifo", "other"), default=None, help="scheduling policy of the probe")
    p.add_argument("--priority", type=bounded(1, 99, "(SCHED_FIFO priority)", integer=True), default=None,
                   metavar="P", help="SCHED_FIFO priority (default 80)")
    p.add_argument("--slack-ns", type=bounded(0, 10 ** 9, "ns", integer=True), default=None, metavar="NS",
                   help="timer slack (prctl PR_SET_TIMERSLACK)")
    fields: dict[str, list] = {}
    for r in RECORDS.values():
        for f in r.fields:
            if f.kind != "command":       # the words after "--", split off in parse_rest
                fields.setdefault(f.option, []).append((r.name, f))
    for option, named in fields.items():
        _add_field(p, option, named)
    return p


def _add_field(p: argparse.ArgumentParser, option: str, named: list) -> None:
    """One option for every probe that takes it: bounds wide enough for each (the spec then holds each
    probe to its own), its help and default per probe."""
    f = named[0][1]
    help = "; ".join(f"{name}: {g.help}{_default(g)}" for name, g in named)
    flag = "--" + option.replace("_", "-")
    if f.kind == "flag":
        p.add_argument(flag, action="store_true", help=help)
        return
    kw: dict = {"default": None, "help": help, "metavar": f.metavar or None}
    lo, hi = min(g.low for _, g in named if g.low is not None) if f.low is not None else None, \
        max(g.high for _, g in named if g.high is not None) if f.high is not None else None
    if f.kind == "choice":
        kw["choices"] = tuple(dict.fromkeys(v for _, g in named for v in g.values()))
        kw.pop("metavar")
    elif f.kind == "size":
        kw["type"] = bounded_size(lo, hi)
    elif f.kind in ("int", "preset"):
        kw["type"] = bounded(lo, hi, f.unit, integer=f.kind == "int")
    p.add_argument(flag, **kw)


def _default(f) -> str:
    if f.special:
        # the form's text for "not given": "each node with memory", or "default (3; 1 for a command)"
        return f" ({f.special})" if f.special.startswith("default") else f" (default: {f.special})"
    if f.default is None or f.kind == "flag":
        return ""
    if f.kind == "size":
        return f" (default {format_size(f.default)})"
    return f" (default {f.default:g})" if isinstance(f.default, float) else f" (default {f.default})"


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
    from probes.runner import ProbeRun, ProbeStarter, RunningProbe
    from probes.text import format_result

    parse_rest(args)
    rec = record(args.name)
    if args.hlog and not rec.histogram:
        raise ProbeSpecError(f"--hlog applies to {' and '.join(r.name for r in RECORDS.values() if r.histogram)}, "
                             f"not {args.name}")
    if args.hlog:
        check_result_path(args.hlog, "--hlog")      # before the run, not after a minute of measuring
    # A host's runner (coremap --host H probe, app/cli/host.py): its CPUs are checked there, by the child.
    start: ProbeStarter | None = getattr(args, "start_probe", None)
    if args.cpu is None and not args.unbound and not rec.cpus_optional:
        raise CoremapError("pass --cpu LIST" + (f" (choose from {format_cpulist(allowed_cpus())})" if start is None
                                                else "") + " or --unbound")
    quiet = _quiet_cpus() if start is None else ()
    cpus = () if args.cpu is None else check_cpus(args.cpu, also=quiet) if start is None \
        else parse_cpulist(args.cpu, what="--cpu")
    options = {o: getattr(args, o) for o in APPLIES if o not in ("unbound", "seconds") and hasattr(args, o)}
    spec = ProbeSpec(args.name, cpus, unbound=args.unbound, seconds=args.seconds,
                     **{**options, "command": tuple(args.command)})
    own = OwnAffinityGuard()
    own.lent = frozenset(quiet)
    results, runs = [], []
    for job in spec.jobs():
        run_: RunningProbe
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
    from app.pinning.journal import Journal
    from app.pinning.ledger import ledger_of
    from app.store.folders import journal_path
    from app.sysroot import SysRoot
    with Journal(journal_path(create=False), readonly=True) as journal:
        return ledger_of(journal.entries(), journal.quiet_events(), str(SysRoot("/").root.resolve())).quiet_cpus
