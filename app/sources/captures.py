"""A metrics source's topology completed from a coremap capture of the same host (`--captures DIR`).

A source knows a host's CPUs and some of their places (node_cpu_info: package and core; hinv: NUMA
node) and nothing of its caches, L3 groups, SMT siblings where it names no core, or nohz_full. Where the
user has a capture of that host — a `coremap snapshot` tarball as it was written, or a folder holding
one extracted (`tar xf`) or any captured sys/ and proc/ tree — its topology completes what the source
gave: packages, cores, SMT siblings, caches and L3 groups, NUMA nodes, isolated and nohz_full CPUs. The
source's live per-CPU rates still colour it; the source's own facts (model, kernel, its isolated CPUs
where it exports them) win over the capture's.

Choices where the issue is silent:
- Matching: a capture belongs to the host whose name it recorded (meta.json's "host" of a snapshot,
  else proc/sys/kernel/hostname), compared without case with the source's names of the host: the node
  name it reports (node_uname_info, kernel.uname.nodename) and the host part of its instance or
  hostspec (node7 of node7:9100). A short name (node7) matches a full one (node7.example.com) only when
  one side has no domain. Of several captures of one host, the newest (meta.json's time) is used. A
  capture that records no host name is never matched: nothing is guessed from file names.
- Refusal, never a merge, when the capture is not of the machine the source sees now: its online CPUs
  are not the source's, or the source's own cores (node_cpu_info) or NUMA nodes (hinv) group the CPUs
  otherwise. The host's row then carries one line saying so, and the source's topology is drawn alone.
- A capture of another kernel release is still used (cores and caches outlive a reboot) with a note:
  its isolated and nohz_full CPUs are those of the kernel it recorded.
- Every capture is read through the confined readers: the folder's entries and each tarball through a
  ConfinedRoot of the folder (bounded at MAX_TARBALL), a tarball's members through check_tarball and
  extract_tarball (app/store/capture.py, the one way back from a tarball) into a private temporary
  folder that is gone once its topology is read, and every tree through SysRoot. The folder is indexed
  once, on first use, off the UI thread (the fleet's stream thread or the window's sampler thread);
  a topology is read once per capture and kept.
"""
from __future__ import annotations

import io
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from app.errors import CoremapError, SysRootReadError
from app.format import plural
from app.machine.topology import Topology, read_topology
from app.remote.fleet import FACTS, FleetRow
from app.sampling.machine_state import MachineState
from app.sources.rows import ABSENT
from app.store.capture import MAX_TARBALL, check_tarball, extract_tarball
from app.store.report import machine_facts
from app.sysroot import SysRoot
from app.sysroot.confined import ConfinedRoot

MAX_ENTRIES = 5000          # captures looked at in one folder; past it, a note says the rest were not
# The whole index's budget (issue 32: 12 gzip bombs, or 200 sparse 255 MiB tarballs, took 23-99 s): past
# either, the rest of the folder is not looked at, and a note says so.
INDEX_SECONDS = 10.0
INDEX_BYTES = 1024 * 1024 ** 2
TARBALL_SUFFIXES = (".tar.gz", ".tgz")
STILL_ABSENT = "absent from the source and the capture: IRQ affinity (requested and effective), NIC queues"


class CapturesError(CoremapError):
    """A --captures folder that cannot be used."""


@dataclass(frozen=True)
class Capture:
    """One capture in the folder: where it is, the host it recorded, when (meta.json's time, or "")."""
    entry: str                  # its name in the folder
    host: str
    time: str = ""
    tarball: bool = False
    inner: str = ""             # the folder under `entry` holding sys/ and proc/ ("" when it is `entry`)


def short(name: str) -> str:
    return name.split(".", 1)[0]


def names_match(a: str, b: str) -> bool:
    """node7 matches node7 and node7.example.com; node7.a.com never matches node7.b.com (module docstring)."""
    a, b = a.strip().lower().rstrip("."), b.strip().lower().rstrip(".")
    if not a or not b:
        return False
    return a == b or (("." not in a or "." not in b) and short(a) == short(b))


def host_part(name: str) -> str:
    """node7 of node7:9100, [fe80::1]:9100 or user@node7; an IPv6 address without brackets as it is."""
    name = name.rsplit("@", 1)[-1]
    if name.startswith("["):
        return name[1:].split("]", 1)[0]
    return name.rsplit(":", 1)[0] if name.count(":") == 1 else name


