"""`coremap report [--session FILE | --root DIR] --out FILE.html|FILE.pdf`: one self-contained report
(machine summary, the grid coloured by IRQ load, busiest IRQs, pins, probe results, notes).

A machine's report holds what the window's report of it holds: this job's pins and its quiet CPUs,
badged in the grid (app/pinning/ledger.py, read as `coremap cpus` reads it). This job's pins are the
pins still in effect plus every batch written since the oldest Make quiet still in effect; the journal's
older history (earlier jobs, the "gone" rows of their restores) is left out, and the report says how
many rows it left (app/store/report_pins.py). `--since TIME` chooses the start instead, read as the
window's `--at` reads a time (app/sources/replay.py parse_at): an ISO time (2026-11-28T11:00), seconds
before now (-3600), or seconds after the journal's first row (0: the whole journal). A session's report
holds the pins saved in it (those since TIME, with --since).

Headless: with no DISPLAY or WAYLAND_DISPLAY, Qt's offscreen platform is chosen before Qt is
imported; Qt (widgets/) is imported only inside run(), so `coremap --help` stays Qt-free.
"""
from __future__ import annotations

import argparse
import sys

from app.cli.common import OptionError, add_command, ensure_headless_qt, opened_host, output_file
from app.format import plural, printable
from app.inputs import MiB, read_input_text
from app.parse.json_text import JsonInputError, load_json

NOTES_LIMIT = 1 * MiB              # a page of notes is kilobytes; a megabyte is a book
RESULT_LIMIT = 64 * MiB            # a probe's --json result with its buckets is tens of kB


def register(subparsers) -> None:
    p = add_command(subparsers, "report", "write an HTML or PDF report of a machine or a saved session",
                    "Write one self-contained report (HTML with embedded pictures, or PDF): machine "
                    "summary, the topology coloured by IRQ load, the busiest IRQs and where they land, "
                    "the pins made, probe results with plots and percentiles, and notes.")
    p.add_argument("--session", metavar="FILE", default=argparse.SUPPRESS, help="a saved .coremap session")
    p.add_argument("--out", metavar="FILE.html|FILE.pdf", required=True, help="the report to write")
    p.add_argument("--probe", metavar="RESULT.json", action="append", default=[],
                   help="add a probe result (the JSON object `coremap probe --json` prints); repeatable")
    p.add_argument("--any-host", action="store_true",
                   help="include --probe results measured on another machine (shown under that machine's name); "
                        "without it such a result is refused")
    p.add_argument("--notes", metavar="FILE.md", help="add these notes (text) to the report")
    p.add_argument("--verify", metavar="FILE.json", action="append", default=[],
                   help="add a before / after verification of quiet CPUs (`coremap verify --out`); repeatable")
    p.add_argument("--since", metavar="TIME",
                   help="hold the pins made since TIME (2026-11-28T11:00, -3600 for the last hour, 0 for the "
                        "whole journal) instead of this job's: the pins in effect and those made since the "
                        "oldest Make quiet in effect")
    p.set_defaults(func=run)


def _read_results(paths: list[str], option: str, hint: str, clean, *, many: bool, check=None) -> list[dict]:
    """The stored results in the files of `option` (a --probe or --verify), each as `clean` (probes/results.py
    check_result, app/store/results.py clean_verification) keeps it, its notes on stderr. OptionError naming
    the file, with `hint`, for a file that is not JSON or a value that is not such a result (clean's one
    note says why). `check(result, path)`: raises OptionError for a result the report must not hold."""
    out = []
    for p in paths:
        text = read_input_text(p, what=option, limit=RESULT_LIMIT, hint=hint, stream=True)
        values = _json_values(text, many=many, what=f"{option} {p}")
        if values is None:
            raise OptionError(f"{option} {p}: not JSON; {hint}")
        for v in values:
            kept, notes = clean(v, f"{option} {p}")
            if kept is None:
                raise OptionError(f"{notes[0].removesuffix('; left out')}; {hint}")
            for n in notes:
                print(f"coremap: note: {n}", file=sys.stderr)
            if check is not None:
                check(kept, p)
            out.append(kept)
    return out


def _host_check(machine, any_host: bool):
    """The --probe check: a result measured on another machine than `machine` is refused unless
    --any-host (app/store/result_host.py says why); one of unknown host is included, with a note."""
    from app.store.result_host import OTHER, UNKNOWN, check_host
    noted: set[str] = set()         # one note per file (a run on several CPUs is several results)

    def check(result: dict, path: str) -> None:
        c = check_host(result, machine)
        if c.kind == OTHER and not any_host:
            raise OptionError(c.refusal(f"--probe {path}"))
        note = c.note(f"--probe {path}") if c.kind in (OTHER, UNKNOWN) else ""
        if note and note not in noted:
            noted.add(note)
            print(f"coremap: note: {note}; included", file=sys.stderr)
    return check


def _machine(session, root):
    """The report's machine, as its probe results are checked against it (app/machine/identity.py)."""
    from app.machine.identity import read_identity
    if session is not None:
        return read_identity(session.root, name=session.host or None)
    return read_identity(root)


