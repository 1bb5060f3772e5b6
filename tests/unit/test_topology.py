"""The topology model on every real machine in tests/fixtures, the machines with a known quirk, the
layout tree, and the pure parsers (examples + hypothesis)."""
from __future__ import annotations

import collections
import functools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import CoremapError
from app.format import format_size
from app.machine.topology import Group, layout, read_online_cpus, read_topology
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.parse.topology import (
    arm_part_name,
    parse_cache_size,
    parse_cmdline_isolation,
    parse_cpuinfo,
    parse_distances,
    parse_node_meminfo_total,
    parse_topology_id,
)
from app.sysroot import SysRoot
from tests.machines import MACHINES_DIR, all_machines, copy_machine, extract, machine

MACHINES = all_machines()
NAMES = [m.name for m in MACHINES]


@functools.lru_cache(maxsize=None)
def topo(name: str):
    return read_topology(SysRoot(extract(name)))


# -- every machine ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_every_machine_parses_and_holds_together(name):
    t = topo(name)
    online = set(t.online)
    assert online, "a machine with no online CPU"
    assert online.isdisjoint(t.offline)
    assert online | set(t.offline) == {c.id for c in t.cpus}
    assert [c.id for c in t.cpus] == sorted(c.id for c in t.cpus)
    assert {c.id for c in t.cpus if c.online} == online
    assert read_online_cpus(SysRoot(extract(name))) == t.online

    # Each online CPU in exactly one core; a core's CPUs are each member's sibling list.
    seen = [c for core in t.cores for c in core.cpus]
    assert sorted(seen) == sorted(online)
    for i, core in enumerate(t.cores):
        assert core.index == i
        for c in core.cpus:
            assert t.cpu(c).siblings == core.cpus, (name, c)
            assert t.core_of(c) is core
    assert [k.cpus[0] for k in t.cores] == sorted(k.cpus[0] for k in t.cores), "cores in CPU order"

    # Packages partition the online CPUs; their cores are theirs.
    assert sorted(c for p in t.packages for c in p.cpus) == sorted(online)
    for p in t.packages:
        assert {c for i in p.cores for c in t.cores[i].cpus} == set(p.cpus)

    # Node and L3 indexes agree with the lists they point into.
    for c in t.cpus:
        if c.node is not None:
            assert c.node in {n.id for n in t.nodes}
        if c.l3 is not None:
            assert c.id in t.l3_groups[c.l3]
    for c in t.isolated:
        assert t.cpu(c).isolated

    # The layout holds every online CPU exactly once in a core leaf, and offline ones apart.
    tree = layout(t)
    leaves = [x for g in tree.walk() if g.kind == "core" and not g.offline for x in g.children]
    assert sorted(leaves) == sorted(online)
    off = [x for g in tree.walk() if g.kind == "core" and g.offline for x in g.children]
    assert set(off) <= set(t.offline)
    for g in tree.walk():
        kids = [k for k in g.children if isinstance(k, Group)]
        for k in kids:
            assert set(k.cpus) <= set(g.cpus) or g.kind == "machine"
        for k in kids:
            assert k.cpus, f"{k.label}: an empty box"
            if k.kind != "core":
                assert k.children, f"{k.label}: a box with nothing inside"
                assert k.cpus != g.cpus or g.kind == "machine", f"{k.label} adds nothing to {g.label}"
        for kind, i in g.merged:
            assert i is None or isinstance(i, int), (g.label, kind, i)
        starts = [k.cpus[0] for k in kids if k.cpus and not k.offline]
        assert starts == sorted(starts), f"{g.label}: children out of CPU order"


# -- /proc/cpuinfo agrees with sysfs where it carries the same ids (x86) --------------------------

@pytest.mark.parametrize("name", [m.name for m in MACHINES if m.source == "ghw" and m.arch == "x86_64"])
def test_ghw_cpuinfo_ids_agree_with_sysfs(name):
    root = extract(name)
    info = parse_cpuinfo((root / "proc" / "cpuinfo").read_text())
    t = topo(name)
    assert len(info.processors) == len(t.online)
    checked = 0
    for p in info.processors:
        cpu = t.cpu(p.id)
        assert p.physical_id == cpu.package_id, (name, p.id)
        assert p.core_id == cpu.core_id, (name, p.id)
        checked += 1
    assert checked == len(t.online)


