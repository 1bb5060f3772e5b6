"""`coremap report [--session FILE | --root DIR] --out FILE.html|FILE.pdf`: one self-contained report
(machine summary, the grid coloured by IRQ load, busiest IRQs, pins, probe results, notes).

Headless: with no DISPLAY or WAYLAND_DISPLAY, Qt's offscreen platform is chosen before Qt is
imported; Qt (widgets/) is imported only inside run(), so `coremap --help` stays Qt-free.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli.common import add_root_argument, ensure_headless_qt, root_arg, root_of
from app.errors import CoremapError
from app.inputs import MiB, read_input_text

NOTES_LIMIT = 1 * MiB              # a page of notes is kilobytes; a megabyte is a book
PROBE_RESULT_LIMIT = 64 * MiB      # a probe's --json result with its buckets is tens of kB


class ReportArgumentError(CoremapError):
    """A report option that cannot be used."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report", help="write an HTML or PDF report of a machine or a saved session",
        description="Write one self-contained report (HTML with embedded pictures, or PDF): machine "
                    "summary, the topology coloured by IRQ load, the busiest IRQs and where they land, "
                    "the pins made, probe results with plots and percentiles, and notes.")
    add_root_argument(p)
    p.add_argument("--session", metavar="FILE", default=argparse.SUPPRESS, help="a saved .coremap session")
    p.add_argument("--out", metavar="FILE.html|FILE.pdf", required=True, help="the report to write")
    p.add_argument("--probe", metavar="RESULT.json", action="append", default=[],
                   help="add a probe result (the JSON object `coremap probe --json` prints); repeatable")
    p.add_argument("--notes", metavar="FILE.md", help="add these notes (text) to the report")
    p.add_argument("--verify", metavar="FILE.json", action="append", default=[],
                   help="add a before / after verification of quiet CPUs (`coremap verify --out`); repeatable")
    p.set_defaults(func=run)


def _read_probe_results(paths: list[str]) -> list[dict]:
    # Imported here, not at the top: every `coremap` run imports this module to build its parser, and
    # app.store.results brings the journal and msgspec with it.
    from app.store.results import clean_probe_result
    out = []
    for p in paths:
        text = read_input_text(p, what="--probe", limit=PROBE_RESULT_LIMIT,
                               hint="give the output of `coremap probe --json`")
        objs = []
        try:
            obj = json.loads(text)
            objs = obj if isinstance(obj, list) else [obj]
        except (ValueError, RecursionError):
            # JSON lines (several results, one per line)
            try:
                objs = [json.loads(l) for l in text.splitlines() if l.strip()]
            except (ValueError, RecursionError):
                raise ReportArgumentError(f"--probe {p}: not JSON; give the output of `coremap probe --json`") from None
        for o in objs:
            clean, notes = clean_probe_result(o, f"--probe {p}")
            if clean is None:
                raise ReportArgumentError(f"--probe {p}: not a probe result (no \"probe\" field); "
                                          "give the output of `coremap probe --json`")
            for n in notes:
                print(f"coremap: note: {n}", file=sys.stderr)
            out.append(clean)
    return out


def _read_verifications(paths: list[str]) -> list[dict]:
    from app.store.results import clean_verification     # not at the top: see _read_probe_results
    out = []
    for p in paths:
        text = read_input_text(p, what="--verify", limit=PROBE_RESULT_LIMIT,
                               hint="give the file `coremap verify --out` wrote")
        try:
            v = json.loads(text)
        except (ValueError, RecursionError):
            v = None
        clean, notes = clean_verification(v, f"--verify {p}")
        if clean is None:
            raise ReportArgumentError(f"--verify {p}: not a verification of quiet CPUs; give the file "
                                      "`coremap verify --out` wrote")
        for n in notes:
            print(f"coremap: note: {n}", file=sys.stderr)
        out.append(clean)
    return out


def run(args) -> int:
    out = Path(args.out)
    kind = out.suffix.lower()
    if kind not in (".html", ".htm", ".pdf"):
        raise ReportArgumentError(f"--out {out}: name a .html or .pdf file")
    # Imported here, not at the top: every `coremap` run imports this module to build its parser, and
    # app.atomic brings tempfile and shutil (issue 12: start-up time).
    from app.atomic import check_output_path
    check_output_path(out, "--out")
    session_path, root_path = getattr(args, "session", None), root_arg(args)
    if session_path and root_path:
        raise ReportArgumentError("--root and --session both given: report on one machine at a time")
    probes = _read_probe_results(args.probe)
    verifications = _read_verifications(args.verify)
    notes = ""
    if args.notes:
        notes = read_input_text(args.notes, what="--notes", limit=NOTES_LIMIT, hint="give a text file")

    from app.store.report import (PDF_IMAGE_WIDTH, ProbeSection, VerifySection, build_report_html, report_from_root,
                            report_from_session)
    session = None
    if session_path:
        from app.store.session import open_session
        session = open_session(session_path)
        for n in session.problems:
            print(f"coremap: note: {session_path}: {n}", file=sys.stderr)
    try:
        if session is not None:
            data = report_from_session(session)
            data.probes += [ProbeSection(p) for p in probes]
            data.verifications += [VerifySection(v) for v in verifications]
            if notes:
                data.notes = (data.notes + "\n\n" + notes) if data.notes.strip() else notes
            root = session.root
        else:
            root = root_of(args)
            data = report_from_root(root, probes=probes, notes=notes, verifications=verifications)
        ensure_headless_qt()
        from widgets.report_images import add_images
        add_images(data, root=root)
        html = build_report_html(data, image_width=PDF_IMAGE_WIDTH if kind == ".pdf" else 900)
        if kind == ".pdf":
            from widgets.export import render_pdf
            render_pdf(html, out, title=f"coremap report: {data.host}")
        else:
            from app.atomic import write_atomic
            write_atomic(out, html.encode("utf-8"))
    finally:
        if session is not None:
            session.close()
    print(f"{out}: report on {data.host} ({data.cpu_count} CPUs; {data.rate_note}; "
          f"{len(data.irqs)} IRQs, {len(data.pins)} pins, {len(data.probes)} probe runs"
          + (f", {len(data.verifications)} before / after verifications" if data.verifications else "") + ")")
    return 0
