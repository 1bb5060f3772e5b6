"""`coremap verify --cpus LIST [--seconds S] [--pairs N] [--attribute] [--out FILE.json] [--json]`:
prove that quiet CPUs are quieter — the jitter probe on them not quiet ("before") and quiet
("after"), the same duration each, in alternated pairs; the quiet state is toggled between runs with
isolate and include (journalled like any other), and left as it was found at the end.

Prints gaps >= 10 µs per second and the share of time lost, before and after, with the median of the
per-pair ratios. --out writes the verification (every run, both merged histograms, the attribution
of the gaps when run as root with --attribute) for `coremap report --verify FILE.json`; the window's
Verify keeps the same in the session and the report.
"""
from __future__ import annotations

import json
from pathlib import Path

from app.cli.common import add_root_argument, bounded, write_json
from app.cli.pin import affinity_service
from app.errors import CoremapError


def register(subparsers) -> None:
    p = subparsers.add_parser("verify", help="jitter on CPUs before and after making them quiet",
                              description=__doc__)
    p.add_argument("--cpus", required=True, metavar="LIST", help="the CPUs to verify, e.g. 1")
    p.add_argument("--seconds", type=bounded(0.1, 3600), default=5.0, metavar="S",
                   help="each run's length (default 5)")
    p.add_argument("--pairs", type=bounded(1, 100, "pairs", integer=True), default=2, metavar="N",
                   help="before/after pairs, alternated (default 2)")
    p.add_argument("--attribute", action="store_true", help="say what ran in the largest gaps (root, tracefs)")
    p.add_argument("--out", metavar="FILE.json", help="write the verification for `coremap report --verify`")
    p.add_argument("--json", action="store_true", help="print the verification as one JSON document")
    add_root_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    # imported here: the probe runner, the quiet model and the verification are needed only by a run
    from app.atomic import check_output_path, write_atomic
    from app.quiet.isolate import QuietError, check_cpus
    from probes.own_affinity import OwnAffinityGuard
    from probes.runner import ProbeRun
    from probes.verify import VerifyPlan, verify_text

    if args.out:
        check_output_path(Path(args.out), "--out")
    service = affinity_service(args)
    if not service.root.is_live:
        raise QuietError(f"verify measures the machine coremap runs on, not the capture {service.root.root}; "
                         "drop --root")
    cpus = check_cpus(service.root, args.cpus)
    plan = VerifyPlan(cpus, args.seconds, args.pairs, args.attribute)
    was_quiet = set(cpus) <= set(service.ledger().quiet_cpus)
    own = OwnAffinityGuard(service.root)
    own.lent = frozenset(cpus)  # made quiet between runs, this process with the rest: a probe may go there
    own.exclude(cpus)           # this process stays off the measured CPUs on both sides alike
    try:
        for pair, quiet in plan.steps():
            _toggle(service, plan, cpus, quiet)
            for job in plan.jobs():
                with own.spawning(job.cpus):       # the child inherits its CPU and pins itself there
                    probe = ProbeRun.start(job.probe, job.args)
                own.exclude(cpus)                  # and the reader threads it started stay off it
                try:
                    probe.wait()
                except (KeyboardInterrupt, SystemExit):      # Ctrl+C, SIGTERM/SIGHUP: stop the child too
                    probe.cancel()
                    raise
                failure = probe.failure(job.label)
                if failure:
                    raise CoremapError(failure)
                plan.record(pair, quiet, job.summarize(probe.lines))
                print(f"pair {pair + 1}, {'quiet' if quiet else 'not quiet'}: {job.label} done", flush=True)
    finally:
        _toggle(service, plan, cpus, was_quiet)
        own.restore()
    result = plan.result()
    if args.out:
        write_atomic(Path(args.out), json.dumps(result, separators=(",", ":")).encode())
    if args.json:
        write_json(result, args)
    else:
        print(verify_text(result))
    return 0


def _toggle(service, plan, cpus, quiet: bool) -> None:
    """Make `cpus` quiet or not (isolate / include), saying what moved."""
    from app.quiet.isolate import set_quiet         # imported here with the rest of run()'s imports
    done = set_quiet(service, cpus, quiet)
    if done is not None:
        sentence, _ = done
        plan.note_outcome("isolate" if quiet else "include", sentence)
        print(sentence, flush=True)
