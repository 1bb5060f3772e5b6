"""`coremap guard [--interval S] [--reapply] [--policy BATCH=reapply|report] [--ticks N] [--json]`:
keep every pin and isolate in the journal in place, headless — a foreground daemon without Qt, fit
for a systemd unit (the window runs the same guard).

Each tick it compares every guarded target with what was set and prints one line per change made by
someone else (target, set -> found, when, who) and per new thread of a pinned process it pins. With
--reapply a changed pin is written back (at most 3 times a minute per target) unless its batch's
policy says report; --policy sets a batch's policy in the journal (the window's Pins panel shows and
changes the same). SIGTERM or Ctrl+C stops it. With --json each of those lines is one JSON document
on stdout (JSON lines, each with its schema_version), and what it says on starting goes to stderr, so
stdout holds JSON alone.
"""
from __future__ import annotations

import argparse
import sys
import time

from app.cli.common import add_root_argument, bounded, opened_host, write_json
from app.cli.pin import pins_of
from app.errors import CoremapError
from app.format import printable


class GuardArgumentError(CoremapError):
    """A --policy that names no batch or no policy."""


def register(subparsers) -> None:
    p = subparsers.add_parser("guard", help="keep pins and quiet CPUs in place (a foreground daemon)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interval", type=bounded(0.1, 3600), default=1.0, metavar="S",
                   help="seconds between ticks (default 1)")
    p.add_argument("--reapply", action="store_true",
                   help="write changed pins back (rate-limited) unless their batch's policy says report")
    p.add_argument("--policy", action="append", default=[], metavar="BATCH=reapply|report",
                   help="set one batch's policy in the journal (see `coremap journal` for batch ids)")
    p.add_argument("--ticks", type=bounded(0, 10 ** 9, "ticks", integer=True), default=None, metavar="N",
                   help="stop after N ticks (default: run until stopped)")
    p.add_argument("--json", action="store_true", help="one JSON document per line for each event (JSON lines)")
    add_root_argument(p)
    p.set_defaults(func=run)


def _policies(texts: list[str]) -> list[tuple[int, bool]]:
    out = []
    for text in texts:
        batch, sep, what = text.partition("=")
        if not sep or not batch.strip().isdigit() or what.strip() not in ("reapply", "report"):
            raise GuardArgumentError(f"--policy {text[:40]!r}: write BATCH=reapply or BATCH=report, e.g. 12=reapply")
        out.append((int(batch), what.strip() == "reapply"))
    return out


def run(args) -> int:
    # imported here: only `coremap guard` needs the guard (and its Java and quiet-state imports)
    from app.quiet.guard import Guard
    policies = _policies(args.policy)
    with opened_host(args) as host:
        service = pins_of(host)
        for batch, reapply in policies:
            service.journal.set_policy(batch, reapply)
            print(f"batch #{batch}: {'re-apply' if reapply else 'report'} when changed", file=_said(args))
        guard = Guard(service, reapply=args.reapply)
        guard.refresh(force=True)
        print(f"guarding {guard.guarded} targets every {args.interval:g} s; changed pins are "
              f"{'re-applied' if args.reapply else 'reported'} (per-batch policies in the journal win)", flush=True,
              file=_said(args))
        try:
            _ticks(args, guard)
        finally:
            guard.close()           # /dev/cpu_dma_latency let go (an isolate's force_latency)
    return 0


def _ticks(args, guard) -> None:
    from app.quiet.guard import event_line
    n = 0
    while args.ticks is None or n < args.ticks:
        started = time.monotonic()
        tick = guard.tick()
        for note in tick.notes:
            print(printable(note), file=_said(args), flush=True)
        for ev in tick.events:
            _say(args, {"type": "guard", "line": printable(event_line(ev)), "target": ev.kind, "id": ev.target_id,
                        "expected": ev.expected, "found": ev.found, "who": ev.who, "action": ev.action,
                        "count": ev.count, "time": ev.time})
        for r in tick.followed:
            _say(args, {"type": "follow", "line": f"new thread: {r.line()}", "tid": r.target.id,
                        "pid": r.target.pid, "cpus": r.requested, "ok": r.ok})
        n += 1
        if args.ticks is not None and n >= args.ticks:
            break
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))


def _said(args):
    """Where the lines that are not events go: stderr with --json, whose stdout is JSON lines alone."""
    return sys.stderr if args.json else sys.stdout


def _say(args, obj: dict) -> None:
    if args.json:
        write_json(obj, args)
    else:
        sys.stdout.write(obj["line"] + "\n")
    sys.stdout.flush()
