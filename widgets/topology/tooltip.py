"""A CPU cell's tooltip: composed on demand from the newest state (figures change every tick)."""
from __future__ import annotations

import html

from app.machine.topology import Topology, isolation_label
from app.sampling.machine_state import MachineState
from widgets.colors import MetricValues, format_value
from widgets.topology.items import DIFF_COLOR, LEAK_COLOR, CoreBoxItem, CpuCellItem
from widgets.topology.layout import cpu_map

KIND_NAMES = {"P": "performance core", "E": "efficient core"}


def cpu_tooltip(cpu_id: int, topology: Topology | None, state: MachineState | None,
                values: MetricValues | None, cell: CpuCellItem | None = None) -> str:
    """Rich text: CPU identity (its core: the box `cell` sits in), flags, current figures, top IRQs and
    threads on it, and the managed IRQs still delivered on it while quiet (`cell`'s mark, and why).
    `values`: the metric the grid shows (for a one-capture state)."""
    core = cell.parentItem() if cell is not None else None
    c = cpu_map(topology).get(cpu_id) if topology is not None else None
    lines = [f"<b>CPU {cpu_id}</b>"]
    if c is not None:
        ident = []
        if isinstance(core, CoreBoxItem):
            ident.append(f"core {core.core_index} ({', '.join(map(str, core.cpus))})")
        for v, name in ((c.package_id, "package"), (c.die_id, "die"), (c.node, "node")):
            if v is not None and v != -1:
                ident.append(f"{name} {v}")
        if c.kind:
            ident.append(KIND_NAMES.get(c.kind, c.kind))
        lines.append(", ".join(ident))
        iso = topology.isolation_of(cpu_id)
        flags = [f for f, on in (("offline", not c.online), (isolation_label(iso), bool(iso))) if on]
        if flags:
            lines.append("<i>" + ", ".join(flags) + "</i>")
        if cpu_id in topology.isolcpus and "domain" not in iso:
            # isolcpus= without its domain flag: what the flags do, and that they do not isolate.
            lines.append("not isolated: the scheduler still balances onto it (isolcpus= without domain)")
    st = state
    if st is not None and st.rates is not None:
        r = st.rates.per_cpu.get(cpu_id)
        if r is not None:
            lines.append(
                f"IRQs {format_value(r.irq_per_s, '/s')}/s · softirqs "
                f"{format_value(r.softirq_total_per_s, '/s')}/s · irq+softirq time "
                f"{format_value(r.irq_softirq_pct, '%')} · busy {format_value(r.busy_pct, '%')}")
        top_irqs = _top_irqs(st, cpu_id)
        if top_irqs:
            lines.append("<u>top IRQs</u>: " + "; ".join(top_irqs))
        top_threads = _top_threads(st, cpu_id)
        if top_threads:
            lines.append("<u>top threads</u>: " + "; ".join(top_threads))
    elif st is not None and values is not None:
        v = values.values.get(cpu_id)
        if v is not None:
            lines.append(f"{values.label}: {format_value(v, values.unit)} (totals, not rates)")
    if cell is not None and cell.managed_tip:
        lines.append(f'<span style="color:{LEAK_COLOR.name()}">{html.escape(cell.managed_tip)}</span>')
    if cell is not None and cell.compared_tip:
        lines.append(f'<span style="color:{DIFF_COLOR.name()}">compared: {html.escape(cell.compared_tip)}</span>')
    return "<br>".join(lines)


def _top_irqs(state: MachineState, cpu_id: int, n: int = 3) -> list[str]:
    rates = state.rates
    try:
        col = rates.cpus.index(cpu_id)
    except ValueError:
        return []
    found = []
    for irq, r in rates.irqs.items():
        if len(r.per_cpu) > col and r.per_cpu[col] > 0:
            found.append((r.per_cpu[col], irq))
    found.sort(reverse=True)
    table = state.sample.interrupts
    out = []
    for v, irq in found[:n]:
        row = table.row(irq) if table is not None else None
        name = (row.name if row is not None else "")[:28]
        out.append(f"{irq}{' ' + name if name else ''} {format_value(v, '/s')}/s")
    return out


def _top_threads(state: MachineState, cpu_id: int, n: int = 3) -> list[str]:
    tasks = state.rates.tasks
    sample = state.sample.tasks
    found = [(r.cpu_pct, tid) for tid, r in tasks.items() if r.last_cpu == cpu_id and r.cpu_pct]
    found.sort(reverse=True)
    out = []
    for pct, tid in found[:n]:
        t = sample.tasks.get(tid) if sample is not None else None
        # The full Java name where one was read (the kernel keeps 15 bytes); escaped: this is rich
        # text, and a thread names itself.
        name = state.thread_names.name(t.pid, tid, t.comm) if t is not None else "?"
        out.append(f"{html.escape(name)} ({tid}) {format_value(pct, '%')}")
    return out
