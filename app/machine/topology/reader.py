"""read_topology(SysRoot) -> Topology: runs the per-CPU, NUMA, isolation and core-kind readers
and assembles their results into the frozen records, with the model name, architecture and
kernel release from /proc; every step adds to Topology.notes what it could not know."""
from __future__ import annotations

import platform
import re

from app.machine.topology.cpus import (
    CacheGroups,
    CpuSets,
    cores_from_siblings,
    group_caches,
    read_cpu_sets,
    read_raw_cpus,
)
from app.machine.topology.files import read_line, read_text
from app.machine.topology.isolation import Isolation, read_isolation
from app.machine.topology.kinds import read_kinds
from app.machine.topology.model import Core, Cpu, Package, Topology
from app.machine.topology.nodes import read_nodes
from app.parse.topology import Cpuinfo, parse_cpuinfo
from app.sysroot import SysRoot


def _make_cpus(sets: CpuSets, raw, cpu_node: dict, kinds: dict, iso: Isolation,
               groups: CacheGroups) -> tuple[Cpu, ...]:
    online_set = set(sets.online)
    iso_set, nohz_set = set(iso.isolated), set(iso.nohz_full)
    cpus = []
    for n in sets.known:
        r = raw[n]
        on = n in online_set
        sib = tuple(sorted(s for s in (r.siblings or (n,)) if s in online_set)) if on else ()
        cpus.append(Cpu(
            id=n, online=on, package_id=r.package_id, die_id=r.die_id,
            cluster_id=r.cluster_id, core_id=r.core_id, node=cpu_node.get(n),
            siblings=sib or ((n,) if on else ()), kind=kinds.get(n), capacity=r.capacity,
            isolated=n in iso_set, nohz_full=n in nohz_set, freq_min_khz=r.fmin,
            freq_max_khz=r.fmax, l3=groups.l3_of.get(n) if on else None,
            cluster=groups.cluster_of.get(n) if on else None))
    return tuple(cpus)


def _make_packages(online: tuple[int, ...], by_id: dict, cores: list[Core]) -> tuple[Package, ...]:
    pkg_cpus: dict = {}
    for c in online:
        pkg_cpus.setdefault(by_id[c].package_id, []).append(c)
    # A core belongs to the package of its first CPU: one pass, not one scan of all cores per package.
    cores_of: dict = {}
    for k in cores:
        cores_of.setdefault(by_id[k.cpus[0]].package_id, []).append(k.index)
    packages = []
    for i, (pid, pc) in enumerate(sorted(pkg_cpus.items(), key=lambda kv: kv[1][0])):
        dies = tuple(sorted({by_id[c].die_id for c in pc}, key=lambda d: (d is None, d or 0)))
        packages.append(Package(pid, i, tuple(pc), tuple(cores_of.get(pid, ())), dies))
    return tuple(packages)


def _read_smt_active(root: SysRoot, core_cpu_lists) -> bool | None:
    smt_text = read_line(root, root.cpu_dir("smt", "active"))
    if smt_text in ("0", "1"):
        return smt_text == "1"
    if any(len(k) > 1 for k in core_cpu_lists):
        return True
    return None


def read_topology(root: SysRoot) -> Topology:
    """The machine's CPUs, cores, packages, NUMA nodes and caches, from the files the module
    docstring lists; each step below adds to `notes` what it could not know."""
    notes: list[str] = []
    sets = read_cpu_sets(root, notes)
    online = sets.online
    raw = read_raw_cpus(root, sets, notes)
    iso = read_isolation(root, notes)
    nodes, cpu_node = read_nodes(root, raw, notes)
    core_cpu_lists = cores_from_siblings(raw, online, notes)
    groups = group_caches(raw, online)
    kinds, kind_source = read_kinds(root, raw, online, caches=groups.caches)
    if kind_source and kind_source != "cpu_core/cpu_atom":
        notes.append(f"core kinds inferred from {kind_source}")

    cpus = _make_cpus(sets, raw, cpu_node, kinds, iso, groups)
    by_id = {c.id: c for c in cpus}
    cores = []
    for i, cl in enumerate(core_cpu_lists):
        first = by_id[cl[0]]
        cores.append(Core(i, cl, first.core_id, first.package_id, first.die_id, first.node, first.kind))
    packages = _make_packages(online, by_id, cores)
    if any(p.id is None for p in packages) and online and all(raw[c].has_topology for c in online):
        notes.append("physical_package_id is -1 (not known on this architecture): sockets unknown")

    info_text = read_text(root, root.proc("cpuinfo"))
    info = parse_cpuinfo(info_text) if info_text is not None else None
    arch, model = _arch_and_model(root, info, notes)
    return Topology(
        arch=arch, model_name=model, kernel_release=_kernel_release(root),
        hostname=read_line(root, root.proc("sys", "kernel", "hostname")) or None,
        cpus=cpus, online=online, offline=sets.offline, possible=sets.possible,
        present=sets.present, isolated=iso.isolated, nohz_full=iso.nohz_full, cmdline=iso.cmdline,
        nodes=nodes, packages=packages, cores=tuple(cores), caches=groups.caches,
        l3_groups=groups.l3_groups, clusters=groups.clusters, smt_active=_read_smt_active(root, core_cpu_lists),
        hybrid=len({k for k in kinds.values() if k}) > 1, isolcpus_flags=iso.isolcpus_flags, isolcpus=iso.isolcpus,
        kind_source=kind_source, notes=tuple(notes))


def _arch_and_model(root: SysRoot, info: Cpuinfo | None, notes: list) -> tuple[str | None, str | None]:
    arch = None
    if root.is_live:
        arch = platform.machine() or None
    elif info is not None:
        arch = info.arch
    if arch is None:
        notes.append("architecture unknown (no /proc/cpuinfo to tell it by)")
    model = info.model_name if info is not None else None
    if info is None:
        notes.append("no /proc/cpuinfo: model name unknown")
    return arch, model


def _kernel_release(root: SysRoot) -> str | None:
    rel = read_line(root, root.proc("sys", "kernel", "osrelease"))
    if rel:
        return rel
    version = read_line(root, root.proc("version"))
    if version:
        m = re.match(r"Linux version (\S+)", version)
        if m:
            return m.group(1)
    return None

