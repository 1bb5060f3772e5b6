"""What a metrics engine tells of one host, turned into the values the rest of coremap draws.

A source (pcp.py, prometheus.py) hands over:
- `HostFacts`: the CPUs it knows with the package, core and NUMA node it gives for each (node_cpu_info,
  hinv.map.cpu_node), the model, kernel and host name, isolated and quiet CPUs where it has them;
- `HostCounters`: counters at one time (per IRQ per CPU, per softirq kind per CPU, CPU time per mode);
- or, where the engine computes rates itself (Prometheus' irate), `RateFigures`.

`topology_of(facts)` builds a Topology with what the source gave and nothing else: a CPU whose core the
source does not name is drawn as a core of its own, and the topology's notes say which facts are absent
(core and package ids, caches, IRQ affinity, NIC queues). `sample_of(counters)` builds the MachineSample
`app.sampling.rates.rates` compares, so a counter that went down (a reset) gives 0 and a note, as it does
for /proc. `rates_of(figures)` builds Rates from the engine's own rates.

`Cleaner` drops what no counter can be: a negative value, NaN or infinity (one note per host, counted),
so a broken exporter colours nothing and hides nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from app.machine.sample import MachineSample
from app.machine.topology import Core, Cpu, NumaNode, Package, Topology
from app.parse.number import NumberError, parse_float, parse_int
from app.parse.interrupts import InterruptRow, InterruptTable, SoftirqTable
from app.parse.stat import CpuTimes, StatSample
from app.sampling.rates import CpuRates, IrqRate, Rates

USER_HZ = 100               # /proc/stat's unit (CpuTimes); the engines give seconds or milliseconds
MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
MAX_CPUS = 8192             # per host: more is not a machine, it is a broken source
MAX_VALUE = float(2 ** 64)  # a counter or rate past a 64-bit counter is a broken source
ABSENT = "absent from this source: caches, IRQ affinity (requested and effective), NIC queues"


@dataclass(frozen=True)
class CpuFacts:
    cpu: int
    package: int | None = None
    core: int | None = None
    node: int | None = None


@dataclass(frozen=True)
class HostFacts:
    host: str                               # as the source names it (instance, hostspec)
    hostname: str | None = None
    model: str | None = None
    kernel: str | None = None
    arch: str | None = None
    cpus: tuple[CpuFacts, ...] = ()         # online CPUs, ascending
    isolated: tuple[int, ...] = ()
    quiet: tuple[int, ...] = ()             # coremap's own quiet CPUs, where it exported them (export.py)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostCounters:
    time: float                                              # seconds, the engine's clock
    cpus: tuple[int, ...]                                    # online CPU ids
    irqs: dict[str, tuple[str, dict[int, float]]] = field(default_factory=dict)  # irq -> (description, {cpu: n})
    softirqs: dict[str, dict[int, float]] = field(default_factory=dict)          # kind -> {cpu: n}
    cpu_seconds: dict[int, dict[str, float]] = field(default_factory=dict)        # cpu -> {mode: seconds}


@dataclass(frozen=True)
class RateFigures:
    seconds: float                                           # the window the engine's rates cover
    cpus: tuple[int, ...]
    irq: dict[int, float] = field(default_factory=dict)      # cpu -> hard IRQs/s
    irqs: dict[str, tuple[str, dict[int, float]]] = field(default_factory=dict)   # irq -> (description, {cpu: /s})
    softirq: dict[str, dict[int, float]] = field(default_factory=dict)            # kind -> {cpu: /s}
    modes: dict[int, dict[str, float]] = field(default_factory=dict)              # cpu -> {mode: seconds/s}


class Cleaner:
    """Counts the values refused for one host; `note()` says how many, or "" when none were."""

    def __init__(self, host: str):
        self.host, self.bad = host, 0

    def value(self, raw) -> float | None:
        """`raw` (an engine's text, or a JSON number) through the one number parser: finite, 0 to
        MAX_VALUE (a 64-bit counter), else None and counted. 1e308 passed float() and overflowed as
        infinity in a sum or int() later (issue 32)."""
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            self.bad += 1
            return None
        text = raw if isinstance(raw, str) else repr(raw)
        try:
            return parse_float(text, what="value", lo=0.0, hi=MAX_VALUE)
        except NumberError:
            self.bad += 1
            return None

    def cpu(self, raw) -> int | None:
        try:
            return parse_int(str(raw), what="cpu", lo=0, hi=MAX_CPUS - 1)
        except NumberError:
            self.bad += 1
            return None

    def note(self) -> str:
        if not self.bad:
            return ""
        return f"{self.host}: {self.bad} value{'s' if self.bad != 1 else ''} that no counter can hold " \
               "(negative, NaN, infinite or not a number) left out"


def topology_of(f: HostFacts) -> Topology:
    """The CPUs, cores, packages and NUMA nodes `f` names; nothing guessed (module docstring)."""
    ids = tuple(sorted({c.cpu for c in f.cpus}))
    by = {c.cpu: c for c in f.cpus}
    notes = list(f.notes)
    known_cores = all(by[c].core is not None and by[c].package is not None for c in ids)
    groups: dict = {}
    for c in ids:
        key = (by[c].package, by[c].core) if known_cores else ("cpu", c)
        groups.setdefault(key, []).append(c)
    core_lists = sorted((tuple(v) for v in groups.values()), key=lambda cl: cl[0])
    if not known_cores:
        notes.append("the source names no core of each CPU: every CPU is drawn alone, hardware threads unknown")
    if any(by[c].package is None for c in ids):
        notes.append("the source names no package of each CPU: sockets unknown")
    notes.append(ABSENT)
    siblings = {c: cl for cl in core_lists for c in cl}
    cpus = tuple(Cpu(id=c, online=True, package_id=by[c].package, core_id=by[c].core, node=by[c].node,
                     siblings=siblings[c], isolated=c in f.isolated) for c in ids)
    cores = tuple(Core(i, cl, by[cl[0]].core, by[cl[0]].package, None, by[cl[0]].node, None)
                  for i, cl in enumerate(core_lists))
    pkg: dict = {}
    for k in cores:
        pkg.setdefault(k.package_id, []).append(k)
    packages = tuple(Package(pid, i, tuple(c for k in ks for c in k.cpus), tuple(k.index for k in ks), (None,))
                     for i, (pid, ks) in enumerate(sorted(pkg.items(), key=lambda kv: kv[1][0].cpus[0])))
    node_cpus: dict = {}
    for c in ids:
        if by[c].node is not None:
            node_cpus.setdefault(by[c].node, []).append(c)
    nodes = tuple(NumaNode(n, tuple(cs)) for n, cs in sorted(node_cpus.items()))
    return Topology(
        arch=f.arch, model_name=f.model, kernel_release=f.kernel, hostname=f.hostname or f.host, cpus=cpus,
        online=ids, offline=(), possible=ids, present=ids, isolated=tuple(c for c in f.isolated if c in by),
        nohz_full=(), cmdline=None, nodes=nodes, packages=packages, cores=cores, caches=(), l3_groups=(),
        clusters=(), smt_active=(any(len(cl) > 1 for cl in core_lists) or None) if known_cores else None,
        hybrid=False, notes=tuple(notes))


def sample_of(c: HostCounters) -> MachineSample:
    """The counters as /proc's tables would hold them (interrupt rows by IRQ, softirqs, /proc/stat times)."""
    cpus = c.cpus
    rows = tuple(InterruptRow(irq, tuple(int(per.get(x, 0)) for x in cpus), int(sum(per.values())),
                              description=desc)
                 for irq, (desc, per) in sorted(c.irqs.items(), key=lambda kv: _irq_order(kv[0])))
    interrupts = InterruptTable(cpus, rows) if rows else None
    softirqs = SoftirqTable(cpus, {k: tuple(int(per.get(x, 0)) for x in cpus) for k, per in c.softirqs.items()}) \
        if c.softirqs else None
    stat = None
    if c.cpu_seconds:
        per_cpu = {x: _times(m) for x, m in c.cpu_seconds.items()}
        total = CpuTimes(*(sum(getattr(t, f) for t in per_cpu.values()) for f in MODES))
        stat = StatSample(total, per_cpu)
    return MachineSample(c.time, interrupts, softirqs, stat, None)


def _times(m: dict[str, float]) -> CpuTimes:
    return CpuTimes(*(int(round(m.get(f, 0.0) * USER_HZ)) for f in MODES))


def _irq_order(irq: str):
    return (0, int(irq), "") if irq.isdigit() else (1, 0, irq)


def rates_of(r: RateFigures) -> Rates:
    """Rates as app.sampling.rates.rates would give them, from rates the engine computed."""
    per_cpu = {}
    for c in r.cpus:
        modes = r.modes.get(c)
        soft = {k: per[c] for k, per in r.softirq.items() if c in per}
        pct = {}
        if modes:
            total = sum(modes.get(m, 0.0) for m in MODES)
            if total > 0:
                pct = {m: 100.0 * modes.get(m, 0.0) / total for m in MODES}
        per_cpu[c] = CpuRates(
            c, r.irq.get(c, 0.0), soft, sum(soft.values()),
            busy_pct=(100.0 - pct["idle"] - pct["iowait"]) if pct else None,
            user_pct=(pct["user"] + pct["nice"]) if pct else None, system_pct=pct.get("system"),
            irq_pct=pct.get("irq"), softirq_pct=pct.get("softirq"),
            irq_softirq_pct=(pct["irq"] + pct["softirq"]) if pct else None, idle_pct=pct.get("idle"),
            iowait_pct=pct.get("iowait"), steal_pct=pct.get("steal"))
    irqs = {irq: IrqRate(irq, tuple(per.get(c, 0.0) for c in r.cpus), sum(per.values()))
            for irq, (_desc, per) in r.irqs.items()}
    return Rates(r.seconds, r.cpus, per_cpu, irqs, {})
