"""The CPU topology of a machine: read_topology(SysRoot) -> Topology, and layout(Topology) -> Group,
the Qt-free tree the window draws.

Sources, in order of trust (Documentation/admin-guide/cputopology.rst,
Documentation/ABI/testing/sysfs-devices-system-cpu, Documentation/ABI/stable/sysfs-devices-node):
- sys/devices/system/cpu/{online,offline,possible,present,isolated,nohz_full}, and cpuN/online;
- cpuN/topology/: raw ids (core_id, physical_package_id, die_id, cluster_id) and sibling lists.
  Hardware threads are grouped into cores by their sibling lists, never by core_id: core_id is
  unique only within a package on x86, within a die on multi-die Opterons, and not at all on s390.
  Offline CPUs have no topology/ folder (drivers/base/topology.c removes it on hotplug);
- cpuN/cache/indexK/ for the caches, cpuN/cpu_capacity and cpuN/cpufreq for core kinds and clocks;
- sys/devices/system/node/nodeK/ for NUMA nodes (cpulist, or cpumap on old kernels, or the
  cpuN links), plus distance and meminfo;
- /proc/cpuinfo for the model name and, when not live, the architecture; /proc/cmdline for
  isolcpus=/nohz_full= when the sysfs files are not there.
Every value that could not be known is None, and `Topology.notes` says why.
"""
from __future__ import annotations

import functools
import platform
import re
from dataclasses import dataclass, field

from app.errors import CpuListError, SysRootReadError
from app.format import format_size
from app.parse.cpulist import format_cpulist, parse_cpulist, parse_cpumask
from app.parse.topology import (
    Cpuinfo,
    parse_cache_size,
    parse_cmdline_isolation,
    parse_cpuinfo,
    parse_distances,
    parse_node_meminfo_total,
    parse_topology_id,
)
from app.sysroot import SysRoot

_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")
_INDEX_DIR = re.compile(r"^index(\d+)$")

# Distinct cpu_capacity (or base frequency) values closer than this ratio are one kind of core:
# the GB10 reports 718/731 for its Cortex-A725s and 997/1017/1024 for its Cortex-X925s
# (arch_topology scales each CPU's capacity by its own max frequency), while real kinds differ by
# 30% or more (Pixel 6: 280 / 820 / 1024).
_KIND_GAP = 1.10


@dataclass(frozen=True)
class Cache:
    level: int
    type: str                      # Data, Instruction, Unified
    size_bytes: int | None
    cpus: tuple[int, ...]          # shared_cpu_list
    id: int | None                 # cache/indexK/id where the kernel provides it

    @property
    def name(self) -> str:
        """L1d, L1i, L2, L3."""
        suffix = {"Data": "d", "Instruction": "i"}.get(self.type, "")
        return f"L{self.level}{suffix}"


@dataclass(frozen=True)
class Cpu:
    id: int
    online: bool
    package_id: int | None = None  # raw physical_package_id; None for -1 or unknown
    die_id: int | None = None
    cluster_id: int | None = None  # None for -1 and 65535
    core_id: int | None = None     # raw core_id: NOT unique, never use it to group
    node: int | None = None
    siblings: tuple[int, ...] = ()  # hardware threads of the same core (this CPU included)
    kind: str | None = None        # "P", "E", or None on a machine with one kind of core
    capacity: int | None = None    # cpu_capacity (arm64, riscv): 1024 is the fastest CPU
    isolated: bool = False
    nohz_full: bool = False
    freq_min_khz: int | None = None
    freq_max_khz: int | None = None
    l3: int | None = None          # index into Topology.l3_groups
    cluster: int | None = None     # index into Topology.clusters


@dataclass(frozen=True)
class Core:
    index: int                     # position in Topology.cores (cores in CPU order)
    cpus: tuple[int, ...]
    core_id: int | None
    package_id: int | None
    die_id: int | None
    node: int | None
    kind: str | None


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: tuple[int, ...]          # may be empty (GPU or CXL memory nodes)
    distances: dict = field(default_factory=dict)   # node id -> distance (10 = local)
    memory_kb: int | None = None


@dataclass(frozen=True)
class Package:
    id: int | None                 # raw physical_package_id (36 and 8442 on Kunpeng); None unknown
    index: int
    cpus: tuple[int, ...]
    cores: tuple[int, ...]         # Core.index values
    dies: tuple[int | None, ...]


