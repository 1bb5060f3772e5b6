"""A host read from a metrics engine as the fleet's row (app/remote/fleet.py FleetRow): the same facts the
ssh fleet shows, worded the same way where the source has them and "absent" where it does not."""
from __future__ import annotations

import time

from app.format import cpus_word, format_cpus, plural
from app.remote.fleet import FleetRow, top_irq
from app.sampling.machine_state import MachineState
from app.sources.host import HostFacts

ABSENT = "absent"


def shape_text(facts: HostFacts, state: MachineState) -> str:
    t = state.topology
    n = plural(len(t.online), "CPU")
    if any(c.core is None for c in facts.cpus):
        return f"{n} online (cores not in source)"
    pkgs = len(t.packages) or 1
    tpc = t.threads_per_core
    threads = "-".join(map(str, (tpc[0], tpc[-1]))) if len(tpc) > 1 else (str(tpc[0]) if tpc else "?")
    per = plural(len(t.cores) // pkgs, "core") if len(t.cores) % pkgs == 0 else f"{len(t.cores) / pkgs:.1f} cores"
    return f"{plural(pkgs, 'socket')} × {per} × {threads} thread{'' if threads == '1' else 's'} = {n} online"


def facts_of(facts: HostFacts, state: MachineState, *, isolated_known: bool) -> tuple[tuple[str, str], ...]:
    t = state.topology
    nodes = [n for n in t.nodes if n.cpus]
    return (
        ("Model", facts.model or ABSENT),
        ("Shape", shape_text(facts, state)),
        ("NUMA nodes", "; ".join(f"node {n.id}: {cpus_word(n.cpus)}" for n in nodes) if nodes else ABSENT),
        ("Kernel", facts.kernel or ABSENT),
        ("isolcpus", (format_cpus(facts.isolated) if facts.isolated else "none") if isolated_known else ABSENT),
        ("nohz_full", ABSENT),
        ("irqbalance", ABSENT),
    )


def source_row(facts: HostFacts, state: MachineState, *, isolated_known: bool, top: str | None = None,
               gaps: dict[int, float] | None = None, seconds: float = 0.0, seen: float | None = None) -> FleetRow:
    """`gaps`: jitter gaps/s per CPU that coremap exported on the host (export.py), where a probe ran."""
    probe = None
    if gaps:
        cpu = max(gaps, key=gaps.get)
        probe = {"cpu": cpu, "gaps_per_s": gaps[cpu]}
    return FleetRow(facts.host, facts.hostname or "", facts_of(facts, state, isolated_known=isolated_known),
                    top if top is not None else top_irq(state), state, probe, seconds=seconds,
                    seen=time.time() if seen is None else seen, quiet=tuple(sorted(set(facts.quiet))))


def failed_row(host: str, why: str, *, seconds: float = 0.0) -> FleetRow:
    return FleetRow(host, error=why, seconds=seconds)
