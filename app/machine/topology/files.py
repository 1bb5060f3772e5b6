"""The small readers every topology step shares: one sysfs file as text, a line or an integer
(with hwloc's trailing NULs dropped), CPU lists and masks (memoised by text), raw ids, and which
CPUs exist and are online (Documentation/ABI/testing/sysfs-devices-system-cpu)."""
from __future__ import annotations

import functools
import re

from app.errors import CpuListError, SysRootReadError, excerpt
from app.parse.cpulist import parse_cpulist, parse_cpumask
from app.parse.number import is_ascii_int
from app.parse.topology import parse_topology_id
from app.sysroot import SysRoot


_CPU_DIR = re.compile(r"^cpu([0-9]{1,5})$", re.ASCII)
NODE_DIR = re.compile(r"^node([0-9]{1,5})$", re.ASCII)


# hwloc-gather-topology copies sysfs files with their trailing NUL ("0\n\0"); the kernel never
# writes one, so NULs are dropped before parsing.
def read_text(root: SysRoot, path) -> str | None:
    t = root.read_optional(path)
    return t.replace("\0", "") if t is not None and "\0" in t else t


def read_line(root: SysRoot, path) -> str | None:
    t = read_text(root, path)
    return None if t is None else t.split("\n", 1)[0].strip()


def read_int(root: SysRoot, path) -> int | None:
    """An integer file (cpu_capacity, cpuinfo_max_freq, level, id); None when absent or empty."""
    line = read_line(root, path)
    if not line:
        return None
    if not is_ascii_int(line):
        raise SysRootReadError(path, f"expected an integer, found {excerpt(line)}")
    return int(line)


# Thousands of cpuN files repeat the same few masks (every thread of a POWER7 core prints the
# same 32-word shared_cpu_map), so parsing is memoised by text. A bad text is parsed again
# uncached so the error names the file.
@functools.lru_cache(maxsize=8192)
def _cached_ids(text: str, mask: bool) -> tuple[int, ...]:
    return parse_cpumask(text) if mask else parse_cpulist(text)


def parse_ids(text: str, *, mask: bool, path) -> tuple[int, ...]:
    try:
        return _cached_ids(text, mask)
    except CpuListError:
        return parse_cpumask(text, what=str(path)) if mask else parse_cpulist(text, what=str(path))


def read_online_cpus(root: SysRoot) -> tuple[int, ...]:
    """Online CPU ids: the `online` file; where absent, each cpuN/online; else CPUs that have a
    topology/ folder (offline CPUs lose theirs)."""
    online, _ = read_online(root, cpu_dir_ids(root))
    return online


def read_cpu_ids(root: SysRoot) -> tuple[int, ...]:
    """Every CPU the machine has a cpuN/ folder for (present CPUs, online or not), with the online ones."""
    return tuple(sorted(set(cpu_dir_ids(root)) | set(read_online_cpus(root))))


def cpu_dir_ids(root: SysRoot) -> list[int]:
    out = []
    for name in root.listdir(root.cpu_dir()):
        m = _CPU_DIR.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def read_list(root: SysRoot, path) -> tuple[int, ...] | None:
    text = read_text(root, path)
    if text is None:
        return None
    return parse_ids(text, mask=False, path=path)


def read_online(root: SysRoot, dirs: list[int]) -> tuple[tuple[int, ...], str | None]:
    online = read_list(root, root.cpu_dir("online"))
    if online is not None:
        return online, None
    out = []
    used_flag = False
    for n in dirs:
        flag = read_int(root, root.cpu_dir(f"cpu{n}", "online"))
        if flag is not None:
            used_flag = True
            if flag:
                out.append(n)
        elif root.is_dir(root.cpu_dir(f"cpu{n}", "topology")):
            out.append(n)
    how = ("no online file: online taken from each cpuN/online, and for CPUs without one, "
           "from having a topology folder") if used_flag else \
        "no online file: CPUs with a topology folder taken as online"
    return tuple(out), how


# Paths below are plain strings, not pathlib: a machine with 8,192 CPUs has some 200,000 sysfs files
# to read, and building a Path per file cost more than reading it (issue 10, "Scale").

def read_ids_file(root: SysRoot, d: str, base: str):
    """The CPUs of a `<base>_list` file, or of the `<base>` mask file where only that exists."""
    p = f"{d}/{base}_list"
    text = read_text(root, p)
    if text is not None:
        return parse_ids(text, mask=False, path=p)
    p = f"{d}/{base}"
    text = read_text(root, p)
    if text is not None:
        return parse_ids(text, mask=True, path=p)
    return None


def read_id(root: SysRoot, path: str, *, cluster: bool = False) -> int | None:
    return parse_topology_id(read_text(root, path), what=path, cluster=cluster)

