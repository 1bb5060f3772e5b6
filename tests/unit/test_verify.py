"""Verify (issue 13, "Prove it"): the jitter probe not quiet and quiet in alternated pairs, the quiet
state toggled between runs and left as found; the verification goes into sessions and the report's
"before / after" section (HTML and PDF, whose pages are rendered with pdftoppm and checked).

A step that fails (issue 22, "verify") is made to fail for real in a live run: the probe child of
run k killed, or tracefs unmounted under run k of an attributed verification (in a mount namespace
of the verification's own, so the machine's tracefs stays mounted). The first k-1 runs are in --out,
which is read as each run's line arrives, and one line names the step."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from app.cli.common import SCHEMA_VERSION
from app.cli.main import main
from app.pinning.journal import Journal
from app.store.results import clean_verification
from app.store.session import Session, SessionError, open_session, save_session
from probes.verify import VerifyPlan, run_figures, verify_text
from tests.live import can_move_machine, live_test, machine_lock, read_affinities
from tests.machines import extract

ROOT = Path(__file__).resolve().parents[2]
live = live_test


def _body(v: dict) -> dict:
    """A --out document without the CLI's schema_version: the verification a session keeps."""
    return {k: x for k, x in v.items() if k != "schema_version"}


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
    # "isolate CPU 1: …", or with the method it used: "isolate CPU 1 (cpuset shield): …"
    assert re.search(r"^isolate CPU 1[: ]", r.stdout, re.M) and re.search(r"^include CPU 1[: ]", r.stdout, re.M)
    assert "not quiet (before)" in r.stdout and "after / before" in r.stdout
    assert "run 1 of 4 (pair 1, not quiet, CPU 1) done: gaps >= 10 µs " in r.stdout       # each run as it ends
    assert "run 4 of 4 (pair 2, not quiet, CPU 1) done: " in r.stdout and "stopped" not in r.stdout + r.stderr
    assert after.irqs == {n: m for n, m in before.irqs.items() if n in after.irqs}
    assert after.workqueue == before.workqueue
    with Journal(state / "journal.jsonl") as j:
        actions = [q.action for q in j.quiet_events()]
    # not quiet, quiet | quiet, not quiet: one isolate, one include, and the state it was found in
    assert actions == ["isolate", "include"]
    # --out is a document of the CLI's JSON (its schema_version); what the session and the report keep is
    # the verification itself, whole.
    assert v["schema_version"] == SCHEMA_VERSION
    assert clean_verification(v) == (_body(v), [])
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
    # The PDF of a fixture machine's report: its pages are looked at for the verification's section, which
    # is the same whatever machine the report is of; a second report of the live machine would only wait
    # again for its rates (twice 0.5 s, the HTML's report above reads them).
    pdf = tmp_path / "r.pdf"
    assert main(["report", "--root", str(extract("sno")), "--verify", str(f), "--out", str(pdf)]) == 0
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
        assert s.verifications == [json.loads(json.dumps(_body(v)))]
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
    """Checked at the door (app/store/results.py Verification): wrong types and nan are left out with a note."""
    side = {"label": "quiet (after)", "gaps10_per_s": float("nan"), "lost_share": 0.01, "sampled_seconds": 1.0,
            "buckets": [{"lo_ns": 1, "hi_ns": "2", "count": 3}], "gaps_per_cpu_hour": 7,
            "percentiles": {"max": 5}, "attribution": {"available": True, "by_cause": "x", "gaps": []}}
    v = {"kind": "verify", "cpus": [1], "seconds": 1.0, "pairs": 1, "before": dict(side, label="not quiet (before)"),
         "after": side, "runs": [{"pair": 0, "quiet": "yes"}], "ratio": {"lost_share": -1}, "outcomes": {"a": 5}}
    clean, notes = clean_verification(json.loads(json.dumps(v).replace("NaN", "1e999")), "verify/1.json")
    assert clean["runs"] == [] and clean["after"]["buckets"] == [] and clean["after"]["gaps_per_cpu_hour"] == []
    assert clean["after"]["gaps10_per_s"] is None and clean["after"]["lost_share"] == 0.01
    assert clean["after"]["attribution"] is None and clean["ratio"] == {} and clean["outcomes"] == {}
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


# -- a step that fails: the runs before it kept ------------------------------------------------------

