"""The probe plots on known inputs, and opening/saving probe results on the panel.

Oracles: bucket arithmetic done by hand, hdrh's own get_value_at_percentile, probes.sweep.measure.analyse's
flags, files written by probes/histogram.py and a live cyclictest run read back by its reader.
"""
from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes import histogram as H
from probes.sweep import measure as sweep
from widgets.probe.c2c import C2CHeatmap
from widgets.probe.histogram_plot import HistogramPlot, step_data
from widgets.probe.percentile_plot import PercentilePlot, percentile_curve, percentile_x, values_at
from widgets.probe.panel import ProbePanel
from widgets.probe.sweep import FLAG_COLOUR, SweepPlot

BUCKETS = [[0, 8, 10], [8, 16, 20], [16, 32, 0], [1000, 1085, 3], [1183, 1282, 1]]
# 1/1000 of an hour sampled: per CPU-hour = count x 1000
SAMPLED_NS = H.NS_PER_HOUR / 1000


def test_histogram_plot_known_buckets(qtbot):
    plot = HistogramPlot()
    qtbot.addWidget(plot)
    curve = plot.set_run("a", "run a", BUCKETS, SAMPLED_NS)
    x, y = curve.getOriginalDataset()
    # [0, 8) drawn from 1 ns; the empty [16, 32) bucket and the hole 1085-1183 are zeros; the
    # trailing zero bucket is dropped
    assert list(x) == [1, 8, 16, 32, 1000, 1085, 1183, 1282]
    assert list(y) == [10_000, 20_000, 0, 0, 3000, 0, 1000]
    assert curve.opts["stepMode"] == "center" and curve.opts["logMode"] == [True, True]
    dx, dy = curve.getData()                 # what is drawn: log10 of both
    assert np.allclose(dx, np.log10(x))
    assert np.isnan(dy[2]) and math.isclose(dy[0], 4.0)
    # live update: same curve object, new data
    again = plot.set_run("a", "run a", BUCKETS + [[2000, 2200, 7]], SAMPLED_NS)
    assert again is curve and curve.getOriginalDataset()[1][-1] == 7000
    plot.set_run("b", "run b", BUCKETS, SAMPLED_NS * 2)
    assert plot.legend_labels() == ["run a", "run b"]
    assert plot.curve("a").opts["pen"].color() != plot.curve("b").opts["pen"].color()
    plot.set_run_visible("b", False)
    assert not plot.curve("b").isVisible()
    plot.remove_run("a")
    assert plot.keys() == ["b"] and plot.legend_labels() == ["run b"]


def test_step_data_refuses_overlap():
    with pytest.raises(ValueError):
        step_data([[0, 10, 1], [5, 20, 1]], 1e9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 1000)), min_size=1, max_size=30))
def test_percentiles_match_hdrh(rows):
    # contiguous buckets of widths w with counts c
    buckets, lo = [], 0
    for w, c in rows:
        buckets.append([lo, lo + w, c])
        lo += w
    if not any(c for *_, c in buckets):
        return
    h = H.buckets_to_histogram(buckets)
    ps = [0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0]
    mine = values_at(buckets, ps)
    for p, v in zip(ps, mine):
        want = h.get_value_at_percentile(p)
        assert h.get_lowest_equivalent_value(int(v)) == h.get_lowest_equivalent_value(want), (p, v, want)


def test_percentile_plot_axes(qtbot):
    plot = PercentilePlot()
    qtbot.addWidget(plot)
    curve = plot.set_run(1, "r", BUCKETS)
    x, y = curve.getOriginalDataset()
    total = sum(c for *_, c in BUCKETS)
    assert x[0] == 0 and math.isclose(x[-1], math.log10(total))      # p = 1 - 1/N at the end
    assert y[0] == 4 and y[-1] == H.bucket_mid(1183, 1282)
    assert curve.opts["logMode"] == [False, True]
    ticks = dict((t, pos) for pos, t in plot.getPlotItem().getAxis("bottom")._tickLevels[0])
    assert math.isclose(ticks["99.9%"], 3.0) and math.isclose(ticks["50%"], math.log10(2))
    assert math.isclose(percentile_x(99.99), 4.0)
    assert percentile_curve([])[0].size == 0


