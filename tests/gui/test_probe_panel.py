"""The probe panel running real probes (python -m probes children) on this machine.

Oracles: the probe's own lines (iterations = samples counted), probes/histogram.py percentiles,
/proc/self/task affinities read with os.sched_getaffinity, the pid's disappearance.
"""
from __future__ import annotations

from app.format import format_ns, format_rate

import json
import os

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QValidator
from PySide6.QtWidgets import QApplication

from probes import histogram as H
from app.machine.topology import read_online_cpus
from app.sysroot import SysRoot
from tests.unit.test_own_affinity import _own_affinities
from widgets.probe.drop import CPU_MIME
from widgets.probe.panel import ProbePanel


@pytest.fixture
def panel(qtbot):
    p = ProbePanel()
    qtbot.addWidget(p)
    yield p
    if p.busy:
        p.cancel()


def _run(qtbot, panel, timeout=15000):
    assert panel.run(), panel.status_text
    qtbot.waitUntil(lambda: not panel.busy, timeout=timeout)


@pytest.mark.usefixtures("live_machine")
def test_jitter_run_then_overlay(qtbot, panel):
    panel.set_cpus([0])
    panel.form.seconds_spin.setValue(0.3)
    formats = []
    panel.progress.valueChanged.connect(lambda _v: formats.append(panel.progress.format()))
    _run(qtbot, panel)
    assert panel.status_text.startswith("done"), panel.status_text
    (rec,) = panel.runs
    assert rec.finished and rec.probe == "jitter" and rec.cpus == (0,)
    assert any("/ 0.3 s" in f for f in formats)           # progress from the interval lines
    # the histogram counts gaps (intervals of at least the threshold), never the loop's own reads
    threshold = next(l for l in rec.lines if l.get("type") == "hello")["threshold_ns"]
    ivs = [l for l in rec.lines if l.get("type") == "interval"]
    sampled_ns = sum(l["sampled_ns"] for l in ivs)
    gap_rows = [[lo, hi, c] for l in ivs for lo, hi, c in l["buckets"] if lo >= threshold]
    n_gaps = sum(c for *_, c in gap_rows)
    assert sum(c for l in ivs for *_, c in l["buckets"]) == sum(l["iterations"] for l in ivs)
    x, y = panel.plots.histogram_plot.curve(rec.key).getOriginalDataset()
    if n_gaps:
        assert x[0] >= threshold and len(x) >= 2
        assert round(sum(y) * sampled_ns / H.NS_PER_HOUR) == n_gaps
    # figures: the longest gap first (the loop's own top gaps), gaps per second at 2 and 10 µs as the
    # loop counted them, then the gap lengths' percentiles, and the count of gaps
    assert panel.table.keys == [rec.key]
    assert panel.table.horizontalHeaderItem(0).text().replace("\n", " ") == rec.label
    top = max((g for l in ivs for _t, g in l["top_gaps"]), default=None)
    assert panel.table.cell_text("max", rec.key) == format_ns(top)
    for figure, step in (("≥ 2 µs", 2000), ("≥ 10 µs", 10_000)):
        n = sum(c for l in ivs for s, c, _lost in l["at_least"] if s == step)
        assert panel.table.cell_text(figure, rec.key).startswith(format_rate(n / (sampled_ns / 1e9)) + "\n")
    pct = H.percentiles(H.buckets_to_histogram(gap_rows)) if n_gaps else {"p50": None, "p99": None}
    assert panel.table.cell_text("p50", rec.key) == (format_ns(round(pct["p50"], 1)) if n_gaps else "-")
    assert panel.table.cell_text("count", rec.key) == f"{n_gaps:,}"
    # a second run overlays
    panel.form.unbound_check.setChecked(True)
    _run(qtbot, panel)
    assert len(panel.plots.histogram_plot.keys()) == 2
    assert len(panel.plots.histogram_plot.legend_labels()) == 2
    assert len(panel.table.keys) == 2
    assert "unbound" in panel.plots.histogram_plot.legend_labels()[1]
    # unticking a run hides its curves; Remove takes it off the plots, the legend and the table
    item = panel.run_store.runs_list.item(0)
    item.setCheckState(Qt.CheckState.Unchecked)
    assert not panel.plots.histogram_plot.curve(rec.key).isVisible()
    assert not panel.plots.percentile_plot.curve(rec.key).isVisible()
    panel.run_store.runs_list.setCurrentItem(item)
    panel.run_store.remove_button.click()
    assert rec.key not in panel.plots.histogram_plot.keys() and len(panel.plots.histogram_plot.legend_labels()) == 1
    assert len(panel.table.keys) == 1 and len(panel.runs) == 1