def _run_verify(argv: list[str], state: Path, on_line, prefix: tuple[str, ...] = ()):
    """`coremap verify ARGV` as a child of this test (under `prefix`, e.g. unshare); on_line(line, pid) is
    called with each line of its output as it arrives. (returncode, stdout, stderr)."""
    env = dict(os.environ, COREMAP_STATE_DIR=str(state))
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*prefix, sys.executable, "-m", "app", "verify", *argv], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
        lines = []
        try:
            for line in proc.stdout:
                lines.append(line)
                on_line(line.rstrip("\n"), proc.pid)
            proc.wait(timeout=300)
        finally:
            if proc.poll() is None:         # a failed assertion in on_line: no verification left behind
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)
        err.seek(0)
        return proc.returncode, "".join(lines), err.read()


def _probe_child(parent: int, wait_s: float = 60) -> int:
    """The jitter probe child `parent` has started (or starts within `wait_s`): the process whose
    parent it is and whose command line is `python -m probes jitter`."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        parent_stat = Path(f"/proc/{parent}/stat").read_bytes()
        # verify ended (a zombie until the test reaps it) without a child seen: say so now, not 60 s later
        assert parent_stat[parent_stat.rfind(b")") + 2:][:1] != b"Z", f"verify (pid {parent}) ended first"
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_bytes()
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:         # exited while listing
                continue
            if int(stat[stat.rfind(b")") + 2:].split()[1]) == parent and b"probes" in argv and b"jitter" in argv:
                return int(pid)
        time.sleep(0.005)
    raise AssertionError(f"verify (pid {parent}) started no jitter probe within {wait_s:g} s")


def _runs_in(out: Path) -> list[tuple[int, bool]]:
    return [(r["pair"], r["quiet"]) for r in json.loads(out.read_text())["runs"]]


def _assert_given_back(state: Path, before, after) -> None:
    """The CPU is back as found (IRQs and the workqueue cpumask, read from /proc and /sys): the one
    isolate was followed by its include."""
    assert after.irqs == {n: m for n, m in before.irqs.items() if n in after.irqs}
    assert after.workqueue == before.workqueue and after.default_irq == before.default_irq
    with Journal(state / "journal.jsonl") as j:
        assert [q.action for q in j.quiet_events()] == ["isolate", "include"]


@live
def test_a_probe_child_killed_at_run_3_leaves_runs_1_and_2(tmp_path):
    out = tmp_path / "verify.json"
    in_out = []                 # what --out held when each run's line arrived

    def on_line(line: str, pid: int) -> None:
        if " done: " in line:
            in_out.append(_runs_in(out))
            if len(in_out) == 2:
                os.kill(_probe_child(pid), signal.SIGKILL)      # run 3's child, as soon as it exists

    before = read_affinities()
    code, stdout, stderr = _run_verify(["--cpus", "1", "--seconds", "0.3", "--pairs", "2", "--out", str(out)],
                                       tmp_path, on_line)
    after = read_affinities()
    assert code == 1, stderr
    assert in_out == [[(0, False)], [(0, False), (0, True)]]      # written as each run finished
    v = json.loads(out.read_text())
    assert [(r["pair"], r["quiet"]) for r in v["runs"]] == [(0, False), (0, True)]
    assert v["before"]["runs"] == v["after"]["runs"] == 1 and v["ratio"]["gaps10_per_s"] is not None
    assert v["stopped"]["at"] == "run 3 of 4 (pair 2, quiet, CPU 1)"
    assert v["stopped"]["failed"] == "the jitter run failed: jitter CPU 1: the probe exited with status -9"
    line = ("coremap: verify stopped at run 3 of 4 (pair 2, quiet, CPU 1): the jitter run failed: jitter CPU 1: "
            f"the probe exited with status -9; the 2 finished runs are kept above and in {out}")
    assert stderr.splitlines() == [line] and "verify stopped" not in stdout       # said once, as the error
    assert "2 of its 4 runs finished" in stdout and "    pair 1, quiet, CPU 1" in stdout and "    pair 2," not in stdout
    assert re.search(r"^include CPU 1[: ]", stdout, re.M) and v["outcomes"]["stopped"] == line[len("coremap: "):line.index(" above")]
    clean, notes = clean_verification(v)               # a session and the report keep the runs and why
    assert notes == [] and clean["runs"] == v["runs"] and clean["outcomes"]["stopped"] == v["outcomes"]["stopped"]
    _assert_given_back(tmp_path, before, after)


@live
def test_tracefs_unmounted_under_attributed_run_2_leaves_run_1(tracefs, tmp_path):
    """--attribute traces each run in a tracefs instance; unmounting tracefs while run 2 traces makes that
    run's child fail to read its trace. The verification runs in a mount namespace of its own (unshare),
    where the test unmounts tracefs (nsenter): the machine's stays mounted for everyone else."""
    if not (shutil.which("unshare") and shutil.which("nsenter")):
        pytest.skip("unshare and nsenter (util-linux) are needed to unmount tracefs for the verification alone")
    from app.sysroot import SysRoot
    from probes.trace import INSTANCE_PREFIX, remove_stale
    out = tmp_path / "verify.json"
    instances = Path(tracefs) / "instances"
    in_out, traced = [], []

    def on_line(line: str, pid: int) -> None:
        if " done: " not in line:
            return
        in_out.append(_runs_in(out))
        child = _probe_child(pid)
        traced.append(instances / f"{INSTANCE_PREFIX}{child}")
        tracing_on = traced[-1] / "tracing_on"
        deadline = time.monotonic() + 60
        while not (tracing_on.exists() and tracing_on.read_text().strip() == "1"):   # run 2 is tracing
            assert time.monotonic() < deadline, f"run 2 (pid {child}) never started tracing"
            time.sleep(0.005)
        subprocess.run(["nsenter", "-t", str(pid), "-m", "umount", "-l", tracefs], check=True)

    before = read_affinities()
    try:
        # 0.5 s: run 2 measures that long after its tracing is on, ample for one nsenter to unmount meanwhile
        code, stdout, stderr = _run_verify(["--cpus", "1", "--seconds", "0.5", "--pairs", "1", "--attribute",
                                            "--out", str(out)], tmp_path, on_line,
                                           prefix=("unshare", "--mount", "--propagation", "private"))
    finally:
        # run 2's child could not remove its instance (its path was gone): it must not trace CPU 1 on
        remove_stale(SysRoot("/"))
    after = read_affinities()
    assert os.path.ismount(tracefs) and len(traced) == 1 and not traced[0].exists()
    assert code == 1, stderr
    assert in_out == [[(0, False)]]
    v = json.loads(out.read_text())
    assert [(r["pair"], r["quiet"]) for r in v["runs"]] == [(0, False)]
    assert v["before"]["attribution"]["available"] is True      # run 1 was traced and attributed
    assert v["after"]["runs"] == 0 and v["ratio"]["gaps10_per_s"] is None
    assert v["stopped"]["at"] == "run 2 of 2 (pair 1, quiet, CPU 1)"
    assert v["stopped"]["failed"].startswith("the jitter run failed: jitter: ") and tracefs in v["stopped"]["failed"]
    [line] = stderr.splitlines()
    assert line.startswith("coremap: verify stopped at run 2 of 2 (pair 1, quiet, CPU 1): the jitter run failed: ")
    assert line.endswith(f"; the 1 finished run is kept above and in {out}")
    assert "1 of its 2 runs finished" in stdout and "no after / before: no pair finished both its runs" in stdout
    _assert_given_back(tmp_path, before, after)


