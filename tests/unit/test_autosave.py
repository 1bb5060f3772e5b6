"""app/store/autosave.py with real processes: a running window's lock is held and its autosave never
offered; a window killed with SIGKILL leaves an autosave that the next window claims and offers once;
clean exits leave nothing (issue 23: the unclean-exit banner showed while another window ran, and
again after two clean exits that followed a kill -9)."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from app.store.autosave import KEEP_RECOVERED, AutosaveSlot, claim_crashed
from app.store.session import Session, open_session

# A window's life in a child process: take a slot, autosave once, say so, then wait for a signal;
# SIGTERM ends it cleanly (the window's close), SIGKILL is a crash.
WINDOW = textwrap.dedent("""
    import signal, sys
    from app.store.autosave import AutosaveSlot
    from app.store.session import Session
    slot = AutosaveSlot()
    slot.write(Session(notes=sys.argv[1]))
    def clean(*_):
        slot.release()
        sys.exit(0)
    signal.signal(signal.SIGTERM, clean)
    print(slot.id, flush=True)
    signal.pause()
""")


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


class Window:
    def __init__(self, notes: str):
        self.proc = subprocess.Popen([sys.executable, "-c", WINDOW, notes], stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ))
        self.id = self.proc.stdout.readline().strip()
        assert self.id, "the child window did not start"

    def end(self, sig: int) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(30)
        self.proc.stdout.close()


def _notes(path) -> str:
    s = open_session(path)
    try:
        return s.notes
    finally:
        s.close()


def test_a_clean_exit_leaves_nothing(state):
    slot = AutosaveSlot()
    assert slot.write(Session(notes="mine")) == slot.path == state / "instances" / f"{slot.id}.coremap"
    assert slot.lock_path.is_file() and slot.held
    assert claim_crashed() == []                    # our own lock is held: not a crashed window
    slot.release()
    assert not slot.held and list((state / "instances").iterdir()) == []
    assert claim_crashed() == []


def test_a_running_window_is_never_taken_for_a_crashed_one(state):
    w = Window("still running")
    try:
        assert claim_crashed() == []
        assert (state / "instances" / f"{w.id}.coremap").is_file()      # left alone
    finally:
        w.end(signal.SIGTERM)
    assert claim_crashed() == [] and list((state / "instances").iterdir()) == []


def test_kill_9_is_offered_once_then_clean_exits_offer_nothing(state):
    running = Window("the other window")
    crashed = Window("unsaved work")
    crashed.end(signal.SIGKILL)
    found = claim_crashed()
    assert [p.name for p in found] == [f"{crashed.id}.coremap"] and found[0].parent == state / "recovered"
    assert _notes(found[0]) == "unsaved work"
    assert not (state / "instances" / f"{crashed.id}.lock").exists()
    # Two windows that end cleanly after the one that offered it: nothing more is offered.
    for _ in range(2):
        w = Window("later")
        w.end(signal.SIGTERM)
        assert claim_crashed() == []
    # The window that kept running all along is still not taken for a crashed one.
    assert (state / "instances" / f"{running.id}.coremap").is_file()
    running.end(signal.SIGTERM)
    assert claim_crashed() == []


def test_a_crash_before_the_first_autosave_offers_nothing(state):
    slot = AutosaveSlot()
    slot.acquire()
    os.close(slot._fd)               # what the kernel does to a killed window's lock
    assert claim_crashed() == [] and not slot.lock_path.exists()


def test_two_windows_starting_at_once_claim_a_crash_once(state):
    crashed = Window("once")
    crashed.end(signal.SIGKILL)
    lock = state / "instances" / f"{crashed.id}.lock"
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)   # another window is claiming it right now
    try:
        assert claim_crashed() == []
    finally:
        os.close(fd)
    assert len(claim_crashed()) == 1 and claim_crashed() == []


def test_an_older_coremap_autosave_is_offered_once_unless_it_ended_cleanly(state):
    state.mkdir(parents=True)
    from app.store.session import save_session
    save_session(state / "autosave.coremap", Session(notes="from before"))
    (found,) = claim_crashed()
    assert _notes(found) == "from before" and not (state / "autosave.coremap").exists()
    save_session(state / "autosave.coremap", Session(notes="clean"))
    (state / "autosave.clean-exit").write_text("2026-01-01\n")
    assert claim_crashed() == [] and not (state / "autosave.coremap").exists()
    assert not (state / "autosave.clean-exit").exists()


def test_only_the_newest_recovered_autosaves_are_kept(state):
    for i in range(KEEP_RECOVERED + 2):
        w = Window(f"crash {i}")
        w.end(signal.SIGKILL)
        claim_crashed()
    assert len(list((state / "recovered").glob("*.coremap"))) == KEEP_RECOVERED
