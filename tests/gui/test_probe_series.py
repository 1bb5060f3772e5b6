"""Messaging, first-touch and scaling from the probe panel (real `python -m probes` children on this
machine), their runs reopened from a session, and their report sections.

Oracles: each probe's own result object (probes/<probe>/measure.py summarize of the run's lines) against what
the plots hold (getOriginalDataset), the tables and the verdict show; probes/text.py for the Summary
tab; the grid's own selection for the highlighted CPUs; app/store/session.py's reader for the round trip.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.format import format_ns
from app.store.session import ProbeRecord, open_session, save_session, session_from_root
from app.sysroot import SysRoot
from probes.first_touch import measure as first_touch
from probes.messaging import measure as messaging
from probes.scaling import measure as scaling
from probes.spec import record
from probes.text import format_result
from tests.machines import extract
from widgets.probe.panel import ProbePanel

CPUS = sorted(os.sched_getaffinity(0))
REPO = Path(__file__).resolve().parents[2]
two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")


@pytest.fixture
def panel(qtbot):
    p = ProbePanel()
    qtbot.addWidget(p)
    p.resize(1300, 650)
    yield p
    if p.busy:
        p.cancel()


def _run(qtbot, panel, timeout=60000):
    formats = []
    panel.progress.valueChanged.connect(lambda _v: formats.append(panel.progress.format()))
    assert panel.run(), panel.status_text
    qtbot.waitUntil(lambda: not panel.busy, timeout=timeout)
    assert panel.status_text.startswith("done"), panel.status_text
    (rec,) = [r for r in panel.runs if r.finished][-1:]
    assert any(f.endswith("%") for f in formats)              # progress from the probe's own lines
    assert panel.plots.summary_text.toPlainText() == format_result(rec.summary)
    return rec


@two_cpus
@pytest.mark.usefixtures("live_machine")
def test_messaging_from_the_panel(qtbot, panel):
    panel.set_probe("messaging")
    panel.form.field("placement").setText(f"{CPUS[0]}:{CPUS[1]},unpinned")
    panel.form.seconds_spin.setValue(0.4)
    rec = _run(qtbot, panel)
    s = rec.summary
    assert s == messaging.summarize(rec.lines)
    view = panel.plots.view("messaging")
    assert panel.plots.currentWidget() is view
    for i, p in enumerate(s["placements"]):
        x, y = view.plot.throughput.curve(i).getOriginalDataset()
        assert list(y) == p["series"] and len(x) == len(y) + 1 and x[1] == pytest.approx(0.1)
        cells = view.table.cell_texts(i)
        assert cells[0] == p["name"] and cells[4] == ("none" if p["lost"] == 0 else cells[4])
        # one latency column per pace, p50 / p99 as that pace measured them
        assert cells[6:] == [f"{format_ns(x['latency']['p50'])} / {format_ns(x['latency']['p99'])}"
                             if x["latency"] else "-" for x in p["paces"]]
    assert view.plot.throughput.legend_labels() == [p["name"] for p in s["placements"]]
    # the unpinned placement's CPU steps: each window's sender and receiver CPU, as the loop read them
    unpinned = s["placements"][-1]
    x, y = view.plot.steps.sender.getOriginalDataset()
    assert len(x) == len(unpinned["cpu_series"]) + 1
    assert [None if np.isnan(v) else int(v) for v in y] == [c[0] if c[0] >= 0 else None for c in unpinned["cpu_series"]]
    assert all(c[0] in CPUS for c in unpinned["cpu_series"] if c[0] >= 0)
    assert view.verdict_label.text().startswith(s["verdict"])
    # the pair of the selected placement goes to whoever shows CPUs (the grid, in the window)
    with qtbot.waitSignal(panel.cpus_highlighted, timeout=1000) as sig:
        view.table.selectRow(0)
    assert sig.args == [(CPUS[0], CPUS[1])]


@pytest.mark.usefixtures("live_machine")
def test_first_touch_from_the_panel(qtbot, panel):
    panel.set_probe("first-touch")
    panel.set_cpus([CPUS[-1]])
    panel.form.field("size").setText("16M")
    panel.form.field("thp").set_field_value("never")
    rec = _run(qtbot, panel)
    s = rec.summary
    assert s == first_touch.summarize(rec.lines) and s["thp"]["asked"] == "never"
    view = panel.plots.view("first-touch")
    row = s["nodes"][0]
    for touch, key in ((1, "first"), (2, "second")):
        x, y = view.plot.curve(row["node"], touch).getOriginalDataset()
        assert list(y) == [v for _, v in row["series"][key]] and len(x) == len(y) + 1
        assert x[-1] == pytest.approx(16.0)                     # the stretches cover the mapping, in MiB
    cells = view.table.cell_texts(0)
    assert cells[0].startswith(str(row["node"])) and cells[5] == f"{row['first']['minor_faults']:,}"
    assert view.verdict_label.text().startswith(s["verdict"])
    # a 16 MiB first-touch run is no histogram: the percentile table stays empty
    assert panel.table.keys == []


@pytest.mark.skipif(__import__("shutil").which("java") is None, reason="needs a JVM")
@pytest.mark.usefixtures("live_machine")
def test_a_jvm_command_from_the_first_touch_page(qtbot, panel):
    panel.set_probe("first-touch")
    panel.set_cpus([CPUS[-1]])
    panel.form.field("command", "first-touch").setText("java -Xms64m -Xmx64m -version")
    rec = _run(qtbot, panel)
    s = rec.summary
    assert s == first_touch.summarize(rec.lines) and s["mode"] == "command"
    view = panel.plots.view("first-touch")
    without, with_ = sorted(s["runs"], key=lambda r: r["pretouch"])
    # the bars are the two runs' start-up and system times, in seconds
    wall, system = view.plot.bars
    assert list(wall.opts["height"]) == [without["wall_ns"] / 1e9, with_["wall_ns"] / 1e9]
    assert list(system.opts["height"]) == [without["sys_ns"] / 1e9, with_["sys_ns"] / 1e9]
    assert view.table.cell_texts(1)[:2] == ["with -XX:+AlwaysPreTouch", f"{with_['wall_ns'] / 1e9:.2f} s"]
    assert view.verdict_label.text() == s["verdict"]


@two_cpus
@pytest.mark.usefixtures("live_machine")
def test_scaling_from_the_panel(qtbot, panel):
    panel.set_probe("scaling")
    panel.set_cpus(CPUS[:2])
    panel.form.field("work").set_field_value("private")
    panel.form.seconds_spin.setValue(0.3)
    rec = _run(qtbot, panel)
    s = rec.summary
    assert s == scaling.summarize(rec.lines) and s["work"] == "private"
    view = panel.plots.view("scaling")
    pinned = [w for w in s["widths"] if w["pinned"]]
    x, y = view.plot.measured.getData()
    assert list(x) == [1, 2] and list(y) == [w["throughput"] for w in pinned]
    _, ideal = view.plot.ideal.getData()
    assert np.allclose(ideal, [pinned[0]["throughput"] * w for w in (1, 2)])
    ux, uy = view.plot.unpinned.getData()
    assert list(uy) == [s["widths"][-1]["throughput"]]
    assert [view.table.cell_texts(i)[0] for i in range(3)] == ["1 CPU", "2 CPUs", "unpinned"]
    with qtbot.waitSignal(panel.cpus_highlighted, timeout=1000) as sig:
        view.table.selectRow(1)
    assert sig.args == [tuple(CPUS[:2])]


def test_a_series_probe_asks_for_no_cpu_where_it_needs_none(qtbot, panel):
    panel.set_probe("first-touch")
    panel.form.cpu_edit.clear()
    assert not panel.run() and "choose CPUs" in panel.status_text
    panel.set_probe("messaging")
    spec = panel.form.spec()
    assert spec.cpus == () and spec.placement is None and spec.rounds == messaging.DEFAULT_ROUNDS
    panel.form.field("size").setText("12Q")
    panel.set_probe("first-touch")
    panel.set_cpus([CPUS[0]])
    assert not panel.run() and "give a size such as" in panel.status_text


def _result(probe: str, *args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "probes", probe, *args], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stdout[-500:] + p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    return record(probe).measure.summarize(lines)


@two_cpus
def test_session_round_trip_panel_and_report(qtbot, tmp_path):
    from app.store.report import build_report_html, report_from_session
    from widgets.report_images import add_images
    results = [_result("messaging", "--placement", f"{CPUS[0]}:{CPUS[1]}", "--seconds", "0.2", "--rounds", "1",
                       "--transport", "pipe"),
               _result("first-touch", "--cpu", str(CPUS[0]), "--size", "8M"),
               _result("scaling", "--cpu", f"{CPUS[0]},{CPUS[1]}", "--work", "atomic", "--seconds", "0.2",
                       "--rounds", "1")]
    path = tmp_path / "series.coremap"
    save_session(path, session_from_root(SysRoot(extract("sno")), probes=[ProbeRecord(r) for r in results]))
    from probes.results import check_result
    opened = open_session(path, check_result)
    try:
        assert [p.result for p in opened.probes] == results
        panel = ProbePanel()
        qtbot.addWidget(panel)
        recs = [panel.add_result(p.result, str(path)) for p in opened.probes]
        assert [r.probe for r in recs] == ["messaging", "first-touch", "scaling"]
        assert all(r.finished and not r.measured_here and not r.has_histogram for r in recs)
        panel.run_store.runs_list.setCurrentRow(0)
        assert panel.plots.summary_text.toPlainText() == format_result(results[0])
        assert list(panel.plots.view("messaging").plot.throughput.curve(0).getOriginalDataset()[1]) == \
            results[0]["placements"][0]["series"]
        report = add_images(report_from_session(opened), root=opened.root)
        html = build_report_html(report)
    finally:
        opened.close()
    sections = report.probes
    assert [s.title for s in sections] == [r["title"] for r in results]
    assert all(s.plot is not None and s.text == format_result(r, verdict=False) for s, r in zip(sections, results))
    assert report.comparison_plots == []                # none of these is a histogram to compare
    for r in results:
        assert r["verdict"].replace(">", "&gt;") in html
    assert html.count("data:image/png;base64,") == 1 + len(results)      # the grid and one plot each


@two_cpus
def test_the_window_selects_the_highlighted_cpus(qtbot):
    from app.sampling.sampler import Sampler
    from widgets.application import build_window
    w = build_window(None)
    qtbot.addWidget(w)
    w.set_state(Sampler(SysRoot("/")).tick())
    w.probe_panel.cpus_highlighted.emit(tuple(CPUS[:2]))
    assert w.topology_view.selected_cpus() == CPUS[:2]
