"""`coremap snapshot OUT.tar.gz [--root DIR] [--interval S] [--no-second]`: capture this machine's
topology, interrupts, IRQ affinities, PCI devices and counters into a tarball that
`coremap --root DIR` opens after `tar xf OUT.tar.gz -C DIR` (see app/store/capture.py for the layout).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from app.cli.common import add_command, add_root_argument, bounded, opened_host

if TYPE_CHECKING:
    from app.store.capture import SnapshotResult


def register(subparsers) -> None:
    p = add_command(subparsers, "snapshot", "capture this machine's /sys and /proc into a tarball for --root",
                    "Capture the parts of /sys and /proc that coremap reads (topology, caches, NUMA, "
                    "interrupts, IRQ affinities, PCI devices, kernel knobs, threads, counters twice) into "
                    "OUT.tar.gz. Extract "
                    "it anywhere and open it with `coremap --root DIR/<host-time>`.", root=None)
    p.add_argument("out", metavar="OUT.tar.gz", help="the tarball to write (its folder must exist)")
    add_root_argument(p, "capture a captured machine again (a folder holding sys/ and proc/)")
    # Own dest: the top-level --interval is the window's sampling interval.
    p.add_argument("--interval", dest="snapshot_interval", type=bounded(0.01, 3600), default=1.0, metavar="S",
                   help="seconds between the two counter captures (default 1)")
    p.add_argument("--no-second", action="store_true",
                   help="capture the counters once only (no rates for this snapshot)")
    p.add_argument("--no-threads", action="store_true",
                   help="keep no threads (by default every thread's stat, status, cpuset and Java name)")
    p.set_defaults(func=run)


def run(args) -> int:
    # Imported here, not at the top: every `coremap` run imports this module to build its parser,
    # and only this command needs the model behind it (issue 12: start-up time).
    from app.store.capture import take_snapshot
    with opened_host(args) as host:
        res = take_snapshot(args.out, host.root, interval=args.snapshot_interval, second=not args.no_second,
                            threads=not args.no_threads)
    print_result(res)
    return 0


def print_result(res: SnapshotResult) -> None:
    """What a snapshot holds and how to open it (here, or brought from a host: app/cli/host.py)."""
    what = f"counters twice, {res.interval:.3f} s apart" if res.interval is not None else "counters once"
    if res.threads is not None:
        what += f", {res.threads:,} threads"
    print(f"{res.path}: {res.files} files, {res.links} links, {what}; extract with "
          f"`tar xf {res.path}` and open {res.top}/ with --root")
    if res.skipped:
        print(f"skipped {len(res.skipped)} unreadable or missing file(s), listed in "
              f"{res.top}/.coremap/meta.json", file=sys.stderr)
    if res.threads_cut:
        print(f"not every thread was kept: {res.threads_cut}", file=sys.stderr)
