"""`coremap fleet HOST... [--file F] [--csv | --json] [-c/--cpus N]`: many machines over ssh, side by side;
`coremap fleet --prometheus URL [--match M]` and `coremap fleet --pcp URL HOSTSPEC...`: the same from the
metrics engines a team already runs (app/sources/), streaming in the window.

Each host is captured in parallel (at most --parallel at once, each within --timeout seconds):
its grid coloured by the same scale as the others', and a table of model,
shape, NUMA nodes, kernel, isolcpus, nohz_full, irqbalance, the busiest IRQ and, with -c/--cpus N
(first spelt --jitter-cpu N, which still works), the jitter probe's figures on that CPU — the cells that set a machine apart highlighted. A
host that cannot be reached is a row that says why. `--csv` prints the table instead of opening the
window (headless), `--json` the same rows as one document (figures as numbers, with its
schema_version); `--screenshot OUT.png` renders the window offscreen and exits.

With --prometheus or --pcp no agent runs anywhere: per-CPU hard-IRQ and softirq rates and IRQ time come
from node_exporter through Prometheus (every host it scrapes, or the HOSTs named: their `instance`) or
from each host's pmcd through pmproxy (the HOSTs are pmcd hostspecs). The window keeps reading, every
--every seconds: tiles appear as hosts answer, and a host that stops answering keeps its last grid with
when it was last seen. The window of an ssh fleet streams the same way, each round a new capture of
every host (the jitter probe in a host's first round only). --csv, --json and --screenshot print one
round. Tokens and CA files come from
~/.config/coremap/sources.ini (--source-config), never from the command line.

Exit status: 0 when every host was read, 1 when some could not be, 2 for bad input.
"""
from __future__ import annotations

import argparse
import sys

from app.atomic import check_output_path
from app.cli.common import (add_command, add_cpus_argument, add_json_arguments, bounded, ensure_headless_qt,
                             pixel_size)
from app.errors import CoremapError
from app.parse.url import url_argument
from app.remote.hosts import MAX_FLEET, PARALLEL, TIMEOUT, HostError, parse_host, read_hosts_file


def register(subparsers) -> None:
    p = add_command(subparsers, "fleet",
                    "capture many hosts over ssh and show them side by side, differences highlighted",
                    __doc__.split("\n\n")[1], root=None)
    p.add_argument("hosts", nargs="*", metavar="HOST", help="[user@]server[:port], or a Host of ~/.ssh/config")
    p.add_argument("--file", dest="hosts_file", metavar="F", help="more hosts, one per line (# comments)")
    p.add_argument("--csv", action="store_true", help="print the table as CSV instead of opening the window")
    add_json_arguments(p, 'print the table as one JSON document instead of opening the window (the rows under "hosts")')
    p.add_argument("--parallel", type=bounded(1, 64, "hosts", integer=True), default=PARALLEL, metavar="N",
                   help=f"hosts captured at once (default {PARALLEL})")
    p.add_argument("--timeout", dest="fleet_timeout", type=bounded(1, 600), default=TIMEOUT, metavar="S",
                   help=f"seconds each host may take, connecting included (default {TIMEOUT:g})")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prometheus", metavar="URL", type=url_argument("--prometheus"),
                     help="read the fleet from this Prometheus (node_exporter)")
    src.add_argument("--pcp", metavar="URL", type=url_argument("--pcp"),
                     help="read the HOSTs (pmcd hostspecs) through this pmproxy")
    p.add_argument("--match", default="", metavar="MATCHERS",
                   help='with --prometheus: label matchers every host\'s series have, e.g. job="node"')
    p.add_argument("--source-config", metavar="FILE",
                   help="INI file naming each source's bearer_token_file and ca_file (default "
                        "~/.config/coremap/sources.ini)")
    p.add_argument("--captures", metavar="DIR", default=argparse.SUPPRESS,
                   help="with --prometheus or --pcp: a folder of coremap snapshots; a host's capture completes the "
                        "topology the source gives (cores, caches, NUMA nodes, isolated and nohz_full CPUs)")
    p.add_argument("--every", type=bounded(1, 3600), default=5.0, metavar="S",
                   help="seconds between reads of the fleet in the window (default 5)")
    p.add_argument("--sort", choices=("quiet", "busiest", "jitter", "host"), default=None,
                   help="order of the hosts: IRQs on quiet CPUs, busiest CPU, jitter gaps/s, or host name")
    add_cpus_argument(p, "also run the jitter probe on CPU N of every host (one CPU)", old=("--jitter-cpu",),
                      metavar="N", type=one_cpu)
    p.add_argument("--jitter-seconds", type=bounded(0.1, 60), default=1.0, metavar="S",
                   help="how long each host's jitter probe measures (default 1)")
    # SUPPRESS: the top-level --screenshot/--size/--color-by keep their values when given first.
    p.add_argument("--screenshot", metavar="OUT.png", default=argparse.SUPPRESS,
                   help="render the fleet window offscreen, save it, and exit")
    p.add_argument("--size", metavar="WxH", type=pixel_size, default=argparse.SUPPRESS,
                   help="window size, e.g. 1600x1000")
    p.add_argument("--color-by", metavar="METRIC", default=argparse.SUPPRESS,
                   help="what colours the grids: irq (default), softirq[:KIND], irqtime, busy")
    p.set_defaults(func=run)


