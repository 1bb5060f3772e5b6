"""The grid's geometry, without Qt: the boxes to draw (node -> package -> die / L3 -> cluster -> core
-> hardware thread) and where each goes.

`tree_from_group(layout(topology), topology)` turns app.machine.topology's Group tree into
`LayoutNode`s; `arrange(root, width, height, ...)` sizes and places them for a viewport. A core box
holds its threads side by side, cores wrap into rows, groups flow in a grid; the row width of every
level is chosen so that the whole machine fills the viewport's aspect (so a 2-socket server, a
256-CPU POWER7 and a 1152-CPU machine all fit at a glance).

Scene units: one unit is one pixel at zoom 1. Text is measured by the caller (`header_width`, a
function of a label), so this module needs no font.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from app.machine.topology import Cpu, Group, Topology

CELL_W, CELL_H = 60.0, 36.0       # one hardware thread
_CELL_GAP = 2.0                    # between threads of one core
_CORE_PAD = 3.0
KIND_STRIP = 12.0                 # left strip of a hybrid core box holding "P" / "E"
GROUP_PAD = 5.0
GROUP_GAP = 6.0                   # between children of a group
HEADER_H = 17.0                   # group label band
# The shapes (width / height) tried for every level below the top one; arrange() keeps the one that
# lets the whole machine be drawn largest.
_INNER_ASPECTS = (0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0, 5.6, 8.0, 12.0)

HeaderWidth = Callable[[str], float]     # a group label -> the width its header band needs
Size = tuple[float, float]


@dataclass
class LayoutNode:
    """A box to place: a group (children are LayoutNodes) or a core (threads are CPU ids)."""
    kind: str
    gid: object
    label: str
    cpus: tuple
    children: list = field(default_factory=list)
    threads: tuple = ()
    core_kind: str | None = None
    core_index: int = -1
    aliases: tuple = ()              # (kind, id) of levels folded into this box (Group.merged)
    # filled by the layout pass
    w: float = 0.0
    h: float = 0.0
    positions: list = field(default_factory=list)   # child offsets, same order as children


def cpu_map(topology: Topology) -> dict[int, Cpu]:
    return {c.id: c for c in topology.cpus}


def tree_from_group(group: Group, topology: Topology) -> LayoutNode:
    """Turn layout()'s Group tree into boxes to place.

    layout() already folds a level into its parent when both hold the same CPUs (Group.merged); the
    folded (kind, id) pairs stay reachable as the box's aliases. A core Group's id is its index in
    topology.cores; the boxes of offline CPUs (kind "offline") hold cores with no index.
    """
    cpus = cpu_map(topology)

    def conv(g: Group) -> LayoutNode:
        if g.kind == "core":
            threads = tuple(int(c) for c in g.children)
            kinds = {cpus[t].kind for t in threads if t in cpus} - {None}
            return LayoutNode("core", g.id, g.label, tuple(g.cpus), threads=threads,
                              core_kind=next(iter(kinds)) if len(kinds) == 1 else None,
                              core_index=g.id if g.id is not None else -1)
        n = LayoutNode(g.kind, g.id, g.label, tuple(g.cpus), [], aliases=tuple(g.merged))
        for c in g.children:
            if not isinstance(c, int) and c.kind != "core" and not c.children:
                # A level that holds every CPU of its parent but was emitted as an empty sibling
                # (layout() does so for a package equal to the whole machine): no box of its own,
                # but the parent still answers to its name.
                n.aliases += ((c.kind, c.id), *c.merged)
                continue
            n.children.append(conv(c))
        return n

    root = conv(group)
    if root.kind != "machine":
        root = LayoutNode("machine", None, "", root.cpus, [root])
    return root


def _core_size(n: LayoutNode, hybrid: bool) -> Size:
    t = max(1, len(n.threads))
    w = 2 * _CORE_PAD + t * CELL_W + (t - 1) * _CELL_GAP + (KIND_STRIP if hybrid else 0)
    return w, 2 * _CORE_PAD + CELL_H


def cell_offset(i: int, hybrid: bool) -> tuple[float, float]:
    """Where a core's i-th hardware thread sits inside the core box."""
    return _CORE_PAD + (KIND_STRIP if hybrid else 0) + i * (CELL_W + _CELL_GAP), _CORE_PAD


