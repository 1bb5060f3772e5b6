"""The frozen values of a machine's CPU topology: Topology and the Cpu, Core, Cache, NumaNode and
Package records it holds. Built by read_topology (reader.py); Qt-free and immutable, so a snapshot
can be handed between threads and over the wire (app/remote/codec.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from app.errors import CpuListError
from app.parse.cpulist import MAX_CPU, format_cpulist
from app.parse.json_text import CpuId, Meta


@dataclass(frozen=True)
class Cache:
    level: int
    type: str                      # Data, Instruction, Unified
    size_bytes: int | None
    cpus: tuple[CpuId, ...]          # shared_cpu_list
    id: int | None                 # cache/indexK/id where the kernel provides it

    @property
    def name(self) -> str:
        """L1d, L1i, L2, L3."""
        suffix = {"Data": "d", "Instruction": "i"}.get(self.type, "")
        return f"L{self.level}{suffix}"


@dataclass(frozen=True)
class Cpu:
    id: CpuId
    online: bool
    package_id: int | None = None  # raw physical_package_id; None for -1 or unknown
    die_id: int | None = None
    cluster_id: int | None = None  # None for -1 and 65535
    core_id: int | None = None     # raw core_id: NOT unique, never use it to group
    node: int | None = None
    siblings: tuple[CpuId, ...] = ()  # hardware threads of the same core (this CPU included)
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
    cpus: tuple[CpuId, ...]
    core_id: int | None
    package_id: int | None
    die_id: int | None
    node: int | None
    kind: str | None


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: tuple[CpuId, ...]          # may be empty (GPU or CXL memory nodes)
    distances: dict[int, int] = field(default_factory=dict)   # node id -> distance (10 = local)
    memory_kb: int | None = None


@dataclass(frozen=True)
class Package:
    id: int | None                 # raw physical_package_id (36 and 8442 on Kunpeng); None unknown
    index: int
    cpus: tuple[CpuId, ...]
    cores: tuple[int, ...]         # Core.index values
    dies: tuple[int | None, ...]


@dataclass(frozen=True)
class Topology:
    arch: str | None
    model_name: str | None
    kernel_release: str | None
    hostname: str | None
    cpus: Annotated[tuple[Cpu, ...], Meta(max_length=MAX_CPU)]          # every CPU known: possible | present | cpuN folders, sorted
    online: tuple[CpuId, ...]
    offline: tuple[CpuId, ...]
    possible: tuple[CpuId, ...]
    present: tuple[CpuId, ...]
    isolated: tuple[CpuId, ...]
    nohz_full: tuple[CpuId, ...]
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
    isolcpus: tuple[CpuId, ...] = ()  # the CPUs isolcpus= names, whatever its flags; `isolated`: the scheduler's
    kind_source: str | None = None  # where P/E came from: cpu_core/cpu_atom, cpu_capacity, ...
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "_by_id", {c.id: c for c in self.cpus})
        core_of = {}
        for core in self.cores:
            for c in core.cpus:
                core_of[c] = core
        object.__setattr__(self, "_core_of", core_of)
        object.__setattr__(self, "_isolcpus", frozenset(self.isolcpus))

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

    def isolation_of(self, cpu_id: int) -> tuple[str, ...]:
        """The isolation that applies to one CPU, in the kernel's words and this order: "domain" (the
        scheduler leaves it alone: `isolated`), the other isolcpus= flags it is named under
        ("managed_irq", "nohz"), and "nohz_full". () for a CPU with none, or not on this machine."""
        c = self._by_id.get(cpu_id)
        if c is None:
            return ()
        flags = ["domain"] if c.isolated else []
        if cpu_id in self._isolcpus:
            flags += [f for f in self.isolcpus_flags if f != "domain" and f not in flags]
        if c.nohz_full:
            flags.append("nohz_full")
        return tuple(flags)

    def isolation_groups(self) -> tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]:
        """((flags, CPUs), ...): the online CPUs with some isolation, grouped by the flags that apply
        (isolation_of), in the order of each group's first CPU."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for c in self.online:
            flags = self.isolation_of(c)
            if flags:
                groups.setdefault(flags, []).append(c)
        return tuple((flags, tuple(cpus)) for flags, cpus in groups.items())

    @property
    def threads_per_core(self) -> tuple[int, ...]:
        """Distinct thread counts per core (1 and 2 on a hybrid)."""
        return tuple(sorted({len(c.cpus) for c in self.cores}))

