"""The journal survives any line: a line with out-of-range or wrong-typed fields is skipped with a note,
like a torn one, and every valid entry is still restored; a read-only journal can still be read."""
from __future__ import annotations

import json
import os
import stat

import pytest

from app.cli.main import main
from app.pinning.journal import Journal

GOOD = {"ev": "record", "id": 1, "session": "s", "batch": 1, "origin": "cli", "root": "/tmp/x",
        "kind": "irq", "target": 24, "pid": None, "label": "", "starttime": None, "before": [0, 1],
        "requested": [1], "time": 1.7e9}
BAD_FIELDS = [("id", 1e400), ("id", True), ("id", -3), ("id", "7"), ("time", 1e308), ("time", float("nan")),
              ("origin", "undo:abc"), ("origin", "x" * 100), ("kind", "bogus"), ("target", 2 ** 40),
              ("before", [0, -1]), ("requested", [70000]), ("requested", "0-1"), ("label", ["a"]),
              ("pid", 0), ("starttime", -1)]


def _write(path, lines):
    path.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))


@pytest.mark.parametrize("field, value", BAD_FIELDS, ids=[f"{f}={str(v)[:12]}" for f, v in BAD_FIELDS])
def test_a_bad_field_skips_its_line_only(tmp_path, field, value):
    bad = dict(GOOD, id=2, batch=2, **{field: value}) if field not in ("id",) else dict(GOOD, batch=2, id=value)
    later = dict(GOOD, id=3, batch=3, target=25)
    p = tmp_path / "journal.jsonl"
    text = json.dumps(bad).replace("Infinity", "1e400") if field == "id" else json.dumps(bad)
    _write(p, [GOOD, text, later, {"ev": "mark", "id": 3, "state": "done", "after": [1]}])
    j = Journal(p)
    ids = [e.id for e in j.entries()]
    assert ids == [1, 3]
    assert len(j.notes) == 1 and "line 2 skipped" in j.notes[0]
    assert j.entries()[-1].state == "done"
    # and a new pin still gets an id above every valid one
    assert j.record(kind="irq", target_id=26, requested=(0,)) == 4


@pytest.mark.parametrize("line", ['{"ev":"mark","id":1,"state":"bogus"}', '{"ev":"mark","id":1e400,"state":"done"}',
                                  '[' * 5000, '{"ev":"record"', '"just a string"', '{"ev": 5}'])
def test_bad_marks_and_garbage_are_skipped(tmp_path, line):
    p = tmp_path / "journal.jsonl"
    _write(p, [GOOD, line])
    j = Journal(p)
    assert [(e.id, e.state) for e in j.entries()] == [(1, "pending")]
    assert len(j.notes) == 1


def test_cli_commands_keep_working_past_bad_lines(tmp_path, monkeypatch, capsys):
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("COREMAP_STATE_DIR", str(state))
    bad = dict(GOOD, id=2, batch=2, origin="undo:abc")
    _write(state / "journal.jsonl", [GOOD, bad])
    assert main(["journal"]) == 0
    out, err = capsys.readouterr()
    assert "#1 " in out and "line 2 skipped" in err
    assert main(["journal", "--json"]) == 0
    assert [e["id"] for e in json.loads(capsys.readouterr().out)["entries"]] == [1]
    assert main(["undo"]) in (0, 1, 2)          # no traceback, whatever the capture-less entry does


def test_read_only_journal_can_be_listed(tmp_path, monkeypatch, capsys):
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("COREMAP_STATE_DIR", str(state))
    p = state / "journal.jsonl"
    _write(p, [GOOD])
    p.chmod(0o444)
    state.chmod(0o555)
    try:
        if os.geteuid() == 0:
            # Root ignores mode bits: open read-only the way a user would have to.
            j = Journal(p, readonly=True)
            assert [e.id for e in j.entries()] == [1]
        assert main(["journal"]) == 0
        assert "#1 " in capsys.readouterr().out
    finally:
        state.chmod(0o755)
        p.chmod(0o644)