@dataclass(frozen=True)
class Topology:
    arch: str | None
    model_name: str | None
    kernel_release: str | None
    hostname: str | None
    cpus: tuple[Cpu, ...]          # every CPU known: possible | present | cpuN folders, sorted
    online: tuple[int, ...]
    offline: tuple[int, ...]
    possible: tuple[int, ...]
    present: tuple[int, ...]
    isolated: tuple[int, ...]
    nohz_full: tuple[int, ...]
    cmdline: str | None
    nodes: tuple[NumaNode, ...]
    packages: tuple[Package, ...]
    cores: tuple[Core, ...]
    caches: tuple[Cache, ...]
    l3_groups: tuple[tuple[int, ...], ...]
    clusters: tuple[tuple[int, ...], ...]
    smt_active: bool | None
    hybrid: bool
    isolcpus_flags: tuple[str, ...] = ()
    kind_source: str | None = None  # where P/E came from: cpu_core/cpu_atom, cpu_capacity, ...
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "_by_id", {c.id: c for c in self.cpus})
        core_of = {}
        for core in self.cores:
            for c in core.cpus:
                core_of[c] = core
        object.__setattr__(self, "_core_of", core_of)

    def cpu(self, cpu_id: int) -> Cpu:
        try:
            return self._by_id[cpu_id]
        except KeyError:
            raise CpuListError(
                f"CPU {cpu_id} is not on this machine; choose from {format_cpulist(self._by_id)}") from None

    def core_of(self, cpu_id: int) -> Core:
        try:
            return self._core_of[cpu_id]
        except KeyError:
            self.cpu(cpu_id)
            raise CpuListError(f"CPU {cpu_id} is offline, so it belongs to no core; "
                               f"online CPUs are {format_cpulist(self.online)}") from None

    def cpus_of(self, kind: str, id) -> tuple[int, ...]:
        """Online CPUs of one group: kind is machine, package (raw id), node, die ((package, die)
        or die id), core (Core.index), l3 / cluster (index), cpu, or kind ("P"/"E")."""
        on = self.online
        if kind == "machine":
            return on
        if kind == "cpu":
            return (id,) if id in on else ()
        if kind == "core":
            if not 0 <= id < len(self.cores):
                raise CpuListError(f"core {id} does not exist; cores are 0-{len(self.cores) - 1}")
            return self.cores[id].cpus
        if kind == "package":
            return tuple(c for c in on if self._by_id[c].package_id == id)
        if kind == "node":
            return tuple(c for c in on if self._by_id[c].node == id)
        if kind == "die":
            if isinstance(id, tuple):
                pkg, die = id
                return tuple(c for c in on if (self._by_id[c].package_id, self._by_id[c].die_id) == (pkg, die))
            return tuple(c for c in on if self._by_id[c].die_id == id)
        if kind == "l3":
            return tuple(c for c in on if self._by_id[c].l3 == id)
        if kind == "cluster":
            return tuple(c for c in on if self._by_id[c].cluster == id)
        if kind == "kind":
            return tuple(c for c in on if self._by_id[c].kind == id)
        raise ValueError(f"unknown group kind {kind!r}")

    @property
    def threads_per_core(self) -> tuple[int, ...]:
        """Distinct thread counts per core (1 and 2 on a hybrid)."""
        return tuple(sorted({len(c.cpus) for c in self.cores}))


# --------------------------------------------------------------------------------------------
# reading

# hwloc-gather-topology copies sysfs files with their trailing NUL ("0\n\0"); the kernel never
# writes one, so NULs are dropped before parsing.
def _text(root: SysRoot, path) -> str | None:
    t = root.read_optional(path)
    return t.replace("\0", "") if t is not None and "\0" in t else t


def _line(root: SysRoot, path) -> str | None:
    t = _text(root, path)
    return None if t is None else t.split("\n", 1)[0].strip()


def _int(root: SysRoot, path) -> int | None:
    """An integer file (cpu_capacity, cpuinfo_max_freq, level, id); None when absent or empty."""
    line = _line(root, path)
    if not line:
        return None
    try:
        return int(line)
    except ValueError:
        raise SysRootReadError(path, f"expected an integer, found {line[:40]!r}") from None


# Thousands of cpuN files repeat the same few masks (every thread of a POWER7 core prints the
# same 32-word shared_cpu_map), so parsing is memoised by text. A bad text is parsed again
# uncached so the error names the file.
@functools.lru_cache(maxsize=8192)
def _cached_ids(text: str, mask: bool) -> tuple[int, ...]:
    return parse_cpumask(text) if mask else parse_cpulist(text)


