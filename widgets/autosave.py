"""Autosave and crash recovery: the Autosaver writes the shown live machine's session every two
minutes in a thread, into this window's own autosave slot (app/store/autosave.py: a file and a lock
held while the window lives), and CrashRecoveryBar offers the autosave of a window that died without
closing cleanly: never a running window's, and each crash once (claim_crashed).

The Autosaver asks the session controller (widgets/session_controller.py) for what it writes through
the narrow AutosaveSource protocol, never through its fields.

SaveOnQuit keeps probe runs through a quit (issue 28: Ctrl+Q closed at once with 4 unsaved runs). A
window closing with runs measured here that no session or report holds yet saves them as a session
in the reports folder, as File → Save Session does, and says where: on the status line and on stderr,
which outlive the window for whoever started it from a terminal. It never asks: editors that keep
unsaved work through a quit (VS Code's and Sublime Text's "hot exit") taught users that quitting loses
nothing, and coremap's rule is no modal dialog. Only when that save fails is the first quit refused,
with the reason and what to do; a second quit goes.
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from app.errors import CoremapError
from app.format import plural
from app.store.autosave import AutosaveSlot, claim_crashed
from app.store.session import Session
from widgets.notice_bar import NoticeBar

AUTOSAVE_SECONDS = 120.0


class AutosaveSource(Protocol):
    """What the Autosaver needs of the session controller."""

    @property
    def epoch(self) -> int:
        """A number raised whenever another machine is shown."""

    def snapshot_to_take(self) -> Callable[[], Session] | None:
        """What takes the snapshot a session of the shown machine still needs (slow: run it off the UI
        thread), or None when it needs none. Raises CoremapError when no machine is shown."""

    def keep_snapshot(self, epoch: int, snapshot: Session) -> bool:
        """Keep a snapshot taken while machine `epoch` was shown; False when it is of no use now."""

    def session(self) -> Session:
        """The session as shown now (on the UI thread: it reads the widgets). Raises CoremapError."""


def _write_autosave(slot: AutosaveSlot, session: Session) -> None:
    """In the autosave thread: write the session. A full disk or a vanished state folder must not stop
    sampling; the next autosave tries again and the status line of a manual save will say why."""
    try:
        slot.write(session)
    except CoremapError:
        pass


class Autosaver(QObject):
    """Every `seconds` once started, the session of `source` written to the autosave file in a thread;
    the first autosave of a live machine first takes its snapshot, in that thread too. `close()` on a
    normal exit finishes the work and removes this window's autosave and lock (`slot`). Errors go to
    `status`, one line."""

    _snapshot_taken = Signal()           # the autosave thread's snapshot of the live machine is ready

    def __init__(self, source: AutosaveSource, *, status: Callable[[str], None],
                 seconds: float = AUTOSAVE_SECONDS, parent: QObject | None = None):
        super().__init__(parent)
        self._source = source
        self._status = status
        self._thread: threading.Thread | None = None
        self._taken: tuple | None = None  # (epoch, Session or CoremapError) from the autosave thread
        self.slot = AutosaveSlot()
        self.timer = QTimer(self)
        self.timer.setInterval(int(seconds * 1000))
        self.timer.timeout.connect(self.autosave_now)
        self._snapshot_taken.connect(self._on_snapshot_taken)

    def start(self) -> None:
        """Autosave from now on (again, when stopped); nothing when already running."""
        if not self.timer.isActive():
            self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def wait(self, seconds: float) -> None:
        """Wait up to `seconds` for the autosave thread's current work."""
        if self._thread is not None:
            self._thread.join(seconds)

    def autosave_now(self) -> None:
        """Write the session now, in the autosave thread (or first take the snapshot it needs)."""
        if self._thread is not None and self._thread.is_alive():
            return              # the previous autosave (or its snapshot) is still being written
        try:
            take = self._source.snapshot_to_take()
        except CoremapError as e:
            self._status(f"autosave: {e}")
            return
        if take is not None:
            # The first autosave of a live machine needs its snapshot: taken in a thread, not on the
            # UI thread, which it would stop for 0.6 s here (seconds over ssh). The autosave follows
            # when it is ready (_on_snapshot_taken).
            self._start_thread(self._take_snapshot, take, self._source.epoch)
            return
        try:
            session = self._source.session()      # built on the UI thread: it reads the widgets
        except CoremapError as e:
            self._status(f"autosave: {e}")
            return
        try:
            self.slot.acquire()              # here, not in the thread: a refusal goes on the status line
        except CoremapError as e:
            self._status(f"autosave: {e}")
            return
        self._start_thread(_write_autosave, self.slot, session)

    def _start_thread(self, target, *args) -> None:
        self._thread = threading.Thread(target=target, args=args, name="coremap-autosave", daemon=True)
        self._thread.start()

    def _take_snapshot(self, take: Callable[[], Session], epoch: int) -> None:
        """In the autosave thread: take the shown machine's snapshot, hand it to the UI thread."""
        try:
            taken = take()
        except CoremapError as e:
            taken = e
        self._taken = (epoch, taken)
        self._snapshot_taken.emit()         # queued: this object lives in the UI thread

    def _on_snapshot_taken(self) -> None:
        if self._taken is None:
            return
        (epoch, taken), self._taken = self._taken, None
        if isinstance(taken, CoremapError):
            self._status(f"autosave: {taken}")
            return
        if not self._source.keep_snapshot(epoch, taken):
            taken.close()                   # another machine is shown now, or a save took one meanwhile
            return
        # The snapshot thread's emit was its last act, but it may not have returned yet: autosave_now
        # would take it for an autosave still running and skip this one (the session was then written
        # only a timer period later; a busy machine made tests/gui/test_session_controller.py fail).
        self.wait(5)
        self.autosave_now()

    def close(self) -> None:
        """The window closes normally: finish a running autosave, remove this window's autosave."""
        self.timer.stop()
        self.wait(10)
        if self._taken is not None and isinstance(self._taken[1], Session):
            self._taken[1].close()          # a snapshot taken for an autosave that will not come
            self._taken = None
        try:
            self.slot.release()
        except OSError as e:
            self._status(f"could not remove this window's autosave: {e}")


