"""A stored sweep, as its text, the report and the window read it: a row per CPU swept."""
from __future__ import annotations

from msgspec import Struct

from app.parse.json_text import Count, CpuId, NonNegative
from app.store.results import list_of, number
from probes.result import Result


class SweptCpu(Struct, kw_only=True):
    cpu: CpuId
    mean_ns: NonNegative
    sd_ns: NonNegative
    cv: NonNegative             # analyse writes null only for a mean of 0 ns, which no timed unit has
    loss_vs_best: number(-1)    # mean / best CPU's mean - 1: below 0 for a CPU faster on average
    flagged: bool


class Stored(Result, kw_only=True):
    rounds: Count | None                    # null: summarized without its hello line
    cpus: list_of(SweptCpu)
    best_cpu: CpuId | None                  # null: stopped before its first round
    baseline_ns: NonNegative | None