# -- machines with a known shape ----------------------------------------------------------------

def _core_threads(t, kind):
    return sorted(len(k.cpus) for k in t.cores if k.kind == kind)


def test_raptor_lake_has_six_smt_p_cores_and_eight_e_cores():
    t = topo("20em64t-hybrid-1p6c2t+2ca4co1t")
    assert t.hybrid
    assert _core_threads(t, "P") == [2] * 6
    assert _core_threads(t, "E") == [1] * 8
    assert format_cpulist(t.cpus_of("kind", "P")) == "0-11"
    assert t.threads_per_core == (1, 2)


def test_i7_1270p_has_four_p_cores_and_eight_e_cores():
    t = topo("linux-amd64-intel-i7-1270P")
    assert t.hybrid
    assert _core_threads(t, "P") == [2] * 4
    assert _core_threads(t, "E") == [1] * 8
    assert any("L1d" in n for n in t.notes), "an inferred kind must say where it came from"


def test_gb10_kinds_from_cpu_capacity_match_cpu_parts():
    # hwloc's XML groups the GB10 by CPU part: 0xd87 (A725) = 0-4,10-14; 0xd85 (X925) = the rest.
    root = extract("nvidia-dgx-gb10")
    t = topo("nvidia-dgx-gb10")
    assert t.kind_source == "cpu_capacity"
    info = parse_cpuinfo((root / "proc" / "cpuinfo").read_text())
    for p in info.processors:
        assert t.cpu(p.id).kind == {0xD85: "P", 0xD87: "E"}[p.part]
    assert format_cpulist(t.cpus_of("kind", "E")) == "0-4,10-14"
    assert t.nohz_full == ()          # the file holds " (null)"
    assert t.packages[0].id == 36


def test_pixel6_kinds_from_cpu_capacity():
    t = topo("arm64_pixel6_tensor")
    assert t.kind_source == "cpu_capacity"
    assert [t.cpu(c).capacity for c in range(8)] == [1024, 1024, 820, 820, 280, 280, 280, 280]
    assert t.cpus_of("kind", "P") == (0, 1)
    assert t.cpus_of("kind", "E") == (2, 3, 4, 5, 6, 7)
    assert t.nodes == () and all(c.node is None for c in t.cpus)


def test_non_hybrid_machines_have_no_kinds():
    for name in ("master.internal", "128arm-2pa2n8cluster4co", "x86_64_ryzen9_7950x"):
        t = topo(name)
        assert not t.hybrid and all(c.kind is None for c in t.cpus), name


def test_ryzen_7950x_two_l3_groups_and_no_cluster():
    t = topo("x86_64_ryzen9_7950x")
    assert [format_cpulist(g) for g in t.l3_groups] == ["0-7,16-23", "8-15,24-31"]
    assert all(c.cluster_id is None for c in t.cpus)       # sysfs says 65535
    assert t.core_of(3).cpus == (3, 19)
    assert len(t.cores) == 16
    tree = layout(t)
    assert [g.kind for g in tree.walk()].count("l3") == 2


def test_kunpeng_package_ids_and_clusters():
    t = topo("128arm-2pa2n8cluster4co")
    assert [p.id for p in t.packages] == [36, 8442]
    assert [len(p.cores) for p in t.packages] == [64, 64]
    assert all(c.die_id is None for c in t.cpus)           # die_id -1
    assert len(t.clusters) == 32 and all(len(g) == 4 for g in t.clusters)
    assert t.model_name == "Kunpeng-920"
    assert t.arch == "aarch64"


def test_worker1_isolation_from_the_kernel_command_line():
    # isolcpus=managed_irq,0-4,11-79 without domain: the scheduler still balances onto them (issue 30).
    t = topo("worker1.internal")
    assert t.isolated == () and format_cpulist(t.isolcpus) == "0-4,11-79"
    assert format_cpulist(t.nohz_full) == "0-4,11-79"
    assert t.isolcpus_flags == ("managed_irq",)
    assert not t.cpu(5).isolated and not t.cpu(11).isolated
    assert t.isolation_of(11) == ("managed_irq", "nohz_full") and t.isolation_of(5) == ()
    assert any("isolcpus=managed_irq,0-4,11-79" in n and "the scheduler still balances onto them" in n
               for n in t.notes)


