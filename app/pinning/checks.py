"""What is checked of a request's values before a batch journals or writes anything: CPUs that cannot
take a pin here (beyond any machine, not on this one, offline), a value out of its kind's range. What a
target can take (a kernel thread, a cpuset, a managed IRQ) is its writer's to tell, in the flow's dry
run (app/pinning/dry_run.py), not a second rule here.
"""
from __future__ import annotations

from app.errors import excerpt
from app.format import CPUSET_NAMES, format_cpus, format_value, offline_sentence, unknown_cpus_sentence
from app.machine.topology import read_cpu_ids
from app.parse.cpulist import MAX_CPU
from app.pinning.kinds import CPU_KINDS, MEMBER_KINDS, SCALAR_KINDS
from app.pinning.sched import sched_refusal
from app.pinning.settings import valid_scalar
from app.sysroot import SysRoot


def cpus_refusal(root: SysRoot, cpus, online) -> tuple[str, str] | None:
    """(code, reason) when `cpus` cannot take a pin here, checked before any journal line: "invalid"
    for CPUs this machine does not have (exit 2 in the CLI), "offline" for CPUs it has but that are
    offline (exit 1); None when they can."""
    if not cpus:
        return "invalid", "no CPUs given; write CPUs like 2-5,8"
    if any(c < 0 or c >= MAX_CPU for c in cpus):
        return "invalid", (f"CPU list {excerpt(format_cpus(cpus))} holds CPU numbers beyond any machine; "
                           "write CPUs like 2-5,8")
    known = read_cpu_ids(root)
    missing = [c for c in cpus if c not in known]
    if missing:
        return "invalid", unknown_cpus_sentence(missing, known)
    offline = sorted(set(cpus) - set(online))
    if offline:
        return "offline", offline_sentence(offline, online)
    return None


def value_refusal(root: SysRoot, kind: str, value, online, ident: int = 0) -> tuple[str, str] | None:
    """cpus_refusal for a CPU set, and the kind's own range for the other kinds (app/pinning/kinds.py)."""
    value = tuple(value)
    if kind in CPU_KINDS:
        if kind in ("cpuset", "slice") and not value:
            return None             # a cpuset removed, a unit's AllowedCPUs= unset: every CPU
        return cpus_refusal(root, value, online)
    if kind == "sched":
        why = sched_refusal(value)
        return None if why is None else ("invalid", why)
    if kind in SCALAR_KINDS:
        ok = valid_scalar(kind, ident, value)
    elif kind in MEMBER_KINDS:
        ok = len(value) == 1 and 0 <= value[0] < len(CPUSET_NAMES)
    else:
        ok = value in ((0,), (1,))
    return None if ok else ("invalid", f"{format_value(kind, value)} is not a value for a {kind}")
