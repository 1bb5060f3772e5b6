"""The composition root: `build_window` builds the MainWindow and gives each controller the narrow
parts of it that controller needs (a menu, a status sink, the views it drags from or drops on, the
state signal); nothing else in widgets/ constructs the window or reaches into it.

- `run_gui(args, host)`: the window on the Host app/cli/main.py opened from the command line's arguments
  (app/sources/live.py open_host). Everything that can be wrong with the arguments or the machine is
  found before Qt starts, and reported as a
  CoremapError (app/cli/main.py prints "coremap: <message>" and exits 2): no traceback, no dialog.
  With --screenshot the window is rendered offscreen after the first sample(s) and saved, and the
  process exits: two ticks for rates on the live machine, the pair on a two-capture snapshot.
- `render_window(state)`: the whole window for one MachineState, offscreen, as PNG or SVG bytes
  (`coremap screenshot`).
"""
from __future__ import annotations

import functools
import gc

import os
import re
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QSocketNotifier, Qt, QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QDockWidget, QMenu

from app.format import cpus_word
from app.host import Host
from app.pinning.targets import PinRequest
from app.atomic import write_atomic
from app.errors import CoremapError
from app.sampling.heap_trim import MemoryTrimmer
from app.resources import APP_ID, ICON, resource_path
from app.sampling.sampler import MAX_INTERVAL, MIN_INTERVAL
from app.sampling.sources import MachineSource
from app.sources.live import host_of_root
from app.store.session import Session
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot
from widgets.colors import Metric, parse_metric
from widgets.compare import CompareController
from widgets.replay import ReplayControl
from widgets.autosave import SaveOnQuit
from widgets.harness import application
from widgets.help_menu import add_help
from widgets.main_window import MainWindow
from widgets.pictures import RATE_WINDOW, first_state, offscreen, picture_bytes, settle
from app.quiet.guard import event_line
from widgets.pinning.controller import PinController
from widgets.pinning.guard import GuardThread
from widgets.probe.panel import ProbePanel
from widgets.quiet.controller import QuietController
from widgets.remote.connect import ConnectController
from widgets.search_bar import SearchBar
from widgets.session_controller import SessionController
from widgets.settings import WindowSettings
from widgets.topology.cpu_menu import CpuMenu, CpuMenuActions

DEFAULT_SIZE = (1600, 1000)


class BadArgument(CoremapError):
    """A command-line value the window cannot use."""


def parse_size(text: str | None) -> tuple[int, int]:
    if not text:
        return DEFAULT_SIZE
    m = re.fullmatch(r"\s*(\d{2,5})\s*[xX×]\s*(\d{2,5})\s*", text)
    if not m:
        raise BadArgument(f"--size {text!r}: expected WIDTHxHEIGHT in pixels, e.g. 1600x1000")
    w, h = int(m.group(1)), int(m.group(2))
    if not (320 <= w <= 10000 and 240 <= h <= 10000):
        raise BadArgument(f"--size {text!r}: choose a width of 320-10000 and a height of 240-10000 pixels")
    return w, h


def _check_interval(seconds: float | None) -> float:
    s = 1.0 if seconds is None else float(seconds)
    if not (MIN_INTERVAL <= s <= MAX_INTERVAL):
        raise BadArgument(f"--interval {s:g}: choose {MIN_INTERVAL:g} to {MAX_INTERVAL:g} seconds")
    return s


def run_gui(args, host: Host) -> int:
    """The window on `host` (app/cli/main.py opened it from the arguments, before Qt started)."""
    metric = parse_metric(getattr(args, "color_by", None))
    size = parse_size(getattr(args, "size", None))
    interval = _check_interval(getattr(args, "interval", None))
    screenshot = getattr(args, "screenshot", None)
    if screenshot:
        # A screenshot needs no display: render offscreen unless a platform was chosen explicitly.
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        out = Path(screenshot)
        _screenshot(host.sampler, metric, size, interval, out)
        print(f"{out}: {host.name}")        # what was drawn: a replay's moment is the nearest it has
        return 0
    return _interactive(host, metric, size, interval, chosen=_chosen(args))


def _application():
    app = application()
    app.setApplicationName("coremap")
    app.setApplicationDisplayName("coremap")
    # The reverse-DNS id the .desktop file is named by (resources/): Wayland's app_id, so the desktop
    # shows the window with its menu entry's name and icon.
    app.setDesktopFileName(APP_ID)
    icon = resource_path(ICON)
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    return app


