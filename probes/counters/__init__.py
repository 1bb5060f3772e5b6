"""The counters probe's record (probes/record.py). Beside it: measure.py, its runner; its loop is
count_command in probes/_native.c, which scaling and first-touch's JVM runs share."""
from __future__ import annotations

from probes.record import Field, ProbeRecord


RECORD = ProbeRecord(
    "counters", "Counters (perf events, pinned vs not)", order=50, takes=("unbound", "seconds"), per_cpu=True,
    timed=True,
    step="run", steps=lambda spec: 2, pin=False, usage="-c LIST [-- COMMAND]",
    fields=(
        Field("command", "command", "command", "the command counted, pinned and unpinned",
              placeholder="default: a jitter probe of the duration"),
    ))
