"""The grid's geometry (widgets/topology/layout.py) without Qt: boxes wrap, like groups take one size,
every CPU gets one cell, nothing overlaps, and the machine fills the viewport's shape.

The module lives in widgets/ (whose package imports Qt), so it is loaded here from its file alone:
that it loads at all, with Qt blocked, is the test that it needs none."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from app.machine.topology import read_topology, layout
from app.sysroot import SysRoot
from tests.machines import extract

ROOT = Path(__file__).resolve().parents[2]
LAYOUT_PY = ROOT / "widgets" / "topology" / "layout.py"
MACHINES = ["master.internal", "16em64t-4s2c2t-offlines", "256ppc-8n8s4t", "20em64t-hybrid-1p6c2t+2ca4co1t",
            "128arm-2pa2n8cluster4co", "worker1.internal", "sno"]


def _load():
    spec = importlib.util.spec_from_file_location("grid_layout", LAYOUT_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


L = _load()


def header_width(label: str) -> float:
    """A stand-in for the header font's measure: 7 units a character plus the padding."""
    return 7.0 * len(label) + 2 * L.GROUP_PAD + 4


def _tree(name):
    topo = read_topology(SysRoot(extract(name)))
    return topo, L.tree_from_group(layout(topo), topo)


def _cells(node, x=0.0, y=0.0, hybrid=False, out=None):
    """(cpu, x, y) of every cell in scene units, and a check that each child lies inside its parent."""
    out = [] if out is None else out
    if node.kind == "core":
        for i, cpu in enumerate(node.threads):
            cx, cy = L.cell_offset(i, hybrid)
            assert cx + L.CELL_W <= node.w + 1e-6 and cy + L.CELL_H <= node.h + 1e-6
            out.append((cpu, x + cx, y + cy))
        return out
    for child, (cx, cy) in zip(node.children, node.positions):
        assert cx >= 0 and cy >= 0 and cx + child.w <= node.w + 1e-6 and cy + child.h <= node.h + 1e-6, \
            (node.kind, node.label, child.kind, child.label)
        _cells(child, x + cx, y + cy, hybrid, out)
    return out


def test_the_module_imports_no_qt():
    code = f"""
import importlib.util, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph', 'widgets'):
            raise ImportError('imported ' + name)
sys.meta_path.insert(0, Block())
spec = importlib.util.spec_from_file_location('grid_layout', {str(LAYOUT_PY)!r})
m = importlib.util.module_from_spec(spec)
sys.modules['grid_layout'] = m
spec.loader.exec_module(m)
print('ok', m.flow([(10.0, 5.0)] * 3, 26.0)[1:])
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok (26.0, 16.0)"


def test_flow_wraps_at_the_width():
    # Boxes 10 wide with a gap of 6: two fit in 26, the third wraps.
    pos, w, h = L.flow([(10.0, 5.0)] * 5, 26.0)
    gap = L.GROUP_GAP
    assert pos == [(0.0, 0.0), (10 + gap, 0.0), (0.0, 5 + gap), (10 + gap, 5 + gap), (0.0, 2 * (5 + gap))]
    assert (w, h) == (26.0, 3 * 5 + 2 * gap)
    # A box wider than the width still gets a row of its own.
    assert L.flow([(40.0, 5.0), (10.0, 5.0)], 26.0)[0] == [(0.0, 0.0), (0.0, 5 + gap)]


@pytest.mark.parametrize("aspect, per_row", [(1.0, 4), (4.0, 8), (0.25, 2)])
def test_best_flow_picks_the_row_length_nearest_the_aspect(aspect, per_row):
    pos, w, h = L.best_flow([(10.0, 10.0)] * 16, aspect)
    assert len({y for _, y in pos}) == -(-16 // per_row)
    assert sum(1 for _, y in pos if y == 0.0) == per_row


@pytest.mark.parametrize("name", MACHINES)
def test_every_cpu_has_one_cell_inside_its_boxes_and_none_overlap(name):
    topo, root = _tree(name)
    L.arrange(root, 1200, 800, topo.hybrid, header_width)
    cells = _cells(root, hybrid=topo.hybrid)
    assert sorted(c for c, _, _ in cells) == sorted(c.id for c in topo.cpus)
    rects = sorted((x, y) for _, x, y in cells)
    for i, (x, y) in enumerate(rects):
        for x2, y2 in rects[i + 1:i + 40]:
            assert not (abs(x - x2) < L.CELL_W and abs(y - y2) < L.CELL_H), (x, y, x2, y2)


@pytest.mark.parametrize("name", MACHINES)
@pytest.mark.parametrize("size", [(1200, 800), (800, 1200), (1600, 500)])
def test_the_machine_fills_the_viewport_shape(name, size):
    """Drawn as large as fits, the machine covers most of a landscape, portrait or wide viewport
    (one row of cores would cover a few per cent of it)."""
    topo, root = _tree(name)
    width, height = size
    L.arrange(root, width, height, topo.hybrid, header_width)
    fit = min(width / root.w, height / root.h)
    assert root.w * fit * root.h * fit >= 0.7 * width * height


def test_like_groups_take_one_size():
    topo, root = _tree("128arm-2pa2n8cluster4co")         # 32 clusters: "cluster 3" and "cluster 13"
    L.arrange(root, 1200, 800, topo.hybrid, header_width)
    clusters = []

    def walk(n):
        if n.kind == "cluster":
            clusters.append((n.w, n.h))
        for c in n.children:
            walk(c)
    walk(root)
    assert len(clusters) == 32 and len(set(clusters)) == 1


def test_folded_levels_stay_reachable_and_cores_keep_their_kind():
    topo, root = _tree("master.internal")                  # 2 sockets: node N is package N
    packages = [n for n in root.children if n.kind == "package"]
    assert {n.gid for n in packages} == {p.id for p in topo.packages}
    assert all(("node", n.gid) in n.aliases for n in packages)
    topo, root = _tree("20em64t-hybrid-1p6c2t+2ca4co1t")

    def cores(n):
        return [n] if n.kind == "core" else [c for k in n.children for c in cores(k)]
    assert {c.core_index: c.core_kind for c in cores(root)} == {c.index: c.kind for c in topo.cores}


def test_a_groups_box_is_never_narrower_than_its_label():
    topo, root = _tree("sno")
    L.arrange(root, 300, 2000, topo.hybrid, lambda label: 5000.0)
    assert [c.kind for c in root.children] == ["package"] and root.children[0].w == 5000.0
