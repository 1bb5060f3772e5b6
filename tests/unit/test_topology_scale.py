"""A machine with 8,192 CPUs (issue 10, "Scale"): 256 copies of a real 2-socket Xeon Silver 4108
capture (tests/widen.py) parse into the right counts, and every CPU keeps the place it had on its
board. Not timed here: tests/benchmarks/bench_topology.py measures it against lscpu and hwloc.
"""
from __future__ import annotations

import pytest

from app.machine.topology import Group, layout, read_topology
from app.sysroot import SysRoot
from tests.machines import extract, widened

SOURCE = "32intel64-2p8co2t+8ve"   # 2 packages x 8 cores x 2 threads, 2 NUMA nodes, 32 CPUs
N_CPUS = 8192
COPIES = N_CPUS // 32


@pytest.fixture(scope="module")
def wide():
    # Built once per fixture cache and content (tests/machines.py widened): 450,000 small files took
    # 12 s to write and 3 s to remove in every run.
    return read_topology(SysRoot(extract(SOURCE))), read_topology(SysRoot(widened(SOURCE, N_CPUS)))


def test_8192_cpus_parse_with_the_right_counts(wide):
    small, big = wide
    assert big.online == tuple(range(N_CPUS))
    assert big.offline == ()
    assert len(big.packages) == COPIES * len(small.packages) == 512
    assert sorted(p.id for p in big.packages) == list(range(512))
    assert len(big.nodes) == COPIES * len(small.nodes) == 512
    assert len(big.cores) == COPIES * len(small.cores) == 4096
    assert big.threads_per_core == (2,)
    assert len(big.l3_groups) == COPIES * len(small.l3_groups)
    assert len(big.caches) == COPIES * len(small.caches)
    assert big.smt_active is True
    assert {len(p.cores) for p in big.packages} == {8}
    # Copy i holds CPUs 32i..32i+31, packages 2i, 2i+1 and nodes 2i, 2i+1: each CPU keeps its place.
    for c in big.cpus:
        i, s = divmod(c.id, 32)
        mine = small.cpu(s)
        assert c.package_id == mine.package_id + 2 * i
        assert c.node == mine.node + 2 * i
        assert c.siblings == tuple(x + 32 * i for x in mine.siblings)
        assert c.core_id == mine.core_id
    # A node is 10 from itself, as on the board to its board neighbour, and farther off the board.
    far = big.nodes[5].distances
    assert far[5] == 10 and far[4] == small.nodes[1].distances[0] and far[0] > far[4]


def test_8192_cpus_nest_like_the_board_they_copy(wide):
    small, big = wide
    tree = layout(big)
    leaves = [x for g in tree.walk() if g.kind == "core" for x in g.children]
    assert sorted(leaves) == list(range(N_CPUS))

    def shape(g: Group):
        return (g.kind, len(g.cpus), tuple(shape(k) for k in g.children if isinstance(k, Group)))

    board = shape(layout(small))
    assert shape(tree)[:2] == ("machine", N_CPUS)
    # The machine holds 256 copies of what the 32-CPU machine holds.
    assert shape(tree)[2] == board[2] * COPIES