def test_bitmask_only_machine_with_offline_cpus():
    root = extract("16em64t-4s2c2t-offlines")
    assert not list(root.glob("sys/devices/system/cpu/cpu*/topology/*_list")), "fixture changed"
    assert not (root / "sys/devices/system/cpu/online").exists()
    t = topo("16em64t-4s2c2t-offlines")
    assert format_cpulist(t.online) == "0-1,3-4,6-12,15"
    assert format_cpulist(t.offline) == "2,5,13-14"
    assert [k.cpus for k in t.cores] == [(0, 8), (1, 9), (3, 11), (4, 12), (6,), (7, 15), (10,)]
    assert sorted(p.id for p in t.packages) == [0, 1, 2, 3]
    tree = layout(t)
    off = [g for g in tree.children if g.kind == "offline"]
    assert len(off) == 1 and off[0].cpus == (2, 5, 13, 14) and off[0].offline


def test_power7_smt4_gives_64_cores_and_unknown_package():
    t = topo("256ppc-8n8s4t")
    assert len(t.online) == 256 and len(t.cores) == 64
    assert all(len(k.cpus) == 4 for k in t.cores)
    assert len(t.packages) == 1 and t.packages[0].id is None
    assert [n.id for n in t.nodes] == [0, 1, 4, 5, 8, 9, 12, 13]
    assert t.nodes[1].distances[0] > t.nodes[1].distances[1]


def test_sparse_node_ids_and_asymmetric_distances():
    t = topo("48amd64-4pa2n6c-sparse")
    ids = [n.id for n in t.nodes]
    assert ids == [0, 1, 2, 33, 34, 45, 72, 73]
    n33 = t.nodes[ids.index(33)]
    assert set(n33.distances) == set(ids) and n33.distances[33] == 10
    assert format_cpulist(n33.cpus) == "18-23"


def test_gpu_memory_nodes_without_cpus():
    t = topo("nvidiagpunumanodes")
    gpu = [n for n in t.nodes if n.id >= 250]
    assert len(gpu) == 6 and all(n.cpus == () for n in gpu)
    assert gpu[0].memory_kb == 15728640
    assert [p.id for p in t.packages] == [0, 8]
    assert len(t.possible) == 176 and len(t.online) == 32


def test_offline_cpu0_and_removed_node0():
    t = topo("offline-cpu0-node0")
    assert not t.cpu(0).online
    assert [n.id for n in t.nodes] == [1]
    assert t.cpu(4).node is None and t.cpu(5).node == 1
    assert t.nodes[0].distances == {0: 21, 1: 10}     # node/possible order: the file has 2 values
    with pytest.raises(CoremapError, match="offline"):
        t.core_of(0)
    with pytest.raises(CoremapError, match="not on this machine"):
        t.cpu(5000)


def test_s390_without_node_folder():
    t = topo("20s390-2g6s4c")
    assert t.nodes == () and t.arch == "s390x"
    assert t.model_name.startswith("IBM/S390")
    assert len(t.cores) == 20


# -- layout ------------------------------------------------------------------------------------------

def _kinds_path(tree, cpu):
    """Kinds of the boxes from the machine down to the core holding cpu."""
    out = []
    g = tree
    while True:
        out.append(g.kind)
        if g.kind == "core":
            return out
        g = next(k for k in g.children if isinstance(k, Group) and cpu in k.cpus)


def test_layout_two_socket_server_folds_node_into_package():
    tree = layout(topo("master.internal"))
    pk = [g for g in tree.children if g.kind == "package"]
    assert len(pk) == 2 and ("node", 0) in pk[0].merged and "node 0" in pk[0].label
    assert _kinds_path(tree, 1) == ["machine", "package", "core"]   # L3 == package: skipped


def test_layout_snc_nodes_inside_package():
    t = topo("memorysidecaches")
    tree = layout(t)
    assert _kinds_path(tree, 0) == ["machine", "package", "node", "core"]
    assert sum(1 for g in tree.walk() if g.kind == "node") == 4


def test_layout_x3950_packages_inside_nodes():
    tree = layout(topo("96em64t-4no4pa3ca2co"))
    assert [g.kind for g in tree.children] == ["node"] * 4
    assert all(sum(1 for k in n.children if k.kind == "package") == 4 for n in tree.children)


