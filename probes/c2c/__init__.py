"""The c2c probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop; its
tab is View in widgets/probe/c2c.py."""
from __future__ import annotations

from probes.record import Field, ProbeRecord


def _steps(spec) -> int:
    n = len(spec.cpus)
    return max(1, len(spec.pairs.split(",")) if spec.pairs else n * (n - 1) // 2)


RECORD = ProbeRecord(
    "c2c", "Core to core (cache-line ping-pong)", order=40, step="pair", steps=_steps,
    view="Core to core",
    fields=(
        Field("pairs", "pairs", "text", "only these pairs (default: every pair of the CPUs)", metavar="A:B,...",
              placeholder="every pair of the CPUs, or e.g. 0:1,0:2"),
    ))
