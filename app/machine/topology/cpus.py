"""Per-CPU reading: which CPUs exist (possible, present, online), each cpuN folder's raw ids,
sibling lists, capacity, clocks and caches (RawCpu), and what they add up to: cores as unions of
sibling lists, the distinct caches, the L3 groups and the clusters
(Documentation/admin-guide/cputopology.rst, drivers/base/cacheinfo.c)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.machine.topology.files import (
    NODE_DIR,
    cpu_dir_ids,
    parse_ids,
    read_id,
    read_ids_file,
    read_int,
    read_line,
    read_list,
    read_online,
    read_text,
)
from app.machine.topology.model import Cache
from app.parse.cpulist import format_cpulist
from app.parse.topology import parse_cache_size
from app.sysroot import SysRoot


_INDEX_DIR = re.compile(r"^index([0-9]{1,3})$", re.ASCII)


@dataclass
class RawCpu:
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


@dataclass
class CacheWalk:
    """What reading the caches of every CPU carries from one CPU to the next. `seen` maps cache/indexK
    to the CPUs that an earlier CPU's indexK shared: the kernel gives every CPU that shares a cache
    the same index for it (drivers/base/cacheinfo.c), so theirs is the cache already read and is
    skipped. On an 8,192-CPU machine that halves the files read (an L3 is read once, not 56 times).
    `disagree`: (cpuN/cache/indexK, its list, its map) where shared_cpu_list and shared_cpu_map differ."""
    seen: dict[str, set[int]] = field(default_factory=dict)
    disagree: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)


def _read_raw_cpu(root: SysRoot, n: int, *, caches: CacheWalk | None) -> RawCpu:
    """One cpuN folder; its caches too unless `caches` is None (offline CPUs have none).
    Per-core files are not shared the way caches are: a Bulldozer compute unit's two threads are
    thread_siblings with different core_ids (fixture 64amd64-4s2n4ca2co)."""
    d = f"{root.cpu_dir()}/cpu{n}"
    r = RawCpu(n)
    entries = root.listdir(d)
    t = f"{d}/topology"
    if "topology" in entries and root.is_dir(t):
        _read_cpu_topology(root, t, r)
    if "cpu_capacity" in entries:
        r.capacity = read_int(root, f"{d}/cpu_capacity")
    if "cpufreq" in entries:
        r.fmin = read_int(root, f"{d}/cpufreq/cpuinfo_min_freq")
        r.fmax = read_int(root, f"{d}/cpufreq/cpuinfo_max_freq")
        r.base_khz = read_int(root, f"{d}/cpufreq/base_frequency")
    r.node_links = tuple(sorted(int(m.group(1)) for m in map(NODE_DIR.match, entries) if m))
    if caches is not None and "cache" in entries:
        for name in root.listdir(f"{d}/cache"):
            if not _INDEX_DIR.match(name):
                continue
            seen = caches.seen.setdefault(name, set())
            if n in seen:
                continue
            cache = _read_cache(root, f"{d}/cache/{name}", n, caches.disagree)
            if cache is not None:
                r.caches.append(cache)
                seen.update(cache.cpus)
    return r


def _read_cpu_topology(root: SysRoot, t: str, r: RawCpu) -> None:
    r.has_topology = True
    r.package_id = read_id(root, f"{t}/physical_package_id")
    r.die_id = read_id(root, f"{t}/die_id")
    r.cluster_id = read_id(root, f"{t}/cluster_id", cluster=True)
    r.core_id = read_id(root, f"{t}/core_id")
    # thread_siblings and core_cpus are the same mask (core_cpus is the newer name).
    r.siblings = read_ids_file(root, t, "thread_siblings")
    if r.siblings is None:
        r.siblings = read_ids_file(root, t, "core_cpus")
    if r.cluster_id is not None:
        r.cluster_cpus = read_ids_file(root, t, "cluster_cpus")


def _read_cache(root: SysRoot, i: str, n: int, disagree: list) -> Cache | None:
    """cpuN/cache/indexK (Documentation/ABI/testing/sysfs-devices-system-cpu); None without a level.
    Its CPUs are shared_cpu_map's where that and shared_cpu_list differ, as hwloc and lscpu (which
    read only the map) take them: the Opteron 6276 capture's kernel lists "0" under a map of 3 for the
    L1i and L2 that each two-core compute unit shares, and the list would count 64 L2s where there are
    32 (issue 30). Each such file goes into `disagree`, for the topology's note."""
    level = read_int(root, f"{i}/level")
    ctype = read_line(root, f"{i}/type")
    size_text = read_text(root, f"{i}/size")
    size = parse_cache_size(size_text, what=f"{i}/size") if size_text is not None else None
    cpus = None
    text = read_text(root, f"{i}/shared_cpu_list")
    if text is not None:
        cpus = parse_ids(text, mask=False, path=f"{i}/shared_cpu_list")
    text = read_text(root, f"{i}/shared_cpu_map")
    if text is not None and (cpus is None or not _same_mask(text, cpus)):
        mapped = parse_ids(text, mask=True, path=f"{i}/shared_cpu_map")
        if cpus is not None and mapped:
            disagree.append((i, cpus, mapped))
        cpus = mapped or cpus
    cid = read_int(root, f"{i}/id")
    if level is None:
        return None
    return Cache(level, ctype or "Unified", size, cpus or (n,), cid)


