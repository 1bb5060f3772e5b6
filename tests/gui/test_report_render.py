"""Reports end to end on the master.internal fixture (112 CPUs): HTML and PDF, the PDF rasterised with
pdftoppm and checked for pages and ink; probe plots; the headless CLI commands."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from app.store.report import PDF_IMAGE_WIDTH, build_report_html, report_from_root
from app.sysroot import SysRoot
from tests.machines import extract
from widgets import export
from widgets.pictures import build_probe_plot, gap_rows, render_probe_plot
from widgets.report_images import add_images

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def probe_result():
    """A real jitter run with known gaps (3,258 of at least 1 µs on CPU 1, a busy shell beside it), as
    `coremap probe --json` printed it (tests/fixtures/results/SOURCE). A short live run on a quiet
    machine may see no gap, and the plot test then checked nothing (issue 31)."""
    stored = json.loads((ROOT / "tests" / "fixtures" / "results" / "kvm-6.18-jitter-attributed.json").read_text())
    return next(r for r in stored["results"] if r["cpu"] == 1)


def _ink(img: QImage) -> float:
    """Share of sampled pixels that are not (near) white."""
    dark = total = 0
    for y in range(0, img.height(), 4):
        for x in range(0, img.width(), 4):
            c = img.pixelColor(x, y)
            total += 1
            if c.red() + c.green() + c.blue() < 700:
                dark += 1
    return dark / total


def _colours(img: QImage) -> set:
    return {img.pixelColor(x, y).rgb() for y in range(0, img.height(), 3) for x in range(0, img.width(), 3)}


def test_probe_plot_curves_follow_the_result(qtbot, probe_result):
    rows = gap_rows(probe_result)
    assert rows and all(lo < hi for lo, hi, _ in rows)
    w = build_probe_plot([probe_result])
    qtbot.addWidget(w)
    curves = w.getPlotItem().listDataItems()
    nonzero = [r for r in rows if r[2] > 0]
    assert nonzero
    drawn = sum(len(c.yData) for c in curves)
    assert drawn == len(nonzero)                        # one step per non-empty row, no invented floor
    for c in curves:
        assert len(c.xData) == len(c.yData) + 1         # stepMode="center": edges
    png = render_probe_plot(probe_result)
    img = QImage.fromData(png)
    assert img.width() == 900 and _ink(img) > 0.02


def test_master_report_html_and_pdf(tmp_path, probe_result):
    root = SysRoot(extract("master.internal"))
    second = dict(probe_result, cpu=probe_result["cpu"])
    data = report_from_root(root, probes=[probe_result, second], notes="tuned <irq> 720 & friends",
                            journal=[{"kind": "irq", "target_id": 720, "label": "ahci", "before": [60],
                                      "requested": [2], "after": [2], "state": "done", "time": 1.7e9}])
    add_images(data, root=root)
    assert data.topology_image is not None and len(data.comparison_plots) == 1
    html = build_report_html(data)
    (tmp_path / "r.html").write_text(html)
    assert 'width="900"' in html
    assert "one capture only: totals, not rates" in html
    assert html.count("data:image/png;base64,") == 4      # grid, comparison, two probe plots
    assert "tuned &lt;irq&gt; 720 &amp; friends" in html

    pdf = export.render_pdf(build_report_html(data, image_width=PDF_IMAGE_WIDTH), tmp_path / "r.pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed")
    subprocess.run(["pdftoppm", "-png", "-r", "60", str(pdf), str(tmp_path / "page")], check=True, timeout=60)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert 2 <= len(pages) <= 8, pages
    imgs = [QImage(str(p)) for p in pages]
    # A4 at 60 dpi is 496 x 702 pixels.
    assert all(abs(i.width() - 496) <= 2 and abs(i.height() - 702) <= 2 for i in imgs)
    # no blank page: each carries text or pictures (the last may hold only the end of the notes)
    assert all(_ink(i) > 0.01 for i in imgs[:-1]) and _ink(imgs[-1]) > 0, [(_ink(i)) for i in imgs]
    # The grid page carries the colour map (many colours), not only black text.
    assert max(len(_colours(i)) for i in imgs) > 40


def test_a_probe_without_a_histogram_is_reported_as_its_text(probe_result):
    """What a probe's section shows comes from its record (probes/catalog.py): a counters run (no
    histogram, no picture) gets its text and no plot, and stays out of the comparison of the two
    jitter runs, which get their gap plots."""
    from probes.spec import record
    from probes.text import format_result
    cpu = min(os.sched_getaffinity(0))
    p = subprocess.run([sys.executable, "-m", "probes", "counters", "--cpu", str(cpu), "--", "true"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    counters = record("counters").measure.summarize([json.loads(l) for l in p.stdout.splitlines() if l.strip()])
    data = report_from_root(SysRoot(extract("sno")), probes=[probe_result, counters, probe_result], live_wait=0)
    add_images(data)
    first, counted, second = data.probes
    assert counted.text == format_result(counters, verdict=False) and counted.plot is None
    assert first.text == second.text == "" and first.plot is not None and first.caption
    assert len(data.comparison_plots) == 1
    html = build_report_html(data)
    assert html.count('class="probe-text"') == 1 and html.count("data:image/png;base64,") == 3
    assert "<h3>Runs side by side</h3>" in html and "2. counters on CPU" not in html.split("<h3>1.")[0]


def _cli(*args, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path, env=env)


def test_cli_report_and_screenshot_headless(tmp_path, capsys):
    root = str(extract("master.internal"))
    r = _cli("report", "--root", root, "--out", "m.html", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "totals, not rates" in r.stdout
    html = (tmp_path / "m.html").read_text()
    assert "master.internal" in html and "data:image/png;base64," in html
    # The grid's SVG in this process: the command's drawing is the same, and its headless start is the
    # PNG's child below (a child of its own cost 1.2 s of start-up and of reading master.internal).
    from app.cli.main import main
    assert main(["screenshot", "--root", root, "--out", str(tmp_path / "g.svg"), "--what", "grid"]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'g.svg'}: grid of ")
    import xml.etree.ElementTree as ET
    svg = ET.parse(tmp_path / "g.svg").getroot()
    assert sum(1 for e in svg.iter() if e.tag.endswith("rect")) >= 112
    r = _cli("screenshot", "--root", root, "--out", "w.png", "--size", "1000x700", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    img = QImage(str(tmp_path / "w.png"))
    assert (img.width(), img.height()) == (1000, 700) and _ink(img) > 0.05


def test_cli_refusals(tmp_path, capsys):
    # The first refusal's message and status, in this process (app.cli.main.main prints the same line);
    # the second as the command exits, in a process of its own.
    from app.cli.main import main
    assert main(["report", "--out", str(tmp_path / "x.txt")]) == 2
    assert "name a .html or .pdf file" in capsys.readouterr().err and not (tmp_path / "x.txt").exists()
    bad = tmp_path / "bad.coremap"
    bad.write_text("not a zip")
    r = _cli("screenshot", "--session", str(bad), "--out", "x.png", tmp_path=tmp_path)
    assert r.returncode == 2 and "not a zip file" in r.stderr and not (tmp_path / "x.png").exists()