def test_missing_journal_lists_as_empty(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "nowhere"))
    assert main(["journal"]) == 0
    assert "empty" in capsys.readouterr().out
    assert not (tmp_path / "nowhere").exists()        # reading created nothing


def test_a_journal_that_is_not_a_file_is_refused(tmp_path):
    os.mkfifo(tmp_path / "journal.jsonl")
    with pytest.raises(Exception, match="not a regular file"):
        Journal(tmp_path / "journal.jsonl")
    assert stat.S_ISFIFO(os.stat(tmp_path / "journal.jsonl").st_mode)


# -- issue 13's lines: masks, isolates, follow rules, policies, guard reports ------------------------------
QUIET = {"ev": "quiet", "id": 2, "session": "s", "root": "/tmp/x", "action": "isolate", "cpus": [1], "time": 1.7e9}
RPS = dict(GOOD, id=3, batch=2, kind="rps", target=0, netdev="eth0", origin="isolate")
FOLLOW = {"ev": "follow", "batch": 1, "root": "/tmp/x", "pid": 77, "starttime": 5, "cpus": [1], "name": "", "time": 1.7e9}
POLICY = {"ev": "policy", "batch": 1, "reapply": True, "time": 1.7e9}
GUARD = {"ev": "guard", "time": 1.7e9, "root": "/tmp/x", "batch": 1, "kind": "irq", "target": 24, "netdev": None,
         "pid": None, "label": "", "expected": [1], "found": [0, 1], "who": "irqbalance (pid 9)",
         "action": "reported", "count": 0, "message": ""}
BAD_NEW = [("quiet", dict(QUIET, action="quieten")), ("quiet", dict(QUIET, cpus=[])), ("quiet", dict(QUIET, id=1)),
           ("quiet", dict(QUIET, cpus=[1, -1])), ("rps", dict(RPS, netdev="../../etc")), ("rps", dict(RPS, netdev=None)),
           ("rps", dict(RPS, netdev="a b")), ("rps", dict(RPS, netdev="x" * 16)), ("rps", dict(GOOD, id=3, netdev="eth0")),
           ("follow", dict(FOLLOW, pid=0)), ("follow", dict(FOLLOW, name=["x"])), ("follow", dict(FOLLOW, cpus=[])),
           ("policy", dict(POLICY, reapply="yes")), ("policy", dict(POLICY, batch=-1)),
           ("guard", dict(GUARD, kind="file")), ("guard", dict(GUARD, action="ignored")),
           ("guard", dict(GUARD, kind="xps", netdev="..")), ("guard", dict(GUARD, found="0-1")),
           ("guard", dict(GUARD, who="w" * 300)), ("guard", dict(GUARD, count=True))]


@pytest.mark.parametrize("kind, line", BAD_NEW, ids=[f"{k}{i}" for i, (k, _) in enumerate(BAD_NEW)])
def test_a_bad_new_line_is_skipped_and_the_rest_stands(tmp_path, kind, line):
    p = tmp_path / "journal.jsonl"
    good = [GOOD, QUIET, RPS, FOLLOW, POLICY, GUARD]
    _write(p, good[:1] + [line] + good[1:] if line.get("id") != 2 or kind != "quiet" else good + [line])
    j = Journal(p)
    assert len(j.notes) == 1 and "skipped" in j.notes[0]
    assert [e.id for e in j.entries()] == [1, 3] and j.entries()[1].netdev == "eth0"
    assert [q.id for q in j.quiet_events()] == [2]
    assert len(j.follow_rules()) == 1 and j.policies() == {1: True} and len(j.guard_events()) == 1
    assert j.record(kind="irq", target_id=26, requested=(0,)) == 4        # ids continue past the quiet line
    j.close()


def test_record_refuses_a_device_name_for_the_wrong_kind(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    for kind, netdev in (("irq", "eth0"), ("rps", None), ("xps", "a/b"), ("bogus", None)):
        with pytest.raises(ValueError):
            j.record(kind=kind, target_id=0, requested=(0,), netdev=netdev)
    assert j.entries() == []
    j.close()
