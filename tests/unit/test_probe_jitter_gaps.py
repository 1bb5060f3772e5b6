"""What a jitter run leads with (issue 22): gaps per second and per CPU-hour at 2, 10, 100 µs and
1 ms, time lost, the longest gap, and percentiles of gap lengths rather than of every read.

Oracles: the loop's own interval lines (its fine buckets bracket each exact step count; every read is
in one bucket), hand-made buckets whose gap counts are known, oslat's captured histogram, and the
fleet's and the session door's own readers."""
from __future__ import annotations

import json
import os

import pytest

from app.format import format_ns
from app.remote.fleet import jitter_text
from probes.results import check_result
from probes import files
from probes import histogram as H
from probes.jitter.measure import fleet_figures, summarize
from probes.runner import run_to_end
from probes.text import format_result
from tests.unit.test_probes import OSLAT_SAMPLE

CPU = sorted(os.sched_getaffinity(0))[-1]
# 1,000,000 reads of ~12 ns, then gaps: 3 of [1.0, 1.1) µs, 2 of [2.0, 2.2) µs, 1 of [20, 22) µs,
# 1 of [1.5, 1.6) ms: 7 gaps of 1 µs or more, 4 of 2 µs, 2 of 10 µs, 1 of 100 µs and of 1 ms.
BUCKETS = [[8, 16, 1_000_000], [1000, 1100, 3], [2000, 2200, 2], [20_000, 22_000, 1], [1_500_000, 1_600_000, 1]]


def test_gap_figures_count_gaps_not_reads():
    g = H.gap_figures(BUCKETS, 2e9, from_ns=1000)
    assert g["count"] == 7 and g["from_ns"] == 1000
    counts = {r["ns"]: r["count"] for r in g["at_least"]}
    assert counts == {2000: 4, 10_000: 2, 100_000: 1, 1_000_000: 1}
    row = H.step_row(g, 10_000)
    assert row["per_second"] == pytest.approx(1.0) and row["per_cpu_hour"] == pytest.approx(3600.0)
    assert not row["exact"]                                   # read from the buckets
    # lost: the midpoints of the gaps of 2 µs or more, over the sampled time
    assert g["lost_ns"] == 2 * 2100 + 21_000 + 1_550_000 and g["lost_share"] == pytest.approx(g["lost_ns"] / 2e9)
    # the percentiles are of the 7 gaps: the median is a 2 µs one, never the loop's 12 ns
    assert g["percentiles"]["p50"] == pytest.approx(2100, rel=0.01)
    assert g["percentiles"]["max"] == pytest.approx(1_550_000, rel=0.01)
    assert H.percentiles(H.buckets_to_histogram(BUCKETS))["p50"] == 12      # what it used to lead with


def test_the_loops_exact_counts_and_max_win():
    exact = {2000: (5, 11_000.0), 10_000: (2, 1_540_000.0)}
    g = H.gap_figures(BUCKETS, 1e9, from_ns=1000, max_ns=1_520_000, exact=exact)
    assert [(r["ns"], r["count"], r["exact"]) for r in g["at_least"]] == [
        (2000, 5, True), (10_000, 2, True), (100_000, 1, False), (1_000_000, 1, False)]
    assert g["lost_ns"] == 11_000.0
    # the exact longest gap, though its bucket's midpoint lies above it; no percentile beyond it
    assert g["max_ns"] == g["percentiles"]["max"] == 1_520_000
    assert all(v <= 1_520_000 for v in g["percentiles"].values())


def test_no_gap_at_all():
    g = H.gap_figures([[8, 16, 500]], 1e9, from_ns=1000)
    assert g["count"] == 0 and g["max_ns"] is None and g["lost_share"] == 0
    assert all(r["count"] == 0 and r["per_second"] == 0 for r in g["at_least"])


