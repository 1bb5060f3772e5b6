"""The PDF report holds what the HTML holds (issue 28): every run's heading, picture and tables, the
gaps' attribution and the Notes, with no heading left alone at the foot of a page.

The runs are stored results with known gaps (tests/fixtures/results: two attributed jitter runs and
two wakeup runs on a 2-CPU KVM guest, as `coremap probe --json` wrote them). Where page breaks fall
depends on what comes before the probes, so the report is rendered with 0 to 35 pin rows ahead of
them: the PDF used to end after the first run, or lose its Notes, at some of those offsets, and left a
heading at the foot of a page at most."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from app.store.report import PDF_IMAGE_WIDTH, build_report_html, report_from_root
from app.store.results import results_in
from probes.results import check_result
from app.sysroot import SysRoot
from tests.machines import FIXTURES, extract
from widgets.export import pdf_bytes
from widgets.report_images import add_images

RESULTS = FIXTURES / "results"
NOTES = "Quiet CPU 1 for the feed handler.\nThe busy shell on CPU 1 explains its 0.5 s lost."

pytestmark = pytest.mark.skipif(shutil.which("pdftotext") is None or shutil.which("pdfimages") is None,
                                reason="pdftotext and pdfimages (poppler-utils) are not installed")


def _runs() -> list[dict]:
    """Jitter on CPU 1, jitter on CPU 0, wakeup on CPU 1, wakeup on CPU 0, through the stored results'
    one door (app/store/results.py), as `coremap report --probe` reads them."""
    runs = []
    for name in ("kvm-6.18-jitter-attributed.json", "kvm-6.18-wakeup.json"):
        for r in results_in(json.loads((RESULTS / name).read_text())):
            kept, notes = check_result(r, name)
            assert kept is not None and not notes, notes
            runs.append(kept)
    runs.sort(key=lambda r: (r["probe"] != "jitter", -r["cpu"]))
    assert [(r["probe"], r["cpu"]) for r in runs] == [("jitter", 1), ("jitter", 0), ("wakeup", 1), ("wakeup", 0)]
    assert all(r["attribution"]["available"] for r in runs[:2])
    return runs


def _pins(n: int) -> list[dict]:
    """n rows as the pin flow journals them: IRQ 24 moved between CPU 0 and CPU 1."""
    return [{"kind": "irq", "target_id": 24, "label": "virtio0-input.0", "before": [i % 2], "requested": [1 - i % 2],
             "after": [1 - i % 2], "state": "done", "time": 1.7e9 + i} for i in range(n)]


def _pdf_text(pdf: bytes, tmp_path) -> str:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True).stdout


def _pdf_images(pdf: bytes, tmp_path) -> int:
    """The PDF's pictures, as pdfimages lists them; only the test that counts them pays for the listing
    (the page-break tests render up to 80 PDFs each and read their text only)."""
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf)
    listing = subprocess.run(["pdfimages", "-list", str(path)], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in listing.splitlines()[2:] if line.split()[2:3] == ["image"])


def _squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@pytest.fixture(scope="module")
def root():
    return SysRoot(extract("2pa-pcidomain32bits"))       # a 2-CPU VM


@pytest.fixture(scope="module")
def report(root):
    data = report_from_root(root, probes=_runs(), notes=NOTES, live_wait=0)
    add_images(data, root=root)
    return data


@pytest.mark.parametrize("pins", range(0, 40, 5))
def test_the_pdf_holds_every_section_of_the_html(qapp, tmp_path, root, report, pins):
    report.pins = report_from_root(root, journal=_pins(pins), live_wait=0).pins
    html = build_report_html(report, image_width=PDF_IMAGE_WIDTH)
    headings = [_squash(re.sub(r"<[^>]+>", "", h)) for h in re.findall(r"<h[123]>(.*?)</h[123]>", html)]
    assert {"1. jitter on CPU 1", "2. jitter on CPU 0", "3. wakeup on CPU 1", "4. wakeup on CPU 0",
            "Notes"} <= set(headings)
    pdf = pdf_bytes(html)
    text, images = _pdf_text(pdf, tmp_path), _pdf_images(pdf, tmp_path)
    flat = _squash(text)
    # every heading, in the HTML's order
    at = 0
    for h in headings:
        found = flat.find(h, at)
        assert found >= 0, f"{h!r} is not in the PDF after {flat[max(0, at - 80):at]!r}"
        at = found + len(h)
    headings = set(headings)
    # every picture (the grid, the jitter runs compared, the wakeup runs compared, one per run) and both
    # runs' attribution; QTextDocument prints a line at a page's foot onto the next page too (clipped
    # away, but pdftotext reads it)
    assert images == html.count("<img ") == 7
    assert flat.count("What ran in the 320 largest gaps") >= html.count("What ran in the 320 largest gaps") == 2
    assert "sh/9561" in flat
    assert _squash(NOTES) in flat
    # No page ends with a heading or a line that introduces what follows: it goes to the next page with
    # it (a heading whose picture follows it on its page ends that page's text, and is not alone).
    pictured = {h for h in headings if re.search(re.escape(h) + r"</h[23]>\s*<p><img", html)}
    for page in text.split("\f"):
        lines = [_squash(line) for line in page.splitlines() if line.strip()]
        if lines:
            assert lines[-1] not in headings - pictured, f"a page ends with the heading {lines[-1]!r}"
            assert not lines[-1].endswith(":"), f"a page ends with {lines[-1]!r}"
    # "Pins made", the paragraph that says which pins, and the table's first row share a page.


def test_what_follows_a_row_moved_to_the_next_page_is_printed(qapp, tmp_path):
    """The cause of the lost runs: a row that a page break cut was moved while QTextDocument's lazy
    layout had not reached the end, and the layout stopped there; print_() then printed 3 pages of 6.
    Here the table's rows of 7 wrapped lines cross the first page's foot whatever the fonts."""
    rows = "".join(f"<tr><td>{i}</td><td width='200'>{'word ' * 30}END{i}</td></tr>" for i in range(12))
    sections = "".join(f"<h3>Section {i}</h3><p>{'text ' * 300}</p>" for i in range(20))
    html = f"<html><body><h1>rows</h1><table border='1'>{rows}</table>{sections}<h2>Notes</h2><p>THE END</p></body></html>"
    text = _pdf_text(pdf_bytes(html), tmp_path)
    flat = _squash(text)
    assert all(f"END{i}" in flat for i in range(12))
    assert all(f"Section {i}" in flat for i in range(20)) and "THE END" in flat


def test_a_heading_its_paragraph_and_its_table_share_a_page(qapp, tmp_path):
    """"Pins made", the two lines that say which pins, then the table: the heading and its paragraph
    ended page 1 and the table began page 2 (issue 28, seen in the walk's report). Each line of filler
    moves them a line down the first page, past its foot, whatever the fonts."""
    rows = "".join(f"<tr><td>thread {i}</td><td>0-1 -> 1</td><td>done</td></tr>" for i in range(6))
    for filler in range(80):
        html = (f"<html><body><h1>report</h1>{'<p>filler line</p>' * filler}<h2>Pins made</h2>"
                f"<p>{'Pins in effect and those made since this window opened. ' * 3}Now CPU 1 quiet.</p>"
                f"<table border='1'><tr><th>Target</th><th>Before → after</th><th>Result</th></tr>{rows}</table>"
                f"{'<p>after</p>' * 40}</body></html>")
        text = _pdf_text(pdf_bytes(html), tmp_path)
        page = next(p for p in text.split("\f") if "Pins made" in p)
        assert "thread 0" in page.split("Pins made", 1)[1], (filler, page[-300:])


def test_wakeup_runs_are_drawn_on_their_own_axes(qapp, report):
    """A wakeup run's picture is latency against wake-ups per CPU-hour, never "gap length", and the
    runs compared side by side are compared with their own kind (issue 28 item 5, in the report)."""
    from widgets.pictures import axes_of, build_probe_plot
    jitter, _, wakeup, _ = (p.result for p in report.probes)
    assert (axes_of(jitter), axes_of(wakeup)) == ("gaps", "latency")
    for result, bottom, left in ((jitter, "gap length", "gaps per CPU-hour"), (wakeup, "latency", "wake-ups per CPU-hour")):
        plot = build_probe_plot([result], axes=axes_of(result))
        item = plot.getPlotItem()
        assert (item.getAxis("bottom").labelText, item.getAxis("left").labelText) == (bottom, left)
        plot.deleteLater()
    assert [p.caption for p in report.probes] == ["gap lengths, count per CPU-hour"] * 2 + \
        ["wake-up latencies, count per CPU-hour"] * 2
    assert len(report.comparison_plots) == 2
