"""SessionController: the File menu — sessions, screenshots, reports — and what a session holds;
its Autosaver and crash recovery bar come from widgets/autosave.py.

What the window shows is kept as it goes (the rates of each tick, the probe runs, the pin journal,
the screenshots taken), so File → Save Session writes it all into one `.coremap` file
(app/store/session.py) that reopens on any workstation. Screenshots and reports go straight into the
user's reports folder (app/store/folders.py, reports_dir) under a name carrying host, date and time; the
status line says where. Nothing here shows a modal dialog except the file choosers of Open Session…
and Save Session As….
"""
from __future__ import annotations

import collections
import tempfile
import time
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QWidget

from app.atomic import write_atomic
from app.errors import CoremapError
from app.format import plural
from app.host import Host
from app.store.report import PDF_IMAGE_WIDTH, build_report_html, irqbalance_fact, report_from_root
from app.store.report_pins import pin_scope
from app.sources.live import open_host
from app.store.session import ProbeRecord, Session, history_tick, journal_rows, save_session
from app.sampling.machine_state import MachineState
from app.store.folders import reports_dir
from app.sysroot import SysRoot
from probes.files import write_run
from widgets.autosave import AUTOSAVE_SECONDS, Autosaver, CrashRecoveryBar, crash_recovery_bar
from widgets.export import default_file_name, render_pdf, save_screenshot, screenshot_target
from widgets.report_images import add_images
from widgets.session_bar import SessionBar
from widgets.summary_bar import irqbalance_running

HISTORY_TICKS = 3600          # an hour at 1 s: what a session keeps of the sampled history
HISTORY_TOP_IRQS = 64         # per tick, the busiest IRQs' per-CPU rates (the rest sum into the CPUs)




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


class ProbeRuns(Protocol):
    """What a session needs of the probe panel: its runs (widgets/probe/runs.py RunRecord)."""

    @property
    def runs(self) -> list: ...


def _hlog_bytes(rec) -> bytes:
    """A finished run's histogram as an .hlog, for the session: written where only this reads it,
    not through the panel, whose "saved … to …" would name a file the user never asked for (issue 23)."""
    with tempfile.TemporaryDirectory(prefix="coremap-session-") as d:
        path = Path(d) / "run.hlog"
        write_run(path, label=rec.label, result=rec.summary, buckets=rec.buckets, sampled_ns=rec.sampled_ns,
                  lines=rec.lines)
        return path.read_bytes()


def _live_irqbalance(state: MachineState | None, root: SysRoot | None) -> str | None:
    """irqbalance as the window saw it, for a report of a live machine: this machine's read now (its
    pid, what it bans); over ssh, from the process list of the last state; None otherwise (the
    report reads it from the capture)."""
    if root is not None and root.is_live:
        return irqbalance_fact(root)
    running = irqbalance_running(state) if state is not None and state.live else None
    return None if running is None else ("running: it may move pinned IRQs back" if running else "not running")


def _source_name(state: MachineState | None, opened: Session | None, root: SysRoot | None, host: str) -> str | None:
    """What a report says it was made from: the live machine by name (its snapshot is a temporary
    folder gone by the time anyone reads the report), the session file, or the capture's folder."""
    if opened is not None:
        return str(opened.source) if opened.source else None
    if state is not None and state.live:
        return f"{host} (live" + (f", over ssh {state.host})" if state.host else ")")
    return str(root.root) if root is not None else None


