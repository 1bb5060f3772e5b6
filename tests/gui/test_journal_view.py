"""The Pins dock's JournalModel (widgets/pinning/journal_view.py): Qt's model tester on it, new writes
inserted at the top without touching the rows already shown, a mark refreshing its row in place, an
older row or a row gone resetting the model, and the Guard column following the policies."""
from __future__ import annotations

from app.pinning.journal import Journal
from widgets.pinning.journal_view import JournalModel


def _journal(tmp_path, n: int) -> Journal:
    j = Journal(tmp_path / "journal.jsonl")
    for i in range(n):
        e = j.record(kind="irq", target_id=20 + i, before=(0, 1), requested=(1,), label=f"dev{i}")
        j.mark(e, "done", after=(1,), effective=(1,))
    return j


def test_the_model_passes_qts_model_tester(qtmodeltester, tmp_path):
    j = _journal(tmp_path, 5)
    m = JournalModel()
    m.set_entries(j.entries())
    qtmodeltester.check(m)
    assert m.rowCount() == 5 and m.row_texts()[0][2] == "IRQ 24 (dev4)"        # newest first


def test_new_writes_go_on_top_and_a_mark_refreshes_its_row(qtbot, tmp_path):
    j = _journal(tmp_path, 3)
    m = JournalModel()
    m.set_entries(j.entries())
    inserted, resets, changed = [], [], []
    m.rowsInserted.connect(lambda _p, first, last: inserted.append((first, last)))
    m.modelReset.connect(lambda: resets.append(True))
    m.dataChanged.connect(lambda a, b: changed.append((a.row(), b.row())))
    assert m.set_entries(j.entries()) is False                   # nothing new: nothing done
    pending = j.record(kind="irq", target_id=40, before=(0, 1), requested=(0,))
    j.record(kind="irq", target_id=41, before=(0, 1), requested=(0,))
    assert m.set_entries(j.entries()) and inserted == [(0, 1)] and not resets
    assert [r[4] for r in m.row_texts()[:2]] == ["pending", "pending"]
    j.mark(pending, "failed", code="denied", message="needs the helper")
    assert m.set_entries(j.entries()) and changed and not resets
    assert m.row_texts()[1][4] == "failed denied: needs the helper"
    assert m.rowCount() == 5
    # A target that exited is nothing to change: "gone", not painted as a failure.
    gone = j.record(kind="thread", target_id=42, before=(0, 1), requested=(0,))
    j.mark(gone, "failed", code="gone", message="thread 42 has exited; refresh the list")
    m.set_entries(j.entries())
    from PySide6.QtCore import Qt
    assert m.row_texts()[0][4] == "gone: thread 42 has exited; refresh the list"
    assert m.data(m.index(0, 4), Qt.ItemDataRole.ForegroundRole) is None
    assert m.data(m.index(2, 4), Qt.ItemDataRole.ForegroundRole) is not None     # the denied one


def test_a_row_gone_resets_and_the_guard_column_follows_the_policies(qtbot, tmp_path):
    j = _journal(tmp_path, 3)
    m = JournalModel()
    m.set_entries(j.entries())
    resets = []
    m.modelReset.connect(lambda: resets.append(True))
    entries = j.entries()
    batch = entries[0].batch
    assert m.set_entries(entries, policies={batch: True}, in_effect=[batch])
    assert m.row_texts()[-1][6] == f"#{batch}: re-apply" and m.row_texts()[0][6] == ""
    assert m.set_entries(entries[1:]) and resets                 # another journal: shown afresh
    assert m.rowCount() == 2
