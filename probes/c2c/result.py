"""A stored core-to-core run: matrix_ns[i][j] is the one-way latency between matrix_cpus[i] and [j],
null where not measured. 4096 CPUs are ~8.4M pairs, a day of ping-pong: no real run holds more."""
from __future__ import annotations

from app.parse.json_text import CpuId, NonNegative
from app.store.results import list_of
from probes.result import Result


class Stored(Result, kw_only=True):
    matrix_cpus: list_of(CpuId, 4096)
    matrix_ns: list_of(list_of(NonNegative | None, 4096), 4096)

    def __post_init__(self):
        super().__post_init__()
        n = len(self.matrix_cpus)
        if len(self.matrix_ns) != n or any(len(row) != n for row in self.matrix_ns):
            raise ValueError("matrix_ns is not one row and one column per CPU of matrix_cpus")
