"""What every stored probe result may hold (Result), which each probe's own type (probes/<name>/result.py)
extends; the records a verification's side holds too are in app/store/results.py. probes/results.py
check_result checks a result field by field against Result (one out of its definition is left out, with a
note), then whole against its probe's type; a field the probe's type defines again (jitter's `cpu`: one
CPU, not a list) is its alone. Fields no definition names pass unread. Bounds far above any machine's keep
the readers' sums finite."""
from __future__ import annotations

from msgspec import UNSET, Struct, field

from app.parse.json_text import Count, CpuId, NonNegative
from app.store.results import (Absent, Attribution, Bucket, BucketSpan, GapRow, PercentileMap, Text, list_of,
                               number, text, whole)

Share = number(0, 1)


class Tail(Struct, kw_only=True):
    """A run's median and tail, where it has them (null: no sample)."""
    p50: Count | None = None
    p99: Count | None = None
    max: Count | None = None


class Percentiles(Struct, kw_only=True):
    """The latency percentiles of a run (null: no sample)."""
    p50: Count | None
    p90: Count | None
    p99: Count | None
    p99_9: Count | None = field(name="p99.9")
    max: Count | None


class AtLeast(Struct, kw_only=True):
    ns: whole(1)
    count: Count
    exact: bool
    per_second: NonNegative | None
    per_cpu_hour: NonNegative | None


class Gaps(Struct, kw_only=True):
    """The gaps a run counted from `from_ns` on (absent before gaps led the text)."""
    from_ns: whole(1)
    count: Count
    max_ns: Count | None                # null: no gap at all
    lost_share: NonNegative | None      # null: nothing sampled
    at_least: list_of(AtLeast, 16)
    percentiles: Percentiles


class Host(Struct, kw_only=True):
    """The machine a run measured (probes/common.py host_facts): what a report or an export of another
    machine checks it against (app/store/result_host.py); each field null where the machine did not say."""
    hostname: text(255) | None = None   # HOST_NAME_MAX (64) is Linux's; DNS names reach 253
    machine_id: text(64) | None = None
    kernel: text(256) | None = None
    cpu_model: text(256) | None = None


class Result(Struct, kw_only=True):
    """The fields every probe's result may have. `probe` names the result's type (probes/results.py)."""
    label: Text | None = None
    source: Text | None = None
    title: text(1 << 16) | None = None
    verdict: text(1 << 16) | None = None
    loop_ns: NonNegative | None = None
    # 0 (no interval line) or at least one ns: the histogram's per CPU-hour divides by it; null: a run
    # that samples nothing (c2c)
    sampled_seconds: NonNegative | None = None
    achieved_duty: NonNegative | None = None
    lost_share: NonNegative | None = None
    mean_ns: NonNegative | None = None
    min_ns: NonNegative | None = None
    interval_ns: NonNegative | None = None
    baseline_ns: NonNegative | None = None
    iterations: Count | None = None
    wakeups: Count | None = None
    rounds: Count | None = None
    threshold_ns: Count | None = None
    cpu: CpuId | list_of(CpuId) | None = None       # one CPU, or those of a run over several (sweep, c2c)
    percentiles: PercentileMap | None = None
    buckets: list_of(Bucket) | None = None
    gaps_per_cpu_hour: list_of(GapRow, 256) | None = None
    gaps: Gaps | Absent = UNSET
    attribution: Attribution | None = None          # null: a run without --attribute
    host: Host | Absent = UNSET

    def __post_init__(self):
        if self.sampled_seconds is not None and 0 < self.sampled_seconds < 1e-9:
            raise ValueError("sampled_seconds: 0 or at least one ns")
        if self.buckets is not None and _overlap(self.buckets):
            # the window's histogram draws one edge after another, and refused an overlap with a ValueError
            raise ValueError("buckets: a bucket reaches into the next, or ends before it starts")


def _overlap(buckets: list) -> bool:
    spans = sorted((b.lo_ns, b.hi_ns) if isinstance(b, BucketSpan) else (b[0], b[1])
                   for b in buckets if isinstance(b, BucketSpan) or len(b) == 3)
    return any(lo > hi for lo, hi in spans) or any(b[0] < a[1] for a, b in zip(spans, spans[1:]))
