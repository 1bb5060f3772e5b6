"""MachineSource: what hands the window one MachineState per tick, whichever machine it reads.

Two implement it: Sampler (app/sampling/sampler.py) reads this machine or a capture through a
SysRoot; RemoteSampler (app/remote/sampler.py) asks the agent on a machine over ssh for the same
Sampler.tick() there. The window's SamplerThread (widgets/sampler_thread.py), `--screenshot` and the
pictures drive a MachineSource, so they cannot tell the two apart except by `state.host` and
`state.stale`. tests/unit/test_remote_conformance.py checks both have every member below with a
signature that fits.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from app.machine.topology import Topology
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot


class MachineSource(Protocol):
    """One machine's states, tick by tick; the caller keeps time (`interval` says how often)."""

    live: bool                  # False: a capture, whose one state does not change
    interval: float             # seconds between ticks, clamped to MIN_INTERVAL..MAX_INTERVAL
    source: str                 # what the states come from, as the window's title says it
    generation: int             # of the last state handed out

    @property
    def root(self) -> SysRoot | None:
        """The machine's folder here, to save or report it from; None when it is read elsewhere."""

    def tick(self) -> MachineState:
        """The next state, under a new generation (CoremapError when none can be had)."""

    def set_interval(self, seconds: float) -> float:
        """The interval to keep from now on, clamped; returns the one kept."""

    def track(self, tids: Iterable[int], pids: Iterable[int] = ()) -> None:
        """Follow where these threads (and every thread of these processes) run."""

    @property
    def tracked(self) -> tuple[tuple[int, ...], tuple[int, ...]]: ...

    def forget_threads(self, pids: Iterable[int] | None = None) -> None:
        """Read these processes' threads (all when None) afresh at the next tick: after a pin."""

    def refresh_topology(self) -> Topology | None:
        """Read the topology again (a CPU went on or offline); the next state carries it."""
