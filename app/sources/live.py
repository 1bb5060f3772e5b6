"""SourceSampler: one host of a metrics engine as a MachineSource (app/sampling/sources.py), so the window's
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

from app.machine.topology import Topology
from app.sampling.machine_state import MachineState
from app.sampling.sampler import clamp_interval


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


def pcp_sampler(url: str, hostspec: str, *, auth=None, interval: float = 1.0, captures=None) -> SourceSampler:
    """`captures`: a CaptureShelf (app/sources/captures.py) whose capture of the host completes its topology."""
    from app.sources.pcp import Pmproxy
    host = Pmproxy(url, auth=auth).host(hostspec)
    return SourceSampler(_completed(host.state, captures, hostspec), f"pcp {hostspec} via {url}", interval=interval)


def prometheus_sampler(url: str, instance: str, *, auth=None, interval: float = 1.0,
                       at: float | None = None, captures=None, check: bool = True, match: str = "") -> SourceSampler:
    """`check`: ask the server what it is first (False where the fleet it came from has just read it:
    the window opened from the fleet never waits on the network in the UI thread)."""
    from app.sources.prometheus import Prometheus
    prom = Prometheus(url, auth=auth, match=match)
    if check:
        prom.check()
    return SourceSampler(_completed(lambda g: prom.host_state(instance, g, at), captures, instance),
                         f"prometheus {instance} via {url}", interval=interval)


def host_opener(*, pcp: str | None = None, prometheus: str | None = None, auth=None, interval: float = 1.0,
                captures=None, match: str = "") -> Callable[[str], SourceSampler]:
    """How a fleet read from `pcp` or `prometheus` opens one of its hosts live (the fleet window's Open this
    host): the sampler `coremap --pcp URL --host NAME` / `--prometheus URL --host INSTANCE` runs on.
    Building it touches no network; its first tick, on the sampler's thread, does."""
    if pcp:
        return lambda host: pcp_sampler(pcp, host, auth=auth, interval=interval, captures=captures)
    return lambda host: prometheus_sampler(prometheus, host, auth=auth, interval=interval, captures=captures,
                                           check=False, match=match)


def _completed(read: Callable[[int], MachineState], captures, host: str) -> Callable[[int], MachineState]:
    if captures is None:
        return read
    from app.sources.captures import complete_state
    return lambda g: complete_state(captures, read(g), host)
