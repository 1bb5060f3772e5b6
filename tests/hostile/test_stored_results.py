"""`report --session` and `report --probe` survive files that pass the session checks but hold wrong
types inside (issue 10): the malformed parts are left out with a note, the report is written."""
from __future__ import annotations

import io
import json
import zipfile
from functools import partial

import pytest

from app.store.results import clean_history
from app.store.session import open_session, save_session, session_from_root
from app.sysroot import SysRoot
from probes.results import check_result
from tests.hostile.conftest import run_cli, run_main
from tests.machines import extract


def _rewrite(src, dst, member: str, text: str):
    """A copy of a session file with one member replaced (the checks on the zip itself still pass)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for zi in zin.infolist():
            data = text.encode() if zi.filename == member else zin.read(zi)
            zout.writestr(zi, data)


@pytest.fixture(scope="module")
def session_file(tmp_path_factory):
    # Once for the module: each test reads it and writes its own spoiled copy (_rewrite).
    p = tmp_path_factory.mktemp("session") / "sno.coremap"
    save_session(p, session_from_root(SysRoot(extract("sno")), history=[{"t": 0.0, "irq": {"24": {"3": 800.0}}}]))
    return p


WRONG_TYPES = [
    ("history.jsonl", '{"t":0,"irq":[1,2]}\n{"t":1,"irq":{"24":{"x":5}}}\n{"t":2,"cpu":{"0":{"busy":1e400}}}\n',
     "3 malformed ticks"),
    ("history.jsonl", '{"t":"soon"}\n', "1 malformed tick"),
    ("journal.jsonl", '{"id":1e400,"kind":"irq"}\n', "1 malformed entry"),
]


@pytest.mark.parametrize("member, text, note", WRONG_TYPES)
def test_a_session_with_wrong_types_inside_still_reports(capsys, session_file, tmp_path, member, text, note):
    bad = tmp_path / "bad.coremap"
    _rewrite(session_file, bad, member, text)
    s = open_session(bad)
    try:
        assert any(note in p for p in s.problems)
    finally:
        s.close()
    out = tmp_path / "r.html"
    # The first case as a child; the others in this process (run_main): one door, other notes.
    first = (member, text, note) == WRONG_TYPES[0]
    r = (run_cli if first else partial(run_main, capsys))("report", "--session", bad, "--out", out, timeout=120)
    assert r.returncode == 0, r.stderr
    assert note in r.stderr and out.stat().st_size > 0


def test_probe_results_with_wrong_types(capsys, tmp_path):
    res = {"probe": "jitter", "cpu": 1, "percentiles": 5, "sampled_seconds": float("nan"),
           "buckets": [{"lo_ns": 1, "hi_ns": 2, "count": -4}], "attribution": {"available": True, "gaps": 3},
           "loop_ns": 8.7, "label": "ok\x1b[2J"}
    clean, notes = check_result(res)
    assert clean["loop_ns"] == 8.7 and clean["cpu"] == 1 and "\x1b" not in clean["label"]
    for key in ("percentiles", "sampled_seconds", "buckets", "attribution"):
        assert key not in clean and any(repr(key) in n for n in notes)
    p = tmp_path / "res.json"
    p.write_text(json.dumps(res).replace("NaN", "1e400"))
    out = tmp_path / "r.html"
    # In this process (run_main): `report --probe` runs as a child in the bucket test below.
    r = run_main(capsys, "report", "--root", extract("sno"), "--probe", p, "--out", out, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "'percentiles' has the wrong type" in r.stderr


def test_notes_that_are_not_utf8(capsys, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_bytes(b"caf\xe9 \xff\xfe notes")
    out = tmp_path / "r.html"
    # In this process (run_main): `report` runs as a child in the session and bucket tests.
    r = run_main(capsys, "report", "--root", extract("sno"), "--notes", notes, "--out", out, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "notes" in out.read_text()


def test_history_cleaner_keeps_good_ticks():
    good = {"t": 1.0, "irq": {"24": {"3": 812.0}}, "cpu": {"0": {"busy": 0.25}}}
    ticks, notes = clean_history([good, {"t": 2, "irq": "x"}, 7])
    assert ticks == [good] and notes == ["history: 2 malformed ticks left out"]
    assert clean_history({"t": 1}) == ([], ["history: not a list of ticks; left out"])


BUCKET_FORMS = [[[1000, 3], [2000, 1]], [[1000, 1999, 3]], [{"lo_ns": 5, "hi_ns": 9, "count": 2}]]


@pytest.mark.parametrize("buckets", BUCKET_FORMS, ids=["edge-count", "lo-hi-count", "dicts"])
def test_every_bucket_form_the_door_takes_reaches_the_report(capsys, tmp_path, buckets):
    """Buckets stored as [edge, count] pairs passed app/store/results.py and failed in probes/histogram.py
    with an IndexError in `report` (issue 24): the one bucket reader reads every form the door takes."""
    from probes.histogram import bucket_rows
    res = {"probe": "jitter", "cpu": 1, "buckets": buckets, "sampled_seconds": 1.0}
    clean, _notes = check_result(res)
    assert clean["buckets"] == buckets and all(len(row) == 3 for row in bucket_rows(clean["buckets"]))
    p = tmp_path / "res.json"
    p.write_text(json.dumps(res))
    out = tmp_path / "r.html"
    # The first form as a child; the others in this process (run_main).
    run = run_cli if buckets == BUCKET_FORMS[0] else partial(run_main, capsys)
    r = run("report", "--root", extract("sno"), "--probe", p, "--out", out, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_overlapping_buckets_are_left_out_and_the_window_shows_the_rest(qtbot):
    """A stored jitter run with one bucket reaching into the next passed the door and stopped the
    window's histogram with a ValueError: its buckets are left out with a note."""
    from widgets.probe.panel import ProbePanel
    res = {"probe": "jitter", "cpu": 1, "sampled_seconds": 1.0,
           "buckets": [{"lo_ns": 1000, "hi_ns": 1152, "count": 5}, {"lo_ns": 1050, "hi_ns": 5000, "count": 2}]}
    clean, notes = check_result(res)
    assert "buckets" not in clean and any("'buckets'" in n for n in notes)
    fine = dict(res, buckets=[{"lo_ns": 1000, "hi_ns": 1152, "count": 5}, {"lo_ns": 1152, "hi_ns": 5000, "count": 2}])
    assert check_result(fine)[0]["buckets"] == fine["buckets"]
    panel = ProbePanel()
    qtbot.addWidget(panel)
    assert panel.add_result(clean, "stored") is None            # nothing to draw, and no error
    assert panel.add_result(check_result(fine)[0], "stored") is not None
