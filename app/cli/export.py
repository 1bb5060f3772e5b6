"""`coremap export --textfile FILE.prom [--jitter RESULT.json ...]`: What only coremap knows, for node_exporter's
textfile collector: IRQ requested and effective affinity, the quiet CPUs and the pins in effect from the
pin journal, and jitter gap rates from saved jitter results.

Point it into node_exporter's --collector.textfile.directory (from cron or a systemd timer, every minute
or so); the file is replaced atomically, so a scrape never sees half of it. The metrics are named in
app/sources/export.py.
"""
from __future__ import annotations

import sys

from app.cli.common import add_command, opened_host


def register(subparsers) -> None:
    p = add_command(subparsers, "export", "write IRQ affinity, quiet CPUs, pins and jitter gap rates for "
                    "node_exporter's textfile collector", __doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("--textfile", required=True, metavar="FILE.prom",
                   help="the file to write, in node_exporter's --collector.textfile.directory")
    p.add_argument("--jitter", action="append", default=[], metavar="RESULT.json",
                   help="a `coremap probe jitter --json` result (repeat for more CPUs; the last per CPU wins)")
    p.add_argument("--any-host", action="store_true",
                   help="export --jitter results measured on another machine too; without it such a result is "
                        "refused (its series would be scraped as this machine's)")
    p.set_defaults(func=run)


def run(args) -> int:
    # Imported here: every `coremap` run imports this module to build its parser.
    from app.sources.export import gather, summary, write
    from probes.results import check_result
    with opened_host(args) as host:
        # The journal only read (a missing one is empty: nothing pinned, nothing quiet).
        exported = gather(host.root, journal=host.open_pins(dry_run=True).journal, results=args.jitter,
                          any_host=args.any_host, check_result=check_result)
    write(args.textfile, exported)
    for note in exported.notes:
        print(f"coremap: note: {note}", file=sys.stderr)
    print(f"{args.textfile}: {summary(exported)}")
    return 0
