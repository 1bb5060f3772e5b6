"""Probe runs and files (probes/files.py): runs read from .hlog, cyclictest and oslat --json files,
and a run written as .hlog, .csv, .txt and .json.

Oracles: probes/histogram.py's own readers and writers, a live cyclictest run (cycles x its -i
interval), oslat's captured sample (tests/unit/test_probes.py).
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess

import pytest

from probes import histogram as H
from probes.files import (ResultFileError, hlog_intervals, load_runs, parse_runs, result_run, write_run,
                          write_runs_hlog)
from tests.unit.test_probes import OSLAT_SAMPLE

BUCKETS = [[0, 8, 10], [8, 16, 20], [1000, 1085, 3]]


def _lines(cpu, bucket_lists, step_ns=100_000_000):
    """A run's JSON lines as a probe streams them: hello, then one interval per chunk."""
    out = [{"type": "hello", "cpu": cpu}]
    for i, b in enumerate(bucket_lists, 1):
        out.append({"type": "interval", "elapsed_ns": i * step_ns, "buckets": b})
    return out + [{"type": "done"}]


def test_tagged_hlog_is_one_run_per_tag(tmp_path):
    path = tmp_path / "two.hlog"
    H.write_hlog(path, [(0, 0.1, H.buckets_to_histogram(BUCKETS), "cpu1"),
                        (0.1, 0.2, H.buckets_to_histogram(BUCKETS), "cpu1"),
                        (0, 0.1, H.buckets_to_histogram([[8, 16, 5]]), "cpu3")])
    one, three = load_runs(path)
    assert (one.label, three.label) == ("two.hlog cpu1", "two.hlog cpu3")
    assert sum(c for *_, c in one.buckets) == 66 and sum(c for *_, c in three.buckets) == 5
    assert math.isclose(one.sampled_ns, 0.3e9) and one.cpu is None


def test_oslat_json_is_one_run_per_thread():
    (run,) = parse_runs(OSLAT_SAMPLE, name="o.json", what="o.json")
    want = H.read_oslat_json(OSLAT_SAMPLE)[0]
    assert run.label == "o.json CPU 1" and run.cpu == 1
    assert run.buckets == H.merge_buckets(want["buckets"]) and math.isclose(run.sampled_ns, 0.999e9)


def test_cyclictest_without_an_interval_measured_its_default_period():
    text = json.dumps({"file_version": 1, "cmdline:": "cyclictest -q -l 10 -t 1 --json=x.json",
                       "thread": {"0": {"cpu": 0, "histogram": {"3": 10}, "cycles": 10,
                                        "min": 3, "avg": 3, "max": 3}}})
    (run,) = parse_runs(text, name="c.json", what="c.json")
    assert math.isclose(run.sampled_ns, 10 * 1000e3)       # cycles x 1000 us


@pytest.mark.skipif(shutil.which("cyclictest") is None, reason="rt-tests not installed")
def test_cyclictest_json_from_a_live_run(tmp_path):
    out = tmp_path / "ct.json"
    subprocess.run(["cyclictest", "-q", "-l", "50", "-i", "700", "-t", "1", "-a", "0", "-h", "2000",
                    f"--json={out}"], check=True, capture_output=True, timeout=20)
    (run,) = load_runs(out)
    assert run.cpu == 0 and run.label == "ct.json CPU 0"
    assert math.isclose(run.sampled_ns, 50 * 700e3)
    assert sum(c for *_, c in run.buckets) == sum(c for *_, c in H.read_cyclictest_json(out.read_text())[0]["buckets"])


def test_what_is_not_a_result_file_says_so(tmp_path):
    with pytest.raises(ResultFileError, match="not JSON"):
        parse_runs("{nope", name="x", what="x.json")
    with pytest.raises(ResultFileError, match="no intervals"):
        parse_runs("#[Histogram log format version 1.2]\n", name="x", what="x.hlog")
    with pytest.raises(ResultFileError, match="no such file"):
        load_runs(tmp_path / "missing.hlog")