def _screenshot(sampler: MachineSource, metric: Metric, size, interval: float, out: Path) -> None:
    # Sample before the window exists: a slow or failing read is reported without Qt in the way.
    state = first_state(sampler, min(interval, RATE_WINDOW))
    with _shown_window(state, size, metric, interval) as window:
        picture = picture_bytes(window, "png", title="")
    write_atomic(out, picture)          # the one writer (app/atomic.py): never through a link or into a device


def _chosen(args) -> dict[str, bool]:
    """What the command line chose, which wins over what the window remembers (widgets/settings.py)."""
    return {"metric": getattr(args, "color_by", None) is not None, "geometry": getattr(args, "size", None) is not None}


def _interactive(host: Host, metric: Metric, size, interval: float, chosen: dict[str, bool] | None = None) -> int:
    app = _application()
    window = build_window(host, metric=metric, interval=interval, crash_recovery=True)
    window.resize(*size)
    chosen = chosen or {}
    settings = WindowSettings()
    settings.restore(window, metric=not chosen.get("metric"), geometry=not chosen.get("geometry"))
    window.closing.connect(lambda: settings.save(window))
    window.show()
    window.sampler_thread.start()
    # Ctrl+C, SIGTERM (systemd, kill) and SIGHUP (the terminal went away) close the window cleanly, so
    # what it owns is cleaned up on the way out: a session's capture folder in /tmp, the autosave's
    # clean mark.
    with _signals_wake_qt():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda *_: window.close_now())
        try:
            return int(app.exec())
        finally:
            window.sampler_thread.stop()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)


