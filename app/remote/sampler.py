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
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace

from app.errors import CoremapError
from app.remote.client import AgentClient
from app.remote.codec import StateReceiver
from app.remote.decode import DecodeError
from app.remote.hosts import HostSpec
from app.remote.transport import Disconnected, LinkError
from app.machine.topology import Topology
from app.sampling.machine_state import MachineState
from app.sampling.sampler import clamp_interval
from app.sysroot import SysRoot

BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
TICK_TIMEOUT = 30.0         # a tick of thousands of threads on a loaded server takes a second, not thirty


class RemoteSampler:
    """Sampler.tick() on `host`, through its agent. `root`: a capture on the server instead of its live
    machine (`coremap --host H --root DIR`)."""

    live = True

    def __init__(self, host: HostSpec, *, interval: float = 1.0, root: str | None = None,
                 connect=None, clock=time.monotonic):
        self.host = host
        self.interval = clamp_interval(interval)
        self.remote_root = root
        self.root: SysRoot | None = None    # no SysRoot on this side: captures come through capture.py
        self.source = f"ssh {host}"
        self.generation: int = 0
        self.session = uuid.uuid4().hex[:12]     # the journal session of every agent this sampler opens
        self.root_key: str | None = None
        self.journal_stamp = None           # [size, mtime] of the server's journal at the last tick
        self.opened: dict = {}              # what `open` answered (host name there, live, source)
        self._connect = connect or AgentClient.connect
        self._clock = clock
        self._client: AgentClient | None = None
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
        self._closed = False
        self._lock = threading.Lock()

    # -- the connection ---------------------------------------------------------------------------------
    @property
    def client(self) -> AgentClient | None:
        """The connected client, or None while the link is down (pins and probes use it too)."""
        c = self._client
        return c if c is not None and c.alive else None

    def connect(self) -> AgentClient:
        """Connect now (the CLI and the window do, to report a host that cannot be reached before
        anything else starts); LinkError otherwise."""
        c = self.client
        if c is not None:
            return c
        client = self._connect(self.host)
        try:
            opened = client.call("open", root=self.remote_root, interval=self.interval, session=self.session)
            if not isinstance(opened, dict) or not isinstance(opened.get("root_key"), str):
                raise Disconnected(f"{self.host}: the agent did not say what it opened")
        except CoremapError:
            client.close()
            raise
        with self._lock:
            if self._closed:
                client.close()
                raise Disconnected(f"{self.host}: the connection was closed")
            self._client = client
        self.opened = {k: opened.get(k) for k in ("host", "live", "source")}
        self.root_key = opened["root_key"]
        self._receiver = StateReceiver()
        self._track_sent = False
        self._interval_sent = self.interval
        self._down, self._failures = None, 0
        return client

    def close(self) -> None:
        """End the connection now; a tick under way ends at once (stale) and none starts again. Safe to
        call from another thread than the one ticking."""
        with self._lock:
            self._closed = True
            c, self._client = self._client, None
        if c is not None:
            c.close()

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
        self.journal_stamp = tuple(stamp) if isinstance(stamp, list) else None
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
        if self._closed:
            raise Disconnected(f"{self.host}: the connection was closed")
        c = self._client
        if c is not None and c.alive:
            return c
        if c is not None:
            self._lost(c.failure or Disconnected(f"{self.host}: the connection ended"))
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
        with self._lock:
            c, self._client = self._client, None
        if c is not None:
            c.close(why)
        if self._down is None or why is not self._down:
            self._failures += 1
            self._retry_at = self._clock() + BACKOFF[min(self._failures, len(BACKOFF)) - 1]
        self._down = why

    def _stale(self) -> MachineState:
        """The last state marked stale, under a new generation; before any state, the failure itself."""
        wait = max(0, math.ceil(self._retry_at - self._clock()))
        why = str(self._down)
        if self._last is None:
            raise LinkError(f"{why} — retrying in {wait} s" if not self._closed else why)
        text = f"disconnected — reconnecting in {wait} s ({why})" if not self._closed else f"disconnected ({why})"
        self.generation += 1
        return replace(self._last, generation=self.generation, stale=text, notes=(text, *self._last.notes))
