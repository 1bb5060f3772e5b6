"""/proc/stat (Documentation/filesystems/proc.rst, "1.7 Miscellaneous kernel statistics").

Times are in USER_HZ ticks (sysconf(_SC_CLK_TCK), 100 on every mainstream architecture).
"""
from __future__ import annotations

from dataclasses import dataclass

from app.errors import ParseError
from app.parse.cpulist import MAX_CPU
from app.parse.json_text import Count, CpuId


@dataclass(frozen=True)
class CpuTimes:
    user: Count
    nice: Count
    system: Count
    idle: Count
    iowait: Count = 0
    irq: Count = 0
    softirq: Count = 0
    steal: Count = 0
    guest: Count = 0
    guest_nice: Count = 0

    @property
    def total(self) -> int:
        # guest and guest_nice are already counted in user and nice (kernel/sched/cputime.c).
        return (self.user + self.nice + self.system + self.idle + self.iowait + self.irq
                + self.softirq + self.steal)

    @property
    def busy(self) -> int:
        return self.total - self.idle - self.iowait


@dataclass(frozen=True)
class StatSample:
    total: CpuTimes
    cpus: dict[CpuId, CpuTimes]     # only CPUs that have a cpuN line (online ones)
    ctxt: Count | None = None
    btime: Count | None = None
    processes: Count | None = None
    procs_running: Count | None = None
    procs_blocked: Count | None = None
    intr_total: Count | None = None
    softirq_total: Count | None = None


# Fields of a "cpu" line in order. Kernels print 4 (2.4), 7 (2.6.0: iowait irq softirq),
# 8 (2.6.11: steal), 9 (2.6.24: guest), 10 (2.6.33: guest_nice); fs/proc/stat.c show_stat.
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
               "guest_nice")
_SCALARS = ("ctxt", "btime", "processes", "procs_running", "procs_blocked")


def _ints(toks: list[str], what: str, lineno: int, key: str) -> list[int]:
    out = []
    for t in toks:
        if not (t.isdigit() and t.isascii()):
            raise ParseError(what, f"{key}: {t[:30]!r} is not a count", lineno)
        out.append(int(t))
    return out


def parse_stat(text: str, *, what: str = "stat") -> StatSample:
    """/proc/stat. Lines this parser does not know (page, swap, disk_io on old kernels) are skipped."""
    total: CpuTimes | None = None
    cpus: dict[CpuId, CpuTimes] = {}
    scalars: dict[str, int] = {}
    intr_total = softirq_total = None
    for lineno, line in enumerate(text.split("\n"), 1):
        toks = line.split()
        if not toks:
            continue
        key = toks[0]
        if key.startswith("cpu"):
            ident = key[3:]
            if ident and not (ident.isdigit() and ident.isascii() and len(ident) <= 5 and int(ident) < MAX_CPU):
                raise ParseError(what, f"{key[:30]!r} is neither 'cpu' nor 'cpuN' (N below {MAX_CPU})", lineno)
            values = _ints(toks[1:], what, lineno, key)
            if len(values) < 4:
                raise ParseError(what, f"{key} has {len(values)} times; the kernel prints at least 4 "
                                       "(user nice system idle); capture the file again", lineno)
            times = CpuTimes(*values[:10])     # later kernels may add fields: ignore them
            if ident:
                n = int(ident)
                if n in cpus:
                    raise ParseError(what, f"{key} appears twice", lineno)
                cpus[n] = times
            else:
                if total is not None:
                    raise ParseError(what, "the 'cpu' line appears twice", lineno)
                total = times
        elif key in ("intr", "softirq"):
            if len(toks) < 2:
                raise ParseError(what, f"{key} has no total", lineno)
            first = _ints(toks[1:2], what, lineno, key)[0]
            if key == "intr":
                intr_total = first
            else:
                softirq_total = first
        elif key in _SCALARS:
            if len(toks) != 2:
                raise ParseError(what, f"{key} should have one value, found {len(toks) - 1}", lineno)
            scalars[key] = _ints(toks[1:2], what, lineno, key)[0]
    if total is None:
        raise ParseError(what, "no 'cpu' line; is this /proc/stat?")
    return StatSample(total, cpus, intr_total=intr_total, softirq_total=softirq_total, **scalars)
