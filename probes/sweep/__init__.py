"""The sweep probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop; its
tab is View in widgets/probe/sweep.py."""
from __future__ import annotations

from probes.record import SCHEDULED, Field, ProbeRecord


def _steps(spec) -> int:
    return max(1, spec.rounds if spec.rounds is not None else RECORD.field("rounds").default)


RECORD = ProbeRecord(
    "sweep", "Sweep (same work on each CPU)", order=30, takes=SCHEDULED, step="round", steps=_steps,
    view="Sweep",
    fields=(
        Field("rounds", "rounds", "int", "work units per CPU", default=120, low=2, high=100_000, unit="rounds"),
    ))
