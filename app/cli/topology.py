"""`coremap topology [--root DIR] [--csv | --json]`: the machine's CPUs, cores, sockets, NUMA nodes
and caches.

Plain output reads like lscpu. `--csv` prints `cpu,core,socket,node` per online CPU (raw sysfs
core_id and physical_package_id, NUMA node; `-` where unknown), the same columns hwloc and cadvisor
report, so other tools can diff against them. `--json` prints the whole model.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from app.cli.common import add_command, opened_host, write_json
from app.errors import SysRootReadError
from app.parse.cpulist import format_cpulist
from app.format import format_size, printable
from app.sysroot import SysRoot

if TYPE_CHECKING:
    from app.machine.topology import Group, Topology


def register(subparsers) -> None:
    p = add_command(subparsers, "topology", "show CPUs, cores, sockets, NUMA nodes and caches",
                    "Show the CPU topology: lscpu-like summary, or --csv (cpu,core,socket,node per "
                    "online CPU) or --json (everything).")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="cpu,core,socket,node for each online CPU")
    fmt.add_argument("--json", action="store_true", help="the whole topology as JSON")
    p.add_argument("--pretty", action="store_true", help="with --json: indented for reading")
    p.set_defaults(func=run)


def load(root: SysRoot) -> Topology:
    """read_topology, with OS errors named by path (never a traceback)."""
    # Imported here, not at the top: every `coremap` run imports this module to build its parser,
    # and only this command needs the model behind it (issue 12: start-up time).
    from app.machine.topology import read_topology
    try:
        return read_topology(root)
    except OSError as e:
        # Races (a CPU hot-unplugged while we walk cpuN/) and folders we may not list surface as
        # OSError from pathlib's is_dir(); they are news for the user, not bugs.
        raise SysRootReadError(e.filename or root.root, e.strerror or str(e)) from None


def run(args) -> int:
    with opened_host(args) as host:
        topo = load(host.root)
    out = sys.stdout
    if args.csv:
        out.write(format_csv(topo))
    elif args.json:
        write_json(to_json(topo), args, out=out)
    else:
        out.write(format_summary(topo))
    return 0


def _v(x) -> str:
    return "-" if x is None else str(x)


def format_csv(topo: Topology) -> str:
    lines = ["cpu,core,socket,node"]
    for c in topo.cpus:
        if c.online:
            lines.append(f"{c.id},{_v(c.core_id)},{_v(c.package_id)},{_v(c.node)}")
    return "\n".join(lines) + "\n"


def _group_json(g: Group) -> dict:
    return {
        "kind": g.kind, "id": g.id, "label": g.label, "cpus": list(g.cpus), "offline": g.offline,
        "merged": [list(m) for m in g.merged],
        "children": [ch if isinstance(ch, int) else _group_json(ch) for ch in g.children],
    }


def to_json(topo: Topology) -> dict:
    from app.machine.topology import layout      # read_topology (in load) imported it already
    cores = topo.cores
    return {
        "arch": topo.arch, "model_name": topo.model_name, "kernel_release": topo.kernel_release,
        "hostname": topo.hostname, "cmdline": topo.cmdline,
        "online": list(topo.online), "offline": list(topo.offline), "possible": list(topo.possible),
        "present": list(topo.present), "isolated": list(topo.isolated),
        "isolcpus": list(topo.isolcpus), "isolcpus_flags": list(topo.isolcpus_flags),
        "nohz_full": list(topo.nohz_full),
        "isolation": [{"cpus": list(cpus), "flags": list(flags)} for flags, cpus in topo.isolation_groups()],
        "smt_active": topo.smt_active, "hybrid": topo.hybrid, "kind_source": topo.kind_source,
        "packages": [{
            "id": p.id, "index": p.index, "cpus": list(p.cpus), "dies": list(p.dies),
            "cores": [{"index": cores[i].index, "core_id": cores[i].core_id, "cpus": list(cores[i].cpus),
                       "die_id": cores[i].die_id, "node": cores[i].node, "kind": cores[i].kind}
                      for i in p.cores],
        } for p in topo.packages],
        "nodes": [{"id": n.id, "cpus": list(n.cpus), "memory_kb": n.memory_kb,
                   "distances": {str(k): v for k, v in n.distances.items()}} for n in topo.nodes],
        "caches": [{"name": k.name, "level": k.level, "type": k.type, "size_bytes": k.size_bytes,
                    "cpus": list(k.cpus), "id": k.id} for k in topo.caches],
        "l3_groups": [list(g) for g in topo.l3_groups],
        "clusters": [list(g) for g in topo.clusters],
        # A Cpu holds only its flat fields: its __dict__ is what asdict's recursive copy gives, 10x faster.
        "cpus": [{**vars(c), "siblings": list(c.siblings)} for c in topo.cpus],
        "layout": _group_json(layout(topo)),
        "notes": list(topo.notes),
    }


def _counts(values) -> str:
    """"20" when all equal, "1-2" when they vary."""
    vals = sorted(set(values))
    if not vals:
        return "-"
    return str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"


def format_summary(topo: Topology) -> str:
    from app.machine.topology import isolation_label     # read_topology (in load) imported it already
    rows: list[tuple[str, str]] = []
    add = lambda k, v: rows.append((k, v))  # noqa: E731
    add("Architecture", topo.arch or "unknown")
    add("Model name", topo.model_name or "unknown")
    if topo.hostname:
        add("Hostname", topo.hostname)
    if topo.kernel_release:
        add("Kernel", topo.kernel_release)
    present = set(topo.present) | set(topo.online)
    add("CPU(s)", str(len(present)))
    add("On-line CPU(s) list", format_cpulist(topo.online) or "-")
    offline_present = [c for c in topo.offline if c in present]
    if offline_present:
        add("Off-line CPU(s) list", format_cpulist(offline_present))
    if set(topo.possible) - present:
        add("Possible CPU(s) list", format_cpulist(topo.possible))
    add("Thread(s) per core", _counts(len(k.cpus) for k in topo.cores))
    if topo.smt_active is not None:
        add("SMT", "active" if topo.smt_active else "off")
    known_pkgs = [p for p in topo.packages if p.id is not None]
    if known_pkgs and len(known_pkgs) == len(topo.packages):
        add("Core(s) per socket", _counts(len(p.cores) for p in topo.packages))
        ids = [p.id for p in topo.packages]
        sockets = str(len(ids))
        if sorted(ids) != list(range(len(ids))):
            sockets += f" (ids {','.join(map(str, sorted(ids)))})"
        add("Socket(s)", sockets)
    else:
        add("Core(s)", str(len(topo.cores)))
        add("Socket(s)", "unknown (physical_package_id is -1)" if topo.packages else "unknown")
    dies = {(c.package_id, c.die_id) for c in topo.cpus if c.online and c.die_id is not None}
    if dies and len(dies) > len(topo.packages):
        add("Die(s)", str(len(dies)))
    if topo.hybrid:
        for kind in ("P", "E"):
            cs = topo.cpus_of("kind", kind)
            ncores = sum(1 for k in topo.cores if k.kind == kind)
            add(f"{kind}-core CPU(s)", f"{format_cpulist(cs)} ({ncores} cores)")
        add("Core kinds from", topo.kind_source or "-")
    add("NUMA node(s)", str(len(topo.nodes)) if topo.nodes else "unknown")
    for n in topo.nodes:
        mem = f"  {n.memory_kb // 1024} MiB" if n.memory_kb else ""
        add(f"NUMA node{n.id} CPU(s)", (format_cpulist(n.cpus) or "(none)") + mem)
    # Isolated: what the scheduler leaves alone (the domain flag); then each set of flags that applies.
    add("Isolated CPU(s)", format_cpulist(topo.isolated) or "(none)")
    add("nohz_full CPU(s)", format_cpulist(topo.nohz_full) or "(none)")
    groups = topo.isolation_groups()
    if groups:
        add("Isolation flags", "; ".join(f"{format_cpulist(cpus)}: {isolation_label(flags)}" for flags, cpus in groups))
    by_name: dict[str, list] = {}
    for k in topo.caches:
        by_name.setdefault(k.name, []).append(k)
    for name, ks in by_name.items():
        sizes = [k.size_bytes for k in ks if k.size_bytes is not None]
        total = format_size(sum(sizes)) if sizes else "?"
        each = sorted({k.size_bytes for k in ks if k.size_bytes is not None})
        each_text = ", ".join(format_size(s) for s in each)
        add(f"{name} cache", f"{total} ({len(ks)} instance{'s' if len(ks) != 1 else ''} of {each_text})"
            if each else f"? ({len(ks)} instances)")
    freqs = [c.freq_max_khz for c in topo.cpus if c.freq_max_khz]
    if freqs:
        add("CPU max MHz", _counts(f // 1000 for f in freqs))
    width = max(len(k) for k, _ in rows) + 2
    # printable(): model names and host names come from the machine (or a capture) as they are.
    out = [printable(f"{k + ':':<{width}}{v}") for k, v in rows]
    for n in topo.notes:
        out.append(printable(f"Note: {n}"))
    return "\n".join(out) + "\n"
