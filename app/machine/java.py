"""Java threads by their full names.

The kernel keeps only 15 bytes of a thread's name (comm, TASK_COMM_LEN 16 with the NUL,
include/linux/sched.h), so "market-data-feed-handler" shows as "market-data-fee". The JVM's own
thread dump has the full name and the native thread id: `nid=0x30f7` is the Linux tid in hex (JDK
17's `jcmd PID Thread.print` / `jstack PID`; later JDKs may print it in decimal, both are read).
No agent is loaded into the JVM: jcmd and jstack use the JVM's attach listener, which every HotSpot
JVM has unless started with -XX:+DisableAttachMechanism.
"""
from __future__ import annotations

import difflib
import re
import shutil
import subprocess

from app.errors import CoremapError, SysRootReadError
from app.format import printable
from app.sysroot import SysRoot

# "name" #12 [daemon] prio=5 os_prio=0 cpu=1.21ms elapsed=1.79s tid=0x... nid=0x30f7 waiting ...
# The name may itself hold quotes, so take everything up to the last quote before the attributes.
_HEADER = re.compile(r'^"(?P<name>.*)"\s.*?\bnid=(?P<nid>0x[0-9a-fA-F]+|\d+)\b')
COMM_LEN = 15
DUMP_TIMEOUT = 20.0


class JavaThreadError(CoremapError):
    """A Java thread that cannot be found, or a JVM that cannot be asked."""


def parse_thread_dump(text: str) -> dict[str, int]:
    """{full thread name: tid} from a HotSpot thread dump. A name that occurs twice (Java allows it)
    keeps its first thread; find_java_thread reports the ambiguity."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _HEADER.match(line)
        if not m:
            continue
        nid = m.group("nid")
        tid = int(nid, 16) if nid.startswith("0x") else int(nid)
        out.setdefault(m.group("name"), tid)
    return out


def _dump_names(text: str) -> list[tuple[str, int]]:
    out = []
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            nid = m.group("nid")
            out.append((m.group("name"), int(nid, 16) if nid.startswith("0x") else int(nid)))
    return out


def _tool() -> list[str] | None:
    for name, args in (("jcmd", ["Thread.print"]), ("jstack", [])):
        path = shutil.which(name)
        if path:
            return [path, *args]
    return None


def is_hotspot_jvm(pid: int, root: SysRoot) -> bool:
    """Whether process `pid` is a HotSpot JVM: its memory map names libjvm, or it has a perf-data file
    (/tmp/hsperfdata_USER/PID). Checked before attaching, because the attach mechanism starts by
    sending SIGQUIT — which kills any process that is not a JVM (a Python process, say)."""
    try:
        maps = root.read_optional(root.task_dir(pid, None, "maps"))
    except SysRootReadError:
        maps = None         # another user's process: its map is closed to us; try hsperfdata
    if maps is not None and "/libjvm.so" in maps:
        return True
    tmp = root.path("tmp")
    return any(d.startswith("hsperfdata_") and root.exists(tmp / d / str(pid)) for d in root.listdir(tmp))


def thread_dump(pid: int, root: SysRoot | None = None) -> str | None:
    """The JVM's thread dump text, or None when neither jcmd nor jstack is installed. Raises
    JavaThreadError for a process that is not a HotSpot JVM, before anything is sent to it."""
    root = root or SysRoot("/")
    tool = _tool()
    if tool is None:
        return None
    if not is_hotspot_jvm(pid, root):
        comm = root.read_first_line(root.task_dir(pid, None, "comm")) or "?"
        raise JavaThreadError(f"process {pid} ({printable(comm)}) is not a Java VM (no libjvm in its memory "
                              "map); give the pid of a JVM (see `jcmd -l`)")
    cmd = [tool[0], str(int(pid)), *tool[1:]]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=DUMP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise JavaThreadError(f"{' '.join(cmd)} did not answer in {DUMP_TIMEOUT:.0f} s; is process "
                              f"{pid} a responsive JVM? pass --tid instead") from None
    if r.returncode != 0 or '"' not in r.stdout:
        msg = [l.strip() for l in (r.stderr.strip() or r.stdout.strip()).splitlines() if l.strip()]
        # The tools end a failure with a Java exception line and its stack frames ("at sun.tools...");
        # the line that says what went wrong is the last one that is not a frame.
        said = next((l for l in reversed(msg) if not l.startswith("at ")), "no output")
        raise JavaThreadError(
            f"{' '.join(cmd)} failed: {printable(said[:200])}; run coremap as the JVM's user "
            "(the attach listener admits only its owner) or pass --tid")
    return r.stdout


def _comm_threads(root: SysRoot, pid: int) -> list[tuple[str, int]]:
    out = []
    for name in root.listdir(root.task_dir(pid, None, "task")):
        if name.isdigit():
            # read_first_line: None when the thread exited between listing and reading.
            comm = root.read_first_line(root.task_dir(pid, int(name), "comm"))
            if comm is not None:
                out.append((comm, int(name)))
    return out


def java_threads(pid: int, root: SysRoot | None = None) -> dict[str, int]:
    """{name: tid} of process `pid`: comm names, overlaid by full names from the thread dump where a
    JDK tool is installed. Raises JavaThreadError when the process does not exist."""
    root = root or SysRoot("/")
    comms = _comm_threads(root, pid)
    if not comms:
        raise JavaThreadError(f"process {pid} does not exist; find the JVM with `jcmd -l` or `coremap threads`")
    out = {}
    for comm, tid in comms:
        out.setdefault(comm, tid)
    dump = thread_dump(pid, root) if root.is_live and is_hotspot_jvm(pid, root) else None
    if dump is not None:
        alive = {tid for _, tid in comms}
        for name, tid in _dump_names(dump):
            if tid in alive:
                out[name] = tid
    return out


def comm_of(name: str) -> str:
    """The kernel's name (comm) of a thread called `name`: its first 15 bytes, cut on a character
    boundary as the kernel's copy is shown (__set_task_comm copies TASK_COMM_LEN - 1 bytes)."""
    return name.encode("utf-8")[:COMM_LEN].decode("utf-8", "ignore")