def test_hlog_intervals_follow_the_interval_lines():
    ivs = hlog_intervals(_lines(2, [BUCKETS, [[8, 16, 4]]]), tag="cpu2")
    assert [(s, l, t) for s, l, _h, t in ivs] == [(0.0, 0.1, "cpu2"), (0.1, 0.1, "cpu2")]
    assert ivs[1][2].get_total_count() == 4


def test_several_runs_are_tagged_by_cpu(tmp_path):
    path = tmp_path / "cli.hlog"
    write_runs_hlog(path, [_lines(1, [BUCKETS]), _lines(3, [BUCKETS, BUCKETS])])
    log = H.read_hlog(path)
    assert [iv.tag for iv in log.intervals] == ["cpu1", "cpu3", "cpu3"]
    write_runs_hlog(path, [_lines(1, [BUCKETS])])
    assert [iv.tag for iv in H.read_hlog(path).intervals] == [None]


def test_a_run_written_in_each_format(tmp_path):
    lines = _lines(0, [BUCKETS, [[8, 16, 4]]])
    merged = H.merge_buckets(BUCKETS, [[8, 16, 4]])
    result = {"probe": "jitter", "buckets": H.buckets_as_dicts(merged)}
    kw = dict(label="#1 jitter CPU 0", result=result, buckets=merged, sampled_ns=0.2e9)
    write_run(tmp_path / "r.hlog", lines=lines, **kw)
    log = H.read_hlog(tmp_path / "r.hlog")
    # a jitter run's log holds its gaps (from 1 us), as its header says (tests/unit/test_hlog_gaps.py)
    assert len(log.intervals) == 2 and log.merged().get_total_count() == 3
    assert any("#1 jitter CPU 0" in c for c in log.comments)
    # a run read from a file has no interval lines: one interval of its whole time; a latency run's
    # log holds every value
    write_run(tmp_path / "f.hlog", **{**kw, "result": {"probe": "wakeup"}})
    (iv,) = H.read_hlog(tmp_path / "f.hlog").intervals
    assert iv.length_s == 0.2 and iv.histogram.get_total_count() == 37
    write_run(tmp_path / "r.csv", **kw)
    assert (tmp_path / "r.csv").read_text().splitlines()[0] == "lo_ns,hi_ns,count"
    write_run(tmp_path / "r.txt", **kw)
    assert "# Total: 000000037" in (tmp_path / "r.txt").read_text()
    write_run(tmp_path / "r.json", **kw)
    assert json.loads((tmp_path / "r.json").read_text()) == result


def test_what_cannot_be_written_says_so(tmp_path):
    sweep = {"probe": "sweep", "cpus": []}
    with pytest.raises(ResultFileError, match="has no histogram; save it as .json"):
        write_run(tmp_path / "s.hlog", label="#2 sweep", result=sweep)
    write_run(tmp_path / "s.json", label="#2 sweep", result=sweep)
    with pytest.raises(ResultFileError, match="name a .hlog"):
        write_run(tmp_path / "r.bin", label="r", result={}, buckets=BUCKETS)
    with pytest.raises(ResultFileError, match="does not exist"):
        write_run(tmp_path / "no" / "such" / "r.csv", label="r", result={}, buckets=BUCKETS)


def test_a_stored_result_as_a_run():
    run = result_run({"probe": "wakeup", "cpu": 2, "sampled_seconds": 0.5,
                      "buckets": [{"lo_ns": 8, "hi_ns": 16, "count": 3}, {"lo_ns": 0, "hi_ns": 8, "count": 1}]})
    assert run.label == "wakeup CPU 2" and run.cpu == 2 and run.sampled_ns == 0.5e9
    assert run.buckets == [[0, 8, 1], [8, 16, 3]]
    s = run.result("#1 wakeup CPU 2", "/tmp/s.coremap")
    assert s["total"] == 4 and s["label"] == "#1 wakeup CPU 2" and s["source"] == "/tmp/s.coremap"
    assert result_run({"probe": "sweep", "buckets": []}) is None
