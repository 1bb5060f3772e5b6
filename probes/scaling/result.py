"""A stored scaling run. A width's figures are medians of its rounds: null where no round measured
one, and a median of whole counts may be a half. Ceilings: the plot multiplies a throughput by the
widest width, the text adds the two switch counts."""
from __future__ import annotations

from msgspec import UNSET, Struct

from app.parse.json_text import CpuId, NonNegative
from app.store.results import Absent, list_of, number, text, whole
from probes.result import Result

SWITCHES = number(0, 1 << 53)


class Width(Struct, kw_only=True):
    """1, 2, 4 ... CPUs, then unpinned."""
    label: text(64)
    width: whole(1, 65536)
    cpus: list_of(CpuId)                    # lit up in the grid when its row is selected
    pinned: bool
    throughput: number(0, 1e15) | None
    speedup: NonNegative | None
    factor: NonNegative | None
    flagged: bool
    wall_ns: NonNegative | None
    cpu_ns: NonNegative | None
    voluntary: SWITCHES | None
    involuntary: SWITCHES | None
    migrations: SWITCHES | None
    wait_share: NonNegative | None = None   # a command has none
    cpus_used: NonNegative | None = None    # newer than the first results


class Stored(Result, kw_only=True):
    title: text(1 << 16)                    # names the command, its words joined
    mode: text(16)                          # "work" or "command"
    threads: whole(1, 1024) | None          # null for a command
    rounds: whole(1)
    widths: list_of(Width, 256)
    verdict: text(1 << 16) | Absent = UNSET