def test_layout_package_equal_to_machine_is_one_box_with_the_rest_folded_in():
    tree = layout(topo("linux-amd64-intel-i7-1270P"))
    assert [g.kind for g in tree.children] == ["package"]
    pkg = tree.children[0]
    assert pkg.label == "package 0 · node 0" and ("l3", 0) in pkg.merged and ("die", 0) in pkg.merged
    kids = [(g.kind, g.cpus) for g in pkg.children]
    assert kids[:4] == [("core", (0, 1)), ("core", (2, 3)), ("core", (4, 5)), ("core", (6, 7))]
    assert kids[4:] == [("cluster", (8, 9, 10, 11)), ("cluster", (12, 13, 14, 15))]
    power7 = layout(topo("256ppc-8n8s4t"))
    assert ("package", None) in power7.merged and [g.kind for g in power7.children] == ["node"] * 8


def test_layout_opteron_nodes_inside_packages():
    tree = layout(topo("64amd64-4s2n4ca2co"))
    pk = [g for g in tree.children if g.kind == "package"]
    assert len(pk) == 4
    assert all([k.kind for k in p.children] == ["node", "node"] for p in pk)


# -- caches against hwloc ---------------------------------------------------------------------------

def _hwloc_cache_counts(m) -> collections.Counter | None:
    """{"L2": 32, ...}: the caches lstopo printed for the machine (its .console, or the .xml where that
    is what upstream kept), or None when it kept neither."""
    base = MACHINES_DIR / "hwloc" / m.name
    console, xml = base.with_suffix(base.suffix + ".console"), base.with_suffix(base.suffix + ".xml")
    if console.exists():
        return collections.Counter(x.group(1) for x in re.finditer(r"^\s*(L\d[di]?)Cache L#\d+",
                                                                       console.read_text(), re.M))
    if xml.exists():
        # hwloc 2 XML: L1Cache with cache_type 1 is L1d, L1iCache is the instruction cache.
        kinds = re.findall(r'type="(L\d)(i?)Cache"[^>]*cache_type="(\d)"', xml.read_text())
        return collections.Counter(f"{lvl}{'i' if i else 'd' if t == '1' else ''}" for lvl, i, t in kinds)
    return None


@pytest.mark.parametrize("name", [m.name for m in MACHINES if m.source == "hwloc"])
def test_cache_counts_match_hwloc(name):
    want = _hwloc_cache_counts(machine(name))
    if want is None:
        pytest.fail(f"{name}: hwloc left neither a .console nor an .xml to compare with")
    assert collections.Counter(k.name for k in topo(name).caches) == want


def test_opteron_caches_follow_the_map_where_the_list_disagrees(capsys):
    # shared_cpu_list says 0, shared_cpu_map says 0-1 for the L1i and L2 of each two-core compute unit.
    t = topo("64amd64-4s2n4ca2co")
    l2 = [k for k in t.caches if k.name == "L2"]
    assert len(l2) == 32 and l2[0].cpus == (0, 1)
    assert any("shared_cpu_list and shared_cpu_map disagree" in n and "cpu0/cache/index1: list 0, map 0-1" in n
               for n in t.notes)
    from app.cli.main import main
    assert main(["topology", "--root", str(extract("64amd64-4s2n4ca2co"))]) == 0
    out = capsys.readouterr().out
    assert "L2 cache:            64 MiB (32 instances of 2 MiB)" in out
    assert "Note: cache shared_cpu_list and shared_cpu_map disagree" in out
    assert not any("shared_cpu" in n for n in topo("worker1.internal").notes), "no note where they agree"


def test_a_cache_map_that_is_no_mask_is_named(tmp_path):
    # The map is compared with the list by one int(); text int() cannot read is parsed in full, which
    # names the file.
    root = tmp_path / "m"
    copy_machine("linux-amd64-offlineCPUs", root)
    bad = root / "sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_map"
    bad.write_text("0000000x\n")
    with pytest.raises(CoremapError, match="index2/shared_cpu_map"):
        read_topology(SysRoot(root))


# -- parsers -----------------------------------------------------------------------------------------

