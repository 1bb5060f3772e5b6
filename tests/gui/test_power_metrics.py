"""The grid's idle and frequency metrics (widgets/colors.py): deep idle (the share of time in states
deeper than the shallowest sleep), one idle state's share, and the frequency, from state.power
(app/sampling/cpu_power.py), coloured and written in the cells, named in the legend and offered in the
toolbar (issue 22).

Oracles: the frequency captures' own scaling_cur_freq files (through the Sampler, the window's
code), and for idle a cpuidle tree whose times advance by known amounts (tests/unit/test_cpu_power.py
says why it is built: no capture holds cpuidle)."""
from __future__ import annotations

import dataclasses

import pytest

from app.machine.cpuidle import read_idle_layout, read_idle_sample
from app.sampling.cpu_power import CpuPower, idle_rates
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.machines import extract
from tests.unit.test_cpu_power import HYBRID, Clock, _spend, _tree
from widgets.colors import METRIC_BASES, UnknownMetric, format_value, metric_values, parse_metric, scale_for
from widgets.grid_toolbar import GridToolBar
from widgets.topology.view import TopologyView


def _idle_state(tmp_path, name="worker1.internal", deep=lambda cpu: 0.25):
    """A captured machine's state with idle shares: each CPU 10% in C1 and `deep(cpu)` in C6."""
    state = Sampler(SysRoot(extract(name))).tick()
    cpus = state.topology.online
    root = SysRoot(_tree(tmp_path, cpus=max(cpus) + 1))
    layout = read_idle_layout(root, cpus)
    clock = Clock()
    before = read_idle_sample(root, layout, clock=clock)
    for c in cpus:
        _spend(root.root, c, C1=100_000, C6=round(deep(c) * 1_000_000))
    clock.t += 1.0
    power = CpuPower(1.0, idle_rates(layout, before, read_idle_sample(root, layout, clock=clock)))
    return dataclasses.replace(state, power=power)


def test_the_metrics_are_read_as_typed():
    assert parse_metric("idle").unit == "%" and parse_metric("idle:C6").idle_state == "C6"
    assert parse_metric("ghz") == parse_metric("frequency") == parse_metric("mhz")
    assert parse_metric("ghz").unit == "GHz" and not parse_metric("ghz").log
    with pytest.raises(UnknownMetric, match="not an idle state's name"):
        parse_metric("idle:C6;rm")
    assert ("idle", "Idle states") in METRIC_BASES and ("ghz", "Frequency") in METRIC_BASES


def test_frequency_on_the_grid(qtbot):
    state = Sampler(SysRoot(extract(HYBRID))).tick()
    vals = metric_values(state, parse_metric("ghz"))
    assert vals.values == {c: v / 1000 for c, v in state.power.mhz.items()} and vals.unit == "GHz"
    assert vals.label == "Frequency (scaling_cur_freq)"
    scale = scale_for(vals.values, parse_metric("ghz"), False)
    assert (scale.vmin, scale.vmax, scale.log) == (0.0, 2.0, False)      # 1.92 GHz the fastest
    view = TopologyView(metric="ghz")
    qtbot.addWidget(view)
    view.set_state(state)
    slowest = min(vals.values, key=vals.values.get)
    assert view.cells()[slowest].figure == format_value(vals.values[slowest], "GHz") == "0.40"
    assert view.legend.title == "Frequency (scaling_cur_freq)" and view.legend.unit == "GHz"


def test_deep_idle_names_the_quiet_cpus_that_sleep_deep(qtbot, tmp_path):
    # worker1 isolates CPUs 0-4, 11-15, ...: let 2 of them sleep deep 80% of the time
    state = _idle_state(tmp_path, deep=lambda c: 0.8 if c in (2, 3) else 0.2)
    quiet = set(state.topology.isolated) | set(state.topology.nohz_full)
    assert {2, 3} <= quiet
    vals = metric_values(state, parse_metric("idle"))
    assert vals.values[2] == pytest.approx(80.0) and vals.values[7] == pytest.approx(20.0)
    assert vals.label.endswith("; 2 quiet CPUs asleep deep half the time or more (CPU 2: 80%)")
    c1 = metric_values(state, parse_metric("idle:C1"))
    assert c1.values and all(v == pytest.approx(10.0) for v in c1.values.values())
    none = metric_values(state, parse_metric("idle:C10"))
    assert none.values == {} and none.empty_reason == "no CPU here has idle state C10; it has POLL, C1, C1E, C3, C6"
    view = TopologyView(metric="idle")
    qtbot.addWidget(view)
    view.set_state(state)
    assert view.cells()[2].figure == "80%"


def test_without_idle_states_the_legend_says_why(qtbot):
    state = Sampler(SysRoot(extract(HYBRID))).tick()
    view = TopologyView(metric="idle")
    qtbot.addWidget(view)
    view.set_state(state)
    assert view.legend.note == "a capture holds no cpuidle times"
    assert all(c.figure == "" and c.color_index is None for c in view.cells().values())


def test_the_toolbar_offers_them(qtbot):
    bar = GridToolBar(1.0)
    qtbot.addWidget(bar)
    got = []
    bar.metric_chosen.connect(got.append)
    for key in ("idle", "ghz"):
        bar.metric_combo.setCurrentIndex(bar.metric_combo.findData(key))
    assert [m.key for m in got] == ["idle", "ghz"]


def test_the_toolbar_offers_the_machines_own_idle_states(qtbot, tmp_path):
    """Per-state colouring from the toolbar (it was on the command line only): the kind combo beside
    Colour by: Idle states lists the states the sampler read, shallow to deep, and colours by one."""
    from widgets.application import build_window
    state = _idle_state(tmp_path)
    w = build_window(None)
    qtbot.addWidget(w)
    w.set_state(state)
    w.metric_combo.setCurrentIndex(w.metric_combo.findData("idle"))
    kinds = [w.kind_combo.itemData(i) for i in range(w.kind_combo.count())]
    assert kinds == ["", "POLL", "C1", "C1E", "C3", "C6"] and w.kind_combo.isEnabled()
    assert w.topology_view.color_metric.key == "idle"
    w.kind_combo.setCurrentIndex(w.kind_combo.findData("C1"))
    assert w.topology_view.color_metric.key == "idle:C1"
    assert {c.figure for c in w.topology_view.cells().values() if c.figure} == {"10%"}
    # a metric without kinds leaves the combo empty and disabled; softirq gets the kernel's kinds back
    w.metric_combo.setCurrentIndex(w.metric_combo.findData("busy"))
    assert not w.kind_combo.isEnabled() and w.topology_view.color_metric.key == "busy"
    w.metric_combo.setCurrentIndex(w.metric_combo.findData("softirq"))
    assert w.kind_combo.findData("NET_RX") > 0 and w.kind_combo.findData("C1") < 0
    # --color-by idle:C6 shown before any idle read keeps its state in the combo
    bar = GridToolBar(1.0)
    qtbot.addWidget(bar)
    bar.show_metric(parse_metric("idle:C6"))
    assert bar.kind_combo.currentData() == "C6"
