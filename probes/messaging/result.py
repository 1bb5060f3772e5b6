"""A stored messaging run. Results before paced senders have no rates, paces, lost, drained, cpu_series
or pace_of_window. Rates are at most 1e12 a second (the plot scales its y range by 1.15); per-window
lists hold 10 windows a second for at most a day."""
from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from app.parse.json_text import Count, CpuId, NonNegative
from app.store.results import Text, list_of, number, text, whole
from probes.result import Result, Tail

RATE = number(0, 1e12)
WINDOWS = 1 << 20
# a window's [sender, receiver] CPU when last read (-1: not read)
CPU_PAIR = Annotated[list[whole(-1, 65535)], Meta(min_length=2, max_length=2)]


class Migrations(Struct, kw_only=True):
    sender: Count | None                    # null: the kernel did not say
    receiver: Count | None


class Pace(Struct, kw_only=True):
    label: text(64)
    achieved_rate: RATE | None = None       # null: no window at this pace
    sent: Count
    lost: Count | None = None
    latency: Tail | None = None


class Placement(Struct, kw_only=True):
    """Where the sender and the receiver ran: both pinned (CPUs) or neither (both null): the view
    sorts {send, recv} when send is a CPU."""
    name: Text
    kind: Text
    send: CpuId | None
    recv: CpuId | None
    series: list_of(RATE, WINDOWS)          # messages per second of each window
    pace_of_window: list_of(Count, WINDOWS) = []    # an index into rates
    cpu_series: list_of(CPU_PAIR | None, WINDOWS) = []     # null: not kept
    median_rate: RATE | None = None         # null: no saturation window
    cv: NonNegative | None                  # null: fewer than two saturation windows
    sent: Count
    received: Count
    lost: Count | None = None               # null: drained messages not counted
    migrations: Migrations
    paces: list_of(Pace, 1024) = []

    def __post_init__(self):
        if (self.send is None) != (self.recv is None):
            raise ValueError("send and recv: both CPUs, or both null")


class Stored(Result, kw_only=True):
    title: Text
    verdict: Text = ""                      # the view adds to it: never null
    sampled_seconds: NonNegative = 0
    window_ns: whole(0, 10 ** 12) | None = None     # null: a run that sent no hello
    rounds: whole(1) | None = None
    message_bytes: whole(1) | None = None   # null: no segment finished
    rates: list_of(RATE, 1024) = []         # 0: as fast as it can
    missing: list_of(Text, 64) = []
    placements: list_of(Placement, 4096)