class CaptureShelf:
    """The captures of one folder, indexed by the host each recorded; thread-safe."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise CapturesError(f"--captures {folder}: not a folder; give the folder holding your coremap "
                                "snapshots (coremap snapshot OUT.tar.gz writes one)")
        self.root = ConfinedRoot(self.folder)
        self._lock = threading.Lock()
        self._index: list[Capture] | None = None
        self._topologies: dict[str, Topology | str] = {}      # entry -> its topology, or why it cannot be read
        self._bytes_left = INDEX_BYTES
        self.notes: list[str] = []

    # -- the index -----------------------------------------------------------------------------------------
    def captures(self) -> list[Capture]:
        with self._lock:
            if self._index is None:
                self._index = self._scan()
            return list(self._index)

    def _scan(self) -> list[Capture]:
        try:
            entries = sorted(self.root.listdir(self.folder))
        except SysRootReadError as e:
            raise CapturesError(f"--captures {self.folder}: {e}") from None
        if len(entries) > MAX_ENTRIES:
            self.notes.append(f"--captures {self.folder}: {len(entries):,} entries; only the first "
                              f"{MAX_ENTRIES:,} were looked at")
        out = []
        deadline, self._bytes_left = time.monotonic() + INDEX_SECONDS, INDEX_BYTES
        for i, name in enumerate(entries[:MAX_ENTRIES]):
            if time.monotonic() > deadline or self._bytes_left <= 0:
                spent = f"{INDEX_SECONDS:g} s" if self._bytes_left > 0 else f"{INDEX_BYTES // 1024 ** 2:,} MiB of tarballs"
                self.notes.append(f"--captures {self.folder}: indexing stopped after {spent}; "
                                  f"{plural(len(entries[:MAX_ENTRIES]) - i, 'entry', 'entries')} not looked at; keep "
                                  "only this fleet's snapshots there")
                break
            cap = self._tarball(name) if name.endswith(TARBALL_SUFFIXES) else self._tree(name)
            if cap is not None:
                out.append(cap)
        return out

    def _tarball(self, name: str) -> Capture | None:
        try:
            data = self.root.read_bytes(self.folder / name, limit=min(MAX_TARBALL, max(self._bytes_left, 1)))
            self._bytes_left -= len(data)
            meta = check_tarball(io.BytesIO(data), str(self.folder / name)).meta
        except CoremapError as e:
            self.notes.append(str(e))
            return None
        host = meta.get("host")
        if not isinstance(host, str) or not host.strip():
            return None
        return Capture(name, host.strip()[:255], str(meta.get("time", ""))[:40], tarball=True)

    def _tree(self, name: str) -> Capture | None:
        path = self.folder / name
        if not self.root.is_dir(path):
            return None
        inner = ""
        if not _holds_machine(self.root, path):
            # An extracted snapshot: NAME/<host-time>/{sys,proc}; one folder deeper, never more.
            subs = [d for d in self.root.listdir(path)[:64] if _holds_machine(self.root, path / d)]
            if len(subs) != 1:
                return None
            inner = subs[0]
        try:
            root = SysRoot(path / inner)
            meta = root.snapshot_meta() or {}
            host = meta.get("host") if isinstance(meta.get("host"), str) else None
            if not host:
                host = (root.read_optional(root.proc("sys", "kernel", "hostname"), limit=4096) or "").strip()
        except CoremapError as e:
            self.notes.append(str(e))
            return None
        if not host:
            return None
        return Capture(name, host[:255], str(meta.get("time", ""))[:40], inner=inner)

    def find(self, *names: str) -> Capture | None:
        """The newest capture whose host matches one of `names` (the source's names of the host)."""
        names = tuple(n for n in (host_part(x) for x in names if x) if n)
        hits = [c for c in self.captures() if any(names_match(c.host, n) for n in names)]
        return max(hits, key=lambda c: (c.time, c.entry)) if hits else None

    # -- topologies --------------------------------------------------------------------------------------
    def topology(self, cap: Capture) -> Topology:
        """The capture's topology, read once (CapturesError when it cannot be read)."""
        with self._lock:
            got = self._topologies.get(cap.entry)
        if got is None:
            try:
                got = self._read(cap)
            except CoremapError as e:
                got = f"capture {cap.entry}: {e}"
            with self._lock:
                self._topologies[cap.entry] = got
        if isinstance(got, str):
            raise CapturesError(got)
        return got

    def _read(self, cap: Capture) -> Topology:
        if not cap.tarball:
            return read_topology(SysRoot(self.folder / cap.entry / cap.inner))
        data = self.root.read_bytes(self.folder / cap.entry, limit=MAX_TARBALL)
        with tempfile.TemporaryDirectory(prefix="coremap-capture-") as tmp:
            top = extract_tarball(io.BytesIO(data), Path(tmp), str(self.folder / cap.entry))
            return read_topology(SysRoot(top))


def _holds_machine(root: ConfinedRoot, path: Path) -> bool:
    return root.is_dir(path / "sys" / "devices" / "system" / "cpu") or root.exists(path / "proc" / "cpuinfo")


# -- completing -------------------------------------------------------------------------------------------
def _groups(pairs) -> set[frozenset[int]]:
    out: dict = {}
    for key, cpu in pairs:
        out.setdefault(key, set()).add(cpu)
    return {frozenset(v) for v in out.values()}


def refusal(source: Topology, captured: Topology, label: str) -> str:
    """Why `captured` is not of the machine the source sees ("" when it is): module docstring."""
    src, cap = set(source.online), set(captured.online)
    if src != cap:
        if len(src) != len(cap):
            why = f"it has {plural(len(cap), 'CPU')} online, the source {len(src)}"
        else:
            why = f"its online CPUs are not the source's ({len(src ^ cap)} differ)"
        return f"capture {label} refused: {why}; not merged"
    by = {c.id: c for c in source.cpus if c.id in src}
    if all(by[c].core_id is not None and by[c].package_id is not None for c in src):
        theirs = _groups(((by[c].package_id, by[c].core_id), c) for c in src)
        ours = _groups((k.index, c) for k in captured.cores for c in k.cpus if c in src)
        if theirs != ours:
            return f"capture {label} refused: its cores group the CPUs otherwise than the source's; not merged"
    if all(by[c].node is not None for c in src):
        theirs = _groups((by[c].node, c) for c in src)
        ours = _groups((n.id, c) for n in captured.nodes for c in n.cpus if c in src)
        if ours and theirs != ours:
            return f"capture {label} refused: its NUMA nodes group the CPUs otherwise than the source's; not merged"
    return ""


def merge(source: Topology, captured: Topology, label: str, *, isolated_known: bool) -> Topology:
    """The capture's shape with the source's own facts over it (module docstring); `isolated_known`: the
    source exports which CPUs are isolated (node_cpu_isolated), so its answer wins."""
    notes = [n for n in captured.notes]
    notes.append(f"packages, cores, caches and NUMA nodes from capture {label}; rates from the source")
    kernel = source.kernel_release or captured.kernel_release
    if source.kernel_release and captured.kernel_release and source.kernel_release != captured.kernel_release:
        notes.append(f"capture {label} was of kernel {captured.kernel_release}, the host runs "
                     f"{source.kernel_release} now: its isolated and nohz_full CPUs are that kernel's")
    notes.append(STILL_ABSENT)
    # A source that exports isolated CPUs knows them now; one that does not (PCP, an exporter without
    # node_cpu_isolated) leaves the capture's.
    isolated = source.isolated if isolated_known or source.isolated else captured.isolated
    cpus = tuple(replace(c, isolated=c.id in isolated) for c in captured.cpus)
    return replace(captured, cpus=cpus, isolated=tuple(isolated), model_name=source.model_name or captured.model_name,
                   kernel_release=kernel, hostname=source.hostname or captured.hostname,
                   arch=source.arch or captured.arch, notes=tuple(notes))


@dataclass(frozen=True)
class Completion:
    """What `complete` made of a host: its topology (the source's, or completed), and the one line for
    its row ("" when no capture of it is in the folder)."""
    topology: Topology
    note: str = ""
    completed: bool = False


def complete(shelf: CaptureShelf, topology: Topology, *names: str, isolated_known: bool = False) -> Completion:
    """`topology` (the source's) completed from the newest capture of the host `names` name, or as it was
    with why not; a capture that cannot be read is a note, like a refused one."""
    cap = shelf.find(*names)
    if cap is None:
        return Completion(topology)
    label = cap.entry + (f" ({cap.time})" if cap.time else "")
    try:
        captured = shelf.topology(cap)
    except CapturesError as e:
        return Completion(topology, str(e))
    why = refusal(topology, captured, cap.entry)
    if why:
        return Completion(replace(topology, notes=(*topology.notes, why)), why)
    return Completion(merge(topology, captured, label, isolated_known=isolated_known),
                      f"topology completed from capture {label}", True)


def complete_state(shelf: CaptureShelf, state: MachineState, *names: str, isolated_known: bool = False) -> MachineState:
    """`state` with its topology completed (or the refusal among its notes): the one-host window's tick."""
    done = complete(shelf, state.topology, state.host, state.topology.hostname or "", *names,
                    isolated_known=isolated_known)
    notes = state.notes + ((done.note,) if done.note and not done.completed else ())
    return replace(state, topology=done.topology, notes=notes)


def complete_row(shelf: CaptureShelf, row: FleetRow) -> FleetRow:
    """A fleet row with its topology and the facts that come of it (shape, NUMA nodes, isolcpus,
    nohz_full) completed from its host's capture, or its one line saying why not."""
    if row.state is None:
        return row
    iso_known = row.fact("isolcpus") not in ("", ABSENT)
    done = complete(shelf, row.state.topology, row.host, row.name, isolated_known=iso_known)
    if not done.note:
        return row
    state = replace(row.state, topology=done.topology)
    if not done.completed:
        return replace(row, state=state, note=done.note)
    got = dict(machine_facts(done.topology, None, irqbalance=row.fact("irqbalance") or ABSENT))
    facts = tuple((label, got[label]) for label in FACTS if label in got)
    return replace(row, state=state, facts=facts, note=done.note)


def completing(shelf: CaptureShelf, rounds):
    """A fleet's rounds (app/sources/stream.py) whose rows are completed from `shelf` as they come."""
    def completed():
        for batch in rounds():
            yield [complete_row(shelf, r) for r in batch]
    return completed
