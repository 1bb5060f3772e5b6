"""Report pages as a reader sees them (issue 23): the grid picture carries the quiet badge the window
shows and no empty frame around a small machine; a PDF never cuts a table row across a page; a
report of the live machine names it and says what the window saw of irqbalance; saving a session
writes no probe file the user did not ask for."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from app.sysroot import SysRoot
from tests.machines import copy_machine, extract
from app.sources.live import host_of_root
from widgets.application import build_window
from widgets.export import pdf_bytes
from widgets.pictures import render_grid, state_for
from widgets.topology.items import QUIET_COLOR


def _quiet_pixels(png: bytes) -> int:
    img = QImage.fromData(png)
    want = QUIET_COLOR.rgb()
    return sum(1 for y in range(0, img.height(), 2) for x in range(0, img.width(), 2) if img.pixel(x, y) == want)


def test_the_grid_picture_badges_quiet_cpus_and_fits_a_small_machine(qapp):
    state = state_for(SysRoot(extract("2pa-pcidomain32bits")))        # a 2-CPU VM
    plain = render_grid(state)
    quiet = render_grid(state, quiet=[1])
    # The legend's key has a little of the colour; the badged cell has a band and a word of it.
    assert _quiet_pixels(quiet) > _quiet_pixels(plain) + 50
    # A small machine's picture is no taller than it needs (it was a small box in a 760-pixel frame).
    assert QImage.fromData(plain).height() < 500


def test_a_pdf_never_cuts_a_table_row_across_pages(qapp, tmp_path):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    # Cells of 1 to 4 wrapped lines in a narrow column, as an IRQ's long device name wraps.
    rows = "".join(f"<tr><td>{i}</td><td width='200'>{'word ' * (6 + 7 * (i % 5))}END{i}</td><td>x</td></tr>"
                   for i in range(120))
    pdf = tmp_path / "rows.pdf"
    pdf.write_bytes(pdf_bytes(f"<html><body><h1>rows</h1><table border='1'>{rows}</table></body></html>"))
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = [p for p in text.split("\f") if p.strip()]
    assert len(pages) >= 3
    for page in pages:
        lines = [line for line in page.splitlines() if line.strip()]
        # Each page ends with a row's end (the last word of its wrapped cell)...
        assert re.search(r"END\d+", lines[-1]), lines[-3:]
    for page in pages[1:]:
        lines = [line for line in page.splitlines() if line.strip()]
        # ...and the next begins with a row's number, never with the rest of a cut row.
        assert re.match(r"\s*\d+\s+word", lines[0]), lines[:3]


@pytest.fixture
def live_window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    # Ticks every 0.25 s, not the window's 1 s: the rates it waits for come with the second tick, and
    # neither test reads the interval.
    w = build_window(host_of_root(SysRoot("/"), interval=0.25), interval=0.25)
    thread = w.sampler_thread
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    with qtbot.waitSignal(w.state_applied, timeout=20000):
        thread.start()
    qtbot.waitUntil(lambda: w.state.rates is not None, timeout=20000)
    return w


def test_a_report_of_the_live_machine_names_it_and_what_the_window_saw(qtbot, live_window):
    from widgets.summary_bar import irqbalance_running
    w = live_window
    w.pin_controller.grid.set_quiet_cpus([0])
    path = w.session_controller.export_report("html")
    html = path.read_text()
    host = w.state.topology.hostname
    assert f"Source: <span class=\"mono\">{host} (live)</span>" in html
    assert "/tmp/" not in html.split("Source:")[1][:200]
    seen = irqbalance_running(w.state)
    assert seen is not None
    irq_row = re.search(r"<th>irqbalance</th><td>([^<]*)</td>", html).group(1)
    assert irq_row.startswith("running" if seen else "not running")


def test_saving_a_session_says_nothing_of_files_the_user_did_not_ask_for(qtbot, live_window, tmp_path):
    """A finished histogram run goes into the session as .hlog bytes; the probe panel no longer says
    "saved #1 jitter CPU 1 to /tmp/…/run.hlog" (issue 23)."""
    w = live_window
    panel = w.probe_panel
    rec = panel.add_result({"probe": "jitter", "cpu": 0, "sampled_seconds": 1.0, "buckets": [[1000, 2000, 5]],
                            "percentiles": {}}, "test")
    assert rec is not None and rec.finished and rec.has_histogram
    status_before = panel.status_text
    records = w.session_controller.probe_records()
    assert any(r.hlog and r.hlog.startswith(b"#") for r in records)
    assert panel.status_text == status_before and "run.hlog" not in panel.status_text
    assert not list(tmp_path.glob("**/run.hlog"))


def test_the_cli_report_of_a_machine_holds_its_pins_and_badges_its_quiet_cpus(qapp, tmp_path, monkeypatch, capsys):
    """`coremap report --root` holds what the window's report holds: the journal's pins of that
    machine and its quiet CPUs badged in the grid (issue 23: only the window's report badged them).
    The report with the pins runs as the command does, headless in a process of its own; the one
    without, its baseline, runs in this process (app.cli.main.main), which prints the same report."""
    import base64
    import os
    import sys

    from app.cli.main import main
    from app.pinning.journal import Journal
    from app.pinning.service import AffinityService
    from app.quiet.isolate import LocalQuiet
    from tests.machines import writable_test_tree

    copy = tmp_path / "sno"
    copy_machine("sno", copy)
    root = SysRoot(writable_test_tree(copy))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with Journal(state / "journal.jsonl") as journal:
        quiet = LocalQuiet(AffinityService(root, journal))
        quiet.apply(quiet.preview("isolate", "1"))

    def report(state_dir, name, in_process=False):
        if in_process:
            monkeypatch.setenv("COREMAP_STATE_DIR", str(state_dir))
            capsys.readouterr()
            assert main(["report", "--root", str(copy), "--out", str(tmp_path / name)]) == 0
            stdout = capsys.readouterr().out
        else:
            env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
            env.update(COREMAP_STATE_DIR=str(state_dir), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
            r = subprocess.run([sys.executable, "-m", "app", "report", "--root", str(copy), "--out", name],
                               capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env)
            assert r.returncode == 0, r.stderr
            stdout = r.stdout
        html = (tmp_path / name).read_text()
        grid = base64.b64decode(re.search(r'data:image/png;base64,([A-Za-z0-9+/=]+)', html).group(1))
        return stdout, html, grid

    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    plain_out, _plain_html, plain_grid = report(empty, "plain.html", in_process=True)
    out, html, grid = report(state, "quiet.html")
    assert " 0 pins" in plain_out and " 0 pins" not in out
    assert re.search(r"isolate|Make quiet", html)
    assert _quiet_pixels(grid) > _quiet_pixels(plain_grid) + 50
