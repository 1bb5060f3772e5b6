"""What differs between two machines, or one machine at two times: `coremap diff A B` and the window's
File → Compare with…. Qt-free; both read each side with the readers every view uses.

Each side is a SysRoot (a capture, or this machine), read once into a Side: its topology, kernel command
line and isolation, every numbered IRQ's requested and effective CPUs and counts, the kernel's CPU masks
and knobs (app/store/capture.py KNOB_FILES), and its threads (a capture holds them since issue 30). The
comparison is grouped (topology, command line, isolation, IRQs, masks and knobs, threads); changes that
are the same change (eighty IRQs moved from 0-79 to 0-63) are one Change listing what they apply to.

CPUs are marked where their IRQs differ, which the window's grid shows:
- placement: the IRQs whose effective CPUs (else requested) include the CPU are not the same (compared
  by IRQ number and name, so a capture of the same machine compares like with like);
- load: the CPU's share of the side's device interrupts (a rate where the side has one, else the
  counts since boot) is at least LOAD_SHARE on one side and under half of that on the other.
"""
from __future__ import annotations

import collections
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.errors import CoremapError, SysRootReadError
from app.machine.interrupts import IrqTable, read_irqs
from app.machine.java import full_thread_names
from app.machine.thread_names import ThreadNames
from app.machine.threads import ThreadsSample, read_tasks
from app.machine.topology import Topology, read_topology
from app.parse.cpulist import format_cpulist
from app.parse.interrupts import parse_interrupts
from app.parse.topology import parse_cmdline_isolation
from app.pinning.masks import mask_path, read_mask
from app.store.capture import KNOB_FILES
from app.sysroot import SysRoot

MERGED = 3                  # IRQs with the same change listed as one change from this many on
LOAD_SHARE = 0.01           # a CPU taking 1% of a machine's device interrupts carries IRQ load
# A kworker's name ends in what it works on now ("kworker/1:1-events", then "-mm_percpu_wq"; kernel/
# workqueue.c wq_worker_comm): the same worker, so compared without it. Rescuers ("kworker/R-rcu_gp")
# are named for their workqueue for life, and keep it.
_KWORKER_NOW = re.compile(r"^(kworker/u?[0-9]+:[0-9]+[HI]*)-.*$")
MASKS = (("irqdefault", "default IRQ affinity (proc/irq/default_smp_affinity)"),
         ("workqueue", "unbound workqueues (workqueue/cpumask)"),
         ("watchdog", "lockup watchdog (kernel.watchdog_cpumask)"))


@dataclass(frozen=True)
class Change:
    """One difference: `what` is `a` on side A and `b` on side B (None: absent there). `items`: what
    the same change applies to (IRQ numbers, thread names), when it applies to several."""
    what: str
    a: str | None
    b: str | None
    items: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    name: str
    changes: tuple[Change, ...]
    note: str = ""          # why the group could not be compared, or what it left out


@dataclass(frozen=True)
class MachineDiff:
    a: str                              # the sides' names, for people
    b: str
    groups: tuple[Group, ...]
    cpus: dict[int, str] = field(default_factory=dict)   # CPU -> why it is marked

    @property
    def same(self) -> bool:
        return not any(g.changes for g in self.groups)


@dataclass(frozen=True)
class Side:
    """What one machine is, as the comparison reads it."""
    name: str
    topology: Topology
    irqs: IrqTable | None
    irq_load: dict[int, float]          # CPU -> its share of the device interrupts
    masks: dict[str, str | None]
    knobs: dict[str, str | None]
    threads: ThreadsSample | None
    names: ThreadNames


class DiffError(CoremapError):
    """A side that cannot be read at all."""


def read_side(root: SysRoot, name: str) -> Side:
    """Everything the comparison needs of `root`, read once."""
    try:
        topo = read_topology(root)
    except SysRootReadError as e:
        raise DiffError(f"{name}: {e}") from None
    try:
        irqs = read_irqs(root)
    except SysRootReadError:
        irqs = None             # a capture without proc/interrupts: its IRQs are not compared
    threads = read_tasks(root, detail="full") if root.listdir_small(str(root.proc())) else None
    if threads is not None and not threads.tasks:
        threads = None
    names = full_thread_names(((t.pid, t.tid, t.comm) for t in threads.tasks.values()), root,
                              {p: i.comm for p, i in threads.processes.items()}) if threads else ThreadNames()
    return Side(name, topo, irqs, _irq_load(root, irqs), _masks(root), _knobs(root), threads, names)


