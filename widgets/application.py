"""run_gui(args): the window, from the command line's arguments (see app/cli/main.py).

Everything that can be wrong with the arguments or the root is found before Qt starts, and reported
as a CoremapError (app/cli/main.py prints "coremap: <message>" and exits 2): no traceback, no dialog.
With --screenshot the window is rendered offscreen after the first sample(s) and saved, and the
process exits: two ticks for rates on the live machine, the pair on a two-capture snapshot.
"""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from app.errors import CoremapError
from app.resources import ICON, resource_path
from app.sampler import MAX_INTERVAL, MIN_INTERVAL, Sampler
from app.sysroot import SysRoot

DEFAULT_SIZE = (1600, 1000)
# Live screenshots: seconds between the two ticks that give the first rates.
SCREENSHOT_RATE_WINDOW = 0.5


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


def _root_of(args):
    """(SysRoot, session or None) from --root / --session."""
    if getattr(args, "session", None):
        if getattr(args, "root", None):
            raise BadArgument("--root and --session both given: open one machine at a time")
        from app.session import open_session
        session = open_session(args.session)
        return session.root, session
    return SysRoot(args.root or "/"), None


def run_gui(args) -> int:
    from widgets.colors import parse_metric
    metric = parse_metric(getattr(args, "color_by", None))
    size = parse_size(getattr(args, "size", None))
    interval = _check_interval(getattr(args, "interval", None))
    screenshot = getattr(args, "screenshot", None)
    if screenshot:
        out = Path(screenshot)
        if not out.parent.is_dir():
            raise BadArgument(f"--screenshot {screenshot}: folder {out.parent} does not exist; create it first")
        if out.suffix.lower() not in (".png", ".jpg", ".jpeg", ".bmp"):
            raise BadArgument(f"--screenshot {screenshot}: name a .png file")
        # A screenshot needs no display: render offscreen unless a platform was chosen explicitly.
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    root, session = _root_of(args)
    try:
        sampler = Sampler(root, interval=interval)
        if session is not None:
            sampler.source = str(session.source)
        if screenshot:
            return _screenshot(sampler, metric, size, interval, Path(screenshot))
        return _interactive(sampler, metric, size, interval)
    finally:
        if session is not None:
            session.close()


def _application():
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication
    app = QApplication.instance() or QApplication(["coremap"])
    app.setApplicationName("coremap")
    app.setApplicationDisplayName("coremap")
    app.setDesktopFileName("coremap")
    icon = resource_path(ICON)
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    return app


def _screenshot(sampler: Sampler, metric, size, interval: float, out: Path) -> int:
    # Sample before the window exists: a slow or failing read is reported without Qt in the way.
    state = sampler.tick()
    if sampler.live:
        time.sleep(min(interval, SCREENSHOT_RATE_WINDOW))
        state = sampler.tick()
    app = _application()
    from widgets.main_window import MainWindow
    window = MainWindow(None, metric=metric, interval=interval)
    window.resize(*size)
    window.show()
    app.processEvents()
    window.set_state(state)
    app.processEvents()
    window.topology_view.zoom_fit()
    app.processEvents()
    image = window.grab()
    ok = image.save(str(out))
    window.close()
    window.deleteLater()
    app.processEvents()
    if not ok:
        raise BadArgument(f"--screenshot {out}: could not write the image; check the folder's permissions")
    return 0


def _interactive(sampler: Sampler, metric, size, interval: float) -> int:
    app = _application()
    from PySide6.QtCore import QTimer
    from widgets.main_window import MainWindow
    from widgets.sampler_thread import SamplerThread
    thread = SamplerThread(sampler)
    window = MainWindow(thread, metric=metric, interval=interval, crash_recovery=True)
    window.resize(*size)
    window.show()
    thread.start()
    # Ctrl+C in the terminal closes the window cleanly: Python signal handlers run only when the
    # interpreter gets control, so a slow timer hands it control a few times a second.
    signal.signal(signal.SIGINT, lambda *_: window.close())
    wake = QTimer()
    wake.timeout.connect(lambda: None)
    wake.start(300)
    try:
        return int(app.exec())
    finally:
        wake.stop()
        thread.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)