def _json_values(text: str, *, many: bool, what: str) -> list | None:
    """The JSON value of `text`, as a list of values: with `many`, the results each document holds
    (app/store/results.py results_in: a probe's on several CPUs, or a list) and JSON lines (several
    documents, one a line). None when it is not JSON (or too large or deep for the one decoder,
    app/inputs.py load_json)."""
    from app.store.results import results_in      # imported here, as in _report_data
    try:
        value = load_json(text, what=what, limit=RESULT_LIMIT)
    except JsonInputError:
        if not many:
            return None
        try:
            return [r for line in text.splitlines() if line.strip()
                    for r in results_in(load_json(line, what=what, limit=RESULT_LIMIT))]
        except JsonInputError:
            return None
    return results_in(value) if many else [value]


def run(args) -> int:
    out = output_file(args, (".html", ".htm", ".pdf"), ".html or .pdf")
    kind = out.suffix.lower()
    with opened_host(args) as host:
        session, root = host.session, host.root
        quiet = ()
        ledger = _ledger(host) if session is None else None
        if ledger is not None:
            quiet = ledger.quiet_cpus
        since = _since(args.since, session, ledger) if args.since is not None else None
        data = _report_data(args, session, root, ledger, since)
        ensure_headless_qt()
        from app.store.report import PDF_IMAGE_WIDTH, build_report_html
        from widgets.report_images import add_images
        add_images(data, root=root, quiet=quiet)
        html = build_report_html(data, image_width=PDF_IMAGE_WIDTH if kind == ".pdf" else 900)
        if kind == ".pdf":
            from widgets.export import render_pdf
            render_pdf(html, out, title=f"coremap report: {printable(data.host)}")
        else:
            from app.atomic import write_atomic
            write_atomic(out, html.encode("utf-8"))
    print(f"{out}: report on {printable(data.host)} ({plural(data.cpu_count, 'CPU')}; {data.rate_note}; "
          f"{plural(len(data.irqs), 'IRQ')}, {plural(len(data.pins), 'pin')}, {plural(len(data.probes), 'probe run')}"
          + (f", {plural(len(data.verifications), 'before / after verification')}" if data.verifications else "")
          + ")")
    return 0


def _ledger(host):
    """What the journal adds up to for `host` (app/pinning/ledger.py Ledger), read only; None, with a note
    on stderr, when the journal cannot be trusted (the report is still written, without pins)."""
    from app.errors import CoremapError
    try:
        return host.open_pins(dry_run=True).ledger()
    except CoremapError as e:
        print(f"coremap: note: no pins in the report: {e}", file=sys.stderr)
        return None


def _since(text: str, session, ledger) -> float:
    """--since as epoch seconds: a time of the span from the journal's first row (the session's, or
    the machine's) to now. OptionError for a time that cannot be read."""
    import time as _time

    from app.sources.replay import ReplayError, Timeline, parse_at
    rows = session.journal if session is not None else (ledger.entries if ledger is not None else ())
    times = [t for t in (r.get("time") if isinstance(r, dict) else r.time for r in rows)
             if isinstance(t, (int, float))]
    now = _time.time()
    span = Timeline()
    span.times, span.wall, span.label = [min(times, default=now), now], True, "the journal"
    try:
        return parse_at(text, span, "--since")
    except ReplayError as e:
        raise OptionError(str(e)) from None


def _report_data(args, session, root, ledger, since: float | None):
    """The report's contents: the session's (its problems noted on stderr) or the machine's with this
    job's pins of its `ledger` (or those `since`), with the --probe results, --verify files and --notes
    added."""
    # Imported here, not at the top: every `coremap` run imports this module to build its parser, and
    # app.store.results brings the journal and msgspec with it.
    from app.store.results import clean_verification
    from probes.results import check_result
    probes = _read_results(args.probe, "--probe", "give the output of `coremap probe --json`", check_result, many=True,
                           check=_host_check(_machine(session, root), args.any_host) if args.probe else None)
    verifications = _read_results(args.verify, "--verify", "give the file `coremap verify --out` wrote",
                                  clean_verification, many=False)
    notes = ""
    if args.notes:
        notes = read_input_text(args.notes, what="--notes", limit=NOTES_LIMIT, hint="give a text file", stream=True)
    from app.store.report import VerifySection, probe_sections, report_from_root, report_from_session
    if session is None:
        from app.store.report_pins import pin_scope
        scope = pin_scope(ledger, since=since) if ledger is not None else None
        return report_from_root(root, journal=scope.rows if scope else [], probes=probes, notes=notes,
                                verifications=verifications, pins_scope=scope.sentence if scope else "")
    for n in session.problems:
        print(f"coremap: note: {args.session}: {n}", file=sys.stderr)
    data = report_from_session(session, since=since)
    data.probes += probe_sections(probes, data.machine)
    data.verifications += [VerifySection(v) for v in verifications]
    if notes:
        data.notes = (data.notes + "\n\n" + notes) if data.notes.strip() else notes
    return data
