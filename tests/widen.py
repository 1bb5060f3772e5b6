"""A big machine made from a real one: `widen(source, n_cpus, dest)` copies a real capture's CPU and
NUMA sysfs tree (and /proc/cpuinfo) as many times as it takes to reach n_cpus, the way a glued
many-socket machine (an SGI UV, an HPE Superdome Flex) is many boards of one design.

Copy i of a source with m CPUs, p packages and k nodes holds CPUs i*m .. i*m+m-1, packages i*p ..,
nodes i*k .. (past 1,024 nodes, a few copies share theirs; see _node_files); every CPU list and
mask is shifted the same way, and ids that name a package-wide thing (physical_package_id,
cluster_id, cache ids) are shifted past the source's largest. CPUs at or past n_cpus are left out
of every list, so n_cpus need not be a multiple of m (65,535 is not).
Masks are printed nr_cpu_ids bits wide, as the kernel prints them (lib/bitmap.c, `%*pb`), which is
what makes a big machine's sysfs big. Used by tests/unit/test_topology_scale.py and
tests/benchmarks/bench_topology.py. The CPU list spelling here is written out on purpose instead of
using app.parse.cpulist: the capture is the input the app's own parser is tested against.
"""
from __future__ import annotations

import errno
import itertools
import os
import re
from pathlib import Path

from app.parse.cpulist import format_cpulist

_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")
# Files that hold a CPU mask (Documentation/ABI/stable/sysfs-devices-system-cpu,
# Documentation/ABI/testing/sysfs-devices-system-cpu); every `*_list` file holds a CPU list.
_MASKS = {"thread_siblings", "core_cpus", "core_siblings", "die_cpus", "package_cpus", "cluster_cpus",
          "book_siblings", "drawer_siblings", "shared_cpu_map", "cpumap"}
# Ids that name something wider than a core, shifted per copy so copies do not share them.
_SHIFTED_IDS = {"physical_package_id", "cluster_id", "id", "book_id", "drawer_id"}
# MAX_NUMNODES with NODES_SHIFT 10, the most nodes any distribution's kernel numbers.
MAX_NODES = 1024
# Per-CPU files the kernel never prints the same on two CPUs and no reader of topology needs.
_SKIPPED = {"uevent", "ppin"}


def _cpus_of_list(text: str) -> list[int]:
    out: list[int] = []
    for piece in text.strip().split(","):
        if not piece:
            continue
        lo, _, hi = piece.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _cpus_of_mask(text: str) -> list[int]:
    value = int(text.strip().replace(",", "") or "0", 16)
    return [b for b in range(value.bit_length()) if value >> b & 1]




def _mask_text(cpus, width: int) -> str:
    value = 0
    for c in cpus:
        value |= 1 << c
    digits = f"{value:0{(width + 3) // 4}x}"
    head = len(digits) % 8
    words = ([digits[:head]] if head else []) + [digits[i:i + 8] for i in range(head, len(digits), 8)]
    return ",".join(words)


