"""Hybrid machines: which CPUs are P and which E cores, from the cpu_core/cpu_atom PMUs, else
distinct cpu_capacity classes, else cpufreq base_frequency (as hwloc does), else L1d sizes."""
from __future__ import annotations

from app.machine.topology.files import read_list
from app.sysroot import SysRoot


# Distinct cpu_capacity (or base frequency) values closer than this ratio are one kind of core:
# the GB10 reports 718/731 for its Cortex-A725s and 997/1017/1024 for its Cortex-X925s
# (arch_topology scales each CPU's capacity by its own max frequency), while real kinds differ by
# 30% or more (Pixel 6: 280 / 820 / 1024).
_KIND_GAP = 1.10


def _classes(values: dict[int, int]) -> dict[int, str] | None:
    """P/E per CPU from a per-CPU performance figure: values within _KIND_GAP of each other are one
    class; the top class is P, the rest E. None when there is only one class."""
    distinct = sorted(set(values.values()))
    top = distinct[0]          # lowest value of the current (finally: the top) class
    classes = 1
    for prev, v in zip(distinct, distinct[1:]):
        if v > prev * _KIND_GAP:
            classes += 1
            top = v
    if classes < 2:
        return None
    return {c: ("P" if v >= top else "E") for c, v in values.items()}


def read_kinds(root: SysRoot, raw: dict, online, *, caches) -> tuple[dict[int, str], str | None]:
    # Intel hybrids register two PMUs whose cpus files list the P and E cores
    # (arch/x86/events/intel/core.c, Documentation/ABI/testing/sysfs-bus-event_source-devices).
    core_cpus = read_list(root, root.sys("devices", "cpu_core", "cpus"))
    atom_cpus = read_list(root, root.sys("devices", "cpu_atom", "cpus"))
    if core_cpus and atom_cpus:
        out = {c: "P" for c in core_cpus}
        out.update({c: "E" for c in atom_cpus})
        return out, "cpu_core/cpu_atom"
    caps = {c: raw[c].capacity for c in online if raw[c].capacity is not None}
    if caps and len(caps) == len(online):
        k = _classes(caps)
        if k:
            return k, "cpu_capacity"
    # intel_pstate's base_frequency differs by kind but not between favoured cores of a
    # Turbo Boost Max 3.0 part, whose cpuinfo_max_freq differs; hwloc uses it the same way.
    base = {c: raw[c].base_khz for c in online if raw[c].base_khz}
    if base and len(base) == len(online):
        k = _classes(base)
        if k:
            return k, "cpufreq base_frequency"
    # Last resort: cores of one design share an L1d size; on every hybrid shipped so far the
    # big core has the larger L1d (Alder/Raptor Lake 48K vs 32K, Cortex-X vs A5x 64K vs 32K).
    l1d = {}
    for cache in caches:
        if cache.level == 1 and cache.type == "Data" and cache.size_bytes:
            for c in cache.cpus:
                l1d[c] = cache.size_bytes
    if l1d and all(c in l1d for c in online) and len(set(l1d.values())) > 1:
        k = _classes({c: l1d[c] for c in online})
        if k:
            return k, "L1d cache sizes"
    return {}, None