def test_sweep_plot_flags_an_outlier(qtbot):
    samples = {0: [100e3, 101e3, 99e3, 100e3], 1: [100e3, 102e3, 98e3, 100e3], 2: [150e3, 151e3, 149e3, 150e3]}
    res = sweep.analyse(samples)
    assert [c for c, r in res["per_cpu"].items() if r["flagged"]] == [2]
    plot = SweepPlot()
    qtbot.addWidget(plot)
    plot.set_result(res["per_cpu"], order=[2, 0, 1])
    assert plot.cpus == [2, 0, 1] and plot.flagged == [2]
    assert plot.bar_brush(2) == FLAG_COLOUR
    assert list(plot.flag_bars.opts["x"]) == [0] and list(plot.normal_bars.opts["x"]) == [1, 2]
    assert np.allclose(plot.flag_bars.opts["height"], [150.0])
    sd2 = res["per_cpu"][2]["sd_ns"] / 1e3
    assert np.allclose(plot.error_bars.opts["top"][0], sd2)
    ticks = [t for _, t in plot.getPlotItem().getAxis("bottom")._tickLevels[0]]
    assert ticks == ["2", "0", "1"]


def test_c2c_heatmap_matrix(qtbot):
    w = C2CHeatmap()
    qtbot.addWidget(w)
    cpus = [0, 1, 2]
    m = [[None, 50.0, 80.0], [50.0, None, 120.0], [80.0, 120.0, None]]
    w.set_matrix(cpus, m, order=[2, 0, 1])
    assert w.cpus == [2, 0, 1]
    img = w.image.image
    assert img.shape == (3, 3) and np.isnan(img[0, 0])
    assert img[0, 1] == 80.0 and img[1, 2] == 50.0 and img[2, 0] == 120.0
    assert tuple(w.colorbar.levels()) == (50.0, 120.0)
    assert "CPU 2 ↔ CPU 0" in w.text_at(1.5, 0.5) and "80" in w.text_at(1.5, 0.5)
    assert w.text_at(5, 5) == ""


def _intervals(bucket_lists):
    return [(i * 0.1, 0.1, H.buckets_to_histogram(b)) for i, b in enumerate(bucket_lists)]


def test_open_hlog_adds_a_run_and_save_round_trips(qtbot, tmp_path):
    panel = ProbePanel()
    qtbot.addWidget(panel)
    path = tmp_path / "run.hlog"
    H.write_hlog(path, _intervals([BUCKETS, [[8, 16, 5], [5128, 5522, 2]]]), comment="test")
    added = panel.open_result(path)
    # an .hlog's every sample counts (it holds no jitter threshold): drawn on the latency axes
    assert len(added) == 1 and panel.plots.wakeup_plot.keys() == [added[0].key]
    assert panel.plots.histogram_plot.keys() == []
    rec = added[0]
    assert sum(c for *_, c in rec.buckets) == 34 + 7
    assert math.isclose(rec.sampled_ns, 0.2e9)
    x, _y = panel.plots.wakeup_plot.curve(rec.key).getOriginalDataset()
    assert len(x) > 2 and panel.table.keys == [rec.key]
    assert panel.table.cell_text("count", rec.key) == "41"     # the samples counted
    # tagged intervals (one per CPU) become one run each
    tagged = tmp_path / "tagged.hlog"
    H.write_hlog(tagged, [(0, 0.1, H.buckets_to_histogram(BUCKETS), "cpu1"),
                          (0, 0.1, H.buckets_to_histogram(BUCKETS), "cpu3")])
    assert [r.label.split()[-1] for r in panel.open_result(tagged)] == ["cpu1", "cpu3"]
    assert len(panel.plots.wakeup_plot.legend_labels()) == 3
    # save in each format and read back with probes/histogram.py's own readers
    panel.save_run(rec.key, tmp_path / "out.hlog")
    back = H.read_hlog(tmp_path / "out.hlog").merged()
    assert back.get_total_count() == 41
    panel.save_run(rec.key, tmp_path / "out.csv")
    rows = (tmp_path / "out.csv").read_text().splitlines()
    assert rows[0] == "lo_ns,hi_ns,count" and len(rows) == 1 + len(rec.buckets)
    panel.save_run(rec.key, tmp_path / "out.txt")
    assert "# Total: 000000041" in (tmp_path / "out.txt").read_text()
    with pytest.raises(Exception, match="name a .hlog"):
        panel.save_run(rec.key, tmp_path / "out.bin")


