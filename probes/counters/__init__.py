"""The counters probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop."""
from __future__ import annotations

from probes.record import Field, ProbeRecord


RECORD = ProbeRecord(
    "counters", "Counters (perf events, pinned vs not)", order=50, takes=("unbound", "seconds"), per_cpu=True, timed=True,
    step="run", steps=lambda spec: 2, pin=False, usage="-c LIST [-- COMMAND]",
    fields=(
        Field("command", "command", "command", "the command counted, pinned and unpinned",
              placeholder="default: a jitter probe of the duration"),
    ))