def _irq_load(root: SysRoot, irqs: IrqTable | None) -> dict[int, float]:
    """Each CPU's share of the device (numbered) interrupts: over the capture's interval where it has a
    second capture of the counters, else since boot."""
    if irqs is None:
        return {}
    per_cpu = _device_counts(irqs.cpus, irqs.rows)
    try:
        later = root.later()
    except SysRootReadError:
        later = None
    if later is not None:
        path = later[0].proc("interrupts")
        try:
            t1 = parse_interrupts(later[0].read(path), what=str(path))
            after = _device_counts(t1.cpus, t1.rows)
            per_cpu = {c: max(0, after.get(c, 0) - n) for c, n in per_cpu.items()}
        except (SysRootReadError, CoremapError):
            pass        # a second capture that cannot be read: the counts since boot still say where
    total = sum(per_cpu.values())
    return {c: n / total for c, n in per_cpu.items()} if total else {}


def _device_counts(cpus, rows) -> dict[int, int]:
    out = dict.fromkeys(cpus, 0)
    for r in rows:
        if r.numbered and len(r.counts) == len(cpus):
            for c, n in zip(cpus, r.counts):
                out[c] += n
    return out


def _masks(root: SysRoot) -> dict[str, str | None]:
    out = {}
    for kind, label in MASKS:
        try:
            cpus = read_mask(root, mask_path(root, kind), kind)
        except SysRootReadError as e:
            out[label] = f"unreadable ({e.reason})"
            continue
        out[label] = None if cpus is None else format_cpulist(cpus)
    return out


def _knob_name(rel: str) -> str:
    if rel.startswith("proc/sys/"):
        return rel.removeprefix("proc/sys/").replace("/", ".")
    return rel.removeprefix("sys/")


def _knobs(root: SysRoot) -> dict[str, str | None]:
    """KNOB_FILES's values (the mask among them is compared as a mask), and each cpufreq governor with
    the CPUs that run it."""
    out: dict[str, str | None] = {}
    for rel in KNOB_FILES:
        if rel in ("proc/sys/kernel/watchdog_cpumask", "sys/devices/virtual/workqueue/cpumask"):
            continue
        try:
            text = root.read_optional(root.path(rel))
        except SysRootReadError as e:
            text = f"unreadable ({e.reason})"
        out[_knob_name(rel)] = None if text is None else " ".join(text.split())
    governors: dict[str, list[int]] = collections.defaultdict(list)
    for cpu in root.listdir(root.cpu_dir()):
        if cpu.startswith("cpu") and cpu[3:].isdigit():
            try:
                g = root.read_first_line(root.cpu_dir(cpu, "cpufreq", "scaling_governor"))
            except SysRootReadError:
                g = None
            if g:
                governors[g].append(int(cpu[3:]))
    out["cpufreq governor"] = "; ".join(f"{g} on {format_cpulist(c)}" for g, c in sorted(governors.items())) or None
    return out


# -- the comparison --------------------------------------------------------------------------------------
def compare(a: Side, b: Side) -> MachineDiff:
    groups = (_topology(a.topology, b.topology), _cmdline(a.topology, b.topology),
              _isolation(a.topology, b.topology), _irqs(a, b),
              _values("Kernel masks", a.masks, b.masks), _values("Kernel knobs", a.knobs, b.knobs),
              _threads(a, b))
    return MachineDiff(a.name, b.name, groups, _marked_cpus(a, b))


def diff_roots(a: SysRoot, a_name: str, b: SysRoot, b_name: str) -> MachineDiff:
    return compare(read_side(a, a_name), read_side(b, b_name))


