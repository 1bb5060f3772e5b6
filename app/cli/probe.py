"""`coremap probe PROBE [options] [-- COMMAND]`: run a probe headless.

The same engine as the window: the options become a ProbeSpec (probes/spec.py), whose jobs are
`python -m probes ...` children (probes/runner.py): one per CPU for a per-CPU probe, all at once where
its record says `parallel` (jitter, wakeup: as oslat -c and cyclictest -t -a) and else one after
another; one for the whole list otherwise. `--every S` prints each CPU's figures every S seconds as
they come (with --json, a JSON line each), before the results. Each probe is a subcommand of its own
(`coremap probe jitter --help` lists its options alone), built from its record (probes/catalog.py):
the options it takes, their bounds, defaults and help, so this parser and the window's form offer the
same. The results print as each
probe lays them out (probes/text.py).

"-- COMMAND" (counters, first-touch, scaling) is cut off the arguments before argparse sees them
(app/cli/main.py): how argparse hands a "--" down to a subcommand's subcommand has changed between
Python versions. The words land in `command_words`, which each probe's parser also takes as plain
positionals (`coremap probe counters -c 1 true`).
"""
from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import threading

from app.cli.common import (OneLineParser, add_cpus_argument, add_json_arguments, bounded, bounded_size, opened_host,
                             write_json)
from app.errors import CoremapError
from app.format import format_size
from app.parse.cpulist import format_cpulist, parse_cpulist
from probes.catalog import RECORDS
from probes.record import SECONDS_MEAN, ProbeRecord
from probes.spec import APPLIES, PROBE_NAMES, ProbeSpec, applies, batches, record

DESCRIPTION = """Run a probe headless, with the engine of the window's Probes panel: a separate process
measures on each CPU given, and the result prints as the probe lays it out (--json: one document).
Each probe takes the options its own help lists: coremap probe PROBE --help."""


def register(subparsers) -> None:
    # The probes' list is written when help is asked for (OneLineParser.format_help).
    p = subparsers.add_parser("probe", help="run a probe: " + ", ".join(PROBE_NAMES) + " (the window's Probes panel)",
                              description=DESCRIPTION, epilog=_examples,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              usage="coremap probe [-h] PROBE [options] [-- COMMAND]")
    probes = p.add_subparsers(dest="name", metavar="PROBE", required=True, title="probes", prog="coremap probe",
                              parser_class=ProbeParser)
    for r in RECORDS.values():
        q = probes.add_parser(r.name, help=r.title, description=_description(r))
        _add_options(q, r)
        q.set_defaults(func=run, command_words=[])


class ProbeParser(OneLineParser):
    """One probe's parser: an option that another probe takes is refused saying which do."""

    def error(self, message: str):
        probe = self.prog.rsplit(" ", 1)[-1]
        if message.startswith("unrecognized arguments:"):
            for word in message.split(":", 1)[1].split():
                option = word.split("=", 1)[0].removeprefix("--").replace("-", "_")
                if word.startswith("--") and option in APPLIES and not applies(option, probe):
                    names = APPLIES[option]
                    to = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
                    message = f"{word.split('=', 1)[0]} does not apply to the {probe} probe; it applies to {to}"
                    break
        super().error(message)


def _examples() -> str:
    return "each probe takes, for instance:\n" + "\n".join(f"  coremap probe {r.name} {usage}" for r in RECORDS.values()
                                      for usage in r.usage.split("   or   "))


def _description(r: ProbeRecord) -> str:
    runs = ("one run over the CPUs of -c/--cpus" if not r.per_cpu else "one run per CPU of -c/--cpus, all at once, "
            "each pinned to its CPU" if r.parallel else "one run per CPU of -c/--cpus, one after another")
    return f"{r.title}: {runs}. The window's Probes panel runs the same."


