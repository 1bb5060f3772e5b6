"""RemoteSampler: a MachineSource (app/sampling/sources.py), as Sampler is, for a machine reached over ssh, so
the window's SamplerThread, `--screenshot` and everything else that drives a MachineSource drive this
one unchanged.

Each `tick()` asks the agent for one Sampler.tick() on the server and applies the delta it sends
(codec.py). The window's thread keeps time as it does locally (the interval, the first rates after
half a second, pause): a paused window costs the server nothing, and a slow link never queues states
(there is at most one tick under way). What the window changes between ticks (the threads to follow,
processes to re-read after a pin, the interval, a topology refresh) rides along with the next tick.

The link fails gracefully. When a tick cannot be answered (the connection dropped, the agent sent
something coremap cannot use), the client is dropped and the last state comes back marked stale —
`state.stale` says "disconnected — reconnecting in 4 s (why)", as does its first note — under a new
generation, never as live. Reconnecting is tried at the next tick once the backoff (1, 2, 4 ... 30 s)
has passed; a new agent sends a whole state again. Before any state, a failure raises its LinkError
(one line: refused, login refused, unknown host key, ...).
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import replace

from app.remote.client import AgentClient, Link
from app.remote.codec import StateReceiver
from app.remote.decode import DecodeError
from app.remote.hosts import HostSpec
from app.remote.transport import Disconnected, LinkError
from app.machine.topology import Topology
from app.sampling.machine_state import MachineState
from app.sampling.sampler import clamp_interval

BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
TICK_TIMEOUT = 30.0         # a tick of thousands of threads on a loaded server takes a second, not thirty


class RemoteSampler:
    """Sampler.tick() on `host`, through its agent, over `link` (its RemoteHost's: app/remote/host.py;
    one of its own otherwise, from `root`, a capture on the server instead of its live machine, and
    `connect`)."""

    live = True
    root = None                 # no SysRoot on this side: captures come through capture.py

    def __init__(self, host: HostSpec, *, interval: float = 1.0, root: str | None = None,
                 connect=None, clock=time.monotonic, link: Link | None = None):
        self.host = host
        self.link = link or Link(host, root=root, connect=connect)
        self.interval = clamp_interval(interval)
        self.source = f"ssh {host}"
        self.generation: int = 0
        self._clock = clock
        self._seen: AgentClient | None = None     # the client the receiver's deltas come from
        self._receiver: StateReceiver | None = None
        self._last: MachineState | None = None
        self._tids: tuple[int, ...] = ()
        self._pids: tuple[int, ...] = ()
        self._track_sent = False
        self._forget: set[int] | None = set()     # None: every process
        self._refresh = False
        self._interval_sent: float | None = None
        self._down: LinkError | None = None
        self._retry_at = 0.0
        self._failures = 0

    # -- the connection ---------------------------------------------------------------------------------
    @property
    def client(self) -> AgentClient | None:
        """The connected client, or None while the link is down."""
        return self.link.client

    def connect(self) -> AgentClient:
        """Connect now (the CLI and the window do, to report a host that cannot be reached before
        anything else starts); LinkError otherwise. A new agent sends a whole state first."""
        client = self.link.connect(self.interval)
        if client is not self._seen:
            self._seen = client
            self._receiver = StateReceiver()
            self._track_sent = False
            self._interval_sent = self.interval
            self._down, self._failures = None, 0
        return client

    def close(self) -> None:
        """End the connection now; a tick under way ends at once (stale) and none starts again. Safe to
        call from another thread than the one ticking."""
        self.link.close()

    # -- the MachineSource ------------------------------------------------------------------------------------
    def tick(self) -> MachineState:
        try:
            client = self._usable_client()
            reply = client.call("tick", timeout=TICK_TIMEOUT, **self._tick_params())
            if not isinstance(reply, dict):
                raise DecodeError("a tick answer that is not an object")
            state = self._receiver.apply(reply.get("state"))
        except DecodeError as e:
            self._lost(Disconnected(f"{self.host} sent a state coremap cannot use ({e})"))
            return self._stale()
        except LinkError as e:
            self._lost(e)
            return self._stale()
        self._sent()
        stamp = reply.get("journal")
        self.link.journal_stamp = tuple(stamp) if isinstance(stamp, list) else None
        self.generation += 1
        self._last = replace(state, generation=self.generation, host=str(self.host), stale="")
        return self._last

    def set_interval(self, seconds: float) -> float:
        self.interval = clamp_interval(seconds)
        return self.interval

    def track(self, tids: Iterable[int], pids: Iterable[int] = ()) -> None:
        self._tids = tuple(dict.fromkeys(int(t) for t in tids))
        self._pids = tuple(dict.fromkeys(int(p) for p in pids))
        self._track_sent = False

    @property
    def tracked(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self._tids, self._pids

    def forget_threads(self, pids: Iterable[int] | None = None) -> None:
        if pids is None:
            self._forget = None
        elif self._forget is not None:
            self._forget.update(int(p) for p in pids)

    def refresh_topology(self) -> Topology | None:
        self._refresh = True
        return self._last.topology if self._last is not None else None

    # -- inside ---------------------------------------------------------------------------------------------
    def _usable_client(self) -> AgentClient:
        if self.link.closed:
            raise Disconnected(f"{self.host}: the connection was closed")
        if self.link.client is not None:
            return self.connect()
        why = self.link.lost()
        if why is not None:
            self._lost(why)
        if self._down is not None and self._clock() < self._retry_at:
            raise self._down
        return self.connect()

    def _tick_params(self) -> dict:
        p: dict = {}
        if self._interval_sent != self.interval:
            p["interval"] = self.interval
        if not self._track_sent:
            p["track"] = [list(self._tids), list(self._pids)]
        if self._forget is None:
            p["forget"] = "all"
        elif self._forget:
            p["forget"] = sorted(self._forget)
        if self._refresh:
            p["refresh"] = True
        return p

    def _sent(self) -> None:
        self._interval_sent = self.interval
        self._track_sent = True
        self._forget = set()
        self._refresh = False

    def _lost(self, why: LinkError) -> None:
        """The link is down: drop the client, and wait the next backoff step before trying again."""
        self.link.drop(why)
        if self._down is None or why is not self._down:
            self._failures += 1
            self._retry_at = self._clock() + BACKOFF[min(self._failures, len(BACKOFF)) - 1]
        self._down = why

    def _stale(self) -> MachineState:
        """The last state marked stale, under a new generation; before any state, the failure itself."""
        wait = max(0, math.ceil(self._retry_at - self._clock()))
        why = str(self._down)
        closed = self.link.closed
        if self._last is None:
            raise LinkError(f"{why} — retrying in {wait} s" if not closed else why)
        text = f"disconnected — reconnecting in {wait} s ({why})" if not closed else f"disconnected ({why})"
        self.generation += 1
        return replace(self._last, generation=self.generation, stale=text, notes=(text, *self._last.notes))