def _same_mask(text: str, cpus: tuple[int, ...]) -> bool:
    """Whether a mask file's text ("00000000,00000003") holds exactly `cpus`. An 8,192-CPU machine's
    masks are 2,300 characters each, and parsing one per distinct cache doubled read_topology's time;
    one int() and a few shifts tell the usual case, where list and map agree. False for a text int()
    cannot read: the full parse then names the file."""
    try:
        value = int(text.replace(",", "").strip(), 16)
    except ValueError:
        return False
    want = 0
    for c in cpus:
        want |= 1 << c
    return value == want


@dataclass(frozen=True)
class CpuSets:
    """Which CPUs exist and which are online, from the cpu/ folder's list files."""
    dirs: tuple[int, ...]          # cpuN folders
    online: tuple[int, ...]
    possible: tuple[int, ...]
    present: tuple[int, ...]
    known: tuple[int, ...]         # possible | present | folders | online
    offline: tuple[int, ...]


def read_cpu_sets(root: SysRoot, notes: list) -> CpuSets:
    dirs = cpu_dir_ids(root)
    if not dirs and not root.is_dir(root.cpu_dir()):
        notes.append("sys/devices/system/cpu is absent: no CPU topology in this capture")
    has_cpu_dir = bool(dirs) or root.is_dir(root.cpu_dir())
    online, how = read_online(root, dirs)
    if how and has_cpu_dir:
        notes.append(how)
    possible = read_list(root, root.cpu_dir("possible"))
    present = read_list(root, root.cpu_dir("present"))
    if possible is None:
        if has_cpu_dir:
            notes.append("no possible file: possible CPUs taken as the cpuN folders")
        possible = tuple(sorted(set(dirs) | set(online)))
    if present is None:
        present = tuple(sorted(set(dirs) | set(online)))
    known = tuple(sorted(set(possible) | set(present) | set(dirs) | set(online)))
    online_set = set(online)
    return CpuSets(tuple(dirs), tuple(online), tuple(possible), tuple(present), known,
                    tuple(c for c in known if c not in online_set))


def read_raw_cpus(root: SysRoot, sets: CpuSets, notes: list) -> dict[int, RawCpu]:
    """Every known CPU's raw files; caches only for online CPUs (offline ones have none)."""
    dir_set, online_set = set(sets.dirs), set(sets.online)
    walk = CacheWalk()
    raw = {n: _read_raw_cpu(root, n, caches=walk if n in online_set else None)
           if n in dir_set else RawCpu(n) for n in sets.known}
    if walk.disagree:
        notes.append(cache_disagreement_note(walk.disagree))
    return raw


def cache_disagreement_note(disagree: list[tuple[str, tuple[int, ...], tuple[int, ...]]]) -> str:
    """One note for every cache whose shared_cpu_list and shared_cpu_map differ, with the first as the example."""
    path, listed, mapped = disagree[0]
    where = "/".join(path.rsplit("/", 3)[-3:])       # cpu0/cache/index2
    more = f"; {len(disagree) - 1} more caches likewise" if len(disagree) > 1 else ""
    return (f"cache shared_cpu_list and shared_cpu_map disagree ({where}: list {format_cpulist(listed)}, map "
            f"{format_cpulist(mapped)}{more}): the map is taken, as hwloc and lscpu take it")


def cores_from_siblings(raw: dict[int, RawCpu], online: tuple[int, ...], notes: list) -> tuple[tuple[int, ...], ...]:
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
class CacheGroups:
    caches: tuple[Cache, ...]
    l3_groups: tuple[tuple[int, ...], ...]
    l3_of: dict
    clusters: tuple[tuple[int, ...], ...]
    cluster_of: dict


def group_caches(raw: dict[int, RawCpu], online: tuple[int, ...]) -> CacheGroups:
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
    return CacheGroups(cache_list, l3_groups, _index_of(l3_groups), cluster_groups, _index_of(cluster_groups))


def _index_of(groups) -> dict[int, int]:
    """CPU -> index of the first group that holds it."""
    out: dict[int, int] = {}
    for i, g in enumerate(groups):
        for c in g:
            out.setdefault(c, i)
    return out

