"""SessionController: the File menu — sessions, screenshots, reports — autosave and crash recovery.

What the window shows is kept as it goes (the rates of each tick, the probe runs, the pin journal,
the screenshots taken), so File → Save Session writes it all into one `.coremap` file
(app/store/session.py) that reopens on any workstation. Screenshots and reports go straight into the
user's reports folder (app/statedir.reports_dir) under a name carrying host, date and time; the
status line says where. Nothing here shows a modal dialog except the file choosers of Open Session…
and Save Session As….
"""
from __future__ import annotations

import collections
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QFrame, QHBoxLayout, QLabel, QMenu, QPushButton, QWidget

from app.atomic import write_atomic
from app.errors import CoremapError
from app.store.report import PDF_IMAGE_WIDTH, build_report_html, report_from_root
from app.sampling.sampler import Sampler
from app.store.session import (ProbeRecord, Session, autosave, history_tick, journal_rows, last_session_after_crash,
                         mark_clean_exit, open_session, save_session, session_from_root)
from app.sampling.machine_state import MachineState
from app.store.folders import reports_dir
from app.sysroot import SysRoot
from widgets.export import default_file_name, render_pdf, save_screenshot, screenshot_target
from widgets.report_images import add_images
from widgets.sampler_thread import SamplerThread

HISTORY_TICKS = 3600          # an hour at 1 s: what a session keeps of the sampled history
HISTORY_TOP_IRQS = 64         # per tick, the busiest IRQs' per-CPU rates (the rest sum into the CPUs)
AUTOSAVE_SECONDS = 120.0


def _write_autosave(session: Session) -> None:
    """In the autosave thread: write the session. A full disk or a vanished state folder must not stop
    sampling; the next autosave tries again and the status line of a manual save will say why."""
    try:
        autosave(session)
    except CoremapError:
        pass


def _unique(path: Path) -> Path:
    """`path`, or `path` with -2, -3... before the suffix when it exists (names are to the minute)."""
    if not path.exists():
        return path
    for n in range(2, 1000):
        cand = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not cand.exists():
            return cand
    raise CoremapError(f"{path.parent}: too many screenshots named {path.stem}; clear some out")


def state_history_tick(t: float, state: MachineState) -> dict | None:
    """One history.jsonl line for a MachineState with rates (None without rates)."""
    r = state.rates
    if r is None:
        return None
    cpu = {c: {"busy": cr.busy_pct or 0.0, "irq": cr.irq_per_s or 0.0,
               "softirq": cr.softirq_total_per_s or 0.0, "irqtime": cr.irq_softirq_pct or 0.0}
           for c, cr in r.per_cpu.items()}
    busiest = sorted(r.irqs.values(), key=lambda x: x.total, reverse=True)[:HISTORY_TOP_IRQS]
    irq = {x.irq: dict(zip(r.cpus, x.per_cpu)) for x in busiest if x.total > 0}
    return history_tick(t, cpu, irq)


class CrashRecoveryBar(QFrame):
    """A non-modal bar at the top: the last run did not exit cleanly; reopen its autosave?"""
    open_requested = Signal(str)

    def __init__(self, path: Path, parent=None):
        super().__init__(parent)
        self.path = path
        self.setObjectName("crash-recovery-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#crash-recovery-bar { background: #fff4d6; }")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 2, 8, 2)
        self.label = QLabel(f"coremap did not close cleanly last time; its autosaved session is {path}", self)
        lay.addWidget(self.label, 1)
        self.open_button = QPushButton("Reopen it", self)
        self.dismiss_button = QPushButton("Dismiss", self)
        lay.addWidget(self.open_button)
        lay.addWidget(self.dismiss_button)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.dismiss_button.clicked.connect(self.hide)

    def _on_open_clicked(self) -> None:
        self.hide()
        self.open_requested.emit(str(self.path))


class ProbeRuns(Protocol):
    """What a session needs of the probe panel: its runs, and a finished run written as .hlog."""

    @property
    def runs(self) -> list: ...

    def save_run(self, key: int, path) -> None: ...