def _ids(text: str, *, mask: bool, path) -> tuple[int, ...]:
    try:
        return _cached_ids(text, mask)
    except CpuListError:
        return parse_cpumask(text, what=str(path)) if mask else parse_cpulist(text, what=str(path))


def read_online_cpus(root: SysRoot) -> tuple[int, ...]:
    """Online CPU ids: the `online` file; where absent, each cpuN/online; else CPUs that have a
    topology/ folder (offline CPUs lose theirs)."""
    online, _ = _read_online(root, _cpu_dir_ids(root))
    return online


def read_cpu_ids(root: SysRoot) -> tuple[int, ...]:
    """Every CPU the machine has a cpuN/ folder for (present CPUs, online or not), with the online ones."""
    return tuple(sorted(set(_cpu_dir_ids(root)) | set(read_online_cpus(root))))


def _cpu_dir_ids(root: SysRoot) -> list[int]:
    out = []
    for name in root.listdir(root.cpu_dir()):
        m = _CPU_DIR.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def _read_list(root: SysRoot, path) -> tuple[int, ...] | None:
    text = _text(root, path)
    if text is None:
        return None
    return _ids(text, mask=False, path=path)


def _read_online(root: SysRoot, dirs: list[int]) -> tuple[tuple[int, ...], str | None]:
    online = _read_list(root, root.cpu_dir("online"))
    if online is not None:
        return online, None
    out = []
    used_flag = False
    for n in dirs:
        flag = _int(root, root.cpu_dir(f"cpu{n}", "online"))
        if flag is not None:
            used_flag = True
            if flag:
                out.append(n)
        elif root.is_dir(root.cpu_dir(f"cpu{n}", "topology")):
            out.append(n)
    how = ("no online file: online taken from each cpuN/online, and for CPUs without one, "
           "from having a topology folder") if used_flag else \
        "no online file: CPUs with a topology folder taken as online"
    return tuple(out), how


@dataclass
class _RawCpu:
    id: int
    has_topology: bool = False
    package_id: int | None = None
    die_id: int | None = None
    cluster_id: int | None = None
    core_id: int | None = None
    siblings: tuple[int, ...] | None = None
    cluster_cpus: tuple[int, ...] | None = None
    capacity: int | None = None
    base_khz: int | None = None
    fmin: int | None = None
    fmax: int | None = None
    node_links: tuple[int, ...] = ()
    caches: list = field(default_factory=list)


# Paths below are plain strings, not pathlib: a machine with 8,192 CPUs has some 200,000 sysfs files
# to read, and building a Path per file cost more than reading it (issue 10, "Scale").

def _read_ids_file(root: SysRoot, d: str, base: str):
    """The CPUs of a `<base>_list` file, or of the `<base>` mask file where only that exists."""
    p = f"{d}/{base}_list"
    text = _text(root, p)
    if text is not None:
        return _ids(text, mask=False, path=p)
    p = f"{d}/{base}"
    text = _text(root, p)
    if text is not None:
        return _ids(text, mask=True, path=p)
    return None


def _read_id(root: SysRoot, path: str, *, cluster: bool = False) -> int | None:
    return parse_topology_id(_text(root, path), what=path, cluster=cluster)


def _read_raw_cpu(root: SysRoot, n: int, *, caches_seen: dict[str, set[int]] | None) -> _RawCpu:
    """One cpuN folder. `caches_seen` (None: read no caches) maps cache/indexK to the CPUs that an
    earlier CPU's indexK listed in shared_cpu_list: the kernel gives every CPU that shares a cache
    the same index for it (drivers/base/cacheinfo.c), so theirs is the cache already read and is
    skipped. On an 8,192-CPU machine that halves the files read (an L3 is read once, not 56 times).
    Per-core files are not shared the same way: a Bulldozer compute unit's two threads are
    thread_siblings with different core_ids (fixture 64amd64-4s2n4ca2co)."""
    d = f"{root.cpu_dir()}/cpu{n}"
    r = _RawCpu(n)
    entries = root.listdir(d)
    t = f"{d}/topology"
    if "topology" in entries and root.is_dir(t):
        _read_cpu_topology(root, t, r)
    if "cpu_capacity" in entries:
        r.capacity = _int(root, f"{d}/cpu_capacity")
    if "cpufreq" in entries:
        r.fmin = _int(root, f"{d}/cpufreq/cpuinfo_min_freq")
        r.fmax = _int(root, f"{d}/cpufreq/cpuinfo_max_freq")
        r.base_khz = _int(root, f"{d}/cpufreq/base_frequency")
    r.node_links = tuple(sorted(int(m.group(1)) for m in map(_NODE_DIR.match, entries) if m))
    if caches_seen is not None and "cache" in entries:
        for name in root.listdir(f"{d}/cache"):
            if not _INDEX_DIR.match(name):
                continue
            seen = caches_seen.setdefault(name, set())
            if n in seen:
                continue
            cache = _read_cache(root, f"{d}/cache/{name}", n)
            if cache is not None:
                r.caches.append(cache)
                seen.update(cache.cpus)
    return r


