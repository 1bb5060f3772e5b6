"""A stored first-touch run: of the probe's own mapping (no `mode`; a row per NUMA node) or of a JVM
command run twice (`"mode": "command"`, probes/pretouch.py). Results before the per-GiB figures and
THP counts lack ms_per_gib, cpu_ms_per_gib, sys_ms_per_gib, off_cpu_share, stalls, stall_ns and vmstat."""
from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Struct

from app.parse.json_text import Count, CpuId, NonNegative
from app.store.results import U63, Absent, Text, list_of, text, whole
from probes.result import Result, Share, Tail

OFFSET = whole(0, 1 << 50)
STRETCHES = list_of(tuple[OFFSET, NonNegative], 4096)   # [offset in the mapping, ns per page]


class PerGib(Struct, kw_only=True):
    ms_per_gib: NonNegative | None = None
    cpu_ms_per_gib: NonNegative | None = None
    sys_ms_per_gib: NonNegative | None = None


class Vmstat(Struct, kw_only=True):
    compact_stall: Count = 0
    thp_fault_alloc: Count = 0
    thp_fault_fallback: Count = 0


class FirstTouch(PerGib, kw_only=True):
    ns_per_page: NonNegative | None
    sys_share: Share | None                 # null: under 50 ms of CPU time
    minor_faults: Count
    off_cpu_share: Share | None = None
    stalls: Count | Absent = UNSET
    stall_ns: NonNegative | Absent = UNSET
    vmstat: Vmstat | None = None            # null: no end line (a run cut short)
    percentiles: Tail | None = None

    def __post_init__(self):
        if self.stalls and self.stall_ns is UNSET:
            raise ValueError("stall_ns: missing (stalls counted)")


class SecondTouch(PerGib, kw_only=True):
    ns_per_page: NonNegative | None


class Series(Struct, kw_only=True):
    first: STRETCHES
    second: STRETCHES


class Node(Struct, kw_only=True):
    node: whole(0, 1023)
    local: bool | None                      # null: the CPU's node is not known
    ratio: NonNegative | None
    huge_pages: whole(-U63, U63) | None     # a difference: may be below 0
    on_node_share: Share | None
    first: FirstTouch
    second: SecondTouch
    series: Series


class Thp(Struct, kw_only=True):
    asked: text(64) | None
    system: text(64) | None
    defrag: text(64) | None
    meaning: Text


class CommandRun(Struct, kw_only=True):
    pretouch: bool
    exit_status: whole(-64, 255)            # -N: killed by signal N
    wall_ns: Count
    user_ns: Count
    sys_ns: Count
    minor_faults: Count
    flag_in: text(64)                       # "command line" or "JAVA_TOOL_OPTIONS"


class Stored(Result, kw_only=True):
    mode: Literal["command"] | Absent = UNSET   # absent: a run of the mapping
    title: text(200)
    cpu: CpuId | None = None                # null: an --unbound run
    sampled_seconds: NonNegative = 0
    size_bytes: whole(1, 1 << 50) | None = None     # null only without a hello line
    page_bytes: whole(1, 1 << 30) | None | Absent = UNSET
    stretch_bytes: whole(1, 1 << 50) | None = None
    table_note: Text | None = None          # null: more than one NUMA node
    thp: Thp | Absent = UNSET
    nodes: list_of(Node, 1024) | Absent = UNSET
    runs: list_of(CommandRun, 16) | Absent = UNSET

    def __post_init__(self):
        super().__post_init__()
        if self.mode == "command" and self.runs is UNSET:
            raise ValueError("runs: missing (a command run)")
        if self.mode != "command" and UNSET in (self.page_bytes, self.thp, self.nodes):
            raise ValueError("page_bytes, thp and nodes: a run of the mapping holds all three")