def test_parse_cache_size():
    assert parse_cache_size("32K") == 32768
    assert parse_cache_size("24576K\n") == 24576 * 1024
    assert parse_cache_size("2M") == 2 << 20
    assert parse_cache_size("") is None
    with pytest.raises(CoremapError, match="32Q"):
        parse_cache_size("32Q")
    assert format_size(27.5 * 1024 * 1024) == "27.5 MiB"
    assert format_size(48 * 1024) == "48 KiB"


def test_parse_topology_id_sentinels():
    assert parse_topology_id("-1\n") is None
    assert parse_topology_id("65535", cluster=True) is None
    assert parse_topology_id("65535") == 65535
    assert parse_topology_id("8442") == 8442
    with pytest.raises(CoremapError, match="core_id"):
        parse_topology_id("x", what="core_id")


def test_parse_cmdline_isolation():
    c = parse_cmdline_isolation("ro isolcpus=managed_irq,domain,2-3,8 nohz_full=2-3 rcu_nocbs=2-3")
    assert c.isolcpus == (2, 3, 8) and c.isolcpus_flags == ("managed_irq", "domain")
    assert c.nohz_full == (2, 3) and c.rcu_nocbs == (2, 3)
    assert parse_cmdline_isolation("quiet").isolcpus is None
    assert parse_cmdline_isolation("isolcpus=1-2").isolcpus_flags == ()
    with pytest.raises(CoremapError, match="isolcpus"):
        parse_cmdline_isolation("isolcpus=1-x")


def test_parse_distances_and_meminfo():
    assert parse_distances("10 21 31\n") == (10, 21, 31)
    with pytest.raises(CoremapError):
        parse_distances("10 x")
    assert parse_node_meminfo_total("Node 250 MemTotal:       15728640 kB\n") == 15728640


def test_arm_part_names():
    assert arm_part_name(0x41, 0xD0B) == "Cortex-A76"
    assert arm_part_name(0x41, 0xFFF) == "ARM 0xfff"


@pytest.mark.parametrize("name", [m.name for m in MACHINES if (extract(m) / "proc" / "cpuinfo").exists()])
def test_cpuinfo_shape_gives_the_architecture(name):
    m = next(x for x in MACHINES if x.name == name)
    info = parse_cpuinfo((extract(m) / "proc" / "cpuinfo").read_text(errors="replace"))
    want = {"x86_64": "x86_64", "aarch64": "aarch64", "ppc64": "ppc64", "ppc64le": "ppc64", "s390x": "s390x"}
    assert info.arch == want[m.arch]
    assert info.model_name


# -- hypothesis: the parsers fail only with a CoremapError --------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
_cpuinfo_like = st.lists(st.sampled_from([
    "processor\t: 0", "processor\t: x", "model name\t: Foo", "physical id\t: 1", "core id\t: -3",
    "CPU implementer\t: 0x41", "CPU part\t: 0xzz", "cpu\t\t: POWER9", "vendor_id : IBM/S390",
    "processor 3: machine = 3931", "cpu MHz\t\t: abc", "flags\t\t: fpu lm", "", ":", "cpu number : 2",
]), max_size=40).map("\n".join)


def _only_clear_errors(fn, text):
    try:
        fn(text)
    except CoremapError as e:
        assert str(e)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_text, _cpuinfo_like))
def test_cpuinfo_parser_never_crashes(text):
    info = parse_cpuinfo(text)
    assert all(p.id >= 0 for p in info.processors)


@settings(max_examples=300, deadline=None)
@given(_text)
def test_small_parsers_raise_only_coremap_errors(text):
    for fn in (parse_cache_size, parse_distances, parse_cmdline_isolation, parse_topology_id,
               parse_node_meminfo_total):
        _only_clear_errors(fn, text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["isolcpus=", "nohz_full=", "managed_irq,", "domain,", "1-3", "x",
                                 ",", " ", "5", "-", "rcu_nocbs="]), max_size=12).map("".join))
def test_cmdline_parser_raises_only_coremap_errors(text):
    _only_clear_errors(parse_cmdline_isolation, text)
    try:
        c = parse_cmdline_isolation(text)
    except CoremapError:
        return
    if c.isolcpus is not None:
        assert list(c.isolcpus) == sorted(set(c.isolcpus))
        assert c.isolcpus == parse_cpulist(format_cpulist(c.isolcpus))