@live
def test_an_out_file_that_can_no_longer_be_written_stops_the_verification(tmp_path):
    folder = tmp_path / "gone"
    folder.mkdir()
    out = folder / "verify.json"

    def on_line(line: str, _pid: int) -> None:
        if line.startswith("run 1 of 2 ") and " done: " in line:
            out.unlink()            # the folder taken away after run 1 was written into it
            folder.rmdir()

    before = read_affinities()
    code, stdout, stderr = _run_verify(["--cpus", "1", "--seconds", "0.3", "--pairs", "1", "--out", str(out)],
                                       tmp_path, on_line)
    after = read_affinities()
    assert code == 1 and "run 2 of 2 (pair 1, quiet, CPU 1) done: " in stdout       # run 2 measured, then
    [line] = stderr.splitlines()                                                    # said once
    assert line == (f"coremap: verify stopped at run 2 of 2 (pair 1, quiet, CPU 1): --out: {out}: folder {folder} "
                    "does not exist; create it or choose another path; the 2 finished runs are kept above")
    assert "    pair 1, quiet, CPU 1" in stdout and not folder.exists()
    _assert_given_back(tmp_path, before, after)


def test_a_verification_stopped_before_any_run_says_so():
    plan = VerifyPlan((1, 2), 0.5, 1)
    assert plan.planned_runs == 4 and plan.where(0, True, (2,)) == "run 1 of 4 (pair 1, quiet, CPU 2)"
    sentence = plan.stop(plan.where(0, False), "making CPUs 1-2 not quiet (include) failed: no CPU left")
    assert sentence == ("verify stopped at run 1 of 4 (pair 1, not quiet, CPUs 1-2): making CPUs 1-2 not quiet "
                        "(include) failed: no CPU left; no run had finished")
    v = plan.result()
    assert v["runs"] == [] and v["stopped"]["finished_runs"] == 0 and v["outcomes"]["stopped"] == sentence
    text = verify_text(v)
    assert "0 of its 4 runs finished" in text and text.count("no run finished") == 2
    assert text.splitlines()[-1] == sentence
