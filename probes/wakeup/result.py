"""A stored wakeup run, as its text, the report and the window read it."""
from __future__ import annotations

from msgspec import UNSET, Struct

from app.parse.json_text import Count, CpuId
from app.store.results import Absent, Text, text, whole
from probes.result import Percentiles, Result


class DmaLatency(Struct, kw_only=True):
    held: bool
    why: Text | None = None


class Stored(Result, kw_only=True):
    cpu: CpuId | None = None
    wakeups: Count = 0
    interval_ns: Count | None = None        # null: a run without a hello line
    min_ns: Count | None = None
    percentiles: Percentiles | Absent = UNSET
    # how it ran: absent before the text said it, null where the hello line did not say
    policy: text(32) | None = None
    priority: whole(0, 99) | None = None
    timer_slack_ns: Count | None = None
    dma_latency: DmaLatency | Absent = UNSET
