"""layout(Topology) -> Group: the Qt-free tree of boxes the window draws (packages, nodes, dies,
L3 groups, clusters and cores nested by CPU-set containment, equal levels folded into one box,
offline CPUs in a box of their own)."""
from __future__ import annotations

from dataclasses import dataclass

from app.format import format_size
from app.machine.topology.model import Topology
from app.parse.cpulist import format_cpulist


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