def _pairs(what_values: Iterable[tuple[str, object, object]]) -> tuple[Change, ...]:
    return tuple(Change(w, _text(x), _text(y)) for w, x, y in what_values if _text(x) != _text(y))


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, tuple):
        return format_cpulist(v) if v else "none"
    return str(v)


def _topology(a: Topology, b: Topology) -> Group:
    def facts(t: Topology):
        l3 = collections.Counter(c.size_bytes for c in t.caches if c.level == 3)
        return {"model": t.model_name, "architecture": t.arch, "kernel": t.kernel_release,
                "CPUs": len(t.cpus), "online CPUs": t.online, "offline CPUs": t.offline or None,
                "packages": len(t.packages), "cores": len(t.cores), "SMT active": t.smt_active,
                "NUMA nodes": len(t.nodes),
                **{f"node {n.id} CPUs": n.cpus for n in t.nodes},
                "L3 caches": ", ".join(f"{n} x {_size(s)}" for s, n in sorted(l3.items(), key=lambda i: i[0] or 0)) or None}
    fa, fb = facts(a), facts(b)
    return Group("Topology", _pairs((k, fa.get(k), fb.get(k)) for k in dict.fromkeys([*fa, *fb])))


def _size(n: int | None) -> str:
    from app.format import format_size
    return format_size(n) if n is not None else "? B"


def cmdline_words(cmdline: str | None) -> dict[str, str]:
    """A kernel command line as {parameter: value} ("" for a bare word); a parameter given twice keeps
    every value, space-separated, in order (the kernel takes the last of most)."""
    out: dict[str, list[str]] = {}
    for word in (cmdline or "").split():
        key, sep, value = word.partition("=")
        out.setdefault(key, []).append(value if sep else "")
    return {k: " ".join(v) if any(v) else "(set)" for k, v in out.items()}


def _cmdline(a: Topology, b: Topology) -> Group:
    if a.cmdline is None or b.cmdline is None:
        return Group("Command line", (), note="not known for " + " and ".join(
            n for n, t in (("A", a), ("B", b)) if t.cmdline is None))
    wa, wb = cmdline_words(a.cmdline), cmdline_words(b.cmdline)
    return Group("Command line", _pairs((k, wa.get(k), wb.get(k)) for k in dict.fromkeys([*wa, *wb])))


def _isolation(a: Topology, b: Topology) -> Group:
    def facts(t: Topology):
        try:
            nocbs = parse_cmdline_isolation(t.cmdline).rcu_nocbs if t.cmdline else None
        except CoremapError:
            nocbs = None
        # isolated: what the scheduler leaves alone (the domain flag); isolcpus: every CPU it names.
        return {"isolated CPUs": t.isolated, "isolcpus CPUs": t.isolcpus or None, "nohz_full CPUs": t.nohz_full,
                "isolcpus flags": ",".join(t.isolcpus_flags) or None, "rcu_nocbs CPUs": nocbs}
    fa, fb = facts(a), facts(b)
    return Group("Isolation", _pairs((k, fa[k], fb[k]) for k in fa))


def _irq_key(irqs: IrqTable) -> dict[str, str]:
    """IRQ number -> its name (actions as printed), for the numbered IRQs."""
    return {r.irq: (",".join(r.actions) or r.description or "?") for r in irqs.rows if r.numbered}