def _read_cpu_topology(root: SysRoot, t: str, r: _RawCpu) -> None:
    r.has_topology = True
    r.package_id = _read_id(root, f"{t}/physical_package_id")
    r.die_id = _read_id(root, f"{t}/die_id")
    r.cluster_id = _read_id(root, f"{t}/cluster_id", cluster=True)
    r.core_id = _read_id(root, f"{t}/core_id")
    # thread_siblings and core_cpus are the same mask (core_cpus is the newer name).
    r.siblings = _read_ids_file(root, t, "thread_siblings")
    if r.siblings is None:
        r.siblings = _read_ids_file(root, t, "core_cpus")
    if r.cluster_id is not None:
        r.cluster_cpus = _read_ids_file(root, t, "cluster_cpus")


def _read_cache(root: SysRoot, i: str, n: int) -> Cache | None:
    """cpuN/cache/indexK (Documentation/ABI/testing/sysfs-devices-system-cpu); None without a level."""
    level = _int(root, f"{i}/level")
    ctype = _line(root, f"{i}/type")
    size_text = _text(root, f"{i}/size")
    size = parse_cache_size(size_text, what=f"{i}/size") if size_text is not None else None
    cpus = None
    for fname, mask in (("shared_cpu_list", False), ("shared_cpu_map", True)):
        text = _text(root, f"{i}/{fname}")
        if text is not None:
            cpus = _ids(text, mask=mask, path=f"{i}/{fname}")
            break
    cid = _int(root, f"{i}/id")
    if level is None:
        return None
    return Cache(level, ctype or "Unified", size, cpus or (n,), cid)


@dataclass(frozen=True)
class _CpuSets:
    """Which CPUs exist and which are online, from the cpu/ folder's list files."""
    dirs: tuple[int, ...]          # cpuN folders
    online: tuple[int, ...]
    possible: tuple[int, ...]
    present: tuple[int, ...]
    known: tuple[int, ...]         # possible | present | folders | online
    offline: tuple[int, ...]


def _read_cpu_sets(root: SysRoot, notes: list) -> _CpuSets:
    dirs = _cpu_dir_ids(root)
    if not dirs and not root.is_dir(root.cpu_dir()):
        notes.append("sys/devices/system/cpu is absent: no CPU topology in this capture")
    has_cpu_dir = bool(dirs) or root.is_dir(root.cpu_dir())
    online, how = _read_online(root, dirs)
    if how and has_cpu_dir:
        notes.append(how)
    possible = _read_list(root, root.cpu_dir("possible"))
    present = _read_list(root, root.cpu_dir("present"))
    if possible is None:
        if has_cpu_dir:
            notes.append("no possible file: possible CPUs taken as the cpuN folders")
        possible = tuple(sorted(set(dirs) | set(online)))
    if present is None:
        present = tuple(sorted(set(dirs) | set(online)))
    known = tuple(sorted(set(possible) | set(present) | set(dirs) | set(online)))
    online_set = set(online)
    return _CpuSets(tuple(dirs), tuple(online), tuple(possible), tuple(present), known,
                    tuple(c for c in known if c not in online_set))


def _read_raw_cpus(root: SysRoot, sets: _CpuSets) -> dict[int, _RawCpu]:
    """Every known CPU's raw files; caches only for online CPUs (offline ones have none)."""
    dir_set, online_set = set(sets.dirs), set(sets.online)
    caches_seen: dict[str, set[int]] = {}
    return {n: _read_raw_cpu(root, n, caches_seen=caches_seen if n in online_set else None)
            if n in dir_set else _RawCpu(n) for n in sets.known}