def test_open_bad_file_says_so(qtbot, tmp_path):
    panel = ProbePanel()
    qtbot.addWidget(panel)
    bad = tmp_path / "bad.hlog"
    bad.write_text("this is not a log\n")
    with pytest.raises(Exception, match="not an interval line"):
        panel.open_result(bad)
    assert panel.runs == []


@pytest.mark.skipif(shutil.which("cyclictest") is None, reason="rt-tests not installed")
def test_open_cyclictest_json(qtbot, tmp_path):
    out = tmp_path / "ct.json"
    subprocess.run(["cyclictest", "-q", "-l", "100", "-i", "500", "-t", "1", "-a", "0", "-h", "2000",
                    f"--json={out}"], check=True, capture_output=True, timeout=20)
    want = H.read_cyclictest_json(out.read_text())[0]
    panel = ProbePanel()
    qtbot.addWidget(panel)
    (rec,) = panel.open_result(out)
    assert rec.cpus == (0,) and "CPU 0" in rec.label
    assert sum(c for *_, c in rec.buckets) == sum(c for *_, c in want["buckets"])
    assert math.isclose(rec.sampled_ns, 100 * 500e3)        # cycles x the -i interval


def test_an_empty_plot_says_what_to_do_and_every_axis_has_its_unit(qtbot):
    from widgets.probe.axes import EMPTY_HINT
    plots = [HistogramPlot(), PercentilePlot(), SweepPlot()]
    heat = C2CHeatmap()
    for w in plots + [heat]:
        qtbot.addWidget(w)
        w.resize(600, 400)

    def shown(hint):
        return hint.isVisibleTo(hint.parentWidget())
    h, p, s = plots
    # Empty: the hint shows, and the log axes carry worded decades ("1 µs"), not pyqtgraph's bare 2…9.
    assert shown(h.empty_hint) and h.empty_hint.text() == EMPTY_HINT
    assert shown(p.empty_hint) and shown(s.empty_hint) and shown(heat.empty_hint)
    ticks = h.getPlotItem().getAxis("bottom")._tickLevels[0]
    assert any(label == "1 µs" for _pos, label in ticks)
    for w in (h, p, s, heat.plot):
        item = w.getPlotItem()
        for side in ("bottom", "left"):
            title = item.getAxis(side).labelText
            assert title.endswith(")") and "(" in title, f"{type(w).__name__} {side} axis: {title!r}"
    # With a run: the hint goes, the ticks follow the data.
    buckets = [[0, 1000, 50], [1000, 2000, 10], [20000, 30000, 1]]
    h.set_run(1, "cpu 1", buckets, 1e9)
    p.set_run(1, "cpu 1", buckets)
    assert not shown(h.empty_hint) and not shown(p.empty_hint)


def test_the_empty_hint_stays_inside_a_narrow_plot(qtbot):
    """Beside the probe form in a capture's window at 1400 px the histogram was ~200 px wide, and its
    one-line hint ran past both sides: it wraps to the plot's width there, and is one line where it fits."""
    plot = HistogramPlot()
    qtbot.addWidget(plot)
    plot.show()
    for width in (600, 190):
        plot.resize(width, 400)
        qtbot.waitUntil(lambda: plot.width() == width)
        hint = plot.empty_hint
        assert plot.rect().contains(hint.geometry()), (width, hint.geometry(), plot.rect())
        assert hint.wordWrap() == (width < 300)
