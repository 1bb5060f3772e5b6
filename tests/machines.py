"""The real machines in tests/fixtures (copied from ../shared/fixtures with their SOURCE and licence
files), extracted on demand into a cache folder, and the trees made from them (`widened`: 8,192 CPUs
made of a 32-CPU board, 290 MB of hard links, built once). Used by unit tests, GUI tests and benchmarks.

The cache is shared by every test run of this user on the machine (two clones' `make test` at once, a
benchmark beside the suite), so a folder in it is never changed or deleted once it is there (issue 19,
item 6): each archive is extracted into a folder named for its content (the machine's name and the
SHA-256 of the archive), first into a temporary folder beside it, then renamed into place under an
flock on the cache's lock file. A run that finds the folder uses it as it is; a changed archive gets a
new folder, and the old one stays for whichever run still reads it (the cache lives in the temporary
folder, which the system empties). Before, every run that found the archive newer than its stamp
deleted the folder while the other run was reading it (FileNotFoundError at collection).
"""
from __future__ import annotations

import csv
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MACHINES_DIR = FIXTURES / "machines"
INTERRUPTS_DIR = FIXTURES / "interrupts"


@dataclass(frozen=True)
class Machine:
    name: str          # e.g. "128arm-2pa2n8cluster4co", "worker1.internal"
    source: str        # hwloc, ghw, openshift-nto, iree
    archive: Path
    arch: str
    model: str
    row: dict

    @property
    def oracle(self) -> Path | None:
        p = MACHINES_DIR / self.source / "oracle" / f"{self.name}.csv"
        return p if p.exists() else None

    def oracle_rows(self) -> list[dict]:
        """Oracle rows; cadvisor files start with a '#' comment line."""
        p = self.oracle
        if p is None:
            return []
        lines = [ln for ln in p.read_text().splitlines() if ln and not ln.startswith("#")]
        return list(csv.DictReader(lines))


def _name_of(archive: Path) -> str:
    n = archive.name
    for suffix in (".sysinfo.tgz", ".tar.bz2", ".tar.gz", ".tgz"):
        if n.endswith(suffix):
            return n[: -len(suffix)]
    return n


def all_machines() -> list[Machine]:
    """Every machine in index.tsv (the prometheus-procfs composite tree is not a machine)."""
    out = []
    with open(FIXTURES / "index.tsv") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            archive = FIXTURES / row["file"]
            out.append(Machine(_name_of(archive), row["source"], archive, row["arch"], row["model"], row))
    return out


def machine(name: str) -> Machine:
    for m in all_machines():
        if m.name == name:
            return m
    raise KeyError(name)


def _cache_dir() -> Path:
    base = Path(os.environ.get("COREMAP_FIXTURE_CACHE", Path(tempfile.gettempdir()) / f"coremap-fixtures-{os.getuid()}"))
    base.mkdir(parents=True, exist_ok=True)
    return base


_digests: dict[tuple, str] = {}