class SessionController(QObject):
    """The File menu and what a session holds.

    Parameters (the narrow parts of the window it works with, given by widgets/application.py):
    - `menu`: the File menu to fill;
    - `window`: the widget a window screenshot pictures, the file dialogs' parent, and this
      controller's parent; its grid and plots are found as its children (widgets/export.py);
    - `root`: the machine shown at the start (None: none yet);
    - `status`: the status sink, one line for the user;
    - `probe_runs`: the probe panel's runs, saved with the session;
    - `journal_entries`: the live pin journal's entries, or None when pins go through no journal;
    - `verifications`: the before / after verifications of quiet CPUs made (or opened) so far.

    Signals: `machine_opened(SamplerThread)` when an opened session's machine is to be shown (not yet
    started), then `session_opened(Session)` for its probe runs and pins; `saved(path)`.
    Feed it every applied MachineState with `set_state`.
    """
    saved = Signal(str)                  # path of a session, screenshot or report just written
    machine_opened = Signal(object)      # a SamplerThread on an opened session's machine: show it
    session_opened = Signal(object)      # the Session just opened (read-only): its probe runs and pins
    _snapshot_taken = Signal()           # the autosave thread's snapshot of the live machine is ready

    def __init__(self, menu: QMenu, window: QWidget, root: SysRoot | None, *, status: Callable[[str], None],
                 probe_runs: ProbeRuns, journal_entries: Callable[[], list | None],
                 verifications: Callable[[], list[dict]] = list,
                 autosave_seconds: float = AUTOSAVE_SECONDS, crash_recovery: bool = True):
        super().__init__(window)
        self.menu = menu
        self._window = window
        self._machine_root = root
        self._status = status
        self._probe_runs = probe_runs
        self._journal_entries = journal_entries
        self._verifications = verifications
        self._state: MachineState | None = None
        self.history: collections.deque = collections.deque(maxlen=HISTORY_TICKS)
        self.screenshots: dict[str, bytes] = {}
        self.notes = ""
        self._t0: float | None = None
        self._last_time: float | None = None
        self._opened: Session | None = None          # an opened .coremap: its temp folder is ours to close
        self._live_snapshot: Session | None = None   # `coremap snapshot` of the live machine, taken once
        self._machine_epoch = 0           # raised whenever another machine is shown
        self._taken: tuple | None = None  # (epoch, Session or CoremapError) from the autosave thread
        self._capture: Callable[[], Session] | None = None   # a machine over ssh: its snapshot, brought here
        self._autosave_thread: threading.Thread | None = None
        self._autosaved = False
        self.actions: dict[str, QAction] = {}
        self._fill_menu()
        self.autosave_timer = QTimer(self)
        self.autosave_timer.setInterval(int(autosave_seconds * 1000))
        self.autosave_timer.timeout.connect(self._on_autosave_timer_timeout)
        self._snapshot_taken.connect(self._on_snapshot_taken)
        self.crash_bar: CrashRecoveryBar | None = None
        if crash_recovery:
            path = last_session_after_crash()
            if path is not None:
                self.crash_bar = CrashRecoveryBar(path)
                self.crash_bar.open_requested.connect(self._open_guarded)

    # -- menu ----------------------------------------------------------------------------------
    def _fill_menu(self) -> None:
        items = (
            ("save_session", "&Save Session", "Ctrl+S", self.save_session_to_reports),
            ("save_session_as", "Save Session &As…", "Ctrl+Shift+A", self._save_session_as),
            ("open_session", "&Open Session…", "Ctrl+O", self._open_session_dialog),
            None,
            ("screenshot_window", "Screenshot: &Window (PNG)", "Ctrl+Shift+S", lambda: self.screenshot("window", "png")),
            ("screenshot_grid", "Screenshot: &Grid (PNG)", "Ctrl+Shift+G", lambda: self.screenshot("grid", "png")),
            ("screenshot_grid_svg", "Screenshot: Grid (S&VG)", None, lambda: self.screenshot("grid", "svg")),
            ("screenshot_plot", "Screenshot: &Plot (PNG)", "Ctrl+Shift+P", lambda: self.screenshot("plot", "png")),
            ("screenshot_plot_svg", "Screenshot: Plot (SV&G)", None, lambda: self.screenshot("plot", "svg")),
            None,
            ("report_html", "Export Report as &HTML", "Ctrl+E", lambda: self.export_report("html")),
            ("report_pdf", "Export Report as P&DF", "Ctrl+Shift+E", lambda: self.export_report("pdf")),
        )
        for item in items:
            if item is None:
                self.menu.addSeparator()
                continue
            name, text, keys, fn = item
            a = QAction(text, self.menu)
            if keys:
                a.setShortcut(QKeySequence(keys))
            a.triggered.connect(self._guarded(fn))
            self.menu.addAction(a)
            self.actions[name] = a

    def _guarded(self, fn):
        def run(*_):
            try:
                fn()
            except CoremapError as e:
                self._status(str(e))
        return run

    # -- what a session holds --------------------------------------------------------------------
    def set_state(self, state: MachineState) -> None:
        """A state the window applied: kept for saving, and its rates added to the history."""
        self._state = state
        if self._t0 is None:
            self._t0 = state.sample.time
        if state.sample.time == self._last_time:
            return          # a re-applied state (same sample) adds no history
        self._last_time = state.sample.time
        tick = state_history_tick(state.sample.time - self._t0, state)
        if tick is not None:
            self.history.append(tick)
        if state.live and not self.autosave_timer.isActive():
            self.autosave_timer.start()

    def _host(self) -> str | None:
        """The shown machine's name for file names: its hostname, else the snapshot's recorded host,
        else the snapshot's folder name — never this workstation's name for another machine."""
        st = self._state
        if st is not None and st.topology.hostname:
            return st.topology.hostname
        if self._opened is not None and self._opened.host:
            return self._opened.host
        root = self._machine_root
        if root is not None and not root.is_live:
            meta = root.snapshot_meta() or {}
            return meta.get("host") or root.root.name
        return None

    def set_machine(self, root: SysRoot | None, capture: Callable[[], Session] | None = None) -> None:
        """Another machine is shown (File → Connect…): this one's `root`, or for a machine over ssh
        `capture()`, a Session holding a snapshot it takes then (app/remote/capture.py)."""
        for s in (self._live_snapshot, self._opened):
            if s is not None:
                s.close()
        self._live_snapshot = self._opened = None
        self._machine_root, self._capture = root, capture
        self._machine_epoch += 1
        self.history.clear()
        self._t0 = self._last_time = None
        self._state = None

    def _root(self) -> SysRoot:
        if self._machine_root is None:
            raise CoremapError("this window samples no machine; open a session or a snapshot first")
        return self._machine_root

    def probe_records(self) -> list[ProbeRecord]:
        out = []
        for rec in self._probe_runs.runs:
            if not rec.finished or not rec.summary:
                continue
            hlog = None
            if rec.has_histogram and rec.buckets:
                with tempfile.TemporaryDirectory() as d:
                    p = Path(d) / "run.hlog"
                    self._probe_runs.save_run(rec.key, p)
                    hlog = p.read_bytes()
            out.append(ProbeRecord(dict(rec.summary), hlog))
        return out

    def journal(self) -> list[dict]:
        entries = self._journal_entries()
        if entries is not None:
            return journal_rows(entries)
        return list(self._opened.journal) if self._opened is not None else []

    def session(self) -> Session:
        """The session as shown now. A snapshot of the live machine (topology, IRQ affinity and two
        captures of the counters) is taken once and reused by later saves."""
        if self._state is None:
            raise CoremapError("nothing has been sampled yet; wait for the first tick, then save")
        if self._live_snapshot is None:
            take = self._snapshot_taker()
            if take is not None:
                self._live_snapshot = take()
        if self._live_snapshot is not None:
            machine_dir, host = self._live_snapshot.machine_dir, self._live_snapshot.host
        else:
            machine_dir = self._root().root
            host = (self._opened.host if self._opened is not None else "") or (self._host() or "")
        return Session(machine_dir=machine_dir, history=list(self.history), probes=self.probe_records(),
                       journal=self.journal(), screenshots=dict(self.screenshots),
                       notes=self.notes or (self._opened.notes if self._opened is not None else ""),
                       verifications=list(self._verifications()), host=host)

    def _snapshot_taker(self) -> Callable[[], Session] | None:
        """What takes the snapshot a session of the shown machine needs (the live machine's, or the
        one over ssh), None for a captured machine, whose own folder is saved. Slow: 0.6 s here,
        seconds over ssh."""
        if self._capture is not None:
            return self._capture
        root = self._root()
        if not root.is_live:
            return None
        return lambda: session_from_root(root, capture_interval=0.5)

    # -- File actions ------------------------------------------------------------------------------
    def save_session_to_reports(self) -> Path:
        path = _unique(reports_dir() / default_file_name("session", self._host(), "coremap"))
        save_session(path, self.session())
        self._status(f"session saved to {path}")
        self.saved.emit(str(path))
        return path

    def _save_session_as(self) -> None:
        start = str(reports_dir() / default_file_name("session", self._host(), "coremap"))
        path, _ = QFileDialog.getSaveFileName(self._window, "Save session", start, "coremap sessions (*.coremap)")
        if path:
            save_session(path, self.session())
            self._status(f"session saved to {path}")
            self.saved.emit(path)

    def _open_session_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self._window, "Open session", str(reports_dir()),
                                              "coremap sessions (*.coremap)")
        if path:
            self.open_session(path)

    def _open_guarded(self, path: str) -> None:
        try:
            self.open_session(path)
        except CoremapError as e:
            self._status(str(e))

    def open_session(self, path) -> Session:
        """Show a saved session: its machine (read-only), its probe runs and its pin journal.
        A file that cannot be opened changes nothing (SessionError, shown on the status line)."""
        s = open_session(path)
        sampler = Sampler(s.root, interval=1.0)
        sampler.source = str(path)
        thread = SamplerThread(sampler)
        if self._opened is not None:
            self._opened.close()
        self._opened = s
        self.history.clear()
        self.history.extend(s.history)
        self._t0 = self._last_time = None
        self._state = None              # the shown machine's states start again
        self._machine_root, self._capture = s.root, None
        self._machine_epoch += 1
        self.screenshots = dict(s.screenshots)
        self.autosave_timer.stop()
        self.machine_opened.emit(thread)
        thread.start()
        self.session_opened.emit(s)
        self._status(f"opened session {path} ({s.host or 'machine'}, {len(s.probes)} probe runs, "
                     f"{len(s.journal)} pins) — read-only")
        return s

    def screenshot(self, what: str, ext: str) -> Path:
        target = screenshot_target(self._window, what)
        path = _unique(reports_dir() / default_file_name(what, self._host(), ext))
        save_screenshot(target, path)
        self.screenshots[path.name] = path.read_bytes()
        self._status(f"{what} screenshot saved to {path}")
        self.saved.emit(str(path))
        return path

    def export_report(self, kind: str) -> Path:
        s = self.session()
        data = report_from_root(s.root, journal=s.journal, probes=[p.result for p in s.probes], notes=s.notes,
                                history=s.history, host=s.host or None, live_wait=0,
                                verifications=s.verifications)
        pdf = kind == "pdf"
        add_images(data, state=self._state)
        html = build_report_html(data, image_width=PDF_IMAGE_WIDTH if pdf else 900)
        path = _unique(reports_dir() / default_file_name("report", self._host(), kind))
        if pdf:
            render_pdf(html, path)
        else:
            write_atomic(path, html.encode("utf-8"))
        self._status(f"report saved to {path}")
        self.saved.emit(str(path))
        return path

    # -- autosave and clean exit ---------------------------------------------------------------------
    def _on_autosave_timer_timeout(self) -> None:
        if self._autosave_thread is not None and self._autosave_thread.is_alive():
            return              # the previous autosave (or its snapshot) is still being written
        if self._state is not None and self._live_snapshot is None:
            try:
                take = self._snapshot_taker()
            except CoremapError as e:
                self._status(f"autosave: {e}")
                return
            if take is not None:
                # The first autosave of a live machine needs its snapshot: taken in a thread, not
                # on the UI thread, which it would stop for 0.6 s here (seconds over ssh). The
                # autosave follows when it is ready (_on_snapshot_taken).
                self._start_autosave_thread(self._take_snapshot, take, self._machine_epoch)
                return
        try:
            session = self.session()      # built on the UI thread: it reads the widgets
        except CoremapError as e:
            self._status(f"autosave: {e}")
            return
        self._autosaved = True
        self._start_autosave_thread(_write_autosave, session)

    def _start_autosave_thread(self, target, *args) -> None:
        self._autosave_thread = threading.Thread(target=target, args=args, name="coremap-autosave", daemon=True)
        self._autosave_thread.start()

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
        if epoch != self._machine_epoch or self._live_snapshot is not None:
            taken.close()                   # another machine is shown now, or a save took one meanwhile
            return
        self._live_snapshot = taken
        self._on_autosave_timer_timeout()

    def close(self) -> None:
        """The window closes normally: finish a running autosave, mark the exit clean."""
        self.autosave_timer.stop()
        if self._autosave_thread is not None:
            self._autosave_thread.join(timeout=10)
        if self._taken is not None and isinstance(self._taken[1], Session):
            self._taken[1].close()          # a snapshot taken for an autosave that will not come
            self._taken = None
        if self._autosaved:
            try:
                mark_clean_exit()
            except (CoremapError, OSError) as e:
                self._status(f"could not mark a clean exit: {e}")
        if self._opened is not None:
            self._opened.close()
            self._opened = None
