"""`coremap diff A B [--json]`: what differs between two machines, or one machine at two times.

A and B are each `live` (this machine), a captured folder, a `coremap snapshot` tarball or a saved
session (app/store/machines.py). Compared (app/store/diff.py): topology, kernel command line, isolation,
every IRQ's requested and effective CPUs, the kernel's masks and knobs, and the threads' allowed CPUs
and scheduling policy; printed grouped, or as one JSON document. Exits 0 when nothing differs and 1
when something does, as diff(1) does, so a script can ask "is this node still tuned as that one?".
"""
from __future__ import annotations

import sys

from app.cli.common import add_command, add_json_arguments, write_json


def register(subparsers) -> None:
    p = add_command(subparsers, "diff", "compare two machines or captures: topology, IRQs, masks, threads",
                    "Compare two captures, or a capture and this machine (`live`): topology, kernel "
                    "command line, isolation flags, every IRQ's requested and effective CPUs, kernel "
                    "masks and knobs, threads' allowed CPUs and policy. Exit status 1 when they differ, "
                    "0 when they do not.", root=None)
    p.add_argument("a", metavar="A", help="`live`, a captured folder, a snapshot .tar.gz or a .coremap session")
    p.add_argument("b", metavar="B", help="the same kinds as A")
    add_json_arguments(p, "one JSON document: the groups of changes and the CPUs whose IRQs differ")
    p.set_defaults(func=run)


def run(args) -> int:
    # Imported here, not at the top: every `coremap` run imports this module to build its parser,
    # and only this command needs the model behind it (issue 12: start-up time).
    from app.store.diff import diff_lines, diff_roots
    from app.store.machines import opened_machine
    with opened_machine(args.a) as (ra, na), opened_machine(args.b) as (rb, nb):
        d = diff_roots(ra, na, rb, nb)
    if args.json:
        write_json({"a": d.a, "b": d.b, "same": d.same, "groups": d.groups, "cpus": d.cpus}, args)
    else:
        sys.stdout.write("\n".join(diff_lines(d)) + "\n")
    return 0 if d.same else 1