def test_cancel_kills_the_probe(qtbot, panel):
    panel.set_cpus([0])
    panel.form.seconds_spin.setValue(30)
    assert panel.run()
    pid = panel.controller.pid
    qtbot.waitUntil(lambda: any(l.get("type") == "interval" for r in panel.runs for l in r.lines), timeout=5000)
    panel.cancel_button.click()

    def gone():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    qtbot.waitUntil(gone, timeout=1000)
    assert not panel.busy and panel.progress.format() == "idle"
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()
    assert panel.runs == [] and "cancelled" in panel.status_text


def test_a_cpu_that_does_not_exist(qtbot, panel):
    panel.set_cpus([4095])
    panel.form.seconds_spin.setValue(0.3)
    _run(qtbot, panel)
    assert panel.status_text.startswith("error:") and "CPU 4095" in panel.status_text
    assert panel.runs == [] and panel.run_button.isEnabled()


def test_cpu_edit_validates_and_takes_a_drop(qtbot, panel):
    v = panel.form.cpu_edit.validator()
    assert v.validate("2-x", 0) == QValidator.State.Invalid
    assert v.validate("2-", 0) == QValidator.State.Intermediate
    assert v.validate("2-3,5", 0) == QValidator.State.Acceptable
    qtbot.keyClicks(panel.form.cpu_edit, "2-x")
    assert panel.form.cpu_edit.text() == "2-"
    assert not panel.run() and "error:" in panel.status_text

    mime = QMimeData()
    mime.setData(CPU_MIME, json.dumps({"cpus": [3, 1]}).encode())
    enter, drop = _drag_and_drop(panel, mime)
    assert enter.isAccepted() and drop.isAccepted() and panel.form.cpu_edit.text() == "1,3"
    # a payload that is not {"cpus": [...]} changes nothing and says why
    bad = QMimeData()
    bad.setData(CPU_MIME, b'{"cpu": 2}')
    _drag_and_drop(panel, bad)
    assert panel.form.cpu_edit.text() == "1,3" and "error:" in panel.status_text
    # other MIME types are refused at the door
    text = QMimeData()
    text.setText("2")
    enter, _ = _drag_and_drop(panel, text)
    assert not enter.isAccepted() and panel.form.cpu_edit.text() == "1,3"


