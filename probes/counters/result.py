"""A stored counters run: per perf event (probes/_native.c EVENTS), a count null where the kernel
refused the counter or the mode did not run, a ratio (pinned / unpinned) null where either is unknown
or unpinned is 0."""
from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from app.parse.json_text import Count, CpuId, NonNegative
from app.store.results import list_of, text
from probes.result import Result


class Compared(Struct, kw_only=True):
    pinned: Count | None
    unpinned: Count | None
    ratio: NonNegative | None


class Stored(Result, kw_only=True):
    cpu: CpuId | None                       # null: --modes unpinned without a CPU
    command: list_of(text(1 << 17)) | None  # an argument may be MAX_ARG_STRLEN long
    compare: Annotated[dict[str, Compared], Meta(max_length=64)]
