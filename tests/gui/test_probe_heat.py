"""The grid's per-CPU probe heat (issue 30, "every CPU measured at once"): a jitter run on two CPUs,
started with a real click on the panel's Run, measures both at once and leaves on each CPU's cell a
band coloured by its longest gap and a tooltip line with its figures. Tooltips are read where the view
shows them, from a hover's ToolTip event.

Oracles: each run's own result (probes/jitter/measure.py summarize: the loop's exact longest gap and its
count of gaps of at least 10 µs), and the band's colour rule (probe_heat.level) on the fixture."""
from __future__ import annotations

import os

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.format import format_ns
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from probes.histogram import step_row
from tests.gui.hover import grid_tooltip
from tests.machines import extract
from widgets.topology.probe_heat import LEVELS, level
from widgets.topology.view import TopologyView

pytestmark = pytest.mark.qt_log_level_fail("WARNING")
CPUS = sorted(os.sched_getaffinity(0))


def test_the_band_follows_the_longest_and_leaves_with_the_next_run(qtbot, monkeypatch):
    state = Sampler(SysRoot(extract("master.internal"))).tick()
    view = TopologyView()
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.show()
    view.set_state(state)
    f = {"sampled_s": 2.0, "at_least_ns": 10_000, "count": 9, "per_s": 4.5, "exact": True}
    view.probe_heat.show("jitter", {3: {**f, "max_ns": 9_999}, 60: {**f, "max_ns": 100_000}, 7: {**f, "max_ns": None}})
    assert view.probe_heat.cpus == (3, 60)               # nothing measured on 7: no band
    assert view.legend.heat == "jitter" and "jitter: longest gap" in view.legend._keys()[0][1]    # keyed
    assert view.probe_heat.item(3).color == LEVELS[0][1] and view.probe_heat.item(60).color == LEVELS[2][1]
    assert view.probe_heat.item(3).parentItem() is view.cell_item(3)
    tip = grid_tooltip(view, 60, monkeypatch)
    assert "jitter: longest gap 100 µs (under 1 ms), 4.50/s of at least 10 µs over 2.00 s measured" in tip
    assert "jitter" not in grid_tooltip(view, 4, monkeypatch)
    # the next run's CPUs replace the last's; a rebuilt scene keeps the bands
    view.probe_heat.show("wakeup", {60: {**f, "max_ns": 2_000_000}})
    assert view.probe_heat.cpus == (60,) and view.probe_heat.item(60).color == LEVELS[3][1]
    view.set_topology(state.topology)
    assert view.probe_heat.item(60).parentItem() is view.cell_item(60)
    assert "wakeup: longest wakeup 2 ms (1 ms or more)" in grid_tooltip(view, 60, monkeypatch)
    view.probe_heat.show("jitter", {})
    assert view.probe_heat.cpus == () and view.legend.heat == "" and view.probe_heat.tooltip(60) == ""


@pytest.mark.skipif(len(CPUS) < 2, reason="needs a second CPU")
@pytest.mark.usefixtures("live_machine")
def test_run_on_two_cpus_heats_both_cells(qtbot, monkeypatch):
    from widgets.application import build_window
    w = build_window(None)
    qtbot.addWidget(w)
    w.set_state(Sampler(SysRoot("/")).tick())
    w.show()
    panel, view = w.probe_panel, w.topology_view
    panel.set_probe("jitter")
    panel.set_cpus(CPUS[:2])
    panel.form.seconds_spin.setValue(0.3)
    panel.form.field("attribute", "jitter").setChecked(False)
    statuses: list[str] = []
    panel.status_changed.connect(statuses.append)
    QTest.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert panel.busy, panel.status_text
    qtbot.waitUntil(lambda: not panel.busy, timeout=30_000)
    assert panel.status_text.startswith("done"), panel.status_text
    assert any("at once" in s for s in statuses), statuses          # both children measured together
    runs = {r.cpus: r for r in panel.runs}
    assert set(runs) == {(CPUS[0],), (CPUS[1],)}
    for cpu in CPUS[:2]:
        gaps = runs[(cpu,)].summary["gaps"]
        assert view.probe_heat.item(cpu).color == level(gaps["max_ns"])[0]
        tip = grid_tooltip(view, cpu, monkeypatch)
        row = step_row(gaps, 10_000)
        assert f"jitter: longest gap {format_ns(gaps['max_ns'])}" in tip
        assert f"{row['per_second']:.2f}/s of at least 10 µs" in tip