def flow(sizes: list[Size], width: float) -> tuple[list[tuple[float, float]], float, float]:
    """Place boxes left to right, wrapping at `width`; rows top-aligned. -> offsets, w, h."""
    pos, x, y, row_h, w_max = [], 0.0, 0.0, 0.0, 0.0
    for w, h in sizes:
        if x > 0 and x + w > width + 1e-6:
            y += row_h + GROUP_GAP
            x, row_h = 0.0, 0.0
        pos.append((x, y))
        x += w + GROUP_GAP
        row_h = max(row_h, h)
        w_max = max(w_max, x - GROUP_GAP)
    return pos, w_max, y + row_h


def best_flow(sizes: list[Size], aspect: float) -> tuple[list[tuple[float, float]], float, float]:
    """The wrap width (a whole number of boxes in the first row) whose result is closest to `aspect`."""
    n = len(sizes)
    # Candidate widths: the first k boxes on one row. The result's aspect rises with k, so a binary
    # search finds the crossing; compare the two neighbours.
    widths = []
    x = 0.0
    for w, _ in sizes:
        x = w if x == 0 else x + GROUP_GAP + w
        widths.append(x)
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        _, w, h = flow(sizes, widths[mid])
        if w / max(h, 1e-6) < aspect:
            lo = mid + 1
        else:
            hi = mid
    best = None
    for k in {max(0, lo - 1), lo}:
        pos, w, h = flow(sizes, widths[k])
        score = abs(math.log((w / max(h, 1e-6)) / aspect))
        if best is None or score < best[0]:
            best = (score, pos, w, h)
    return best[1], best[2], best[3]


def place(n: LayoutNode, aspect: float, hybrid: bool, header_width: HeaderWidth,
          sizes_of: dict | None = None, seen: dict | None = None) -> None:
    """Size `n` and its subtree so that each box's shape is near `aspect` (width / height).

    `seen` collects the largest size of each (kind, CPU count) box; given back as `sizes_of` in a
    second pass, every such box takes that size, so that like groups (the 32 clusters of a Kunpeng,
    whose labels "cluster 3" and "cluster 13" differ in width) wrap into the same grid.
    """
    if n.kind == "core":
        n.w, n.h = _core_size(n, hybrid)
        return
    for c in n.children:
        place(c, aspect, hybrid, header_width, sizes_of, seen)
    sizes = [(c.w, c.h) for c in n.children]
    if not sizes:
        n.w, n.h, n.positions = CELL_W, CELL_H, []
        return
    pos, w, h = best_flow(sizes, aspect)
    header = HEADER_H if n.kind != "machine" else 0.0
    pad = GROUP_PAD if n.kind != "machine" else 0.0
    n.positions = [(x + pad, y + header + (pad if n.kind != "machine" else 0.0)) for x, y in pos]
    n.w = w + 2 * pad
    if n.kind != "machine":
        # Never narrower than its own label: an elided "packag..." names nothing.
        n.w = max(n.w, header_width(n.label))
    n.h = h + header + 2 * pad
    key = (n.kind, len(n.cpus))
    if sizes_of is not None and key in sizes_of:
        n.w, n.h = max(n.w, sizes_of[key][0]), max(n.h, sizes_of[key][1])
    if seen is not None:
        w0, h0 = seen.get(key, (0.0, 0.0))
        seen[key] = (max(w0, n.w), max(h0, n.h))


def _place_with_top(root: LayoutNode, inner: float, top: float, hybrid: bool, header_width: HeaderWidth) -> None:
    """Lay out every inner level at aspect `inner`, then the top level at the viewport's aspect."""
    seen: dict = {}
    for c in root.children:
        place(c, inner, hybrid, header_width, None, seen)
    for c in root.children:
        place(c, inner, hybrid, header_width, seen, None)
    if root.kind == "core":
        place(root, top, hybrid, header_width)
        return
    sizes = [(c.w, c.h) for c in root.children]
    if not sizes:
        root.w, root.h, root.positions = CELL_W, CELL_H, []
        return
    pos, w, h = best_flow(sizes, top)
    root.positions = list(pos)
    root.w, root.h = w, h


def arrange(root: LayoutNode, width: float, height: float, hybrid: bool, header_width: HeaderWidth) -> None:
    """Size and place every box under `root` for a viewport of `width` x `height`: the top level at
    the viewport's aspect, the levels below at the one of _INNER_ASPECTS that draws the machine
    largest (a later candidate must beat the best so far by 2%: a near-tie keeps the earlier one)."""
    aspect = width / height
    best = None
    for inner in _INNER_ASPECTS:
        _place_with_top(root, inner, aspect, hybrid, header_width)
        fit = min(width / root.w, height / root.h)
        if best is None or fit > best[0] * 1.02:
            best = (fit, inner)
    _place_with_top(root, best[1], aspect, hybrid, header_width)
