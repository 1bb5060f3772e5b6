"""Number and CPU-list spelling shared by the tables, the details pane and the plots.

Pure functions (no Qt): the widgets call them to turn a MachineState's values into cell text, so the
same figure reads the same in every view.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from app.parse.cpulist import format_cpulist

# Below this a rate is shown with one decimal ("0.4/s"); above it as an integer.
_DECIMAL_BELOW = 10.0


def format_rate(per_s: float | None) -> str:
    """'12,345/s', '3.5/s', '0/s'; '' when unknown."""
    if per_s is None:
        return ""
    if per_s == 0:
        return "0/s"
    if abs(per_s) < _DECIMAL_BELOW:
        return f"{per_s:.1f}/s"
    return f"{per_s:,.0f}/s"


def format_count(n: int | None) -> str:
    """'1,234,567'; '' when unknown."""
    if n is None:
        return ""
    return f"{n:,}"


def format_percent(p: float | None) -> str:
    """'37.5%' (CPU % of one CPU: a thread busy on two CPUs' worth shows 200%); '' when unknown."""
    if p is None:
        return ""
    if p == 0:
        return "0%"
    if abs(p) < _DECIMAL_BELOW:
        return f"{p:.1f}%"
    return f"{p:.0f}%"


def format_cpus(cpus: Iterable[int] | None) -> str:
    """The kernel's list spelling ("0-3,8"); '' for unknown; 'none' for an empty set."""
    if cpus is None:
        return ""
    s = format_cpulist(cpus)
    return s if s else "none"


def per_cpu_pairs(per_cpu, cpus: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """(cpu, value) pairs from a {cpu: value} mapping or a sequence aligned with `cpus`.

    Rates and counts arrive both ways: rates keyed by CPU id, /proc/interrupts counts as columns in
    header order (which skip offline CPUs, so column i is not CPU i: kernel/irq/proc.c
    show_interrupts prints only online CPUs).
    """
    if per_cpu is None:
        return []
    if isinstance(per_cpu, Mapping):
        return [(int(c), v) for c, v in per_cpu.items()]
    if cpus is None:
        cpus = range(len(per_cpu))
    return list(zip(cpus, per_cpu))


def nonzero_pairs(per_cpu, cpus: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """Like per_cpu_pairs, keeping only CPUs with a non-zero value."""
    return [(c, v) for c, v in per_cpu_pairs(per_cpu, cpus) if v]


def shares_of(pairs: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """(cpu, fraction of the total) for non-zero (cpu, value) pairs, largest first."""
    total = float(sum(v for _, v in pairs))
    if total <= 0:
        return []
    return sorted(((c, v / total) for c, v in pairs), key=lambda cf: (-cf[1], cf[0]))


def spread(per_cpu, cpus: Sequence[int] | None = None, *, top: int = 3) -> list[tuple[int, float]]:
    """The CPUs carrying a load, largest share first, as (cpu, fraction of the total) pairs.

    Only CPUs with a non-zero value appear; `top` limits the list (0 = all).
    """
    shares = shares_of(nonzero_pairs(per_cpu, cpus))
    return shares[:top] if top else shares


def format_shares(shares: list[tuple[int, float]], *, top: int = 3) -> str:
    """'3: 61% · 7: 39%' from shares_of(); '+5 CPUs' appended when more CPUs share the load."""
    if not shares:
        return ""
    shown = shares[:top] if top else shares
    text = " · ".join(f"{c}: {_share_text(frac)}" for c, frac in shown)
    rest = len(shares) - len(shown)
    if rest > 0:
        text += f" · +{rest} CPU{'s' if rest > 1 else ''}"
    return text


def _share_text(frac: float) -> str:
    pct = frac * 100
    return "<1%" if 0 < pct < 0.5 else f"{pct:.0f}%"


def format_spread(per_cpu, cpus: Sequence[int] | None = None, *, top: int = 3) -> str:
    """'3: 61% · 7: 39%'; '+5 CPUs' appended when more CPUs share the load; '' when nothing landed."""
    return format_shares(spread(per_cpu, cpus, top=0), top=top)