def _matched_irqs(a: IrqTable, b: IrqTable) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(pairs of the same IRQ on A and B, A's IRQs not on B, B's not on A). The same IRQ is the one
    with the same name where that name is unique on both sides (i40e-eno1-TxRx-3 is numbered
    differently on two machines, and on one after a driver reload), else the same number and name."""
    na, nb = _irq_key(a), _irq_key(b)
    ca, cb = collections.Counter(na.values()), collections.Counter(nb.values())
    by_name_b = {n: irq for irq, n in nb.items() if cb[n] == 1 and n != "?"}
    pairs, taken = [], set()
    for irq, name in na.items():
        other = by_name_b.get(name) if ca[name] == 1 else None
        if other is None and nb.get(irq) == name:
            other = irq
        if other is not None and other not in taken:
            pairs.append((irq, other))
            taken.add(other)
    paired = {x for x, _ in pairs}
    return (pairs, [i for i in na if i not in paired], [i for i in nb if i not in taken])


def _irqs(a: Side, b: Side) -> Group:
    if a.irqs is None or b.irqs is None:
        return Group("IRQs", (), note="no proc/interrupts in " + " and ".join(
            s.name for s in (a, b) if s.irqs is None))
    na, nb = _irq_key(a.irqs), _irq_key(b.irqs)
    pairs, only_a, only_b = _matched_irqs(a.irqs, b.irqs)
    same: dict[tuple[str, str | None, str | None], list[str]] = collections.defaultdict(list)
    for label, x, y, irqs in (("only in A", "present", None, only_a), ("only in B", None, "present", only_b)):
        if irqs:
            same[(label, x, y)] = [f"{i} {(na if x else nb)[i]}" for i in sorted(irqs, key=int)]
    for ia_n, ib_n in sorted(pairs, key=lambda p: int(p[0])):
        ia, ib = a.irqs.info.get(ia_n), b.irqs.info.get(ib_n)
        label = f"{ia_n} {na[ia_n]}" if ia_n == ib_n else f"{ia_n} (B: {ib_n}) {na[ia_n]}"
        for field_, x, y in (("requested CPUs", ia and ia.requested, ib and ib.requested),
                             ("effective CPUs", ia and ia.effective, ib and ib.effective)):
            if _text(x) != _text(y):
                same[(field_, _text(x), _text(y))].append(label)
    changes, single = [], collections.defaultdict(list)
    for (label, x, y), irqs in same.items():
        n = len(irqs)
        if label.startswith("only in"):
            changes.append(Change(f"{n} IRQ{'s' if n > 1 else ''} {label}", x, y, tuple(irqs)))
        elif n >= MERGED:
            changes.append(Change(f"{label} of {n} IRQs", x, y, tuple(irqs)))
        else:
            single[label].extend(f"{i}: {x} -> {y}" for i in irqs)
    # The largest changes first: eighty IRQs moved is the news; the IRQs each with a change of its own
    # come last, one Change per field, each IRQ an item.
    changes.sort(key=lambda c: (-len(c.items), c.what))
    for label, items in single.items():
        changes.append(Change(f"{label} of {len(items)} IRQ{'s' if len(items) > 1 else ''}, each its own",
                              None, None, tuple(sorted(items, key=_num))))
    return Group("IRQs", tuple(changes))


def _values(name: str, a: dict[str, str | None], b: dict[str, str | None]) -> Group:
    return Group(name, _pairs((k, a.get(k), b.get(k)) for k in dict.fromkeys([*a, *b])))


def _thread_facts(side: Side) -> dict[str, collections.Counter]:
    """(process name / thread name) -> how many of its threads have each (allowed CPUs, policy,
    priority). Threads are matched by name, not by id: two machines' ids say nothing about each other."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    s = side.threads
    for t in s.tasks.values():
        proc = s.processes.get(t.pid)
        name = _KWORKER_NOW.sub(r"\1", side.names.name(t.pid, t.tid, t.comm))
        pcomm = _KWORKER_NOW.sub(r"\1", proc.comm) if proc is not None else "?"
        key = name if pcomm == name else f"{pcomm} / {name}"
        out[key][(_text(t.allowed) or "?", t.sched_label)] += 1
    return out


def _facts_text(c: collections.Counter | None) -> str | None:
    if not c:
        return None
    return "; ".join((f"{n} x " if n > 1 else "") + f"CPUs {cpus}, {sched}" for (cpus, sched), n in sorted(c.items()))


def _threads(a: Side, b: Side) -> Group:
    missing = [s.name for s in (a, b) if s.threads is None]
    if missing:
        return Group("Threads", (), note=f"not compared: {' and '.join(missing)} hold{'s' if len(missing) == 1 else ''} "
                                         "no threads (a capture taken before coremap kept them)")
    fa, fb = _thread_facts(a), _thread_facts(b)
    changes = tuple(Change(k, _facts_text(fa.get(k)), _facts_text(fb.get(k)))
                    for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k))
    return Group("Threads", changes)