def java_thread_ids(pid: int, name: str, root: SysRoot) -> frozenset[int] | None:
    """Every live thread of JVM `pid` called `name` by the JVM's thread dump; None when no JDK tool
    is installed. Raises JavaThreadError for a process that is not a HotSpot JVM (checked before
    anything is sent to it: app/machine/java.py is_hotspot_jvm) or a dump that fails."""
    dump = thread_dump(pid, root)
    if dump is None:
        return None
    return frozenset(tid for n, tid in _dump_names(dump) if n == name)


def find_java_thread(pid: int, name: str, root: SysRoot | None = None) -> int:
    """The tid of the Java thread called `name` in JVM `pid`.

    Without jcmd/jstack, only names of up to 15 characters can be found (by comm)."""
    root = root or SysRoot("/")
    comms = _comm_threads(root, pid)
    if not comms:
        raise JavaThreadError(f"process {pid} does not exist; find the JVM with `jcmd -l` or `coremap threads`")
    dump = thread_dump(pid, root) if root.is_live else None
    if dump is None:
        matches = [tid for comm, tid in comms if comm == name]
        if len(name) > COMM_LEN or not matches:
            prefix = [c for c, _ in comms if name.startswith(c) and len(c) == COMM_LEN]
            hint = f" (its kernel name would be {prefix[0]!r})" if prefix else ""
            raise JavaThreadError(
                f"Java thread {name!r} in process {pid} cannot be found by its kernel name{hint}: "
                "install a JDK's jcmd or jstack, or pass --tid")
        if len(matches) > 1:
            raise JavaThreadError(f"{len(matches)} threads of process {pid} are called {name!r} "
                                  f"(tids {', '.join(map(str, matches))}); pass --tid")
        return matches[0]
    alive = {tid for _, tid in comms}
    named = [(n, tid) for n, tid in _dump_names(dump) if tid in alive]
    matches = [tid for n, tid in named if n == name]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise JavaThreadError(f"{len(matches)} Java threads of process {pid} are called {name!r} "
                              f"(tids {', '.join(map(str, matches))}); pass --tid")
    names = sorted({n for n, _ in named})
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    close += [n for n in names if name.casefold() in n.casefold() and n not in close][:5 - len(close)]
    hint = f"; close names: {', '.join(repr(n) for n in close)}" if close else \
        f"; it has {len(names)} named threads (see `jcmd {pid} Thread.print`)"
    raise JavaThreadError(f"JVM {pid} has no thread called {name!r}{hint}")