@dataclass(frozen=True)
class _Isolation:
    cmdline: str | None
    isolated: tuple[int, ...]
    nohz_full: tuple[int, ...]
    isolcpus_flags: tuple[str, ...]


def _read_isolation(root: SysRoot, notes: list) -> _Isolation:
    """cpu/isolated and cpu/nohz_full, or the kernel command line's isolcpus= and nohz_full= where
    the files are not there (worker1's capture has no cpu/isolated)."""
    cmdline_text = root.read_optional(root.proc("cmdline"))
    cmdline = cmdline_text.replace("\0", " ").strip() if cmdline_text is not None else None
    cmd = parse_cmdline_isolation(cmdline) if cmdline else None
    isolated = _read_list(root, root.cpu_dir("isolated"))
    isolcpus_flags: tuple[str, ...] = ()
    if cmd and cmd.isolcpus is not None:
        isolcpus_flags = cmd.isolcpus_flags
    if isolated is None:
        if cmd and cmd.isolcpus is not None:
            isolated = cmd.isolcpus
            flag_text = ",".join(cmd.isolcpus_flags)
            note = "no cpu/isolated file: isolated CPUs taken from the kernel command line isolcpus="
            if flag_text:
                note += f"{flag_text},{format_cpulist(isolated)}"
                if "domain" not in cmd.isolcpus_flags:
                    # kernel/sched/isolation.c: flags given without "domain" leave scheduler
                    # domains alone, so the kernel's own isolated file would read empty.
                    note += " (without the domain flag the scheduler still balances onto them)"
            notes.append(note)
        else:
            isolated = ()
    nohz = _read_list(root, root.cpu_dir("nohz_full"))
    if nohz is None:
        if cmd and cmd.nohz_full is not None:
            nohz = cmd.nohz_full
            notes.append("no cpu/nohz_full file: nohz_full CPUs taken from the kernel command line")
        else:
            nohz = ()
    return _Isolation(cmdline, tuple(isolated), tuple(nohz), isolcpus_flags)


def _core_cpu_lists(raw: dict[int, _RawCpu], online: tuple[int, ...], notes: list) -> tuple[tuple[int, ...], ...]:
    """Cores as the union of sibling lists over online CPUs (union-find), in CPU order."""
    parent = {c: c for c in online}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    missing_topology = [c for c in online if not raw[c].has_topology]
    if missing_topology:
        notes.append(f"online CPUs {format_cpulist(missing_topology)} have no topology folder: "
                     "each is shown as its own core, package unknown")
    for c in online:
        for s in raw[c].siblings or ():
            if s in parent:
                a, b = find(c), find(s)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for c in online:
        groups.setdefault(find(c), []).append(c)
    return tuple(sorted((tuple(sorted(v)) for v in groups.values()), key=lambda t: t[0]))


@dataclass(frozen=True)
class _CacheGroups:
    caches: tuple[Cache, ...]
    l3_groups: tuple[tuple[int, ...], ...]
    l3_of: dict
    clusters: tuple[tuple[int, ...], ...]
    cluster_of: dict


def _group_caches(raw: dict[int, _RawCpu], online: tuple[int, ...]) -> _CacheGroups:
    """The distinct caches, the L3 groups and the clusters, and which of each a CPU belongs to."""
    caches: dict[tuple, Cache] = {}
    for c in online:
        for cache in raw[c].caches:
            caches.setdefault((cache.level, cache.type, cache.cpus), cache)
    type_order = {"Data": 0, "Instruction": 1, "Unified": 2}
    cache_list = tuple(sorted(caches.values(), key=lambda k: (k.level, type_order.get(k.type, 3), k.cpus)))
    l3_groups = tuple(sorted({k.cpus for k in cache_list if k.level == 3}, key=lambda t: t[0]))
    cluster_groups = tuple(sorted({raw[c].cluster_cpus for c in online if raw[c].cluster_cpus},
                                  key=lambda t: t[0]))
    return _CacheGroups(cache_list, l3_groups, _index_of(l3_groups), cluster_groups, _index_of(cluster_groups))


def _index_of(groups) -> dict[int, int]:
    """CPU -> index of the first group that holds it."""
    out: dict[int, int] = {}
    for i, g in enumerate(groups):
        for c in g:
            out.setdefault(c, i)
    return out