@pytest.mark.usefixtures("live_machine")
def test_a_live_run_counts_each_step_exactly():
    rc, lines, run = run_to_end("jitter", ["--cpu", CPU, "--seconds", "0.3"], timeout=30)
    assert rc == 0, run.stderr_lines
    ivs = [l for l in lines if l["type"] == "interval"]
    for iv in ivs:
        assert [s for s, _n, _lost in iv["at_least"]] == list(H.GAP_STEPS_NS)   # threshold 1 µs: all four
        for step, n, lost in iv["at_least"]:
            # the fine buckets (each at most 12.5% wide) bracket the exact count
            surely = sum(c for lo, _hi, c in iv["buckets"] if lo >= step)
            maybe = sum(c for _lo, hi, c in iv["buckets"] if hi > step)
            assert surely <= n <= maybe
            assert (n == 0) == (lost == 0) and lost >= n * step * 0.999
    r = summarize(lines)
    g = r["gaps"]
    sampled = sum(iv["sampled_ns"] for iv in ivs)
    for row, step in zip(g["at_least"], H.GAP_STEPS_NS):
        n = sum(c for iv in ivs for s, c, _ in iv["at_least"] if s == step)
        assert row["exact"] and row["count"] == n and row["per_second"] == pytest.approx(n / (sampled / 1e9))
    assert g["count"] == sum(c for iv in ivs for lo, _hi, c in iv["buckets"] if lo >= 1000)
    top = max((gap for iv in ivs for _t, gap in iv["top_gaps"]), default=None)
    assert g["max_ns"] == top and r["percentiles"] == g["percentiles"] and r["lost_share"] == g["lost_share"]
    text = format_result(r)
    assert "longest gap" in text.splitlines()[1] and "≥ 10 µs" in text and "per CPU-hour" in text
    assert ("gap lengths: p50" in text) == bool(g["count"])
    # through the session door unchanged, and into the fleet's cell
    back, notes = check_result(json.loads(json.dumps(r)))
    assert notes == [] and back["gaps"] == json.loads(json.dumps(g))
    cell = jitter_text({"cpu": CPU, **fleet_figures(r)})
    assert cell.startswith(f"CPU {CPU}: max {format_ns(g['max_ns'])}, gaps >= 10 µs ")


def test_the_fleet_cell_leads_with_gaps():
    figures = {"p99_ns": 5000, "max_ns": 2_150_000, "gaps10_per_s": 12.3, "gaps100_per_s": 0.5,
               "lost_share": 0.000123}
    assert jitter_text({"cpu": 3, **figures}) == \
        "CPU 3: max 2.15 ms, gaps >= 10 µs 12/s, >= 100 µs 0.5/s, time lost 0.0123%"
    # a row of an older coremap, with only its p99 and max
    assert jitter_text({"cpu": 3, "p99_ns": 5000, "max_ns": 2_150_000}) == "CPU 3: max 2.15 ms, p99 5 µs"


def test_oslat_files_and_jitter_hlogs_count_gaps(tmp_path):
    (run,) = files.parse_runs(OSLAT_SAMPLE, name="oslat.json", what="oslat.json")
    assert run.gaps_from_ns == 1000
    res = run.result("oslat", "oslat.json")
    # oslat's [0, 1) µs bucket is the loop's reads: 52,756,252 of them, none a gap
    hist = json.loads(OSLAT_SAMPLE)["thread"]["0"]["histogram"]
    assert res["gaps"]["count"] == sum(v for k, v in hist.items() if k != "1") == 1209
    assert res["percentiles"]["p50"] >= 1000
    # a jitter run saved as .hlog says its threshold, and reads back with it
    result = {"probe": "jitter", "threshold_ns": 2000, "cpu": 1}
    path = tmp_path / "j.hlog"
    files.write_run(path, label="#1 jitter CPU 1", result=result, buckets=BUCKETS, sampled_ns=1e9)
    (back,) = files.load_runs(path)
    assert back.gaps_from_ns == 2000 and back.result("x", str(path))["gaps"]["count"] == 4
    # a stored jitter result from before results said their threshold counts gaps from 1 µs
    assert files.result_run({"probe": "jitter", "buckets": H.buckets_as_dicts(BUCKETS)}).gaps_from_ns == 1000
    assert files.result_run({"probe": "wakeup", "buckets": H.buckets_as_dicts(BUCKETS)}).gaps_from_ns is None


def test_a_hostile_gaps_block_is_left_out():
    good = H.gap_figures(BUCKETS, 1e9, from_ns=1000)
    for bad in ({**good, "count": -1}, {**good, "at_least": [{"ns": "2000"}]}, {**good, "lost_share": float("nan")},
                {**good, "at_least": [dict(good["at_least"][0], exact="yes")]}, [1, 2], {**good, "percentiles": 5}):
        out, notes = check_result({"probe": "jitter", "gaps": bad})
        assert "gaps" not in out and notes
    out, notes = check_result({"probe": "jitter", "gaps": json.loads(json.dumps(good))})
    assert notes == [] and out["gaps"]["count"] == 7
