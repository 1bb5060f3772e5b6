"""The pin journal: fsync'ed JSON lines that survive a crash, torn lines skipped, ids unique across
processes, and `unrestored()` naming what a restore must put back."""
import json

import pytest

from app.pinning.journal import Journal
from app.pinning.ledger import ledger_of, unrestored
from app.store.folders import journal_path, state_dir


def test_record_mark_and_reopen(tmp_path):
    p = tmp_path / "j.jsonl"
    j = Journal(p)
    a = j.record(kind="thread", target_id=100, pid=99, label="x", before=(0, 1), requested=(1,),
                 starttime=5)
    b = j.record(kind="irq", target_id=24, before=(0,), requested=(1,), batch=a)
    j.mark(a, "done", after=(1,), effective=(1,), code="ok")
    j.mark(b, "failed", code="offline", message="CPU 1 is offline")
    j.close()
    again = Journal(p)
    es = again.entries()
    assert [e.id for e in es] == [a, b]
    assert es[0].state == "done" and es[0].after == (1,) and es[0].starttime == 5 and es[0].pid == 99
    assert es[1].state == "failed" and es[1].code == "offline" and es[1].batch == a
    assert again.session_id != j.session_id
    assert es[0].session == j.session_id


def test_record_is_on_disk_before_mark(tmp_path):
    # What a crash between journal and write leaves: a pending line, already on disk.
    p = tmp_path / "j.jsonl"
    j = Journal(p)
    j.record(kind="thread", target_id=7, before=(0, 1), requested=(0,))
    lines = p.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ev"] == "record"
    assert Journal(p).entries()[0].state == "pending"


def test_torn_last_line_is_skipped_with_a_note_and_appends_continue(tmp_path):
    p = tmp_path / "j.jsonl"
    j = Journal(p)
    first = j.record(kind="irq", target_id=24, before=(0,), requested=(1,))
    j.mark(first, "done", after=(1,))
    j.close()
    with open(p, "ab") as f:
        f.write(b'{"ev":"record","id":3,"sess')      # kill -9 in the middle of a write
    j2 = Journal(p)
    assert [e.id for e in j2.entries()] == [first]
    # The torn line has no newline yet: it is not read as a line until something follows it.
    new = j2.record(kind="irq", target_id=25, before=(0,), requested=(1,))
    j3 = Journal(p)
    assert [e.id for e in j3.entries()] == [first, new]
    assert any("skipped" in n for n in j3.notes)


def test_garbage_lines_are_never_fatal(tmp_path):
    p = tmp_path / "j.jsonl"
    p.write_text('not json\n{"ev":"mark","id":42,"state":"done"}\n[1,2]\n{"ev":"weird"}\n')
    j = Journal(p)
    assert j.entries() == []
    assert len(j.notes) == 4


def test_two_processes_get_distinct_ids(tmp_path):
    p = tmp_path / "j.jsonl"
    a, b = Journal(p), Journal(p)
    ids = [a.record(kind="irq", target_id=1, requested=(0,)),
           b.record(kind="irq", target_id=2, requested=(0,)),
           a.record(kind="irq", target_id=3, requested=(0,))]
    assert ids == [1, 2, 3]
    assert [e.target_id for e in b.entries()] == [1, 2, 3]


def test_unrestored_follows_changes_back_to_the_original(tmp_path):
    j = Journal(tmp_path / "j.jsonl")

    def pin(tid, before, req, state="done", code="ok", st=1):
        i = j.record(kind="thread", target_id=tid, before=before, requested=req, starttime=st)
        j.mark(i, state, code=code)
        return i

    first = pin(10, (0, 1), (1,))
    pin(10, (1,), (0,))
    assert [e.id for e in unrestored(j.entries())] == [first]      # still away from 0-1
    pin(10, (0,), (0, 1))
    assert unrestored(j.entries()) == []                            # back to its original affinity
    pin(11, (0, 1), (1,), state="failed", code="denied")   # a failed write changed nothing
    assert unrestored(j.entries()) == []
    crashed = j.record(kind="thread", target_id=12, before=(0, 1), requested=(0,), starttime=1)
    assert [e.id for e in unrestored(j.entries())] == [crashed]    # pending: the write may have happened
    pin(12, (0, 1), (0, 1), code="gone")                   # found gone: nothing left to restore
    assert unrestored(j.entries()) == []
    a = pin(13, (0, 1), (1,), st=100)
    b = pin(13, (0, 1), (0,), st=200)                      # the tid was reused by a new thread
    assert [e.id for e in unrestored(j.entries())] == [b] and a != b