class _Widener:
    """One widening: the source's files read once, then written for each copy."""

    def __init__(self, source: Path, n_cpus: int):
        self.source = source
        self.n = n_cpus
        cpu_root = source / "sys/devices/system/cpu"
        self.cpu_ids = sorted(int(m.group(1)) for m in map(_CPU_DIR.match, os.listdir(cpu_root)) if m)
        self.m = max(self.cpu_ids) + 1
        node_root = source / "sys/devices/system/node"
        self.node_ids = sorted(int(m.group(1)) for m in map(_NODE_DIR.match, _listdir(node_root)) if m)
        self.k = max(self.node_ids) + 1 if self.node_ids else 0
        # Per source CPU: (relative path, text) of its topology and cache files.
        self.cpu_files = {c: _files(cpu_root / f"cpu{c}") for c in self.cpu_ids}
        # The span of each shifted id, per file name and cache index, so copies never collide.
        self.spans: dict[str, int] = {}
        for files in self.cpu_files.values():
            for rel, text in files:
                if Path(rel).name in _SHIFTED_IDS and text.strip().lstrip("-").isdigit():
                    key = _span_key(rel)
                    self.spans[key] = max(self.spans.get(key, 1), int(text) + 1)
        self.copies = -(-n_cpus // self.m)
        self._cache: dict[tuple, str] = {}

    def shift(self, cpus, i: int) -> list[int]:
        o = i * self.m
        return [c + o for c in cpus if c + o < self.n]

    def cpu_text(self, rel: str, text: str, i: int) -> str:
        name = Path(rel).name
        key = (_span_key(rel) if name in _SHIFTED_IDS else name, text, i)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if name.endswith("_list"):
            out = format_cpulist(self.shift(_cpus_of_list(text), i)) + "\n"
        elif name in _MASKS:
            out = _mask_text(self.shift(_cpus_of_mask(text), i), self.n) + "\n"
        elif name in _SHIFTED_IDS and text.strip().isdigit():
            out = f"{int(text) + i * self.spans[_span_key(rel)]}\n"
        else:
            out = text
        self._cache[key] = out
        return out

    def files(self) -> dict[str, str]:
        """Every file of the wide capture: path relative to its root -> text."""
        out: dict[str, str] = {}
        cpu_root = "sys/devices/system/cpu"
        for i in range(self.copies):
            for c in self.cpu_ids:
                new = i * self.m + c
                if new >= self.n:
                    continue
                for rel, text in self.cpu_files[c]:
                    out[f"{cpu_root}/cpu{new}/{rel}"] = self.cpu_text(rel, text, i)
        every = f"0-{self.n - 1}\n"
        for name in ("online", "possible", "present"):
            out[f"{cpu_root}/{name}"] = every
        # NR_CPUS - 1; lscpu sizes its CPU sets by it (8191 is Debian's x86 kernel's).
        out[f"{cpu_root}/kernel_max"] = f"{max(8191, self.n - 1)}\n"
        out[f"{cpu_root}/offline"] = "\n"
        smt = self.source / cpu_root / "smt/active"
        if smt.is_file():
            out[f"{cpu_root}/smt/active"] = smt.read_text()
        self._node_files(out, "sys/devices/system/node")
        self._proc_files(out)
        return out

    def _node_files(self, out: dict[str, str], node_root: str) -> None:
        if not self.node_ids:
            return
        src = self.source / "sys/devices/system/node"
        distance = {k: (src / f"node{k}/distance").read_text().split() for k in self.node_ids}
        # A node one board away is as far as the farthest node on the board plus one hop (10).
        far = str(max(int(v) for row in distance.values() for v in row) + 10)
        source_cpus = {k: _cpus_of_list((src / f"node{k}/cpulist").read_text()) for k in self.node_ids}
        # Linux numbers at most MAX_NUMNODES = 1024 nodes (NODES_SHIFT 10, the most any distribution
        # builds): past that, `per` consecutive boards share their nodes, as the IBM x3950's glued
        # chassis do (fixture 96em64t-4no4pa3ca2co), so a node holds several packages.
        per = 1
        while -(-self.copies // per) * len(self.node_ids) > MAX_NODES:
            per += 1
        groups = [range(g, min(g + per, self.copies)) for g in range(0, self.copies, per)]
        cpus_of = [{k: [c for i in grp for c in self.shift(source_cpus[k], i)] for k in self.node_ids}
                   for grp in groups]
        kept = [[k for k in self.node_ids if cpus_of[g][k]] for g in range(len(groups))]
        nodes = [g * self.k + k for g in range(len(groups)) for k in kept[g]]
        far_runs = {len(ks): " ".join([far] * len(ks)) for ks in kept if ks}
        for g in range(len(groups)):
            for k in kept[g]:
                new = g * self.k + k
                d = f"{node_root}/node{new}"
                out[f"{d}/cpulist"] = format_cpulist(cpus_of[g][k]) + "\n"
                out[f"{d}/cpumap"] = _mask_text(cpus_of[g][k], self.n) + "\n"
                # drivers/base/node.c prints one distance per online node, in node id order.
                local = " ".join(distance[k][self.node_ids.index(k2)] for k2 in kept[g])
                row = (local if h == g else far_runs[len(ks)] for h, ks in enumerate(kept) if ks)
                out[f"{d}/distance"] = " ".join(row) + "\n"
                meminfo = src / f"node{k}/meminfo"
                if meminfo.is_file():
                    out[f"{d}/meminfo"] = re.sub(r"^Node \d+", f"Node {new}", meminfo.read_text(), flags=re.M)
        for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
            out[f"{node_root}/{name}"] = format_cpulist(nodes) + "\n"

    def _proc_files(self, out: dict[str, str]) -> None:
        for name in ("cmdline", "meminfo"):
            f = self.source / "proc" / name
            if f.is_file():
                out[f"proc/{name}"] = f.read_text()
        info = self.source / "proc/cpuinfo"
        if not info.is_file():
            return
        blocks = [b for b in info.read_text().split("\n\n") if b.strip()]
        pkg_span = self.spans.get("physical_package_id", 1)
        text = []
        for i in range(self.copies):
            for b in blocks:
                n = int(re.search(r"^processor\s*:\s*(\d+)", b, re.M).group(1)) + i * self.m
                if n >= self.n:
                    continue
                b = re.sub(r"^(processor\s*:\s*)\d+", rf"\g<1>{n}", b, flags=re.M)
                b = re.sub(r"^(physical id\s*:\s*)(\d+)",
                           lambda mo: f"{mo.group(1)}{int(mo.group(2)) + i * pkg_span}", b, flags=re.M)
                text.append(b + "\n\n")
        out["proc/cpuinfo"] = "".join(text)


def _span_key(rel: str) -> str:
    """cache/index3/id and cache/index0/id are different ids; topology/* names are unique."""
    return rel if rel.startswith("cache/") else Path(rel).name


def _listdir(d: Path) -> list[str]:
    return os.listdir(d) if d.is_dir() else []


def _files(cpu_dir: Path) -> list[tuple[str, str]]:
    out = []
    for top in ("topology", "cache", "cpufreq", "online", "cpu_capacity"):
        p = cpu_dir / top
        if p.is_file():
            out.append((top, p.read_text()))
            continue
        if not p.is_dir():
            continue
        for dirpath, _dirs, names in os.walk(p):
            for name in names:
                f = Path(dirpath) / name
                if name in _SKIPPED or not f.is_file():
                    continue
                out.append((str(f.relative_to(cpu_dir)), f.read_text()))
    return out


def _materialize(dest: Path, files: dict[str, str]) -> None:
    """Write `files` under dest. Most of a wide capture repeats a few texts ("1", "Data", one L3
    mask per package), so each distinct text is written once and hard-linked: on ext4 that is 14 µs
    a file instead of 50-300 µs, and the 8,192-CPU capture takes a few hundred MB, not 2 GB."""
    pool = dest / ".widen-pool"
    pool.mkdir(parents=True)
    made: dict[str, str] = {}
    pooled: list[str] = []           # pool files already full of links
    dirs: set[str] = set()
    for rel, text in files.items():
        parent = os.path.dirname(rel)
        if parent not in dirs:
            os.makedirs(dest / parent, exist_ok=True)
            dirs.add(parent)
        src = made.get(text)
        if src is None:
            src = made[text] = _pool_file(pool, text)
        try:
            os.link(src, dest / rel)
        except OSError as e:
            if e.errno != errno.EMLINK:
                raise
            # ext4 allows 65,000 links to one inode: a 65,535-CPU capture has more copies of "0\n".
            pooled.append(src)
            src = made[text] = _pool_file(pool, text)
            os.link(src, dest / rel)
    for src in [*made.values(), *pooled]:
        os.unlink(src)
    pool.rmdir()


_pool_names = itertools.count()


def _pool_file(pool: Path, text: str) -> str:
    path = str(pool / str(next(_pool_names)))
    with open(path, "x") as f:
        f.write(text)
    return path


def widen(source: Path, n_cpus: int, dest: Path) -> Path:
    """Write a capture of `n_cpus` CPUs made of copies of `source` (a folder holding sys/ and proc/)
    into `dest`, and return `dest`."""
    _materialize(Path(dest), _Widener(Path(source), n_cpus).files())
    return Path(dest)