@contextmanager
def _signals_wake_qt() -> Iterator[None]:
    """Python runs a signal handler only when the interpreter gets control, and Qt's event loop may
    sleep in C++ for as long as nothing happens. The C-level handler writes the signal's number to a
    socket (signal.set_wakeup_fd), a QSocketNotifier wakes the loop on it, and the Python handler runs
    at once: no timer waking the process a few times a second to look (issue 12)."""
    ours, theirs = socket.socketpair()
    for s in (ours, theirs):
        s.setblocking(False)
    notifier = QSocketNotifier(ours.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(lambda *_: _drain(ours))
    previous = signal.set_wakeup_fd(theirs.fileno(), warn_on_full_buffer=False)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        notifier.setEnabled(False)
        ours.close()
        theirs.close()


def _drain(sock: socket.socket) -> None:
    try:
        sock.recv(4096)             # the signal numbers; the handlers have run (or run on return)
    except BlockingIOError:
        pass                        # another wake-up read them first


# -- the composition root ------------------------------------------------------------------------------
def build_window(host: Host | None = None, *, metric: Metric | str | None = None, interval: float = 1.0,
                 crash_recovery: bool = False) -> MainWindow:
    """The window with everything in it: the grid, tables and plots (MainWindow), pinning, the
    probe panel and the File menu, showing `host` (None: nothing yet; states are set by hand, as for a
    picture or a replay). Its sampler thread is started by the caller. With `crash_recovery`, a bar
    offers the autosaved session of a run that did not exit cleanly."""
    window = MainWindow(metric=metric, interval=interval)
    # The File menu comes first, as in every desktop application.
    file_menu = window.menuBar().addMenu("&File")
    edit_menu = window.menuBar().addMenu("&Edit")
    window.pin_controller = _add_pinning(window, edit_menu)
    window.guard_thread = _add_guard(window, edit_menu, interval)
    window.probe_panel, window.probe_dock = _add_probes(window)
    window.quiet_controller = _add_quiet(window)
    window.session_controller = _add_sessions(window, file_menu, crash_recovery)
    window.compare_controller = _add_compare(window, file_menu, window.session_controller.actions["screenshot_window"])
    window.connect_controller = ConnectController(
        file_menu, window, show=lambda h: show_host(window, h), status=window.show_message,
        interval=lambda: window.interval_spin.value())
    window.closing.connect(window.connect_controller.close)
    window.search_bar = SearchBar(window.irq_table, window.thread_table, window.topology_view, lambda: window.state,
                                  window)
    window.add_top_bar(window.search_bar)
    window.help_menu = add_help(window, file_menu, edit_menu)
    window.cpu_menu = _add_cpu_menu(window)
    window.quit_saver = _add_quit_saver(window)
    window.replay = ReplayControl(window)
    if host is not None:
        window.set_host(host)
    # Freed memory goes back to the system every few ticks, so hours of thread churn leave RSS flat.
    trimmer = MemoryTrimmer()
    window.state_applied.connect(lambda _state: trimmer.maybe_trim())
    frozen = []

    def freeze_startup(_state) -> None:
        # What start-up built (modules, classes, the window's Qt wrappers, the first state) lives as long
        # as the window. Moved out of the collector's reach once the first state is on screen, a full
        # collection no longer walks it: it took 35-40 ms for 52k objects here and holds the GIL, and
        # while a batch ran over ssh it stalled the UI thread 140-170 ms (tests/benchmarks/bench_pin_stall.py).
        if not frozen:
            frozen.append(True)
            gc.freeze()
    window.state_applied.connect(freeze_startup)
    return window


def open_window(host: Host, *, metric: Metric | str | None = None, size=DEFAULT_SIZE) -> MainWindow:
    """A window of its own on `host`, shown, its sampler ticking from now on (the first tick included: a
    slow source never holds the UI thread): the fleet's Open this host."""
    window = build_window(host, metric=metric, interval=host.sampler.interval)
    window.resize(*size)
    window.show()
    window.sampler_thread.start()
    return window


def show_host(window: MainWindow, host: Host) -> None:
    """Show `host` in `window`, ticking: File → Connect…, an opened session, Back to Live."""
    window.set_host(host)
    window.sampler_thread.start()


def _add_pinning(window: MainWindow, menu: QMenu) -> PinController:
    """Drops on the grid, Pin to…, Edit → Undo/Redo/Restore all, the Pins dock (a tab beside the
    thread table: the journal is a wide table), the result line and the restore bar (widgets/pinning/)."""
    sources = (window.irq_table.view, window.thread_table.view, window.cpu_details.irq_table,
               window.cpu_details.thread_table)
    pins = PinController(window.topology_view, sources, menu, window.statusBar(), window.state_applied, parent=window)
    for view in (window.thread_table.view, window.cpu_details.thread_table):
        pins.sources.add_scheduling(view)           # Set scheduling… in their context menus
    pins.results_shown.connect(lambda results: window.forget_processes(_pinned_pids(results)))
    window.state_applied.connect(lambda _state: window.irq_table.model.set_pins(_pinned_irqs(pins)))
    pins.quiet_changed.connect(window.irq_table.set_quiet_cpus)     # its managed IRQs still there are marked
    pins.managed_refused.connect(window.irq_table.set_refused_managed)
    window.host_changed.connect(pins.set_host)
    window.closing.connect(pins.close)
    window.pins_dock = window.add_dock("Pins", "pins-dock", pins.journal_widget,
                                       Qt.DockWidgetArea.BottomDockWidgetArea, tab_with=window.thread_dock)
    window.thread_dock.raise_()
    window.add_top_bar(pins.restore_bar)
    return pins


def _add_guard(window: MainWindow, menu: QMenu, interval: float) -> GuardThread:
    """The pin guard (widgets/pinning/guard.py) on the journal the pins go through, from the first
    state after a service exists; what it finds goes on the status line and into the Pins panel.
    Edit → Guard pins turns it off and on."""
    guard = GuardThread(window, interval=interval)
    pins = window.pin_controller
    action = menu.addAction("Guard pins")
    action.setCheckable(True)
    action.setChecked(True)
    action.setToolTip("Watch every pin and quiet CPU; report (or re-apply) what someone else changes")
    action.toggled.connect(guard.set_enabled)

    def on_state(_state) -> None:
        watched = window.host.guarded() if window.host is not None else None
        if watched is not None and guard.enabled:
            guard.start(*watched)

    def on_host_changed(_host) -> None:
        window.sampler_thread.interval_changed.connect(guard.set_interval)

    def on_ticked(tick) -> None:
        for note in tick.notes:           # /dev/cpu_dma_latency held or let go (an isolate's force_latency)
            window.show_message(note)
        for ev in tick.events:
            window.show_message(event_line(ev) + ("; Quiet → Keep irqbalance off…" if ev.who.startswith("irqbalance")
                                                  else ""))
        if tick.followed:
            pids = sorted({r.target.pid for r in tick.followed if r.target.pid is not None})
            window.show_message(f"pinned {len(tick.followed)} new thread{'s' if len(tick.followed) > 1 else ''} "
                                f"of process {', '.join(map(str, pids))} like the process")
            window.forget_processes(pids)
        pins.refresh_journal()

    window.state_applied.connect(on_state)
    window.host_changed.connect(on_host_changed)
    guard.ticked.connect(on_ticked)
    guard.failed.connect(window.show_message)
    window.closing.connect(guard.stop)
    return guard


def _add_quiet(window: MainWindow) -> QuietController:
    """The Quiet menu (widgets/quiet/): isolate, include, Verify, the plan, the irqbalance fix."""
    quiet = QuietController(window.topology_view, window.menuBar().addMenu("&Quiet"), window.pin_controller,
                            status=window.show_message, add_run=window.probe_panel.add_result,
                            state_applied=window.state_applied, parent=window)
    window.closing.connect(quiet.close)
    window.add_top_bar(quiet.cut_short_bar)
    return quiet


def _pinned_irqs(pins: PinController) -> dict[str, tuple[int, ...]]:
    """The IRQs coremap's pins still hold on the machine shown, by IRQ label (for the IRQ table)."""
    service = pins.service
    if service is None:
        return {}
    return {str(irq): cpus for irq, cpus in service.ledger().pinned_irqs().items()}


# What a batch's result moves: these processes' threads (by the target's pid, else its id), or, for a
# cpuset's or a systemd slice's CPUs, every process in it (app/pinning/kinds.py).
_MOVES_PROCESS = ("thread", "process", "cgroup", "cgroupthread", "sched")
_MOVES_EVERY_MEMBER = ("cpuset", "slice")


def _pinned_pids(results) -> list[int] | None:
    """The processes whose threads a pin, isolate, give-back, undo or restore moved (PinResults); None
    when it changed a cpuset's or a slice's CPUs, which moves every process in it. (An isolate's moves
    into /coremap-system were left out, and the thread tree showed the old CPUs of a sleeping process
    until its next check, 15-30 s later: issue 28's stale "0-1" for 20 s.)"""
    if any(r.target.kind in _MOVES_EVERY_MEMBER for r in results):
        return None
    return sorted({r.target.pid or r.target.id for r in results if r.target.kind in _MOVES_PROCESS})


def _add_probes(window: MainWindow) -> tuple[ProbePanel, QDockWidget]:
    """The Probes dock (a tab beside the residency plot), the Probes menu, and the grid's clicked CPU
    as the next probe's CPU (widgets/probe_panel.py)."""
    panel = ProbePanel(window)
    dock = window.add_dock("Probes", "probe-dock", panel, Qt.DockWidgetArea.BottomDockWidgetArea,
                           tab_with=window.residency_dock)
    window.thread_dock.raise_()
    window.menuBar().addMenu(panel.menu)
    window.topology_view.cpu_selected.connect(panel.set_cpu)
    panel.cpus_highlighted.connect(window.topology_view.select_cpus)      # a placement's pair, a width's CPUs
    panel.heat_changed.connect(window.topology_view.probe_heat.show)     # each CPU's gaps, as a run goes
    window.pin_controller.quiet_changed.connect(panel.set_quiet_cpus)
    window.host_changed.connect(lambda host: panel.controller.use_runner(host.probes, elsewhere=host.probes_elsewhere))
    window.state_applied.connect(panel.set_state)
    window.closing.connect(panel.cancel)
    return panel, dock


def _add_sessions(window: MainWindow, menu: QMenu, crash_recovery: bool) -> SessionController:
    """File: sessions, screenshots, reports, autosave and crash recovery (widgets/session_controller.py)."""
    pins = window.pin_controller
    sessions = SessionController(
        menu, window, status=window.show_message,
        probe_runs=window.probe_panel,
        journal_entries=lambda: pins.service.journal.entries() if pins.service is not None else None,
        ledger=lambda: pins.service.ledger() if pins.service is not None else None,
        verifications=lambda: window.quiet_controller.verifications, crash_recovery=crash_recovery,
        quiet_cpus=lambda: window.topology_view.quiet_cpus)
    window.state_applied.connect(sessions.set_state)
    window.host_changed.connect(sessions.set_host)
    sessions.host_opened.connect(lambda host: show_host(window, host))
    sessions.session_opened.connect(lambda session: _show_session(window, session))
    sessions.back_requested.connect(lambda root: show_host(window, host_of_root(root, window.interval_spin.value())))
    window.closing.connect(sessions.close)
    window.add_top_bar(sessions.session_bar)
    if sessions.crash_bar is not None:
        window.add_top_bar(sessions.crash_bar)
    return sessions


def _add_compare(window: MainWindow, menu: QMenu, before) -> CompareController:
    """File → Compare with… (widgets/compare.py): the shown machine, when it is read here, against a capture."""
    def machine() -> SysRoot | None:
        return window.host.root if window.host is not None else None
    # A tab beside the threads, the residency plot and the probes: a dock of its own below the grid
    # squeezed the probe panel's histogram to a strip (seen under Xvfb).
    add_dock = functools.partial(window.add_dock, tab_with=window.thread_dock)
    controller = CompareController(menu, before, window.topology_view, add_dock=add_dock,
                                   status=window.show_message, machine=machine, parent=window)
    # Hiding the new tab made its neighbour, the Probes tab, the one shown: the first frame then built
    # the plots and imported pyqtgraph (tests/gui/test_first_frame.py). The thread table stays in front.
    window.thread_dock.raise_()
    return controller


def _add_cpu_menu(window: MainWindow) -> CpuMenu:
    """The grid's context menu (widgets/topology/cpu_menu.py): each item calls its owner, Quiet's
    previews, the pin controller (the thread tree's selection, judged by the check a drop asks), the
    probe panel."""
    pins, quiet, panel = window.pin_controller, window.quiet_controller, window.probe_panel

    def request(cpus) -> PinRequest | None:
        # The payload's own request, as a drop's: one Java thread is pinned by its full name there too.
        payload = pins.sources.payload(window.thread_table.view)
        return payload.request(cpus, "menu") if payload is not None else None

    def pin_blocked(cpus) -> str:
        r = request(cpus)
        if r is None:
            return "select a thread or process in the Threads table first"
        why = pins.check(r)
        return why[0] if why else ""

    def pin_here(cpus) -> None:
        r = request(cpus)
        if r is not None:
            pins.request(r)

    def probe_here(cpus) -> None:
        panel.set_cpus(cpus)
        window.probe_dock.show()
        window.probe_dock.raise_()
        # After the menu has closed and given the focus back to the grid.
        QTimer.singleShot(0, lambda: panel.run_button.setFocus(Qt.FocusReason.OtherFocusReason))
        window.show_message(f"the probe panel is set to {cpus_word(cpus)}: choose the probe and press Run")

    return CpuMenu(window.topology_view, CpuMenuActions(
        make_quiet=quiet.open_isolate, give_back=quiet.open_include, quiet_cpus=lambda: window.topology_view.quiet_cpus,
        pin_blocked=pin_blocked, pin_here=pin_here, probe_here=probe_here, status=window.show_message), window)


def _add_quit_saver(window: MainWindow) -> SaveOnQuit:
    """Unsaved probe runs are saved as a session when the window closes (widgets/autosave.py)."""
    sessions = window.session_controller
    saver = SaveOnQuit(lambda: window.probe_panel.runs, sessions.save_session_to_reports, status=window.show_message)
    sessions.saved.connect(saver.saved)
    window.close_guard = saver.on_quit
    return saver


def _show_session(window: MainWindow, session: Session) -> None:
    """An opened session: its probe runs in the panel; its machine is read-only, so drops are refused
    with the reason."""
    for p in session.probes:
        window.probe_panel.add_result(p.result, str(session.source))
    for v in session.verifications:
        window.quiet_controller.add_verification(v)
    if session.problems:
        # What opening left out of a damaged session (app/store/results.py), on the status line, not a dialog.
        window.show_message(f"{session.source}: " + "; ".join(session.problems[:3]))


# -- the window as a picture ---------------------------------------------------------------------------
@contextmanager
def _shown_window(state: MachineState, size, metric: Metric | str | None,
                  interval: float = 1.0) -> Iterator[MainWindow]:
    """The window built for `state` and shown at `size` (offscreen unless a display was chosen), the
    grid fitted, for the `with` block; then closed and deleted."""
    _application()
    with offscreen(lambda: build_window(None, metric=metric, interval=interval), size) as window:
        window.set_state(state)
        settle()
        window.topology_view.zoom_fit()
        settle()
        yield window


def render_window(state: MachineState, *, fmt: str = "png", size=DEFAULT_SIZE,
                  metric: Metric | str | None = None) -> bytes:
    """The whole window for `state`, offscreen, as PNG or SVG bytes."""
    with _shown_window(state, size, metric) as window:
        return picture_bytes(window, fmt, title="coremap window")
