"""/proc/vmstat as {counter: value}.

Format: one "name value" per line (mm/vmstat.c vmstat_show); the names are the kernel's, e.g. the
transparent huge page and compaction events of Documentation/admin-guide/mm/transhuge.rst
(thp_fault_alloc, thp_fault_fallback) and Documentation/admin-guide/sysctl/vm.rst (compact_stall:
a task stalled to compact memory for a huge page; compact_fail, compact_success). The counters are
system-wide since boot: a probe reads them before and after what it does.
"""
from __future__ import annotations

from app.errors import ParseError, excerpt
from app.parse.number import is_ascii_int


def parse_vmstat(text: str, *, what: str = "/proc/vmstat") -> dict[str, int]:
    """Every counter; a line whose value is not a whole number is a ParseError naming it."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not is_ascii_int(parts[1]):
            raise ParseError(what, f"{excerpt(line, 40)!r} is not a counter and its value", n)
        out[parts[0]] = int(parts[1])
    return out
