"""`coremap irqs [--root DIR | --file PATH] [--json] [--interval S]`: every interrupt, where it
lands, where it may land, and which device and queue raise it.

Without --interval the counts are totals since boot. With --interval, rates: on the live machine
two reads S seconds apart; on a `coremap snapshot` root, its two captures (their own interval).
`--json` prints {"cpus": [...], "irqs": [{"irq", "counts", "total", "chip", "hwirq", "name", ...}]};
a row with one global count (ERR, MIS) has "counts": [] and its "total".
"""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from app.cli.common import add_command, add_json_arguments, add_root_argument, bounded, opened_host, write_json
from app.format import format_compact, printable
from app.inputs import read_input_text
from app.errors import CoremapError
from app.parse.cpulist import format_cpulist
from app.sysroot import READ_LIMITS

if TYPE_CHECKING:
    from app.machine.interrupts import IrqInfo
    from app.parse.interrupts import InterruptRow
    from app.sampling.rates import Rates

TOP_CPUS = 3


def register(subparsers) -> None:
    p = add_command(subparsers, "irqs", "list interrupts: counts per CPU, affinity, device and queue; or their rates",
                    "List every interrupt of /proc/interrupts with its total, the CPUs it lands on, "
                    "the requested and effective affinity, NUMA node and device/queue. With "
                    "--interval S, rates per IRQ and per CPU instead.", root=None)
    src = p.add_mutually_exclusive_group()
    add_root_argument(p, group=src)
    src.add_argument("--file", metavar="PATH", help="parse a bare /proc/interrupts file (no sysroot)")
    add_json_arguments(p)
    # Own dest: the top-level --interval is the window's sampling interval.
    p.add_argument("--interval", dest="irqs_interval", type=bounded(0.01, 3600), default=None, metavar="S",
                   help="print rates over S seconds (live machine), or over a snapshot's two captures")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.irqs_interval is not None:
        return _run_rates(args)
    # Imported here, not at the top: every `coremap` run imports this module to build its parser,
    # and only this command needs the model behind it (issue 12: start-up time).
    from app.machine.interrupts import read_irqs
    from app.parse.interrupts import parse_interrupts
    if args.file:
        table = parse_interrupts(_read_file(args.file), what=args.file)
        rows, cpus, info = table.rows, table.cpus, {}
    else:
        with opened_host(args) as host:
            irqs = read_irqs(host.root)
        rows, cpus, info = irqs.rows, irqs.cpus, irqs.info
    if args.json:
        write_json({"cpus": list(cpus), "irqs": [_row_json(r, info.get(r.irq), bool(not args.file))
                                                 for r in rows]}, args)
    else:
        _print_counts(rows, cpus, info, with_affinity=not args.file)
    return 0


def _read_file(path: str) -> str:
    return read_input_text(path, what="--file", limit=READ_LIMITS["interrupts"], stream=True,
                           hint="give a saved copy of /proc/interrupts, or --root for a captured machine")


def _cpus_or_none(v):
    return None if v is None else list(v)


def _row_json(r: InterruptRow, info: IrqInfo | None, from_root: bool) -> dict:
    d = {"irq": r.irq, "counts": list(r.counts), "total": r.total, "chip": r.chip, "hwirq": r.hwirq,
         "name": r.name}
    if r.trigger is not None:
        d["trigger"] = r.trigger
    if from_root and info is not None:
        d["requested"] = _cpus_or_none(info.requested)
        d["effective"] = _cpus_or_none(info.effective)
        d["node"] = info.node                    # /proc/irq/N/node
        d["device_node"] = info.device_node      # the device's NUMA node: the one the NODE column shows
        d["managed"] = info.managed
        dev = info.device
        d["device"] = None if dev is None else {
            "pci_address": dev.pci_address, "driver": dev.driver, "netdev": dev.netdev,
            "queue": dev.queue, "description": dev.description}
    return d




def _spread(values, cpus) -> str:
    top = sorted(((v, c) for v, c in zip(values, cpus) if v > 0), reverse=True)[:TOP_CPUS]
    more = sum(1 for v in values if v > 0) - len(top)
    s = " ".join(f"{c}:{format_compact(v)}" for v, c in top)
    return s + (f" +{more}" if more > 0 else "") if s else "-"


