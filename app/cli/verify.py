"""`coremap verify -c/--cpus LIST [--seconds S] [--pairs N] [--attribute] [--out FILE.json] [--json]`
(the window's Quiet → Verify): prove that quiet CPUs are quieter — the jitter probe on them not quiet ("before") and quiet
("after"), the same duration each, in alternated pairs; the quiet state is toggled between runs with
isolate and include (journalled like any other), and left as it was found at the end.

Prints each run as it finishes, then gaps >= 10 µs per second and the share of time lost, before and
after, with the median of the per-pair ratios (after / before) and what it says. --out writes the
verification (every run, both merged histograms, the attribution of the gaps when run as root with
--attribute) for `coremap report --verify FILE.json`, atomically after every finished run, so the file
always holds each run finished so far; the window's Verify keeps the same in the session and the report.

When a step fails (a probe child, tracefs gone under an attributed run, an isolate or include), verify
stops there: one line names the step (run 3 of 4: pair 2, quiet, CPU 1) and what failed, the finished
runs are printed and stay in --out, and the CPUs get back the quiet state they were found in.
Exit status: 0 verified; 1 a step failed, or the quiet state could not be given back; 2 bad input
(checked before any run); 130 interrupted (the finished runs kept as on a failure).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from app.cli.common import add_cpus_argument, add_root_argument, bounded, json_document, opened_host, write_json
from app.cli.pin import pins_of
from app.errors import CoremapError
from app.format import cpus_word, format_cpus


def register(subparsers) -> None:
    p = subparsers.add_parser("verify", help="jitter on CPUs before and after making them quiet (the window's "
                                             "Quiet → Verify)",
                              description=__doc__)
    add_cpus_argument(p, "the CPUs to verify, e.g. 1", required=True)
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
    from app.atomic import check_output_path
    from app.quiet.isolate import QuietError, check_cpus
    from probes.own_affinity import OwnAffinityGuard
    from probes.verify import VerifyPlan, verify_text

    out = check_output_path(Path(args.out), "--out") if args.out else None
    with opened_host(args) as host:
        if not host.root.is_live:
            raise QuietError(f"verify measures the machine coremap runs on, not the capture {host.root.root}; "
                             "drop --root")
        service = pins_of(host)
        cpus = check_cpus(service.root, args.cpus)
        plan = VerifyPlan(cpus, args.seconds, args.pairs, args.attribute)
        was_quiet = set(cpus) <= set(service.ledger().quiet_cpus)
        own = OwnAffinityGuard(service.root)
        own.lent = frozenset(cpus)  # made quiet between runs, this process with the rest: a probe may go there
        own.exclude(cpus)           # this process stays off the measured CPUs on both sides alike
        interrupted = None
        try:
            _run_steps(plan, service, own, out)
        except (KeyboardInterrupt, SystemExit) as e:    # Ctrl+C, SIGTERM/SIGHUP: what finished is still said
            interrupted = e
        finally:
            # Also on an error of coremap's own: the CPUs get their quiet state back, and --out its last word.
            gave_back = _give_back(service, plan, was_quiet)
            own.restore()
            written = _write_out(plan, out)
    result = plan.result()
    if args.json:
        write_json(result, args)
    else:
        print(verify_text(result, stopped=False))     # where it stopped is the error line below
    errors = [e for e in (gave_back, written) if e and not (plan.stopped and e == plan.stopped["failed"])]
    if plan.stopped:
        kept = " above" + (f" and in {out}" if out is not None and not written else "") if plan.runs else ""
        errors.insert(0, plan.outcomes["stopped"] + kept)
    for line in errors:
        print(f"coremap: {line}", file=sys.stderr)
    if interrupted is not None:
        raise interrupted
    return 1 if errors else 0


def _run_steps(plan, service, own, out: Path | None) -> None:
    """Each step of the plan in turn: set the quiet state, run each CPU's job, record it, write --out, say
    so. The first failure ends it through plan.stop(), naming the step; the finished runs stay."""
    from app.cli.probe import run_batch
    from probes.spec import batches
    from probes.verify import finished_line
    where = None
    try:
        for pair, quiet in plan.steps():
            where = plan.where(pair, quiet)
            try:
                _toggle(service, plan, quiet)
            except CoremapError as e:
                change = "quiet (isolate)" if quiet else "not quiet (include)"
                plan.stop(where, f"making {cpus_word(plan.cpus)} {change} failed: {e}")
                return
            # the CPUs of a pair measured at once, as the window's verify and `coremap probe` run them
            for batch in batches(plan.jobs()):
                where = plan.where(pair, quiet, tuple(c for job in batch for c in job.cpus))
                try:
                    done = [(job, job.summarize(lines)) for job, lines in run_batch(batch, None, own, keep_off=plan.cpus)]
                except (CoremapError, OSError) as e:    # OSError: the child could not be started at all
                    plan.stop(where, f"the {batch[0].probe} run failed: {e}")
                    return
                for job, result in done:
                    where = plan.where(pair, quiet, job.cpus)
                    plan.record(pair, quiet, result)
                    error = _write_out(plan, out)
                    print(finished_line(where, result), flush=True)
                    if error:
                        plan.stop(plan.where(pair, quiet, job.cpus, run=len(plan.runs)), error)
                        return
    except (KeyboardInterrupt, SystemExit):            # say where it was, then let run() end
        if where is not None:
            plan.stop(where, "cancelled (Ctrl+C or a signal)")
        raise


def _write_out(plan, out: Path | None) -> str | None:
    """The verification so far into --out, atomically (a reader sees the previous runs or these, whole);
    None when written (or not asked for), else what went wrong."""
    from app.atomic import AtomicWriteError, write_atomic
    if out is None:
        return None
    try:
        # the document --json prints, schema_version first: `report --verify` reads either
        write_atomic(out, json.dumps(json_document(plan.result()), separators=(",", ":")).encode())
    except AtomicWriteError as e:
        return f"--out: {e}"
    return None


def _give_back(service, plan, was_quiet: bool) -> str | None:
    """The quiet state the CPUs were found in; None when they have it, else the sentence saying not."""
    try:
        _toggle(service, plan, was_quiet)
    except CoremapError as e:
        found = "they were" if len(plan.cpus) > 1 else "it was"
        sentence = (f"could not make {cpus_word(plan.cpus)} {'quiet' if was_quiet else 'not quiet'} again, as "
                    f"{found} found: {e}; `coremap {'isolate' if was_quiet else 'include'} --cpus "
                    f"{format_cpus(plan.cpus)}` retries it")
        plan.note_outcome("give back", sentence)
        return sentence
    return None


def _toggle(service, plan, quiet: bool) -> None:
    """Make the plan's CPUs quiet or not (isolate / include), saying what moved. QuietError when a write
    failed (what the kernel refuses by design is not a failure): a run on CPUs half made quiet, or half
    given back, would measure neither side."""
    from app.quiet.isolate import LocalQuiet, QuietError, failed_results   # imported here, as run()'s are
    done = LocalQuiet(service).set_quiet(plan.cpus, quiet)
    if done is None:
        return
    sentence, results = done
    plan.note_outcome("isolate" if quiet else "include", sentence)
    print(sentence, flush=True)
    failed = failed_results(results)
    if failed:
        raise QuietError(f"{len(failed)} write{'s' if len(failed) != 1 else ''} failed, the first: "
                         f"{failed[0].line(warning=False)}")