def _add_options(p: argparse.ArgumentParser, r: ProbeRecord) -> None:
    """The options of probe `r`: the CPUs, the common ones its record takes, its own fields, the output,
    and COMMAND where it runs one."""
    add_cpus_argument(p, r.cpus_means or "the CPUs to measure, e.g. 1 or 2-3,5" + (
        "" if r.cpus_optional or "unbound" not in r.takes else " (or --unbound)"))
    if "unbound" in r.takes:
        p.add_argument("--unbound", action="store_true", help="run once without pinning the probe to a CPU")
    if r.takes_option("seconds"):
        means = r.seconds_means if r.seconds_means != SECONDS_MEAN else "how long to measure, per CPU"
        p.add_argument("--seconds", type=bounded(0.01, 86400), default=1.0, metavar="S",
                       help=f"{means[:1].lower() + means[1:]} (default 1)")
    if "policy" in r.takes:
        p.add_argument("--policy", choices=("fifo", "other"), default=None, help="scheduling policy of the probe")
    if "priority" in r.takes:
        p.add_argument("--priority", type=bounded(1, 99, "(SCHED_FIFO priority)", integer=True), default=None,
                       metavar="P", help="SCHED_FIFO priority (default 80)")
    if "slack_ns" in r.takes:
        p.add_argument("--slack-ns", type=bounded(0, 10 ** 9, "ns", integer=True), default=None, metavar="NS",
                       help="timer slack (prctl PR_SET_TIMERSLACK)")
    for f in r.fields:
        if f.kind != "command":       # the words after "--"
            _add_field(p, f)
    if r.presets:
        p.add_argument("--like", choices=[x.key for x in r.presets], default=None,
                       help="; ".join(f"{x.key}: {x.help}" for x in r.presets)
                       + " (the form's button of that name; an option given beside it wins)")
    add_json_arguments(p, "print one JSON document (several CPUs: their results under \"results\")")
    if r.histogram:
        p.add_argument("--hlog", metavar="FILE", help="write the intervals as an HdrHistogram log")
    command = next((f for f in r.fields if f.kind == "command"), None)
    if command is not None:
        p.add_argument("command_words", nargs="*", metavar="-- COMMAND",
                       help=f"{command.help} (after --, so its own options are not read as coremap's)")


def _add_field(p: argparse.ArgumentParser, f) -> None:
    """One of the probe's own options, with its record's bounds, help and default."""
    flag = "--" + f.option.replace("_", "-")
    help = f.help + _default(f)
    if f.kind == "flag":
        p.add_argument(flag, action="store_true", help=help)
        return
    kw: dict = {"default": None, "help": help, "metavar": f.metavar or None}
    if f.kind == "choice":
        kw["choices"] = f.values()
        kw.pop("metavar")
    elif f.kind == "size":
        kw["type"] = bounded_size(f.low, f.high)
    elif f.kind in ("int", "preset"):
        kw["type"] = bounded(f.low, f.high, f.unit, integer=f.kind == "int")
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


def apply_like(args, rec: ProbeRecord) -> None:
    """--like NAME: the preset's values for every option the command line left unset."""
    like = getattr(args, "like", None)
    if not like:
        return
    preset = next(x for x in rec.presets if x.key == like)
    for option, value in preset.values:
        if getattr(args, option, None) in (None, False):
            setattr(args, option, value)


def run(args) -> int:
    # imported here: the runner, the result files (hdrh) and the text layout are needed only when a
    # probe runs, not by every other `coremap` command that imports this module to register itself
    from probes.common import allowed_cpus, check_cpus
    from probes.files import check_result_path, write_runs_hlog
    from probes.own_affinity import OwnAffinityGuard
    from probes.runner import ProbeStarter
    from probes.text import format_result

    rec = record(args.name)
    hlog = getattr(args, "hlog", None)      # only the probes with a histogram take it
    if hlog:
        check_result_path(hlog, "--hlog")      # before the run, not after a minute of measuring
    # A host's runner (coremap --host H probe, app/cli/host.py): its CPUs are checked there, by the child.
    start: ProbeStarter | None = getattr(args, "start_probe", None)
    unbound = getattr(args, "unbound", False)
    if args.cpus is None and not unbound and not rec.cpus_optional:
        raise CoremapError("pass -c/--cpus LIST" + (f" (choose from {format_cpulist(allowed_cpus())})"
                                                    if start is None else "")
                           + (" or --unbound" if "unbound" in rec.takes else ""))
    cpus: tuple[int, ...] = ()
    quiet = _quiet_cpus() if start is None else ()
    if args.cpus is not None:
        cpus = parse_cpulist(args.cpus, what="-c/--cpus")
        if not cpus:
            raise CoremapError(f"-c/--cpus {args.cpus!r} names no CPU; write CPUs like 2-5,8")
        if start is None:
            cpus = check_cpus(args.cpus, also=quiet)
    apply_like(args, rec)
    # Only the probe's own: the namespace also holds the top-level options (`coremap --size WxH`).
    options = {o: getattr(args, o) for o in APPLIES
               if o not in ("unbound", "seconds", "command") and rec.takes_option(o) and hasattr(args, o)}
    spec = ProbeSpec(args.name, cpus, unbound=unbound, seconds=getattr(args, "seconds", 1.0),
                     **{**options, "command": tuple(args.command_words)})
    busy = _busy_warning(cpus) if start is None and cpus else None
    own = OwnAffinityGuard()
    own.lent = frozenset(quiet)
    results, runs = [], []
    every = _every_printer(args) if getattr(args, "every", None) else None
    if busy:
        every = _warn_once_started(busy, every)
    for batch in batches(spec.jobs(), _at_once(start)):
        for job, lines in run_batch(batch, start, own, every):
            results.append(job.summarize(lines))
            runs.append(lines)

    if hlog:
        write_runs_hlog(hlog, runs)
    if args.json:
        # after --every's JSON lines, the result is one line too (no --pretty): a reader takes lines
        write_json(results[0] if len(results) == 1 else results, None if every else args, items="results")
    else:
        for r in results:
            sys.stdout.write(format_result(r) + "\n")
    return 0