class SessionController(QObject):
    """The File menu and what a session holds.

    Parameters (the narrow parts of the window it works with, given by widgets/application.py):
    - `menu`: the File menu to fill;
    - `window`: the widget a window screenshot pictures, the file dialogs' parent, and this
      controller's parent; its grid and plots are found as its children (widgets/export.py);
    - `status`: the status sink, one line for the user;
    - `probe_runs`: the probe panel's runs, saved with the session;
    - `journal_entries`: the live pin journal's entries, or None when pins go through no journal;
    - `ledger`: what that journal adds up to for the machine shown (app/pinning/ledger.py), or None:
      a report holds this job's pins of it, those in effect and those made since the oldest Make quiet
      in effect or since the window opened (app/store/report_pins.py);
    - `verifications`: the before / after verifications of quiet CPUs made (or opened) so far;
    - `quiet_cpus`: the CPUs the grid shows quiet, badged so in a report's picture of it.

    The machine shown comes with `set_host` (the window's host_changed): its files, and what takes a
    snapshot of it for a session.

    Signals: `host_opened(Host)` when an opened session's machine is to be shown, then
    `session_opened(Session)` for its probe runs and pins; `saved(path)`; `back_requested(SysRoot)`
    when the user leaves a session for the machine shown before it (this machine live when that was
    one over ssh). Its `session_bar` says a session is shown.
    Feed it every applied MachineState with `set_state`. Its `autosaver` writes the live machine's
    session every `autosave_seconds`, asking it through epoch, snapshot_to_take, keep_snapshot and
    session (widgets/autosave.py, AutosaveSource).
    """
    saved = Signal(str)                  # path of a session, screenshot or report just written
    host_opened = Signal(object)         # a CaptureHost of an opened session's machine: show it
    session_opened = Signal(object)      # the Session just opened (read-only): its probe runs and pins
    back_requested = Signal(object)      # the SysRoot to show again instead of the opened session

    def __init__(self, menu: QMenu, window: QWidget, *, status: Callable[[str], None],
                 probe_runs: ProbeRuns, journal_entries: Callable[[], list | None],
                 verifications: Callable[[], list[dict]] = list, quiet_cpus: Callable[[], tuple] = tuple,
                 ledger: Callable[[], object | None] = lambda: None,
                 autosave_seconds: float = AUTOSAVE_SECONDS, crash_recovery: bool = True):
        super().__init__(window)
        self.menu = menu
        self._window = window
        self._shown: Host | None = None
        self._status = status
        self._probe_runs = probe_runs
        self._journal_entries = journal_entries
        self._verifications = verifications
        self._quiet_cpus = quiet_cpus
        self._ledger = ledger
        self._started = time.time()          # a report of the live machine holds the pins made since
        self._state: MachineState | None = None
        self.history: collections.deque = collections.deque(maxlen=HISTORY_TICKS)
        self.screenshots: dict[str, bytes] = {}
        self.notes = ""
        self._t0: float | None = None
        self._last_time: float | None = None
        self._opened: Session | None = None          # an opened .coremap: its temp folder is ours to close
        self._live_snapshot: Session | None = None   # `coremap snapshot` of the live machine, taken once
        self._machine_epoch = 0           # raised whenever another machine is shown
        self._before: SysRoot | None = None           # what an opened session replaced: File → Back to Live
        self.actions: dict[str, QAction] = {}
        self._fill_menu()
        self.actions["back_to_live"].setEnabled(False)
        self.session_bar = SessionBar(window)
        self.session_bar.back_requested.connect(self._guarded(self.back))
        self.autosaver = Autosaver(self, status=status, seconds=autosave_seconds, parent=self)
        self.crash_bar: CrashRecoveryBar | None = crash_recovery_bar() if crash_recovery else None
        if self.crash_bar is not None:
            self.crash_bar.open_requested.connect(self._open_guarded)

    # -- menu ----------------------------------------------------------------------------------
    def _fill_menu(self) -> None:
        add = self._add_action
        add("save_session", "&Save Session", "Ctrl+S", self.save_session_to_reports)
        add("save_session_as", "Save Session &As…", "Ctrl+Shift+A", self._save_session_as)
        add("open_session", "&Open Session…", "Ctrl+O", self._open_session_dialog)
        add("back_to_live", "Back to &Live", "Ctrl+L", self.back)
        self.menu.addSeparator()
        add("screenshot_window", "Screenshot: &Window (PNG)", "Ctrl+Shift+S", lambda: self.screenshot("window", "png"))
        add("screenshot_grid", "Screenshot: &Grid (PNG)", "Ctrl+Shift+G", lambda: self.screenshot("grid", "png"))
        add("screenshot_grid_svg", "Screenshot: Grid (S&VG)", None, lambda: self.screenshot("grid", "svg"))
        add("screenshot_plot", "Screenshot: &Plot (PNG)", "Ctrl+Shift+P", lambda: self.screenshot("plot", "png"))
        add("screenshot_plot_svg", "Screenshot: Plot (SV&G)", None, lambda: self.screenshot("plot", "svg"))
        self.menu.addSeparator()
        add("report_html", "Export Report as &HTML", "Ctrl+E", lambda: self.export_report("html"))
        add("report_pdf", "Export Report as P&DF", "Ctrl+Shift+E", lambda: self.export_report("pdf"))

    def _add_action(self, name: str, text: str, keys: str | None, run: Callable[[], object]) -> None:
        """An item of the File menu, kept in `actions[name]`; a CoremapError it raises goes on the status line."""
        a = QAction(text, self.menu)
        if keys:
            a.setShortcut(QKeySequence(keys))
        a.triggered.connect(self._guarded(run))
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
        if state.live:
            self.autosaver.start()

    def _host(self) -> str | None:
        """The shown machine's name for file names: its hostname, else the snapshot's recorded host,
        else the snapshot's folder name — never this workstation's name for another machine."""
        st = self._state
        if st is not None and st.topology.hostname:
            return st.topology.hostname
        if self._opened is not None and self._opened.host:
            return self._opened.host
        root = self._shown.root if self._shown is not None else None
        if root is not None and not root.is_live:
            meta = root.snapshot_meta() or {}
            return meta.get("host") or root.root.name
        return None

    def set_host(self, host: Host) -> None:
        """Another machine is shown (File → Connect…, an opened session, Back to Live): what a session
        holds starts again. The host closes what it opened (a session's folder) when it is replaced."""
        if self._live_snapshot is not None:
            self._live_snapshot.close()
        self._live_snapshot = self._opened = None
        self._shown = host
        self._before = None
        self.session_bar.hide()
        self.actions["back_to_live"].setEnabled(False)
        self._machine_epoch += 1
        self.history.clear()
        self._t0 = self._last_time = None
        self._state = None

    def _root(self) -> SysRoot:
        if self._shown is None or self._shown.root is None:
            raise CoremapError("this window samples no machine; open a session or a snapshot first")
        return self._shown.root

    def probe_records(self) -> list[ProbeRecord]:
        return [ProbeRecord(dict(rec.stored or rec.summary), _hlog_bytes(rec) if rec.has_histogram and rec.buckets else None)
                for rec in self._probe_runs.runs if rec.finished and rec.summary]

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
        one over ssh: the host's capture), None for a captured machine, whose own folder is saved.
        Slow: 0.6 s here, seconds over ssh."""
        if self._shown is None:
            raise CoremapError("this window samples no machine; open a session or a snapshot first")
        return self._shown.capture

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
        host = open_host(Namespace(session=str(path)))     # the one door every machine opens by
        s = host.session
        # The machine to go back to: a capture as it was, this machine live otherwise (a machine over
        # ssh was disconnected when the session replaced it).
        before = self._before
        if self._opened is None:
            root = self._shown.root if self._shown is not None else None
            before = root if root is not None and not root.is_live else SysRoot("/")
        self.host_opened.emit(host)         # the window shows it: set_host starts what it holds again
        self._opened, self._before = s, before
        self.history.extend(s.history)
        self.screenshots = dict(s.screenshots)
        self.autosaver.stop()
        self.session_opened.emit(s)
        self.session_bar.show_session(str(path), s.host, "live" if before.is_live else str(before.root))
        self.actions["back_to_live"].setEnabled(True)
        self._status(f"opened session {path} ({s.host or 'machine'}, {plural(len(s.probes), 'probe run')}, "
                     f"{plural(len(s.journal), 'pin')}) — read-only")
        return s

    def back(self) -> None:
        """Leave the opened session for the machine shown before it (back_requested)."""
        if self._opened is None or self._before is None:
            raise CoremapError("no saved session is shown; there is nothing to go back from")
        self.back_requested.emit(self._before)

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
        journal, scope = s.journal, ""
        ledger = self._ledger() if self._opened is None else None      # an opened session: the pins saved in it
        if ledger is not None:
            this_job = pin_scope(ledger, opened=self._started)
            journal, scope = this_job.rows, this_job.sentence
        root = self._shown.root if self._shown is not None else None
        data = report_from_root(s.root, journal=journal, probes=[p.result for p in s.probes], notes=s.notes,
                                history=s.history, host=s.host or None, live_wait=0,
                                verifications=s.verifications, source=_source_name(self._state, self._opened, root, s.host),
                                irqbalance=_live_irqbalance(self._state, root), pins_scope=scope)
        pdf = kind == "pdf"
        add_images(data, state=self._state, quiet=self._quiet_cpus())
        html = build_report_html(data, image_width=PDF_IMAGE_WIDTH if pdf else 900)
        path = _unique(reports_dir() / default_file_name("report", self._host(), kind))
        if pdf:
            render_pdf(html, path)
        else:
            write_atomic(path, html.encode("utf-8"))
        self._status(f"report saved to {path}")
        self.saved.emit(str(path))
        return path

    # -- what the autosave needs (widgets/autosave.py, AutosaveSource) ---------------------------------
    @property
    def epoch(self) -> int:
        return self._machine_epoch

    def snapshot_to_take(self) -> Callable[[], Session] | None:
        """What takes the snapshot a session of the shown machine still needs: None before the first
        state, once one is kept, and for a captured machine."""
        if self._state is None or self._live_snapshot is not None:
            return None
        return self._snapshot_taker()

    def keep_snapshot(self, epoch: int, snapshot: Session) -> bool:
        """Keep a snapshot the autosave thread took, unless another machine is shown now or a save took
        one meanwhile."""
        if epoch != self._machine_epoch or self._live_snapshot is not None:
            return False
        self._live_snapshot = snapshot
        return True

    def close(self) -> None:
        """The window closes normally: finish a running autosave, mark the exit clean. (An opened session's
        folder goes with its host, which the window closes.)"""
        self.autosaver.close()
        self._opened = None