def _make_cpus(sets: _CpuSets, raw, cpu_node: dict, kinds: dict, iso: _Isolation,
               groups: _CacheGroups) -> tuple[Cpu, ...]:
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
    smt_text = _line(root, root.cpu_dir("smt", "active"))
    if smt_text in ("0", "1"):
        return smt_text == "1"
    if any(len(k) > 1 for k in core_cpu_lists):
        return True
    return None


def read_topology(root: SysRoot) -> Topology:
    """The machine's CPUs, cores, packages, NUMA nodes and caches, from the files the module
    docstring lists; each step below adds to `notes` what it could not know."""
    notes: list[str] = []
    sets = _read_cpu_sets(root, notes)
    online = sets.online
    raw = _read_raw_cpus(root, sets)
    iso = _read_isolation(root, notes)
    nodes, cpu_node = _read_nodes(root, raw, notes)
    core_cpu_lists = _core_cpu_lists(raw, online, notes)
    groups = _group_caches(raw, online)
    kinds, kind_source = _read_kinds(root, raw, online, caches=groups.caches)
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

    info_text = _text(root, root.proc("cpuinfo"))
    info = parse_cpuinfo(info_text) if info_text is not None else None
    arch, model = _arch_and_model(root, info, notes)
    return Topology(
        arch=arch, model_name=model, kernel_release=_kernel_release(root),
        hostname=_line(root, root.proc("sys", "kernel", "hostname")) or None,
        cpus=cpus, online=online, offline=sets.offline, possible=sets.possible,
        present=sets.present, isolated=iso.isolated, nohz_full=iso.nohz_full, cmdline=iso.cmdline,
        nodes=nodes, packages=packages, cores=tuple(cores), caches=groups.caches,
        l3_groups=groups.l3_groups, clusters=groups.clusters, smt_active=_read_smt_active(root, core_cpu_lists),
        hybrid=len({k for k in kinds.values() if k}) > 1, isolcpus_flags=iso.isolcpus_flags,
        kind_source=kind_source, notes=tuple(notes))


def _read_nodes(root: SysRoot, raw: dict, notes: list) -> tuple[tuple[NumaNode, ...], dict]:
    ids = sorted(int(m.group(1)) for m in map(_NODE_DIR.match, root.listdir(root.node_dir())) if m)
    if not ids:
        if root.is_dir(root.node_dir()) or any(r.node_links for r in raw.values()):
            notes.append("no NUMA node folders: nodes unknown")
        else:
            notes.append("no sys/devices/system/node: nodes unknown")
        return (), {}
    id_set = set(ids)
    node_online = _read_list(root, root.node_dir("online"))
    node_possible = _read_list(root, root.node_dir("possible"))
    cpu_node: dict[int, int] = {}
    listed: dict[int, tuple[int, ...] | None] = {}
    for k in ids:
        d = root.node_dir(f"node{k}")
        cpus = None
        p = d / "cpulist"
        text = _text(root, p)
        if text is not None:
            cpus = _ids(text, mask=False, path=p)
        else:
            p = d / "cpumap"
            text = _text(root, p)
            if text is not None:
                cpus = _ids(text, mask=True, path=p)
        listed[k] = cpus
        for c in cpus or ():
            cpu_node.setdefault(c, k)
    # cpuN/nodeK links fill in CPUs whose node lists are missing. A link to a node without a
    # folder (offline-cpu0-node0 keeps cpu4 -> node0 after node0 was taken away) is not a node.
    dangling = set()
    linked: dict[int, list[int]] = {}
    for n, r in raw.items():
        for k in r.node_links:
            if k in id_set:
                linked.setdefault(k, []).append(n)
                cpu_node.setdefault(n, k)
            else:
                dangling.add(k)
    if dangling:
        notes.append(f"CPU folders link to node(s) {format_cpulist(dangling)} that have no folder "
                     "under sys/devices/system/node: those CPUs' node is unknown")
    # drivers/base/node.c node_read_distance prints one distance per online node in id order.
    order_candidates = [c for c in (node_online, node_possible, tuple(ids)) if c]
    nodes = []
    bad_distance = []
    for k in ids:
        d = root.node_dir(f"node{k}")
        p = d / "distance"
        text = _text(root, p)
        dist = {}
        if text is not None:
            values = parse_distances(text, what=str(p))
            for order in order_candidates:
                if len(order) == len(values):
                    dist = dict(zip(order, values))
                    break
            else:
                bad_distance.append(k)
        mem = None
        mtext = _text(root, d / "meminfo")
        if mtext is not None:
            mem = parse_node_meminfo_total(mtext)
        cpus = listed[k] if listed[k] is not None else tuple(sorted(linked.get(k, ())))
        nodes.append(NumaNode(k, tuple(cpus), dist, mem))
    if bad_distance:
        notes.append(f"node(s) {format_cpulist(bad_distance)}: distance file does not match the node "
                     "list; distances unknown")
    return tuple(nodes), cpu_node


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


