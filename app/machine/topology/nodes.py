"""NUMA nodes: each sys/devices/system/node/nodeK's CPUs (cpulist, cpumap on old kernels, or the
cpuN/nodeK links), its distances and its memory (Documentation/ABI/stable/sysfs-devices-node)."""
from __future__ import annotations

from app.machine.topology.files import NODE_DIR, parse_ids, read_list, read_text
from app.machine.topology.model import NumaNode
from app.parse.cpulist import format_cpulist
from app.parse.topology import parse_distances, parse_node_meminfo_total
from app.sysroot import SysRoot


def read_nodes(root: SysRoot, raw: dict, notes: list) -> tuple[tuple[NumaNode, ...], dict]:
    ids = sorted(int(m.group(1)) for m in map(NODE_DIR.match, root.listdir(root.node_dir())) if m)
    if not ids:
        if root.is_dir(root.node_dir()) or any(r.node_links for r in raw.values()):
            notes.append("no NUMA node folders: nodes unknown")
        else:
            notes.append("no sys/devices/system/node: nodes unknown")
        return (), {}
    id_set = set(ids)
    node_online = read_list(root, root.node_dir("online"))
    node_possible = read_list(root, root.node_dir("possible"))
    cpu_node: dict[int, int] = {}
    listed: dict[int, tuple[int, ...] | None] = {}
    for k in ids:
        d = root.node_dir(f"node{k}")
        cpus = None
        p = d / "cpulist"
        text = read_text(root, p)
        if text is not None:
            cpus = parse_ids(text, mask=False, path=p)
        else:
            p = d / "cpumap"
            text = read_text(root, p)
            if text is not None:
                cpus = parse_ids(text, mask=True, path=p)
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
        text = read_text(root, p)
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
        mtext = read_text(root, d / "meminfo")
        if mtext is not None:
            mem = parse_node_meminfo_total(mtext)
        cpus = listed[k] if listed[k] is not None else tuple(sorted(linked.get(k, ())))
        nodes.append(NumaNode(k, tuple(cpus), dist, mem))
    if bad_distance:
        notes.append(f"node(s) {format_cpulist(bad_distance)}: distance file does not match the node "
                     "list; distances unknown")
    return tuple(nodes), cpu_node