def _digest(archive: Path) -> str:
    """The first 16 hex digits of the archive's SHA-256, computed once per process and file version."""
    st = archive.stat()
    key = (str(archive), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _digests:
        h = hashlib.sha256()
        with open(archive, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _digests[key] = h.hexdigest()[:16]
    return _digests[key]


def extract(m: Machine | str) -> Path:
    """The folder that holds the machine's sys/ (and proc/), extracted once per cache and archive
    content. Safe with other runs extracting and reading the same cache at the same time (module
    docstring): the folder appears whole, by one rename, and is never removed."""
    if isinstance(m, str):
        m = machine(m)

    def unpack(tmp: Path) -> None:
        with tarfile.open(m.archive) as tf:
            tf.extractall(tmp, filter="tar") if hasattr(tarfile, "data_filter") else tf.extractall(tmp)
    return find_root(cached(f"{m.name}-{_digest(m.archive)}", unpack))


def cached(name: str, build) -> Path:
    """The cache's folder `name` (named for its content by the caller), made by build(a temporary
    folder beside it) and renamed into place the first time, under the cache's lock; as it is after."""
    cache = _cache_dir()
    dest = cache / name
    if not dest.is_dir():
        with open(cache / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)      # one run builds; the others wait, then find it there
            if not dest.is_dir():
                tmp = Path(tempfile.mkdtemp(dir=cache, prefix=f".{name}-"))
                try:
                    build(tmp)
                    tmp.rename(dest)
                finally:
                    if tmp.exists():              # the build failed: nobody has seen this folder
                        shutil.rmtree(tmp)
    return dest


# What a copy leaves out unless asked for: the memory blocks (513 of sno's 1,686 files) and each node's links
# to them (257 of its 317 links), which nothing in app/ reads (`grep -rn "system/memory" app` is empty;
# nodes.py and capture.py read only named files of node*/, never list one).
UNREAD = ("sys/devices/system/memory", "sys/devices/system/node/node*/memory[0-9]*")
# The CPUs' cache folders (588 of sno's 819 entries under cpu/), which the copies made to pin IRQs leave out.
CPU_CACHES = "sys/devices/system/cpu/cpu*/cache"

# A packed tree: (path relative to the machine's folder, kind "d" | "f" | "l", permission bits, the file's
# bytes or the link's target), parents before their contents; keyed by (folder, the sub-path packed, the
# globs left out).
_Entry = tuple[str, str, int, "bytes | str | None"]
_packed: dict[tuple[str, str, tuple[str, ...]], tuple[_Entry, ...]] = {}


def copy_machine(source: Machine | str | Path, dest: Path, *, only: Iterable[str] | None = None,
                 leave_out: Iterable[str] = UNREAD) -> Path:
    """Write a copy of a machine's tree (a Machine, its name, or a folder such as extract()'s) into `dest`
    (made if missing), for a test to spoil; returns `dest`. `only`: the sub-folders and files to copy
    ("proc/irq", "sys/devices/system/cpu", "proc/interrupts"; the folders above them are made as
    os.makedirs makes them); `leave_out`: what not to copy, as globs of names (CPU_CACHES); UNREAD unless
    given (pass () for the whole tree).

    As copytree(symlinks=True) without copystat: links are copied as links, never followed; file and folder
    modes and bytes are kept; times are not (no test or reader compares a copy's mtimes with the fixture's).
    It writes from the tree read into memory once per process (a folder of the cache never changes, module
    docstring), with one open/write/close per file: copytree took 170-550 ms a copy of sno (issue 31)."""
    folder = Path(extract(source) if isinstance(source, (Machine, str)) else source)
    # Every part is read (and a missing one refused, as copytree refuses it) before anything is written.
    parts = [_packed_tree(folder, top, tuple(leave_out)) for top in _tops(only)]
    umask = _umask()
    os.makedirs(dest, exist_ok=True)
    base = os.fspath(dest) + "/"
    lock_late = []                       # folders whose mode forbids filling them, or the umask took bits
    for entries in parts:
        if entries and "/" in entries[0][0]:
            os.makedirs(base + entries[0][0].rsplit("/", 1)[0], exist_ok=True)
        for rel, kind, mode, data in entries:
            path = base + rel
            if kind == "d":
                os.mkdir(path, mode | 0o700)
                if (mode | 0o700) & ~umask != mode:
                    lock_late.append((path, mode))
            elif kind == "l":
                os.symlink(data, path)
            else:
                _write_file(path, data, mode, umask)
    for path, mode in reversed(lock_late):
        os.chmod(path, mode)
    return Path(dest)


def _tops(only: Iterable[str] | None) -> list[str]:
    """The sub-paths to pack: "" (all) without `only`; else its paths, less those inside another."""
    if only is None:
        return [""]
    wanted = sorted({p.strip("/") for p in only})
    return [w for w in wanted if not any(w.startswith(o + "/") for o in wanted)]


def _pattern(glob: str) -> str:
    """A leave_out glob as a regular expression: `*` and `?` stay within one name, `[0-9]` is a class."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        end = glob.find("]", i + 1)
        if c == "[" and end > i:
            out.append(glob[i:end + 1])
            i = end + 1
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return "".join(out)


def _write_file(path: str, data: bytes, mode: int, umask: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if mode & umask:                 # os.open's mode lost the bits the umask drops
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _umask() -> int:
    """This process's umask, read without setting it (os.umask sets it: a race with another thread's
    file); /proc/self/status has it since Linux 4.7."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    raise RuntimeError("/proc/self/status has no Umask line (Linux before 4.7); copy_machine needs it")


def _packed_tree(folder: Path, top: str, leave_out: tuple[str, ...] = ()) -> tuple[_Entry, ...]:
    """The entries of `folder`/`top` ("" for all of it) but those `leave_out` names, read into memory: once
    per process for a folder of the cache (named for its content and never changed), each time for any
    other folder (a test's own tree may change)."""
    real = folder.resolve()
    if not real.is_relative_to(_cache_dir().resolve()):
        return _pack(real, top, leave_out)
    key = (os.fspath(real), top, leave_out)
    if key not in _packed:
        _packed[key] = _pack(real, top, leave_out)
    return _packed[key]


def _pack(folder: Path, top: str, leave_out: tuple[str, ...]) -> tuple[_Entry, ...]:
    out: list[_Entry] = []
    pats = [_pattern(p.strip("/")) for p in leave_out]
    skipped = re.compile(f"(?:{'|'.join(pats)})(?:/|$)") if pats else None    # one match per entry

    def add(path: str, rel: str) -> None:
        if skipped is not None and skipped.match(rel):
            return                      # nor what is under it
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            out.append((rel, "l", 0, os.readlink(path)))
        elif stat.S_ISDIR(st.st_mode):
            if rel:
                out.append((rel, "d", stat.S_IMODE(st.st_mode), None))
            with os.scandir(path) as it:
                names = sorted(e.name for e in it)
            for name in names:
                add(f"{path}/{name}", f"{rel}/{name}" if rel else name)
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                out.append((rel, "f", stat.S_IMODE(st.st_mode), f.read()))
        else:
            raise ValueError(f"{path}: not a file, folder or link; copy_machine copies fixture trees")
    if top and not os.path.lexists(folder / top):
        raise FileNotFoundError(f"copy_machine: {top} is not in {folder}; name paths relative to the "
                                "machine's folder")
    add(os.fspath(folder / top) if top else os.fspath(folder), top)
    return tuple(out)


def widened(name: str, n_cpus: int) -> Path:
    """Machine `name` widened to `n_cpus` CPUs (tests/widen.py), built once per cache for the archive's
    content, widen.py's own text and n_cpus (issue 31: the 8,192-CPU tree took 12 s to build and 3 s to
    remove in every run; its 450,000 files are hard links to a few thousand texts)."""
    from tests.widen import widen
    m = machine(name)
    code = hashlib.sha256(Path(__file__).with_name("widen.py").read_bytes()).hexdigest()[:16]
    key = hashlib.sha256(f"{_digest(m.archive)} {code} {n_cpus}".encode()).hexdigest()[:16]
    return cached(f"{m.name}-x{n_cpus}-{key}", lambda tmp: widen(extract(m), n_cpus, tmp / "root")) / "root"


def find_root(folder: Path) -> Path:
    """The shallowest folder under `folder` that holds sys/ or proc/."""
    for depth in range(3):
        for cand in ([folder] if depth == 0 else sorted(folder.glob("/".join(["*"] * depth)))):
            if cand.is_dir() and ((cand / "sys").is_dir() or (cand / "proc").is_dir()):
                return cand
    raise FileNotFoundError(f"no sys/ or proc/ under {folder}")


def writable_test_tree(path: Path) -> Path:
    """Mark `path`, a copy a test made of a fixture, as a tree coremap may write IRQ masks into
    (app/sysroot.py: COREMAP_WRITABLE_TEST_ROOTS). A capture a user hands coremap is never writable;
    the tests that pin on a copy say so here, on purpose. Returns `path`."""
    from app.sysroot import WRITABLE_TEST_ROOTS_ENV
    roots = [p for p in os.environ.get(WRITABLE_TEST_ROOTS_ENV, "").split(os.pathsep) if p]
    os.environ[WRITABLE_TEST_ROOTS_ENV] = os.pathsep.join([*roots, str(Path(path).resolve())])
    return path


def procfs_composite() -> Path:
    """prometheus/procfs's composite fixture tree (not one machine): has proc/PID/task/TID/stat."""
    archive = MACHINES_DIR / "prometheus-procfs" / "fixtures.tar.gz"
    m = Machine("prometheus-procfs", "prometheus-procfs", archive, "", "", {})
    return extract(m)
