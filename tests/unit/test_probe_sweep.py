"""The sweep's flag rule (probes/sweep/measure.py, Flag rule): the Student t tail against printed tables and
its closed forms, Yuen's paired test against a hand computation, and analyse() on synthetic sweeps
built the way a real one is: a ~2.2 ms window per CPU per round, at a random phase of a load that
takes 1 ms of every 10 ms (the benchmark's 10% FIFO hog), plus rare multi-ms stalls from other tasks.
One real short sweep checks that summarize() applies the same rule to what the probe printed.
"""
from __future__ import annotations

import math
import os
import random
import statistics

import pytest
from hypothesis import given, settings, strategies as st

from probes.sweep import measure as sweep
from probes.sweep.measure import analyse, t_isf, t_sf, trimmed_mean, yuen_paired

UNIT = 2_200_000  # ns: the probe's default window (2 ms unit + settle + pin)


# ------------------------------------------------------------------------------- Student t tail
@pytest.mark.parametrize("t, df, p", [
    (2.718, 11, 0.010), (2.821, 9, 0.010), (3.106, 11, 0.005), (1.812, 10, 0.050),
    (2.364, 100, 0.010), (2.576, 10**7, 0.005),  # t tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2)
])
def test_t_sf_matches_printed_tables(t, df, p):
    assert t_sf(t, df) == pytest.approx(p, rel=5e-3)


@given(st.floats(-50, 50), st.sampled_from([1, 2]))
@settings(max_examples=200, deadline=None)
def test_t_sf_closed_forms(t, df):
    # df 1 is the Cauchy distribution; df 2 has P(T > t) = 1/2 - t / (2 sqrt(t^2 + 2))
    want = 0.5 - math.atan(t) / math.pi if df == 1 else 0.5 - t / (2 * math.sqrt(t * t + 2))
    assert t_sf(t, df) == pytest.approx(want, abs=1e-12)


@given(st.floats(1e-8, 0.49), st.integers(1, 500))
@settings(max_examples=100, deadline=None)
def test_t_isf_inverts_t_sf(p, df):
    assert t_sf(t_isf(p, df), df) == pytest.approx(p, rel=1e-6)


# ------------------------------------------------------------------------------- Yuen's paired test
def test_yuen_paired_by_hand():
    d = [5.0, -1.0, 2.0, 3.0, 100.0, 0.0, 1.0, 2.0, 4.0, -50.0]  # n 10, g 0.1: one trimmed each end
    y = yuen_paired(d, 0.1)
    kept = [-1.0, 0.0, 1.0, 2.0, 2.0, 3.0, 4.0, 5.0]
    wins = [5.0, -1.0, 2.0, 3.0, 5.0, 0.0, 1.0, 2.0, 4.0, -1.0]  # ends pulled to the next values
    se = statistics.stdev(wins) / (0.8 * math.sqrt(10))
    assert y["trimmed_mean"] == pytest.approx(statistics.fmean(kept))
    assert y["se"] == pytest.approx(se) and y["df"] == 7
    assert y["t"] == pytest.approx(statistics.fmean(kept) / se)
    assert y["p"] == pytest.approx(t_sf(y["t"], 7))
    assert trimmed_mean(d, 0.1) == pytest.approx(statistics.fmean(kept))


# ------------------------------------------------------------------------------- synthetic sweeps
def _lost(rng, period=10_000_000, burst=1_000_000):
    """Time a window of UNIT ns of work loses to a FIFO burst at the start of every period, started
    at a uniformly random phase s: if the burst is running it waits for its end (the probe counts
    the wait), and if its work is not done when the next burst starts, it loses that whole burst."""
    s = rng.uniform(0, period)
    lost = burst - s if s < burst else 0.0
    return lost + (burst if s + lost + UNIT > period else 0.0)


def _sweep(seed, rounds=120, hog=None, stalls=0, cpus=2, shift=None):
    """samples[c][r] for a synthetic sweep: each window UNIT ns + ~1% gaussian jitter, + the hog's
    loss on CPU `hog`, + `stalls` stalls of 5-30 ms on random rounds and CPUs (other tasks),
    + shift[c] ns on every window of CPU c."""
    rng = random.Random(seed)
    out = {c: [UNIT * (1 + rng.gauss(0, 0.01)) for _ in range(rounds)] for c in range(cpus)}
    if hog is not None:
        out[hog] = [x + _lost(rng) for x in out[hog]]
    for _ in range(stalls):
        out[rng.randrange(cpus)][rng.randrange(rounds)] += rng.uniform(5e6, 30e6)
    for c, ns in (shift or {}).items():
        out[c] = [x + ns for x in out[c]]
    return out


def _flagged(res):
    return [c for c, r in res["per_cpu"].items() if r["flagged"]]


def test_the_synthetic_hog_costs_ten_percent_of_the_time():
    rng = random.Random(1)
    mean = statistics.fmean(_lost(rng) for _ in range(200_000))
    # exact: P(s < burst) x burst / 2 + P(s > period - UNIT) x burst = 0.1 x 0.5 + 0.22 x 1 ms
    assert mean == pytest.approx(0.05e6 + 0.22e6, rel=0.01)
    assert 0.10 < mean / (UNIT + mean) < 0.11  # a tenth of the time, as the hog takes


