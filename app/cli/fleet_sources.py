"""`coremap fleet --prometheus URL` and `coremap fleet --pcp URL HOSTSPEC...`: the fleet from a metrics engine
(app/sources/), printed once (--csv, --json) or streaming in the window (app/cli/fleet.py's options)."""
from __future__ import annotations

import csv
import sys

from app.atomic import check_output_path
from app.cli.common import ensure_headless_qt, write_json
from app.errors import CoremapError
from app.format import printable
from app.remote.hosts import MAX_FLEET


class SourceOptionError(CoremapError):
    """fleet options that do not go with a metrics source."""


def print_rows(rows, args) -> bool:
    """The fleet's rows (FleetRows) as --json or --csv asks, their text made printable (a host's facts
    come from that host); False when neither is asked for (the window shows them)."""
    # Imported here: only a printed fleet needs them.
    from app.remote.fleet import CSV_COLUMNS, csv_rows, json_rows
    if args.json:
        write_json([_printable(d) for d in json_rows(rows)], args, items="hosts")
    elif args.csv:
        w = csv.DictWriter(sys.stdout, fieldnames=CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        for d in csv_rows(rows):
            w.writerow({k: printable(v) for k, v in d.items()})
    else:
        return False
    return True


def _printable(v):
    if isinstance(v, str):
        return printable(v)
    if isinstance(v, dict):
        return {k: _printable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_printable(x) for x in v]
    return v


def _check(args) -> None:
    if args.cpus is not None:
        raise SourceOptionError("fleet: -c/--cpus runs a jitter probe over ssh; with --prometheus or --pcp the jitter "
                                "column shows the gap rates coremap exported on each host (coremap export)")
    if args.hosts_file:
        raise SourceOptionError("fleet: --file names ssh hosts; with a metrics source name the hosts on the "
                                "command line")
    if args.pcp and not args.hosts:
        raise SourceOptionError("fleet --pcp: name the hosts whose pmcd to read (pmcd hostspecs: node7 node8:44321)")
    if args.match and not args.prometheus:
        raise SourceOptionError("fleet: --match goes with --prometheus")
    if len(args.hosts) > MAX_FLEET:
        raise SourceOptionError(f"fleet: {len(args.hosts)} hosts; at most {MAX_FLEET} at once")


def captures_of(args):
    """The CaptureShelf of --captures DIR (app/sources/captures.py), or None without one."""
    folder = getattr(args, "captures", None)
    if not folder:
        return None
    from app.sources.captures import CaptureShelf
    return CaptureShelf(folder)


def make_stream(args, captures=None):
    """The FleetStream of --prometheus or --pcp (checked: a URL that is not that engine is one line), its
    rows completed from `captures` (a CaptureShelf) where it holds their host."""
    from app.sources.http import auth_for
    from app.sources.stream import FleetStream, pcp_rounds, prometheus_rounds
    url = args.prometheus or args.pcp
    auth = auth_for(url, args.source_config)
    if args.prometheus:
        from app.sources.prometheus import Prometheus
        prom = Prometheus(url, match=args.match, auth=auth, timeout=min(args.fleet_timeout, 30.0),
                          deadline=args.fleet_timeout)
        prom.check()
        only = list(dict.fromkeys(args.hosts)) or None
        rounds = prometheus_rounds(prom, only=only)
    else:
        from app.sources.pcp import Pmproxy
        proxy = Pmproxy(url, auth=auth, timeout=min(args.fleet_timeout, 30.0), deadline=args.fleet_timeout)
        hosts = [proxy.host(h) for h in dict.fromkeys(args.hosts)]
        rounds = pcp_rounds(hosts, parallel=args.parallel)
    if captures is not None:
        from app.sources.captures import completing
        rounds = completing(captures, rounds)
    return FleetStream(rounds, interval=args.every)


def host_opener_of(args):
    """How the fleet window opens one of the source's hosts: as `coremap --pcp URL --host NAME` does
    (open_host), without asking the source first (its first tick, on the sampler's thread, does)."""
    import argparse
    from app.sources.live import open_host
    return lambda name: open_host(argparse.Namespace(**{**vars(args), "host": name, "interval": 1.0}), check=False)


def run_sources(args) -> int:
    from app.remote.fleet import sort_rows
    _check(args)
    headless = args.csv or args.json
    if not headless and getattr(args, "screenshot", None):
        check_output_path(args.screenshot, "--screenshot")
    if not headless:
        from app.cli.desktop import require_display
        require_display(args)
    captures = captures_of(args)
    stream = make_stream(args, captures)
    if not headless and not getattr(args, "screenshot", None):
        # The window streams: it opens at once and shows hosts as they answer (widgets/fleet/window.py).
        args.sort = args.sort or "quiet"
        return fleet_window()([], args, stream=stream, samplers=host_opener_of(args))
    stream.run_round()
    if stream.error and not stream.rows():
        raise CoremapError(stream.error)
    rows = sort_rows(stream.rows(), args.sort or "host")
    if not print_rows(rows, args):
        ensure_headless_qt()
        args.sort = args.sort or "quiet"
        rc = fleet_window()(sort_rows(rows, args.sort), args)
        if rc:
            return rc
    return 0 if all(r.ok for r in rows) else 1


def fleet_window():
    """widgets/fleet/window.py run_fleet_window, imported only when the window is asked for (--csv and
    --json run without Qt); CoremapError saying so where PySide6 or pyqtgraph is missing."""
    try:
        from widgets.fleet.window import run_fleet_window
    except ImportError as e:
        raise CoremapError(f"the fleet window needs PySide6 and pyqtgraph ({e}); use --csv without them") from None
    return run_fleet_window