def test_a_give_back_ends_what_an_isolate_started_and_starts_nothing(tmp_path):
    """An include gives back what its isolate moved, and gives a process born while quiet the machine's
    own cpuset: that write is no change for a restore to undo (it would put the process back into a
    shield that is gone)."""
    j = Journal(tmp_path / "j.jsonl")

    def write(kind, target, before, req, origin):
        i = j.record(kind=kind, target_id=target, before=before, requested=req, starttime=1, origin=origin)
        j.mark(i, "done", code="ok")

    write("cgroup", 50, (0,), (1,), "isolate")         # / -> /coremap-system
    write("cgroup", 50, (1,), (0,), "include")         # and back
    write("cgroup", 60, (1,), (0,), "include")         # born inside the shield, given /
    write("thread", 61, (0,), (0, 1), "include")       # born with the housekeeping mask, given every CPU
    assert unrestored(j.entries()) == []
    write("thread", 70, (0, 1), (1,), "isolate")       # an isolate still in effect
    write("thread", 70, (1,), (0,), "include")         # a give-back that is not the original: still changed
    assert [(e.target_id, e.origin) for e in unrestored(j.entries())] == [(70, "isolate")]


def test_state_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "explicit"))
    assert state_dir() == tmp_path / "explicit" and (tmp_path / "explicit").is_dir()
    assert journal_path() == tmp_path / "explicit" / "journal.jsonl"
    monkeypatch.delenv("COREMAP_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir(create=False) == tmp_path / "xdg" / "coremap"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_dir(create=False) == tmp_path / "home" / ".local" / "state" / "coremap"


def test_mark_rejects_unknown_state(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    i = j.record(kind="irq", target_id=1, requested=(0,))
    with pytest.raises(ValueError):
        j.mark(i, "finished")


def test_pinned_irqs_are_the_pins_still_held(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    a = j.record(kind="irq", target_id=24, before=(0, 1), requested=(1,), root="/")
    j.mark(a, "done", after=(1,), effective=(1,))
    b = j.record(kind="irq", target_id=25, before=(0, 1), requested=(0,), root="/")
    j.mark(b, "failed", code="denied")
    c = j.record(kind="irq", target_id=26, before=(0, 1), requested=(0,), root="/other")
    j.mark(c, "done", after=(0,))
    assert ledger_of(j.entries(), [], "/").pinned_irqs() == {24: (1,)}           # a failed write holds nothing; other roots apart
    d = j.record(kind="irq", target_id=24, before=(1,), requested=(0,), root="/", origin="pin")
    j.mark(d, "done", after=(0,))
    assert ledger_of(j.entries(), [], "/").pinned_irqs() == {24: (0,)}           # the last pin counts
    e = j.record(kind="irq", target_id=24, before=(0,), requested=(0, 1), root="/", origin="restore")
    j.mark(e, "done", after=(0, 1))
    assert ledger_of(j.entries(), [], "/").pinned_irqs() == {}                   # restored: no pin holds it any more
    assert ledger_of(Journal(tmp_path / "j.jsonl", readonly=True).entries(), [], "/other").pinned_irqs() == {26: (0,)}


def test_a_line_too_long_is_found_without_splitting_every_line(tmp_path):
    from app.pinning.journal_lines import MAX_LINE, _has_long_line
    short = b"x" * 100 + b"\n"
    assert not _has_long_line(short * 30_000)                       # 3 MB of short lines
    assert not _has_long_line(short * 5 + b"y" * MAX_LINE + b"\n" + short * 5)
    assert _has_long_line(short * 5 + b"y" * (MAX_LINE + 1) + b"\n" + short * 5)
    assert _has_long_line(short * 20_000 + b"y" * (MAX_LINE + 5) + b"\n")
    # Through the journal: the long line is skipped with a note, its neighbours are read.
    good = json.dumps({"ev": "record", "id": 1, "session": "s", "batch": 1, "origin": "cli", "root": "/",
                       "kind": "irq", "target": 24, "pid": None, "label": "", "starttime": None,
                       "before": [0], "requested": [1], "time": 1.7e9})
    p = tmp_path / "j.jsonl"
    p.write_text(good + "\n" + '{"ev": "mark", "id": 1, "state": "done"' + " " * (MAX_LINE + 1) + "}\n")
    j = Journal(p)
    assert [e.state for e in j.entries()] == ["pending"] and "line 2 skipped" in j.notes[0]


def test_the_standard_library_reads_the_same_journal(tmp_path, monkeypatch):
    """The agent shipped to a server has no msgspec (app/remote/ship.py): the journal is then read line by
    line through the same checks, to the same entries and notes."""
    import app.pinning.journal_lines as journal_mod
    p = tmp_path / "j.jsonl"
    j = Journal(p)
    a = j.record(kind="irq", target_id=24, requested=(1,), before=(0, 1))
    j.mark(a, "done", (1,), (1,))
    j.record(kind="thread", target_id=7, requested=(0,), pid=7)
    with open(p, "a") as f:
        f.write('{"ev":"record","id":"x"}\n')
    fast = Journal(p, readonly=True)
    monkeypatch.setattr(journal_mod, "msgspec", None)
    slow = Journal(p, readonly=True)
    assert slow.entries() == fast.entries() and len(slow.notes) == len(fast.notes) == 1