def _table(header: list[str], lines: list[list[str]]) -> None:
    widths = [max(len(h), *(len(row[i]) for row in lines)) if lines else len(h)
              for i, h in enumerate(header)]
    out = sys.stdout
    # printable(): names come from the machine and may carry escapes or newlines that forge a line.
    fmt = lambda row: printable("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())  # noqa: E731
    out.write(fmt(header) + "\n")
    for row in lines:
        out.write(fmt(row) + "\n")


def _print_counts(rows, cpus, info: dict[str, IrqInfo], *, with_affinity: bool) -> None:
    header = ["IRQ", "TOTAL", "TOP CPUS"]
    if with_affinity:
        header += ["REQUESTED", "EFFECTIVE", "NODE"]
    header.append("DEVICE / QUEUE")
    lines = []
    for r in rows:
        line = [printable(r.irq), str(r.total), _spread(r.counts, cpus) if r.counts else "(global)"]
        i = info.get(r.irq)
        if with_affinity:
            line += ["-" if i is None or i.requested is None else format_cpulist(i.requested) or "none",
                     "-" if i is None or i.effective is None else format_cpulist(i.effective) or "none",
                     "-" if i is None else i.node_text() or "-"]
        name = i.device.description if i is not None and i.device is not None else ""
        if r.name and r.name not in name:
            name = f"{r.name}  [{name}]" if name else r.name
        line.append(name)
        lines.append(line)
    print(f"{len(rows)} interrupts, {len(cpus)} CPUs in the header: {format_cpulist(cpus)}")
    _table(header, lines)


def _run_rates(args) -> int:
    s = args.irqs_interval
    if args.file:
        raise CoremapError(f"{args.file}: rates need a live machine or a two-capture snapshot "
                           "(coremap snapshot), not one interrupts file; drop --interval")
    if not (s > 0):
        raise CoremapError(f"--interval {s:g}: give a positive number of seconds")
    # Imported here for start-up time, like run()'s.
    from app.machine.interrupts import read_interrupts
    from app.machine.sample import read_sample, read_snapshot_pair
    from app.sampling.rates import rates
    with opened_host(args) as host:
        root = host.root
        if root.is_live:
            first = read_sample(root, tasks=False)
            time.sleep(s)
            second = read_sample(root, tasks=False)
            note = f"rates over {second.time - first.time:.3f} s"
        else:
            pair = read_snapshot_pair(root)
            if pair is None:
                raise CoremapError(f"{root.root}: rates need a live machine or a two-capture snapshot "
                                   "(coremap snapshot, without --no-second); this capture has one set of "
                                   "counters, so drop --interval to see totals")
            first, second = pair
            note = f"rates over the snapshot's two captures, {second.time - first.time:g} s apart"
        if second.interrupts is None:
            read_interrupts(root)       # raises the SysRootReadError that names the missing file
    r = rates(first, second)
    names = {row.irq: row.name for row in second.interrupts.rows}
    if args.json:
        write_json(_rates_json(r, names), args)
        return 0
    _print_rates(r, names, note)
    return 0


def _rates_json(r: Rates, names: dict[str, str]) -> dict:
    return {
        "seconds": r.seconds, "cpus": list(r.cpus),
        "irqs": [{"irq": q.irq, "per_cpu": list(q.per_cpu), "total": q.total, "name": names.get(q.irq, "")}
                 for q in r.irqs.values()],
        "per_cpu": [{"cpu": c.cpu, "irq_per_s": c.irq_per_s, "softirq_per_s": c.softirq_per_s,
                     "softirq_total_per_s": c.softirq_total_per_s, "busy_pct": c.busy_pct,
                     "irq_softirq_pct": c.irq_softirq_pct, "idle_pct": c.idle_pct}
                    for c in r.per_cpu.values()],
        "new_irqs": list(r.new_irqs), "vanished_irqs": list(r.vanished_irqs), "resets": list(r.resets),
    }


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _print_rates(r: Rates, names: dict[str, str], note: str) -> None:
    print(note)
    active = sorted((q for q in r.irqs.values() if q.total > 0), key=lambda q: -q.total)
    print(f"\n{len(active)} of {len(r.irqs)} interrupts fired (per second):")
    _table(["IRQ", "TOTAL/S", "TOP CPUS", "NAME"],
           [[q.irq, format_compact(round(q.total, 1)), _spread(q.per_cpu, r.cpus) if q.per_cpu else "(global)",
             names.get(q.irq, "")] for q in active])
    print("\nper CPU:")
    _table(["CPU", "IRQ/S", "SOFTIRQ/S", "BUSY%", "IRQ+SOFTIRQ%", "IDLE%"],
           [[str(c.cpu), format_compact(round(c.irq_per_s, 1)), format_compact(round(c.softirq_total_per_s, 1)),
             _pct(c.busy_pct), _pct(c.irq_softirq_pct), _pct(c.idle_pct)] for c in r.per_cpu.values()])
    for label, items in (("new", r.new_irqs), ("vanished", r.vanished_irqs), ("counter resets", r.resets)):
        if items:
            print(printable(f"{label}: {', '.join(items)}"))