def _drag_and_drop(widget, mime):
    """A drag entering the widget's centre, then a drop there (Qt delivers a drop only after an
    accepted enter)."""
    pos = QPointF(widget.rect().center())
    args = (Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    # QDragEnterEvent takes a QPoint (PySide6 < 6.12 has no QPointF overload); QDropEvent a QPointF.
    enter = QDragEnterEvent(pos.toPoint(), *args)
    QApplication.sendEvent(widget, enter)
    drop = QDropEvent(pos, *args)
    if enter.isAccepted():
        QApplication.sendEvent(widget, drop)
    return enter, drop


@pytest.mark.skipif(len(read_online_cpus(SysRoot("/"))) < 2 or not {0, 1} <= set(os.sched_getaffinity(0)),
                    reason="needs CPUs 0 and 1 online and allowed")
@pytest.mark.usefixtures("live_machine")
def test_own_threads_leave_the_probed_cpu(qtbot, panel):
    before = _own_affinities()
    main_before = set(os.sched_getaffinity(0))
    others = set(read_online_cpus(SysRoot("/"))) & main_before - {1}
    panel.set_cpus([1])
    panel.form.seconds_spin.setValue(1.0)
    assert panel.run()
    qtbot.waitUntil(lambda: any(l.get("type") == "interval" for r in panel.runs for l in r.lines), timeout=5000)
    assert panel.busy
    assert set(os.sched_getaffinity(0)) == others
    during = _own_affinities()
    assert len(during) >= 3                                    # this thread and the probe's readers
    assert all(m == others for m in during.values()), during
    qtbot.waitUntil(lambda: not panel.busy, timeout=10000)
    assert set(os.sched_getaffinity(0)) == main_before
    after = _own_affinities()
    assert all(after[t] == before[t] for t in before if t in after)


@pytest.mark.usefixtures("live_machine")
def test_sweep_and_c2c_from_the_panel(qtbot, panel):
    if len(read_online_cpus(SysRoot("/"))) < 2:
        pytest.skip("needs two online CPUs")
    panel.set_probe("sweep")
    panel.set_cpus([0, 1])
    panel.form.field("rounds", "sweep").setValue(3)
    _run(qtbot, panel)
    assert panel.status_text.startswith("done"), panel.status_text
    assert sorted(panel.plots.view("sweep").cpus) == [0, 1]
    panel.set_probe("c2c")
    _run(qtbot, panel)
    assert panel.plots.view("c2c").image.image.shape == (2, 2)
    assert panel.plots.view("c2c").matrix[0, 1] > 0


def test_main_window_wires_the_panel(qtbot):
    from app.sampling.sampler import Sampler
    from app.sysroot import SysRoot
    from tests.machines import extract, machine
    from widgets.application import build_window
    w = build_window(None)
    qtbot.addWidget(w)
    # 2x Xeon Gold 6330, hyperthread siblings N and N+56: the grid's order is not the id order
    state = Sampler(SysRoot(extract(machine("master.internal")))).tick()
    w.set_state(state)
    assert w.probe_dock.widget() is w.probe_panel
    assert "&Probes" in [a.text() for a in w.menuBar().actions()]
    cpu = state.topology.online[-1]
    w.topology_view.cpu_selected.emit(cpu)
    assert w.probe_panel.form.cpu_edit.text() == str(cpu)
    # sweep bars and the c2c matrix follow the grid's order: every online CPU, siblings together
    order = w.probe_panel.plots.order
    assert sorted(order) == sorted(state.topology.online)
    for core in state.topology.cores:
        i = order.index(core.cpus[0])
        assert tuple(order[i:i + len(core.cpus)]) == core.cpus
    assert order != sorted(order)


def test_a_capture_cannot_be_probed_from_here(qtbot):
    """A window on a snapshot of another machine must not run a probe here and label it as there."""
    from app.sampling.sampler import Sampler
    from app.sysroot import SysRoot
    from tests.machines import extract
    panel = ProbePanel()
    qtbot.addWidget(panel)
    state = Sampler(SysRoot(extract("sno"))).tick()
    panel.set_state(state)
    assert not panel.run_button.isEnabled()
    assert "capture" in panel.status_text
    assert panel.run() is False and not panel.controller.running


def _capture_of(name):
    """A window's state for a capture of fixture machine `name` (live False: no affinity check)."""
    from app.machine.sample import MachineSample
    from app.machine.topology import read_topology
    from app.sampling.machine_state import MachineState
    from tests.machines import extract
    topo = read_topology(SysRoot(extract(name)))
    return MachineState(1, topo, MachineSample(1.0), live=False)


def test_cpus_dragged_from_the_grid_fill_the_cpu_field(qtbot, panel):
    from widgets.topology.view import TopologyView
    state = _capture_of("16em64t-4s2c2t-offlines")
    topo = state.topology
    view = TopologyView()
    qtbot.addWidget(view)
    view.set_topology(topo)
    panel.set_state(state)
    core = next(c for c in topo.cores if len(c.cpus) == 2)
    enter, drop = _drag_and_drop(panel, view.gestures.cpu_mime_for(view.core_item(core.index)))
    assert drop.isAccepted() and panel.cpus() == core.cpus
    assert panel.status_text == f"CPUs {panel.form.cpu_edit.text()} from the drop"
    _drag_and_drop(panel, view.gestures.cpu_mime_for(view.cell_item(topo.online[-1])))
    assert panel.cpus() == (topo.online[-1],)
    # An offline CPU (hand-made payload: the grid never sends one) is refused, the field kept
    off = topo.offline[0]
    bad = QMimeData()
    bad.setData(CPU_MIME, json.dumps({"cpus": [topo.online[0], off]}).encode())
    _, drop = _drag_and_drop(panel, bad)
    assert not drop.isAccepted() and panel.cpus() == (topo.online[-1],)
    assert panel.status_text.startswith("error:") and f"CPU {off} is offline" in panel.status_text
    empty = QMimeData()
    empty.setData(CPU_MIME, b'{"cpus": []}')
    _, drop = _drag_and_drop(panel, empty)
    assert not drop.isAccepted() and "holds no CPU" in panel.status_text and panel.cpus() == (topo.online[-1],)


@pytest.mark.skipif(len(set(read_online_cpus(SysRoot("/"))) & os.sched_getaffinity(0)) < 2,
                    reason="needs two online CPUs this process may use")
@pytest.mark.usefixtures("live_machine")
def test_a_dropped_cpu_outside_coremaps_affinity_is_refused(qtbot, panel):
    from app.sampling.sampler import Sampler
    state = Sampler(SysRoot("/")).tick()
    assert state.live
    panel.set_state(state)
    usable = sorted(set(state.topology.online) & os.sched_getaffinity(0))
    mime = QMimeData()
    mime.setData(CPU_MIME, json.dumps({"cpus": [usable[1]]}).encode())
    _, drop = _drag_and_drop(panel, mime)
    assert drop.isAccepted() and panel.cpus() == (usable[1],)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {usable[0]})
    try:
        _, drop = _drag_and_drop(panel, mime)
    finally:
        os.sched_setaffinity(0, before)
    assert not drop.isAccepted()
    assert f"CPU {usable[1]} is not in coremap's allowed CPUs ({usable[0]})" in panel.status_text