def one_cpu(text: str) -> int:
    """The argparse type of fleet's -c/--cpus: one CPU, as every host's jitter column holds one."""
    return bounded(0, 8191, "(one CPU per host, e.g. 3)", integer=True)(text)


def hosts_of(args) -> list:
    hosts = []
    for text in args.hosts:
        try:
            hosts.append(parse_host(text))
        except HostError as e:
            raise HostError(f"fleet: {e}") from None
    if args.hosts_file:
        hosts += read_hosts_file(args.hosts_file)
    hosts = list(dict.fromkeys(hosts))
    if not hosts:
        raise HostError("fleet: name the hosts (coremap fleet node1 node2 ...) or give --file F")
    if len(hosts) > MAX_FLEET:
        raise HostError(f"fleet: {len(hosts)} hosts; at most {MAX_FLEET} at once")
    return hosts


def run(args) -> int:
    if args.prometheus or args.pcp:
        from app.cli.fleet_sources import run_sources
        return run_sources(args)
    # Imported here, not at the top: every `coremap` run imports this module to build its parser.
    from app.cli.fleet_sources import fleet_window, print_rows
    from app.remote.fleet import capture_fleet
    hosts = hosts_of(args)
    headless = args.csv or args.json
    if not headless and getattr(args, "screenshot", None):
        check_output_path(args.screenshot, "--screenshot")      # before a minute of capturing
    if not headless:
        from app.cli.desktop import require_display
        require_display(args)
    probe = _jitter(args.cpus, args.jitter_seconds) if args.cpus is not None else None
    if not headless and not getattr(args, "screenshot", None):
        # The window streams: it opens at once, each host's tile appears as it answers and is read again
        # every --every seconds (app/sources/stream.py).
        from app.sources.stream import FleetStream, ssh_rounds
        rounds = ssh_rounds(hosts, parallel=args.parallel, timeout=args.fleet_timeout, probe=probe)
        args.sort = args.sort or "quiet"
        return fleet_window()([], args, stream=FleetStream(rounds, interval=args.every), ssh=True)
    progress = _Progress(len(hosts)) if sys.stderr.isatty() else None
    rows = capture_fleet(hosts, parallel=args.parallel, timeout=args.fleet_timeout, probe=probe,
                         on_row=progress)
    if progress is not None:
        progress.end()
    if not print_rows(rows, args):
        ensure_headless_qt()
        rc = fleet_window()(rows, args, ssh=True)
        if rc:
            return rc
    return 0 if all(r.ok for r in rows) else 1


def _jitter(cpu: int, seconds: float):
    """What each host runs with --jitter-cpu: the jitter probe there, summarized here."""
    def measure(client) -> dict:
        # Imported here: only --jitter-cpu needs the probes (and their hdrh).
        from app.remote.probe_runs import RemoteProbeRun
        from probes.spec import ProbeSpec
        job = ProbeSpec("jitter", (cpu,), seconds=seconds).jobs()[0]
        run = RemoteProbeRun(client, job.probe, job.args)
        run.wait(seconds + 60)
        failure = run.failure(job.label)
        if failure:
            return {"cpu": cpu, "error": failure}
        from probes.jitter.measure import fleet_figures
        try:
            figures = fleet_figures(job.summarize(run.lines))
        except CoremapError as e:
            return {"cpu": cpu, "error": str(e)}
        return {"cpu": cpu, **figures}
    return measure


class _Progress:
    """`fleet: 12 of 50 hosts (2 unreachable)` on one terminal line while the fleet is captured."""

    def __init__(self, n: int):
        self.n, self.done, self.bad = n, 0, 0

    def __call__(self, row) -> None:
        self.done += 1
        self.bad += not row.ok
        sys.stderr.write(f"\rfleet: {self.done} of {self.n} hosts" + (f" ({self.bad} unreachable)" if self.bad else ""))
        sys.stderr.flush()

    def end(self) -> None:
        sys.stderr.write("\n")