@pytest.mark.parametrize("stalls", [0, 4])
def test_a_hogged_cpu_is_flagged_in_every_synthetic_sweep(stalls):
    for seed in range(40):
        res = analyse(_sweep(seed, hog=1, stalls=stalls))
        assert _flagged(res) == [1], (seed, res["per_cpu"][1])
        assert res["best_cpu"] == 0 and res["per_cpu"][1]["trimmed_loss"] > 0.05


def test_equal_cpus_are_never_flagged_even_with_stalls():
    for seed in range(200):
        res = analyse(_sweep(seed, stalls=seed % 6))
        assert _flagged(res) == [], (seed, res["per_cpu"])


def test_stalls_on_the_best_cpu_do_not_hide_the_hog():
    # the old rule (mean + 2.5 SE of the difference of means) lost the hog here: three 20-30 ms
    # stalls on CPU 0 lift its mean by ~9% and its SE with it
    samples = _sweep(7, hog=1)
    for r in (10, 50, 90):
        samples[0][r] += 25e6
    res = analyse(samples)
    assert _flagged(res) == [1]
    m0, m1 = (statistics.fmean(samples[c]) for c in (0, 1))
    se = math.sqrt(statistics.variance(samples[0]) / 120 + statistics.variance(samples[1]) / 120)
    assert m1 - m0 < 2.5 * se  # what the old rule would have required, and not had


def test_a_consistent_small_difference_is_significant_but_under_the_floor():
    res = analyse(_sweep(3, shift={1: 0.015 * UNIT}))
    row = res["per_cpu"][1]
    assert row["p_value"] < 1e-6 and 0.01 < row["trimmed_loss"] < 0.02
    assert _flagged(res) == []
    assert _flagged(analyse(_sweep(3, shift={1: 0.015 * UNIT}), floor=0.01)) == [1]


def test_the_level_is_shared_among_the_cpus_compared():
    # Bonferroni: with 4 CPUs each comparison is held to alpha / 3, with 2 CPUs to alpha
    d = _sweep(11, cpus=4, shift={2: 0.004 * UNIT})
    res = analyse(d, floor=0.0)
    best, p = res["best_cpu"], res["per_cpu"][2]["p_value"]
    assert 1e-12 < p < 0.01
    pair = {best: d[best], 2: d[2]}
    assert analyse(pair, floor=0.0)["per_cpu"][2]["p_value"] == pytest.approx(p)
    assert analyse(pair, alpha=2 * p, floor=0.0)["per_cpu"][2]["flagged"]
    assert not analyse(d, alpha=2 * p, floor=0.0)["per_cpu"][2]["flagged"]  # 2p / 3 < p
    assert analyse(d, alpha=4 * p, floor=0.0)["per_cpu"][2]["flagged"]     # 4p / 3 > p


def test_rows_keep_the_keys_the_plot_and_cli_read():
    res = analyse(_sweep(5, hog=1, cpus=3))
    for c, row in res["per_cpu"].items():
        assert {"cpu", "mean_ns", "sd_ns", "cv", "loss_vs_best", "flagged", "n", "limit_ns"} <= row.keys()
        assert row["loss_vs_best"] == pytest.approx(row["mean_ns"] / res["baseline_ns"] - 1)
    best = res["per_cpu"][res["best_cpu"]]
    assert best["p_value"] is None and not best["flagged"] and best["excess_ns"] == 0.0
    # the flagged row's trimmed excess is above the limit the run states
    row = res["per_cpu"][1]
    assert row["flagged"] and row["excess_ns"] > row["limit_ns"] >= 0.03 * res["baseline_trimmed_ns"]


def test_a_live_sweep_with_one_round_flags_nothing():
    res = analyse({0: [2.2e6], 1: [3.0e6]})
    assert _flagged(res) == [] and res["per_cpu"][1]["p_value"] is None


# ------------------------------------------------------------------------------- a real short run
@pytest.mark.usefixtures("live_machine")
def test_a_real_sweep_is_summarized_by_the_same_rule():
    pytest.importorskip("probes._native", reason="build probes._native with `pip install -e .`")
    from probes.runner import run_to_end
    cpus = sorted(os.sched_getaffinity(0))[:2]
    args = ["--cpu", ",".join(map(str, cpus)), "--rounds", "12", "--unit-ms", "0.5", "--floor", "0.05"]
    rc, lines, _ = run_to_end("sweep", args, timeout=30)
    assert rc == 0, lines
    hello = next(l for l in lines if l["type"] == "hello")
    assert hello["alpha"] == sweep.ALPHA and hello["floor"] == 0.05 and "k" not in hello
    s = sweep.summarize(lines)
    samples = {c: [l["samples"][str(c)] for l in lines if l["type"] == "interval"] for c in cpus}
    res = analyse(samples, sweep.ALPHA, 0.05)
    assert [r["cpu"] for r in s["cpus"]] == cpus and all(r["n"] == 12 for r in s["cpus"])
    assert s["flagged"] == _flagged(res) and s["best_cpu"] == res["best_cpu"]
    assert s["floor"] == 0.05


def test_bad_alpha_and_floor_are_refused_by_name():
    from probes.runner import run_to_end
    for opt, val in (("--alpha", "0"), ("--floor", "1.5")):
        rc, lines, _ = run_to_end("sweep", ["--cpu", "0", "--rounds", "3", opt, val], timeout=30)
        err = [l for l in lines if l["type"] == "error"]
        assert rc != 0 and err and opt in err[0]["message"], lines