def _marked_cpus(a: Side, b: Side) -> dict[int, str]:
    """CPU -> why the grid marks it: the IRQs placed on it, or its share of the IRQ load, differ."""
    out: dict[int, list[str]] = collections.defaultdict(list)
    ca, cb = set(a.topology.online), set(b.topology.online)
    for cpu in ca ^ cb:
        out[cpu].append(f"online in {'A' if cpu in ca else 'B'} only")
    pa, pb = _placed(a), _placed(b)
    for cpu in ca & cb:
        gained, lost = pb.get(cpu, set()) - pa.get(cpu, set()), pa.get(cpu, set()) - pb.get(cpu, set())
        if gained or lost:
            out[cpu].append("IRQ placement differs: " + ", ".join(
                part for part in (f"{len(lost)} only in A" if lost else "", f"{len(gained)} only in B" if gained else "")
                if part) + f" ({', '.join(sorted(lost | gained, key=_num)[:4])}{', ...' if len(lost | gained) > 4 else ''})")
        la, lb = a.irq_load.get(cpu, 0.0), b.irq_load.get(cpu, 0.0)
        hi = max(la, lb)
        if hi >= LOAD_SHARE and min(la, lb) < hi / 2:
            out[cpu].append(f"IRQ load differs: {la:.1%} of device interrupts in A, {lb:.1%} in B")
    return {cpu: "; ".join(why) for cpu, why in sorted(out.items())}


def _num(label: str) -> int:
    head = label.split(" ", 1)[0]
    return int(head) if head.isdigit() else 1 << 30


def _placed(side: Side) -> dict[int, set[str]]:
    """CPU -> the IRQs ("33 i40e-eno1-TxRx-0") whose effective CPUs (else requested) include it."""
    out: dict[int, set[str]] = collections.defaultdict(set)
    if side.irqs is None:
        return out
    names = _irq_key(side.irqs)
    for irq, info in side.irqs.info.items():
        cpus = info.effective or info.requested or ()
        for cpu in cpus:
            out[cpu].add(f"{irq} {names.get(irq, '?')}")
    return out


# -- for people ------------------------------------------------------------------------------------------
def change_line(c: Change, *, items: int = 6) -> str:
    """One change as a line: "requested CPUs of 80 IRQs: 0-79 -> 0-63 (8 rtc0, 9 acpi, ... 78 more)"."""
    if c.a is None and c.b is None:
        head = c.what
    elif c.a is not None and c.b is not None:
        head = f"{c.what}: {c.a} -> {c.b}"
    else:
        head = f"{c.what}: {c.a if c.a is not None else 'absent'} -> {c.b if c.b is not None else 'absent'}"
    if not c.items or (len(c.items) == 1 and c.what.startswith(f"{c.items[0].split(' ', 1)[0]} ")):
        return head
    shown = ", ".join(c.items[:items])
    more = f", ... {len(c.items) - items} more" if len(c.items) > items else ""
    return f"{head} ({shown}{more})"


def diff_lines(d: MachineDiff, *, per_group: int = 40) -> list[str]:
    """The diff as `coremap diff` prints it and the window's Compare dock shows it: the sides, then each
    group with its changes (at most `per_group`; --json has them all), then the CPUs marked."""
    lines = [f"A: {d.a}", f"B: {d.b}"]
    if d.same:
        lines.append("no differences in what coremap compares")
    for g in d.groups:
        if not g.changes and not g.note:
            continue
        lines.append("")
        if not g.changes:
            lines.append(f"{g.name}: {g.note}")
            continue
        lines.append(f"{g.name}: {len(g.changes)} difference{'s' if len(g.changes) != 1 else ''}"
                     + (f"; {g.note}" if g.note else ""))
        lines.extend(f"  {change_line(c)}" for c in g.changes[:per_group])
        if len(g.changes) > per_group:
            lines.append(f"  ... {len(g.changes) - per_group} more (--json lists them all)")
    if d.cpus:
        lines.append("")
        lines.append(f"CPUs whose IRQs differ: {format_cpulist(d.cpus)}")
    return lines