def _read_kinds(root: SysRoot, raw: dict, online, *, caches) -> tuple[dict[int, str], str | None]:
    # Intel hybrids register two PMUs whose cpus files list the P and E cores
    # (arch/x86/events/intel/core.c, Documentation/ABI/testing/sysfs-bus-event_source-devices).
    core_cpus = _read_list(root, root.sys("devices", "cpu_core", "cpus"))
    atom_cpus = _read_list(root, root.sys("devices", "cpu_atom", "cpus"))
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
    rel = _line(root, root.proc("sys", "kernel", "osrelease"))
    if rel:
        return rel
    version = _line(root, root.proc("version"))
    if version:
        m = re.match(r"Linux version (\S+)", version)
        if m:
            return m.group(1)
    return None


# --------------------------------------------------------------------------------------------
# layout

@dataclass(frozen=True)
class Group:
    """A box in the topology drawing. kind: machine, node, package, die, l3, cluster, core, offline.
    A core's children are CPU ids (ints); every other group's children are Groups.
    `merged` lists (kind, id) of levels folded into this one because they hold the same CPUs
    (a 2-socket server's node 0 is its package 0)."""
    kind: str
    id: int | None
    label: str
    cpus: tuple[int, ...]
    children: tuple = ()
    offline: bool = False
    merged: tuple[tuple[str, int | None], ...] = ()

    def walk(self):
        """This group and every group below it, depth first."""
        yield self
        for ch in self.children:
            if isinstance(ch, Group):
                yield from ch.walk()


_PRIORITY = {"package": 0, "node": 1, "die": 2, "l3": 3, "cluster": 4, "core": 5}


def _label(kind: str, gid, topo: Topology, l3_sizes: dict) -> str:
    if kind == "package":
        return "package ?" if gid is None else f"package {gid}"
    if kind == "die":
        return f"die {gid[1]}" if isinstance(gid, tuple) else f"die {gid}"
    if kind == "l3":
        size = l3_sizes.get(topo.l3_groups[gid])
        return f"L3 {format_size(size)}" if size else "L3"
    return f"{kind} {gid}"


def _candidates(topo: Topology, online: set) -> list[tuple[str, object, frozenset]]:
    """Every box that could be drawn, biggest first; among equal sets package before node before
    die, L3, cluster and core (_PRIORITY), so the outer of two equal boxes is the package."""
    cand: list[tuple[str, object, frozenset]] = []
    for p in topo.packages:
        cand.append(("package", p.id, frozenset(p.cpus)))
    for n in topo.nodes:
        s = frozenset(c for c in n.cpus if c in online)
        if s:
            cand.append(("node", n.id, s))
    # A die, L3 or cluster of one core adds nothing.
    core_sets = {frozenset(k.cpus) for k in topo.cores}
    dies: dict = {}
    for c in topo.cpus:
        if c.online and c.die_id is not None:
            dies.setdefault((c.package_id, c.die_id), set()).add(c.id)
    for key, s in dies.items():
        if frozenset(s) not in core_sets:
            cand.append(("die", key, frozenset(s)))
    for kind, groups in (("l3", topo.l3_groups), ("cluster", topo.clusters)):
        for i, g in enumerate(groups):
            s = frozenset(c for c in g if c in online)
            if s and s not in core_sets:
                cand.append((kind, i, s))
    for k in topo.cores:
        cand.append(("core", k.index, frozenset(k.cpus)))
    cand.sort(key=lambda t: (-len(t[2]), _PRIORITY[t[0]], min(t[2])))
    return cand


class _Box:
    """A placed box while nesting: its CPUs, its parent, its children, the levels folded into it."""
    __slots__ = ("kind", "id", "cpus", "parent", "children", "merged")

    def __init__(self, kind: str, gid, cpus: frozenset, parent: "_Box | None"):
        self.kind, self.id, self.cpus, self.parent = kind, gid, cpus, parent
        self.children: list[_Box] = []
        self.merged: list[tuple[str, object]] = []


