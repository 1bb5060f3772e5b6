"""A stored jitter run, as its text, the report and the window read it: by its buckets, gaps and
attribution (probes/result.py Result); nothing more is required (its text is not printed again)."""
from __future__ import annotations

from app.parse.json_text import Count, CpuId
from probes.result import Result


class Stored(Result, kw_only=True):
    cpu: CpuId | None = None                # null: an --unbound run
    iterations: Count = 0