BATCH_POLL_S = 0.05


def _at_once(start) -> int | None:
    """How many children of a batch may run at once: all here; on another machine, what its agent serves."""
    if start is None:
        return None
    from app.remote.probe_runs import AT_ONCE
    return AT_ONCE


def run_batch(batch, start, own, on_line=None, *, keep_off=()) -> list[tuple]:
    """Start the jobs of one batch together (each child pins itself to its CPU), wait for them all;
    [(job, its lines)]. A job that fails stops the others and raises CoremapError saying why.
    `keep_off`: CPUs this process's threads leave once the children started (coremap verify's)."""
    from probes.runner import ProbeRun
    started: list = []
    try:
        for job in batch:
            on = None if on_line is None else functools.partial(on_line, job)
            if start is not None:
                started.append((job, start(job.probe, job.args, on_line=on)))
            else:
                with own.spawning(job.cpus):
                    started.append((job, ProbeRun.start(job.probe, job.args, on_line=on)))
        if keep_off:
            own.exclude(keep_off)      # the reader threads the children started stay off their CPUs
        while True:
            # the first to fail ends the batch at once, not when the jobs started before it end
            for job, run_ in started:
                if not run_.running:
                    run_.wait()
                    failure = run_.failure(job.label)
                    if failure:
                        raise CoremapError(failure)
            running = [run_ for _job, run_ in started if run_.running]
            if not running:
                break
            try:
                running[0].wait(BATCH_POLL_S)       # wakes as it ends, not up to a poll later
            except subprocess.TimeoutExpired:
                pass                                # look at the others again
    finally:
        # Ctrl+C, SIGTERM/SIGHUP (app/cli/main.py) or a failed job: none of the batch outlives it
        for _job, run_ in started:
            if run_.running:
                run_.cancel()
    return [(job, run_.lines) for job, run_ in started]


def _every_printer(args):
    """on_line(job, line) for --every: each `period` line as it comes, a JSON line with --json, else
    a sentence (probes/periods.py). Called from the runs' reader threads, hence the lock."""
    from probes.periods import period_text
    lock = threading.Lock()

    def on_line(job, line: dict) -> None:
        if line.get("type") != "period":
            return
        with lock:
            if args.json:       # one compact document a line, schema_version first, as every --json
                write_json({"probe": job.probe, **line}, None)
            else:
                sys.stdout.write(period_text(job.probe, line) + "\n")
            sys.stdout.flush()
    return on_line


BUSY_LOOK_ENV = "COREMAP_BUSY_LOOK_S"


def _busy_warning(cpus) -> str | None:
    """The window's line before a probe on a CPU another thread keeps busy (app/sampling/intruders.py):
    the run goes on (a script asked for it), but its lost time is not the CPU's own. Measured before
    the probe starts, so the probe's own load is not in it. It looks $COREMAP_BUSY_LOOK_S (0: not at all)."""
    from app.inputs import env_seconds
    from app.sampling.intruders import CLI_WINDOW_S, busy_line, read_busy
    look = env_seconds(BUSY_LOOK_ENV, CLI_WINDOW_S)
    if look == 0:
        return None
    with opened_host(argparse.Namespace()) as here:         # this machine: the probes run here, whatever --root
        busy, seconds = read_busy(here.root, cpus, look)
    return busy_line(busy, seconds)


def _warn_once_started(line: str, on_line=None):
    """on_line(job, line) that prints the busy warning when the first child says hello, then passes each
    line on: a probe that refuses its input (--size past the memory there is) says one line, not the
    warning and then its refusal (a loaded CI machine's run printed both)."""
    lock, said = threading.Lock(), []

    def hook(job, got: dict) -> None:
        if got.get("type") == "hello":
            with lock:
                if not said:
                    said.append(True)
                    print(f"coremap: warning: {line}", file=sys.stderr, flush=True)
        if on_line is not None:
            on_line(job, got)
    return hook


def _quiet_cpus() -> tuple[int, ...]:
    """The CPUs an isolate in effect made quiet (the journal says): this shell was moved off them
    with everything else, but probing them is what they are kept for."""
    with opened_host(argparse.Namespace()) as here:         # this machine, as in _busy_warning
        return here.open_pins(dry_run=True).ledger().quiet_cpus
