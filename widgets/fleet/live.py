"""One host of a metrics engine in the main window (`coremap --pcp URL --host NAME`, `coremap --prometheus URL
--host INSTANCE`, or Open this host in the fleet window): the window built as for any machine
(widgets/application.py build_window) on a SourceHost (app/sources/live.py open_host), its
grid coloured as over ssh; read-only, since its states are not live. With --screenshot, the first state with
rates rendered offscreen (widgets/pictures.py)."""
from __future__ import annotations

import os
from pathlib import Path

from app.atomic import write_atomic
from app.host import Host
from widgets.application import DEFAULT_SIZE, build_window, parse_size, render_window
from widgets.colors import Metric, parse_metric
from widgets.harness import application
from widgets.main_window import MainWindow
from widgets.pictures import first_state


def open_source_window(host: Host, *, metric: Metric | str | None = None, size=DEFAULT_SIZE) -> MainWindow:
    """The window on `host`, shown, its sampler ticking on its own thread from now on (the first tick
    included: a slow source never holds the UI thread); closing the window stops it."""
    window = build_window(host, metric=metric, interval=host.sampler.interval)
    window.resize(*size)
    window.show()
    window.sampler_thread.start()
    return window


def run_source_window(host: Host, args) -> int:
    metric = parse_metric(getattr(args, "color_by", None))
    size = parse_size(getattr(args, "size", None))
    out = getattr(args, "screenshot", None)
    if out:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        state = first_state(host.sampler)
        application()
        write_atomic(Path(out), render_window(state, size=size, metric=metric))
        print(f"{out}: {host.sampler.source}")
        return 0
    app = application()
    window = open_source_window(host, metric=metric, size=size)
    try:
        return int(app.exec())
    finally:
        window.sampler_thread.stop()
