"""Verify (issue 13, "Prove it"): the jitter probe not quiet and quiet in alternated pairs, the quiet
state toggled between runs and left as found; the verification goes into sessions and the report's
"before / after" section (HTML and PDF, whose pages are rendered with pdftoppm and checked)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.cli.main import main
from app.pinning.journal import Journal
from app.store.results import clean_verification
from app.store.session import Session, SessionError, open_session, save_session
from probes.verify import VerifyPlan, run_figures, verify_text
from tests.live import can_move_machine, live_test, machine_lock, read_affinities
from tests.machines import extract

ROOT = Path(__file__).resolve().parents[2]
live = live_test


def test_pairs_alternate_their_order():
    plan = VerifyPlan((1,), 0.5, 3)
    assert plan.steps() == [(0, False), (0, True), (1, True), (1, False), (2, False), (2, True)]
    [job] = plan.jobs()
    assert job.probe == "jitter" and job.cpus == (1,) and "--seconds" in job.args and "0.5" in job.args


@pytest.fixture(scope="module")
def verification(tmp_path_factory):
    """A real verification of CPU 1 (root: isolate and include for real), 2 pairs of 0.3 s."""
    why = can_move_machine()
    if why is not None:
        pytest.skip(why)
    state = tmp_path_factory.mktemp("state")
    out = state / "verify.json"
    env = dict(os.environ, COREMAP_STATE_DIR=str(state))
    with machine_lock():        # the module's tests hold it too; this isolate runs before the first of them
        before = read_affinities()
        r = subprocess.run([sys.executable, "-m", "app", "verify", "--cpus", "1", "--seconds", "0.3", "--pairs", "2",
                            "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        after = read_affinities()
    return r, json.loads(out.read_text()) if out.exists() else None, state, before, after


@live
def test_coremap_verify_toggles_the_state_and_leaves_it_as_found(verification):
    r, v, state, before, after = verification
    assert r.returncode == 0, r.stderr
    assert "isolate CPU 1:" in r.stdout and "include CPU 1:" in r.stdout
    assert "not quiet (before)" in r.stdout and "after / before" in r.stdout
    assert after.irqs == {n: m for n, m in before.irqs.items() if n in after.irqs}
    assert after.workqueue == before.workqueue
    with Journal(state / "journal.jsonl") as j:
        actions = [q.action for q in j.quiet_events()]
    # not quiet, quiet | quiet, not quiet: one isolate, one include, and the state it was found in
    assert actions == ["isolate", "include"]
    assert clean_verification(v) == (v, [])             # what the session and the report accept, whole
    assert [(x["pair"], x["quiet"]) for x in v["runs"]] == [(0, False), (0, True), (1, True), (1, False)]
    assert v["before"]["runs"] == v["after"]["runs"] == 2
    for side in (v["before"], v["after"]):
        runs = [x["sampled_seconds"] for x in v["runs"] if x["quiet"] == (side is v["after"])]
        assert len(runs) == 2 and all(x > 0 for x in runs) and side["sampled_seconds"] == pytest.approx(sum(runs))
        assert side["buckets"] and side["gaps10_per_s"] is not None
    per_run = [x["gaps10_per_s"] for x in v["runs"] if not x["quiet"]]
    assert min(per_run) <= v["before"]["gaps10_per_s"] <= max(per_run)
    assert v["ratio"]["gaps10_per_s"] is not None
    assert "isolate" in v["outcomes"] and "include" in v["outcomes"]


@live
def test_the_verification_in_the_report_html_and_pdf(verification, tmp_path):
    _, v, state, _, _ = verification
    f = state / "verify.json"
    html = tmp_path / "r.html"
    assert main(["report", "--verify", str(f), "--out", str(html)]) == 0
    text = html.read_text()
    assert "Before / after: quiet CPU 1" in text and "not quiet (before)" in text and "quiet (after)" in text
    assert "after / before" in text and text.count("<img") >= 2          # the grid and the two histograms
    pdf = tmp_path / "r.pdf"
    assert main(["report", "--verify", str(f), "--out", str(pdf)]) == 0
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed: the PDF was written, its pages not looked at")
    subprocess.run(["pdftoppm", "-r", "40", "-png", str(pdf), str(tmp_path / "page")], check=True)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) >= 2 and all(p.stat().st_size > 2000 for p in pages)
    if shutil.which("pdftotext"):
        words = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True).stdout
        assert "Before / after: quiet CPU 1" in words and "after / before" in words


@live
def test_a_session_keeps_the_verification(verification, tmp_path):
    _, v, _, _, _ = verification
    path = tmp_path / "s.coremap"
    save_session(path, Session(machine_dir=extract("sno"), verifications=[v]))
    s = open_session(path)
    try:
        assert s.verifications == [json.loads(json.dumps(v))]
    finally:
        s.close()
    assert "verify: CPU 1" not in verify_text(v) and verify_text(v).startswith("verify CPU 1: jitter 0.3 s a run")


def test_a_damaged_verification_refuses_the_session(tmp_path):
    path = tmp_path / "s.coremap"
    save_session(path, Session(machine_dir=extract("sno")))
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("verify/1.json", json.dumps({"kind": "verify", "cpus": "1", "before": {}, "after": {}}))
    with pytest.raises(SessionError, match="not a verification of quiet CPUs"):
        open_session(path)


def test_a_verification_with_bad_parts_opens_without_them(tmp_path):
    """Checked at the door (app/store/results.py): wrong types and nan are left out with a note."""
    side = {"label": "quiet (after)", "gaps10_per_s": float("nan"), "lost_share": 0.01, "sampled_seconds": 1.0,
            "buckets": [{"lo_ns": 1, "hi_ns": "2", "count": 3}], "gaps_per_cpu_hour": 7,
            "percentiles": {"max": 5}, "attribution": {"available": True, "by_cause": "x", "gaps": []}}
    v = {"kind": "verify", "cpus": [1], "seconds": 1.0, "pairs": 1, "before": dict(side, label="not quiet (before)"),
         "after": side, "runs": [{"pair": 0, "quiet": "yes"}], "ratio": {"lost_share": -1}, "outcomes": {"a": 5}}
    clean, notes = clean_verification(json.loads(json.dumps(v).replace("NaN", "1e999")), "verify/1.json")
    assert clean["runs"] == [] and clean["after"]["buckets"] == [] and clean["after"]["gaps_per_cpu_hour"] == []
    assert clean["after"]["gaps10_per_s"] is None and clean["after"]["lost_share"] == 0.01
    assert clean["after"]["attribution"] is None and clean["ratio"] == {"lost_share": None} and clean["outcomes"] == {}
    assert any("'buckets'" in n for n in notes) and any("runs" in n for n in notes)
    text = verify_text(clean)                                       # and it still reads
    assert "quiet (after)" in text and "–" in text


def test_run_figures_count_gaps_from_ten_microseconds():
    rows = [{"lo_ns": 2000, "hi_ns": 5000, "count": 7, "per_hour": 0.0},
            {"lo_ns": 10000, "hi_ns": 20000, "count": 3, "per_hour": 0.0},
            {"lo_ns": 100000000, "hi_ns": None, "count": 1, "per_hour": 0.0}]
    f = run_figures({"sampled_seconds": 2.0, "gaps_per_cpu_hour": rows, "lost_share": 0.01,
                     "percentiles": {"max": 123}})
    assert f == {"gaps10_per_s": 2.0, "lost_share": 0.01, "max_ns": 123, "sampled_seconds": 2.0}
