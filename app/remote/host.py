"""RemoteHost: a machine over ssh as one Host (app/host.py). It owns the connection (a Link:
app/remote/client.py) and everything that goes over it hangs off that: the sampler's ticks (which
reconnect between ticks), the pins and the quiet CPUs the agent's own AffinityService makes and journals
there, probe runs started there, and a snapshot taken there and brought here. Closing the host closes
the connection, so a tick waiting on the network, or a reconnect waiting on ssh's connect timeout, ends
at once.
"""
from __future__ import annotations

from app.errors import CoremapError
from app.host import Host
from app.remote.capture import capture_session
from app.remote.client import AgentClient, Link
from app.remote.hosts import HostSpec
from app.remote.pins import RemoteAffinityService
from app.remote.probe_runs import RemoteProbeRun
from app.remote.quiet import RemoteQuiet
from app.remote.sampler import RemoteSampler
from app.store.session import Session


class RemoteHost(Host):
    """`spec` over ssh; `root`: a capture on the server instead of its live machine. Not connected
    until `connect()` (the CLI and the window connect before anything else, to report a host that
    cannot be reached in one line)."""

    probes_elsewhere = True

    def __init__(self, spec: HostSpec, *, interval: float = 1.0, root: str | None = None, connect=None):
        self.link = link = Link(spec, root=root, connect=connect)
        pins = RemoteAffinityService(link)
        super().__init__(str(spec), RemoteSampler(spec, interval=interval, link=link), pins=pins,
                         quiet=RemoteQuiet(pins), probes=RemoteProbeRun.starter(lambda: link.client),
                         capture=self._capture)
        self.spec = spec

    def connect(self) -> AgentClient:
        """Connect now, as the sampler's first tick would (the agent opens the machine there)."""
        return self.sampler.connect()

    def _capture(self) -> Session:
        client = self.link.client
        if client is None:
            raise CoremapError(f"{self.spec}: disconnected — reconnecting; save or report once the window "
                               "shows the machine live again")
        return capture_session(client)

    def close(self) -> None:
        self.link.close()