class SaveOnQuit:
    """Keeps a window's unsaved probe runs through its quit (module docstring). Parameters: `runs()`,
    the probe panel's RunRecords (widgets/probe/runs.py); `save()`, which saves the session to the
    reports folder and returns its path (SessionController.save_session_to_reports); `status`, the
    status line. Call `saved()` whenever a session or report took every run shown (the session
    controller's `saved` signal with a session's or report's path), and `on_quit(may_refuse)` as the
    window closes: whether it may close."""

    SAVED_BY = (".coremap", ".html", ".pdf")     # what holds the runs: a session, a report

    def __init__(self, runs: Callable[[], list], save: Callable[[], Path], *, status: Callable[[str], None]):
        self._runs = runs
        self._save = save
        self._status = status
        self._kept: set[int] = set()        # keys of the runs a session or report holds
        self._refused = False

    def unsaved(self) -> list:
        """The finished runs made in this window (a probe run, Verify's two sides) that no session or
        report saved since: what a quit would lose. A run opened from a file or a session is named by
        its path, and is in that file."""
        return [r for r in self._runs() if r.finished and r.summary and r.key not in self._kept
                and (r.measured_here or not Path(r.source).exists())]

    def saved(self, path: str = "") -> None:
        """A session or report (by `path`'s suffix; none: any) now holds every run shown."""
        if not path or Path(path).suffix.lower() in self.SAVED_BY:
            self._kept |= {r.key for r in self._runs() if r.finished}

    def on_quit(self, may_refuse: bool = True) -> bool:
        """Save the unsaved runs, saying where; False (the window stays) when that failed and this is
        the first quit that may be refused."""
        n = len(self.unsaved())
        if not n:
            return True
        runs = plural(n, "unsaved probe run")
        try:
            path = self._save()
        except CoremapError as e:
            if may_refuse and not self._refused:
                self._refused = True
                self._say(f"{runs} could not be saved on quit ({e}); save them with File → Save Session "
                          "As…, or quit again to leave them")
                return False
            self._say(f"{runs} could not be saved on quit and are lost: {e}")
            return True
        self.saved()
        self._say(f"{runs} saved to {path} (File → Open Session… shows {'them' if n > 1 else 'it'} again)")
        return True

    def _say(self, line: str) -> None:
        self._status(line)
        print(f"coremap: {line}", file=sys.stderr, flush=True)


class CrashRecoveryBar(NoticeBar):
    """A notice at the top: a coremap window did not close cleanly; reopen its autosave?"""
    open_requested = Signal(str)

    def __init__(self, path: Path, more: int = 0, parent=None):
        super().__init__("crash-recovery-bar", parent, hidden=False)
        self.path = path
        also = f" ({plural(more, 'other')} beside it)" if more else ""
        self.label.setText(f"a coremap window did not close cleanly; its autosaved session is {path}{also}")
        self.open_button = self.add_button("Reopen it", self._on_open_clicked)
        self.dismiss_button = self.add_button("Dismiss", self.hide)

    def _on_open_clicked(self) -> None:
        self.hide()
        self.open_requested.emit(str(self.path))


def crash_recovery_bar() -> CrashRecoveryBar | None:
    """The bar offering the newest autosave of a window that died without closing cleanly (claimed
    now, so it is offered this once), else None."""
    try:
        found = claim_crashed()
    except CoremapError:
        return None         # no state folder to look in: nothing was autosaved there either
    return CrashRecoveryBar(found[0], len(found) - 1) if found else None
