"""open_host(args): the machine the arguments name, as one Host (app/host.py), for the window and the CLI:
this machine, a capture (--root), a saved session (--session), a machine over ssh (--host), or one
host of a metrics engine (--pcp / --prometheus with --host).

SourceSampler: one host of a metrics engine as a MachineSource (app/sampling/sources.py), so the window's
SamplerThread, `--screenshot` and the pictures drive it as they drive a Sampler or a RemoteSampler.

Each tick asks the engine for the host's state (PcpHost.state: rates between this fetch and the last;
Prometheus.host_state: the engine's irate, every IRQ row). Its states are marked not live (`state.live` is
False): the grid colours as over ssh, but nothing can be pinned or probed from here, since the host is
reached only through its metrics, and a drop must never pin this machine instead. There are no threads
to follow: the sources carry none.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from app.errors import CoremapError
from app.host import CaptureHost, Host, LocalHost
from app.sampling.interval import clamp_interval
from app.sysroot import SysRoot

# Every command opens its machine here: what only ssh, a session or a source needs is imported where it is opened.
if TYPE_CHECKING:
    from app.machine.topology import Topology
    from app.sampling.machine_state import MachineState


class HostOptionError(CoremapError):
    """Options that name no machine, or more than one."""


def open_host(args, *, check: bool = True) -> Host:
    """The machine `args` name (--root, --session, --host, --pcp/--prometheus with --host), opened: a
    host over ssh connected (and remembered for File → Connect…), a source's host asked once when
    `check` (a host it does not have is one line, before any window; the fleet window, which has just
    read it, opens its hosts without: its UI thread never waits on the network), a session's file opened.
    With --at (or --pcp-archive) it is a replay: the window as of that moment of a history, read-only, with
    `host.timeline` for a slider over the rest. Without `check`, a host over ssh is returned before it
    connects (`host.connect()`; File → Connect… does so off the UI thread and may close it meanwhile).
    CoremapError, with nothing left open, when it cannot be."""
    interval = getattr(args, "interval", None) or 1.0
    if getattr(args, "at", None) or getattr(args, "pcp_archive", None):
        return _replay_host(args, interval)
    if getattr(args, "pcp", None) or getattr(args, "prometheus", None):
        return _source_host(args, interval, check)
    if getattr(args, "host", None):
        if getattr(args, "session", None):
            raise HostOptionError("--host and --session both given: a session is a file here; open one at a time")
        from app.remote.host import RemoteHost
        from app.remote.hosts import parse_host, remember_host
        host = RemoteHost(parse_host(args.host), interval=interval, root=getattr(args, "root", None))
        if not check:
            return host         # File → Connect… connects it off the UI thread, cancellable by close()
        try:
            host.connect()
            remember_host(host.spec)
        except CoremapError:
            host.close()
            raise
        return host
    if getattr(args, "session", None):
        if getattr(args, "root", None):
            raise HostOptionError("--root and --session both given: open one machine at a time")
        from app.store.session import open_session
        from probes.results import check_result
        session = open_session(args.session, check_result)
        try:
            return CaptureHost(session.root, session=session, interval=interval)
        except CoremapError:
            session.close()
            raise
    return host_of_root(SysRoot(getattr(args, "root", None) or "/"), interval)


def host_of_root(root: SysRoot, interval: float = 1.0) -> Host:
    """The machine whose files are `root`: this one live ("/") or a copy the tests may write, else a
    capture (read-only)."""
    return LocalHost(root, interval=interval) if root.writable else CaptureHost(root, interval=interval)


def _replay_host(args, interval: float) -> SourceHost:
    """The history --at names (app/sources/replay.py timeline_of), shown at that moment."""
    from app.sources.replay import parse_at, timeline_of
    timeline = timeline_of(args)
    try:
        at = parse_at(getattr(args, "at", None) or "end", timeline)
        sampler = MomentSampler(timeline, at, interval=interval)
        return SourceHost(sampler, "replay", timeline=timeline, at=at,
                          name=f"{timeline.label} at {timeline.describe(timeline.nearest(at))}")
    except CoremapError:
        if timeline.session is not None:
            timeline.session.close()
        raise


def _source_host(args, interval: float, check: bool) -> SourceHost:
    """One host of --pcp's pmproxy or of --prometheus; `--captures DIR`: a folder of snapshots whose
    capture of the host completes the topology the source gives (app/sources/captures.py)."""
    from app.sources.captures import CaptureShelf, complete_state
    from app.sources.http import auth_for
    name, url = getattr(args, "host", None), args.pcp or args.prometheus
    if not name:
        raise HostOptionError("name the host to open: --host NAME (a pmcd hostspec for --pcp, an instance "
                              "for --prometheus); `coremap fleet` shows them all")
    auth = auth_for(url, getattr(args, "source_config", None))
    captures = CaptureShelf(args.captures) if getattr(args, "captures", None) else None
    if args.pcp:
        from app.sources.pcp import Pmproxy
        kind, read = "PCP", Pmproxy(url, auth=auth).host(name).state
    else:
        from app.sources.prometheus import Prometheus
        prom = Prometheus(url, auth=auth, match=getattr(args, "match", None) or "")
        if check:
            prom.check()        # the server is a Prometheus (the fleet it came from has just read it)
        kind, read = "Prometheus", lambda g: prom.host_state(name, g)
    completed = read if captures is None else lambda g: complete_state(captures, read(g), name)
    host = SourceHost(SourceSampler(completed, f"{kind.lower()} {name} via {url}", interval=interval), kind)
    if check:
        host.sampler.tick()         # a host the source does not have is one line here, before any window
    return host



class SourceSampler:
    live = True                 # it keeps ticking; its states say live=False (no pins, no probes)
    root = None                 # nothing of the host is here to save as a capture

    def __init__(self, read: Callable[[int], MachineState], source: str, *, interval: float = 1.0):
        self._read = read
        self.source = source
        self.interval = clamp_interval(interval)
        self.generation = 0
        self._lock = threading.Lock()

    def tick(self) -> MachineState:
        with self._lock:
            self.generation += 1
            state = self._read(self.generation)
            return replace(state, generation=self.generation, live=False, host="", source=self.source)

    def set_interval(self, seconds: float) -> float:
        self.interval = clamp_interval(seconds)
        return self.interval

    def track(self, tids: Iterable[int], pids: Iterable[int] = ()) -> None:
        """The sources carry no threads: nothing to follow."""

    @property
    def tracked(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return (), ()

    def forget_threads(self, pids: Iterable[int] | None = None) -> None:
        """No threads are read, so none to read again."""

    def refresh_topology(self) -> Topology | None:
        """Each tick carries the topology the source gives now (a CPU gone offline shows at the next)."""
        return None


class MomentSampler(SourceSampler):
    """One moment of a Timeline (app/sources/replay.py): not live, so the window's sampler thread ticks it
    once; `moment(t)` is the state at another (the replay's slider), numbered after every state before."""

    live = False

    def __init__(self, timeline, at: float, *, interval: float = 1.0):
        super().__init__(timeline.state_at, timeline.label, interval=interval)
        self.timeline, self.at = timeline, at

    def tick(self) -> MachineState:
        return self.moment(self.at)

    def moment(self, t: float) -> MachineState:
        with self._lock:
            self.generation += 1
            return self.timeline.state_at(t, self.generation)


class SourceHost(Host):
    """One host of a metrics engine (`kind`: PCP, Prometheus), or a replay of a history (`timeline`,
    shown `at` a moment): its states only, read-only."""

    def __init__(self, sampler: SourceSampler, kind: str, *, timeline=None, at: float | None = None,
                 name: str | None = None):
        why = f"read-only: a {kind} source" if timeline is None else f"read-only: a replay of {timeline.label}"
        super().__init__(name or sampler.source, sampler, absent={
            "pins": why, "quiet": why, "probes": f"{why}: no live probes",
            "capture": f"{why}: nothing of the host is here to save"})
        self.timeline, self.at = timeline, at

    def close(self) -> None:
        if self.timeline is not None and self.timeline.session is not None:
            self.timeline.session.close()