def _nest(machine: _Box, cand) -> None:
    """Place each candidate inside the smallest placed box that holds it.

    Placed boxes never overlap without nesting (a candidate that straddles is dropped), so each
    CPU has one innermost box (`inner`), and the boxes holding a CPU are that box and its
    ancestors: the smallest box that holds a candidate is the first ancestor of one member's
    innermost box that holds them all, found in a few steps instead of a scan of every placed box
    (which made 65,535 CPUs take minutes; issue 10). Among equal boxes the innermost wins, so a
    node equal to a package equal to the whole machine folds into the package. A candidate
    straddles when some member's innermost box lies below the parent."""
    inner = dict.fromkeys(machine.cpus, machine)
    for kind, gid, s in cand:
        parent = inner[next(iter(s))]
        while not s <= parent.cpus:
            parent = parent.parent
        if parent.cpus == s and parent is not machine and kind != "core":
            parent.merged.append((kind, gid))
            continue
        if any(inner[c] is not parent for c in s):
            continue  # straddles a box already placed: cannot nest
        box = _Box(kind, gid, s, parent)
        parent.children.append(box)
        for c in s:
            inner[c] = box


def layout(topo: Topology) -> Group:
    """The nesting of packages, nodes, dies, L3 groups, clusters and cores, for drawing.

    Candidate groups are placed by CPU-set containment, biggest first, so whichever of node and
    package holds the other ends up outside (2-socket server: equal, folded into one box;
    SNC or Opteron: nodes inside a package; IBM x3950: packages inside nodes). A group equal to
    its parent is folded into it; a group that straddles two boxes cannot be drawn nested and is
    dropped (its members still carry the id)."""
    online = set(topo.online)
    machine = _Box("machine", None, frozenset(online), None)
    _nest(machine, _candidates(topo, online))
    # A single package of unknown id equal to the machine adds nothing.
    if len(machine.children) == 1 and machine.children[0].kind == "package" and machine.children[0].id is None:
        only = machine.children[0]
        machine.children = only.children
        machine.merged.extend([("package", None)] + only.merged)
    l3_sizes: dict = {}
    for k in topo.caches:
        if k.level == 3:
            l3_sizes.setdefault(k.cpus, k.size_bytes)
    root_group = _group_of(machine, topo, l3_sizes)
    # Offline CPUs have no topology folder, so their place is unknown: one "offline" box. CPUs that
    # are possible but not present (empty hotplug slots, 0-191 on a 24-CPU box) are not hardware.
    present = set(topo.present)
    drawn_offline = tuple(c for c in topo.offline if c in present)
    if drawn_offline:
        off_children = tuple(Group("core", None, f"cpu {c} (offline)", (c,), (c,), True) for c in drawn_offline)
        off = Group("offline", None, f"offline {format_cpulist(drawn_offline)}", drawn_offline, off_children, True)
        root_group = Group(root_group.kind, root_group.id, root_group.label, root_group.cpus,
                           root_group.children + (off,), False, root_group.merged)
    return root_group


def _group_of(box: _Box, topo: Topology, l3_sizes: dict) -> Group:
    """The frozen Group of a placed box and everything below it, children in CPU order."""
    cpus = tuple(sorted(box.cpus))
    merged_ids = tuple((k, i[1] if k == "die" else i) for k, i in box.merged)
    if box.kind == "core":
        core_id = topo.cores[box.id].core_id
        return Group("core", box.id, f"core {core_id if core_id is not None else '?'}", cpus, cpus, False,
                     tuple(box.merged))
    kids = tuple(sorted((_group_of(ch, topo, l3_sizes) for ch in box.children),
                        key=lambda g: g.cpus[0] if g.cpus else 1 << 30))
    if box.kind == "machine":
        return Group("machine", None, topo.hostname or topo.model_name or "machine", cpus, kids, False, merged_ids)
    # Only a folded node is worth naming: a die or L3 equal to its package adds nothing.
    label = " · ".join([_label(box.kind, box.id, topo, l3_sizes)]
                       + [_label(k, i, topo, l3_sizes) for k, i in box.merged if k == "node"])
    return Group(box.kind, box.id[1] if box.kind == "die" else box.id, label, cpus, kids, False, merged_ids)
