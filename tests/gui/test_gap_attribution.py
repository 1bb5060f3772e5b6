"""The gap attribution view on an attribution built from a captured trace (probes/trace.py on
tests/fixtures/tracefs), and its messages for runs without one."""
from __future__ import annotations

from probes import trace as T
from tests.machines import FIXTURES
from widgets.probe.gap_attribution import GapAttributionView

TRACE = (FIXTURES / "tracefs" / "kvm-6.18-cpu1.trace").read_text()
STATS = T.parse_stats((FIXTURES / "tracefs" / "kvm-6.18-cpu1.stats").read_text())


def captured_attribution():
    events = T.parse_trace(TRACE)
    t0 = events[0].ts_ns
    # gaps laid over the capture: one on each of the first three local timer entries, one where
    # nothing ran (between the last event and the capture's end)
    timers = [e.ts_ns for e in events if e.event == "local_timer_entry"][:3]
    quiet = events[-1].ts_ns + 50_000
    gaps = [(t, 5_000) for t in timers] + [(quiet, 20_000)]
    return T.attribute_run(TRACE, STATS, gaps, probe_pid=-1, started_ns=t0, t0_ns=t0), timers


def test_view_shows_causes_and_longest_gaps(qtbot, qtmodeltester):
    a, timers = captured_attribution()
    v = GapAttributionView()
    qtbot.addWidget(v)
    v.set_attribution(a, "jitter CPU 1")
    qtmodeltester.check(v.cause_model)
    qtmodeltester.check(v.gap_model)
    causes = {v.cause_model.index(r, 0).data(): int(v.cause_model.index(r, 1).data())
              for r in range(v.cause_model.rowCount())}
    assert causes["local timer"] == 3 and causes[T.HARDWARE] == 1
    assert v.gap_model.rowCount() == 4
    # sorted by gap length, longest first: the 20 us quiet gap on top, with no event
    top = v.gap_view.model().index(0, 2).data()
    assert top == T.HARDWARE and v.gap_view.model().index(0, 0).data() == "20 µs"
    assert "4 largest gaps attributed" in v.status.text()


def test_view_says_why_a_run_has_no_attribution(qtbot):
    v = GapAttributionView()
    qtbot.addWidget(v)
    v.set_attribution({"available": False, "reason": "attributing gaps needs root"}, "jitter CPU 1")
    assert "needs root" in v.status.text() and v.gap_model.rowCount() == 0
    v.set_attribution(None)
    assert "attribute gaps" in v.status.text()


def test_a_reopened_jitter_run_shows_its_gaps(qtbot):
    """A session stores each run's result (with its attribution); opened again, selecting the run
    fills the Gaps tab from it."""
    from widgets.probe.panel import ProbePanel
    a, _ = captured_attribution()
    a.pop("type")
    panel = ProbePanel()
    qtbot.addWidget(panel)
    result = {"probe": "jitter", "cpu": 1, "sampled_seconds": 1.0, "label": "saved jitter CPU 1",
              "buckets": [{"lo_ns": 1000, "hi_ns": 1100, "count": 5}], "attribution": a}
    rec = panel.add_result(result, "/tmp/saved.coremap")
    item = panel.run_store.item(rec.key)
    panel.run_store.runs_list.setCurrentItem(item)
    assert panel.plots.gap_view.gap_model.rowCount() == len(a["gaps"])
    assert "saved jitter CPU 1" in panel.plots.gap_view.status.text()