def test_attribute_box_says_why_where_tracing_is_impossible(qtbot):
    """A capture-free check of the disabled state: the box's tooltip is the reason itself."""
    from probes import trace
    p = ProbePanel()
    qtbot.addWidget(p)
    why = trace.attribution_unavailable()
    box = p.form.field("attribute", "jitter")
    assert box.isEnabled() == (why is None)
    if why is not None:
        assert box.toolTip() == why
    # a user who is not root traces through coremap-helper, which asks for authorisation: the box is
    # there, unticked until they tick it, and says so
    asks = trace.helper_sentence()
    if asks is not None:
        assert not box.isChecked() and asks[1:] in box.toolTip()
    elif why is None:
        assert box.isChecked()


@pytest.mark.usefixtures("live_machine")
def test_attributed_jitter_run_fills_the_gaps_tab(qtbot, tracefs):
    panel = ProbePanel()        # built after the fixture mounted tracefs, so the box is enabled
    qtbot.addWidget(panel)
    panel.set_cpus([max(os.sched_getaffinity(0))])
    panel.form.seconds_spin.setValue(0.3)
    assert panel.form.field("attribute", "jitter").isEnabled() and panel.form.field("attribute", "jitter").isChecked()
    _run(qtbot, panel)
    (rec,) = panel.runs
    a = rec.summary["attribution"]
    assert a["available"] and a["cpu_events"] > 0
    assert panel.plots.gap_view.gap_model.rowCount() == len(a["gaps"]) > 0
    assert panel.plots.gap_view.cause_model.rowCount() == len(a["by_cause"])
    assert rec.label in panel.plots.gap_view.status.text()
    # unticked: the run asks for no tracing and the tab says how to get it
    panel.form.field("attribute", "jitter").setChecked(False)
    _run(qtbot, panel)
    assert panel.runs[-1].summary["attribution"] is None
    assert "attribute gaps" in panel.plots.gap_view.status.text()


def test_a_box_ticked_for_one_probe_does_not_leak_into_another(qtbot, panel):
    """unbound and attribute stay ticked (and disabled) when another probe is chosen; the spec
    takes a field only for the probes it applies to (probes.spec.applies)."""
    panel.set_cpus([0, 1])
    panel.form.unbound_check.setChecked(True)
    panel.form.policy_combo.setCurrentIndex(panel.form.policy_combo.findData("fifo"))
    panel.set_probe("c2c")
    assert not panel.form.unbound_check.isEnabled() and panel.form.unbound_check.isChecked()
    spec = panel.form.spec()
    assert not spec.unbound and spec.policy is None and spec.duty is None
    (job,) = spec.jobs()
    assert job.cpus == (0, 1) and "--unbound" not in job.args and "--policy" not in job.args
    panel.set_probe("counters")
    assert [j.cpus for j in panel.form.spec().jobs()] == [(), ()]     # unbound: nothing kept free


def test_counters_draw_on_the_summary_and_count_their_two_runs(qtbot, panel):
    """A probe with no view of its own (its record names none) shows on the Summary tab; its progress
    counts the steps its record names: the command run pinned, then unpinned."""
    from probes.text import format_result
    panel.set_probe("counters")
    panel.set_cpus([min(os.sched_getaffinity(0))])
    panel.form.field("command", "counters").setText("true")
    formats = []
    panel.progress.valueChanged.connect(lambda _v: formats.append(panel.progress.format()))
    _run(qtbot, panel)
    assert panel.status_text.startswith("done"), panel.status_text
    (rec,) = panel.runs
    assert rec.summary["command"] == ["true"] and set(rec.summary["runs"]) == {"pinned", "unpinned"}
    assert panel.plots.currentWidget() is panel.plots.summary_text
    assert panel.plots.summary_text.toPlainText() == format_result(rec.summary)
    assert [f.rsplit(": ", 1)[1] for f in formats if ": run" in f] == ["run 1 / 2", "run 2 / 2"]
    # read back from a session, the same result is a run of its own probe, not dropped
    again = panel.add_result(rec.summary, "session.coremap")
    assert again.probe == "counters" and again.finished and not again.has_histogram
