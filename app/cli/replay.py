"""`coremap --session FILE --at TIME`, `coremap --prometheus URL --host INSTANCE --at TIME` and
`coremap --pcp-archive ARCHIVE --at TIME`: the window as of a moment of the past, with a time slider over
the history (or, with --screenshot, that moment rendered and saved). app/sources/replay.py reads the
histories; TIME is seconds from the start (90), from the end (-30), `end`, or a time (2026-11-25T13:40:00)."""
from __future__ import annotations

import time

from app.atomic import check_output_path
from app.errors import CoremapError

PROMETHEUS_SPAN = 3600.0        # the slider over a Prometheus host: the hour up to --at
PROMETHEUS_STEP = 15.0


class ReplayOptionError(CoremapError):
    """--at given with what has no history."""


def timeline_of(args):
    """The Timeline the options name (the session is closed by the caller through `.session`)."""
    from app.sources import replay
    if getattr(args, "pcp_archive", None):
        return replay.PcpArchiveTimeline(args.pcp_archive)
    if getattr(args, "session", None):
        from app.store.session import open_session
        session = open_session(args.session)
        try:
            tl = replay.SessionTimeline(session)
        except CoremapError:
            session.close()
            raise
        tl.session = session
        return tl
    if getattr(args, "prometheus", None):
        if not args.host:
            raise ReplayOptionError("--prometheus --at: name the host to replay with --host INSTANCE")
        from app.sources.http import auth_for
        from app.sources.prometheus import Prometheus
        prom = Prometheus(args.prometheus, auth=auth_for(args.prometheus, getattr(args, "source_config", None)))
        prom.check()
        end = time.time()
        tl = replay.PrometheusTimeline(prom, args.host, end - PROMETHEUS_SPAN, end, PROMETHEUS_STEP)
        at = replay.parse_at(args.at, tl)
        if not tl.times[0] <= at <= tl.times[-1]:
            tl = replay.PrometheusTimeline(prom, args.host, at - PROMETHEUS_SPAN, at, PROMETHEUS_STEP)
        return tl
    raise ReplayOptionError("--at replays a history: give --session FILE, --pcp-archive ARCHIVE, or "
                            "--prometheus URL --host INSTANCE")


def run_replay(args) -> int:
    from app.sources.replay import parse_at
    if args.command is not None:
        raise ReplayOptionError("--at opens the window as of a moment; give no command with it")
    if getattr(args, "screenshot", None):
        check_output_path(args.screenshot, "--screenshot")
    from app.cli.desktop import require_display
    require_display(args)           # before the history is read: without a display Qt aborted (issue 32)
    tl = timeline_of(args)
    try:
        at = parse_at(args.at or "end", tl)
        try:
            from widgets.fleet.replay import run_replay_window
        except ImportError as e:
            raise CoremapError(f"the window needs PySide6 and pyqtgraph ({e})") from None
        return run_replay_window(tl, at, args)
    finally:
        session = getattr(tl, "session", None)
        if session is not None:
            session.close()