@pytest.mark.usefixtures("live_machine")
def test_every_reports_each_period_live_and_the_heat_follows_the_run(qtbot):
    """A long run is read as it goes: with 'report every' 1 s, each second's figures reach the status
    line, and the heat reaches the grid while the run still measures."""
    import re
    from widgets.probe.panel import ProbePanel
    panel = ProbePanel()
    qtbot.addWidget(panel)
    panel.set_probe("jitter")
    panel.set_cpus([CPUS[-1]])
    # a whole period, then the part-period the run ends in (2.2 s added a second whole one: the same case)
    panel.form.seconds_spin.setValue(1.5)
    panel.form.field("attribute", "jitter").setChecked(False)
    every = panel.form.field("every", "jitter")
    assert every.text() == "at the end only"          # not given: the child's default
    every.setValue(1)
    statuses, heats = [], []
    panel.status_changed.connect(statuses.append)
    panel.heat_changed.connect(lambda probe, figures: heats.append((panel.busy, probe, dict(figures))))
    QTest.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.busy, timeout=30_000)
    assert panel.status_text.startswith("done"), panel.status_text
    periods = [s for s in statuses if re.match(rf"jitter CPU {CPUS[-1]}, \d+\.\d-\d+\.\d s: longest gap", s)]
    assert len(periods) == 2 and periods[0].startswith(f"jitter CPU {CPUS[-1]}, 0.0-1.")
    assert any(busy and probe == "jitter" and CPUS[-1] in f for busy, probe, f in heats)   # live
    (rec,) = panel.runs
    assert heats[-1][2][CPUS[-1]]["max_ns"] == rec.summary["gaps"]["max_ns"]           # and final


def test_runs_selected_in_the_list_show_as_the_heat(qtbot):
    """A session's runs (here the fixture results of `coremap probe ... -c 1,0 --json`) are read on the
    grid too: the runs selected in the list, a click and a Ctrl+click, are its heat."""
    import json
    from pathlib import Path
    from probes.periods import result_figures
    from widgets.probe.panel import ProbePanel
    results = Path(__file__).parents[1] / "fixtures" / "results"
    wakeups = json.loads((results / "kvm-6.18-wakeup.json").read_text())["results"]
    jitter = json.loads((results / "kvm-6.18-jitter-with-host.json").read_text())
    panel = ProbePanel()
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    recs = [panel.add_result(r, "session.coremap") for r in (*wakeups, jitter)]
    heats = []
    panel.heat_changed.connect(lambda probe, figures: heats.append((probe, figures)))
    lst = panel.run_store.runs_list

    def click(rec, modifier=Qt.KeyboardModifier.NoModifier):
        item = panel.run_store.item(rec.key)
        QTest.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, modifier, lst.visualItemRect(item).center())

    click(recs[0])
    click(recs[1], Qt.KeyboardModifier.ControlModifier)
    probe, figures = heats[-1]
    assert probe == "wakeup" and set(figures) == {0, 1}
    for r in wakeups:
        assert figures[r["cpu"]]["max_ns"] == r["percentiles"]["max"]
        assert figures[r["cpu"]]["sampled_s"] == r["sampled_seconds"]
    click(recs[2])
    probe, figures = heats[-1]
    row = step_row(jitter["gaps"], 10_000)
    assert probe == "jitter" and figures == {1: result_figures(jitter)}
    assert figures[1]["max_ns"] == jitter["gaps"]["max_ns"] and figures[1]["count"] == row["count"]
    assert figures[1]["per_s"] == pytest.approx(row["per_second"]) and figures[1]["exact"] is row["exact"]


@pytest.mark.usefixtures("live_machine")
def test_a_wakeup_run_attributed_from_the_panel_names_its_late_wakeups(qtbot, tracefs):
    """The wakeup page's 'attribute late wakeups' box (as timerlat -a): the run's latest wakeups and
    what ran before each fill the Gaps tab, which calls them late wakeups, not gaps."""
    from widgets.probe.panel import ProbePanel
    if os.geteuid() != 0:
        pytest.skip("tracing needs root")
    panel = ProbePanel()        # built after the fixture mounted tracefs, so the box is enabled
    qtbot.addWidget(panel)
    panel.set_probe("wakeup")
    panel.set_cpus([CPUS[-1]])
    panel.form.seconds_spin.setValue(0.4)
    box = panel.form.field("attribute", "wakeup")
    assert box.isEnabled() and box.isChecked() and "late wakeups" in box.text()
    QTest.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.busy, timeout=30_000)
    (rec,) = panel.runs
    a = rec.summary["attribution"]
    assert a["available"] and panel.plots.gap_view.gap_model.rowCount() == len(a["gaps"]) > 0
    assert max(g["gap_ns"] for g in a["gaps"]) == rec.summary["percentiles"]["max"]
    assert f"{a['attributed_gaps']:,} largest late wakeups attributed" in panel.plots.gap_view.status.text()
