"""Java threads by their full names, from JVMs verified by facts no other user can forge.

The kernel keeps only 15 bytes of a thread's name (app/machine/thread_names.py), so
"market-data-feed-handler-0" shows as "market-data-fee". The JVM's own thread dump has the full name
and the Linux tid (`nid=`); coremap asks the JVM's attach listener for it (app/machine/jvm_attach.py,
the protocol jcmd speaks). No agent is loaded into the JVM.

Attaching starts with SIGQUIT when the JVM's listener is not up yet, and SIGQUIT ends any process that
does not handle it. So nothing is sent to a process, and no socket of it is spoken to, before
`verify_jvm` — the one check, used by `coremap pin --java`, `coremap threads`, the window's sampler
and the guard — has found (issue 24):
- its executable (/proc/PID/exe) is a `java` in a JDK: the same file at the path the kernel names,
  owned by root or by the process's own user, writable by no one else, with lib/server/libjvm.so of
  the same owners beside it (lib/<arch>/server in a JDK 8);
- its perf-data file /tmp/hsperfdata_<user>/<pid> is a regular file of the process's user, writable
  by no one else, in a folder of that user writable by no one else, and holds HotSpot perf data.
Another user can plant neither: a process of theirs is not a root-owned java, and a file of theirs is
not the JVM's user's. Perf data also says whether attach is on (-XX:+DisableAttachMechanism), so that
is known without a signal; status says whether the JVM handles SIGQUIT (-Xrs).

A JVM's listener admits only its own user and root, and coremap asks only such JVMs.
"""
from __future__ import annotations

import difflib
import os
import pwd
import stat
import time
from dataclasses import dataclass, field

from app.errors import CoremapError, ParseError, SysRootReadError
from app.format import printable
from app.machine.jvm_attach import AttachError, Target, open_pidfd, request
from app.machine.thread_names import COMM_LEN, ThreadNames, comm_of, is_cut, read_captured_names
from app.machine.threads import read_tgid
from app.parse.jvm import ProcessIds, attach_enabled, dump_thread, parse_perfdata, parse_process_ids
from app.parse.jvm import parse_thread_dump  # noqa: F401  (re-exported: the tests and callers know it here)
from app.sysroot import SysRoot

__all__ = ["COMM_LEN", "DUMP_TIMEOUT", "JavaThreadError", "JvmCheck", "JvmNames", "comm_of",
           "dump_thread_names", "find_java_thread", "full_thread_names", "java_thread_ids", "java_threads",
           "names_by_tid", "parse_thread_dump", "read_java_names", "thread_names_of", "verify_jvm"]

DUMP_TIMEOUT = 10.0
_PERF_LIMIT = 1 << 20        # bytes of a perf-data file (HotSpot's default is 32 KiB; -XX:PerfDataMemorySize)


class JavaThreadError(CoremapError):
    """A Java thread that cannot be found, or a JVM that cannot be asked."""


@dataclass(frozen=True)
class JvmCheck:
    """What verify_jvm found about one process."""
    pid: int
    reason: str = ""            # why it is not a JVM coremap may attach to, a clause; "" when verified
    java: bool = False          # its executable is called java: it presents itself as a JVM
    ids: ProcessIds | None = None
    perf: dict = field(default_factory=dict)      # its perf-data entries, when verified

    @property
    def verified(self) -> bool:
        return not self.reason


def verify_jvm(pid: int, root: SysRoot) -> JvmCheck:
    """Whether process `pid` is a HotSpot JVM by the facts in the module docstring. Reads files and
    stats them; sends nothing to the process. Never raises for a process that is gone or hidden."""
    if not root.is_live:
        return JvmCheck(pid, "it is in a capture, not running on this machine")
    link = root.task_dir(pid, None, "exe")
    try:
        exe = root.readlink(link)
    except SysRootReadError:
        return JvmCheck(pid, "its executable cannot be looked at (permission denied: run coremap as root "
                            "or as its user)")
    if exe is None:
        return JvmCheck(pid, "it has no executable (a kernel thread, or it has exited)")
    if exe.endswith(" (deleted)"):
        return JvmCheck(pid, f"its executable {printable(exe)} was replaced since it started (a JDK "
                             "update?); restart it", java=os.path.basename(exe[:-10]) == "java")
    if os.path.basename(exe) != "java":
        return JvmCheck(pid, f"its executable is {printable(exe)}, not a JDK's java")
    try:
        ids = parse_process_ids(root.read(root.task_dir(pid, None, "status")))
    except (SysRootReadError, ParseError) as e:
        return JvmCheck(pid, f"its status cannot be read ({e})", True)
    why = _exe_problem(exe, link, ids) or _perf_data(pid, ids, root)
    if isinstance(why, str):
        return JvmCheck(pid, why, True, ids)
    return JvmCheck(pid, "", True, ids, why)


def _exe_problem(exe: str, link, ids: ProcessIds) -> str:
    """Why `exe` is not a JDK's java of root or the process's user ("" when it is)."""
    if len(ids.nspids) > 1:
        return "it runs in a container (its own pid namespace); coremap reads Java names of JVMs in its own"
    try:
        running, there = os.stat(link), os.stat(exe)     # the file it runs; the file at the path named
    except OSError as e:
        return f"its executable {printable(exe)} cannot be looked at ({os.strerror(e.errno or 0)})"
    if (running.st_dev, running.st_ino) != (there.st_dev, there.st_ino):
        return f"it runs another file than {printable(exe)} here (another mount namespace)"
    owners = (0, ids.euid)
    if not _trusted(running, owners):
        return (f"{printable(exe)} belongs to uid {running.st_uid} or others may write it; a JDK's java "
                "belongs to root or to the process's user")
    home = os.path.dirname(os.path.dirname(exe))
    libs = [os.path.join(home, "lib", "server", "libjvm.so")]
    try:
        libs += [os.path.join(home, "lib", d, "server", "libjvm.so") for d in sorted(os.listdir(os.path.join(home, "lib")))]
    except OSError:
        pass            # no lib/ folder: the check below says it is not a JDK
    for lib in libs:
        try:
            if _trusted(os.stat(lib), owners):
                return ""
        except OSError:
            continue    # not this layout: try the next
    return f"{printable(exe)} is not in a JDK (no lib/server/libjvm.so of root or its user beside it)"


def _trusted(st: os.stat_result, owners) -> bool:
    return stat.S_ISREG(st.st_mode) and st.st_uid in owners and not st.st_mode & 0o022


def _perf_data(pid: int, ids: ProcessIds, root: SysRoot) -> str | dict:
    """The JVM's perf-data entries, or (a str) why /tmp/hsperfdata_<user>/<pid> is not its own."""
    try:
        user = pwd.getpwuid(ids.euid).pw_name
    except KeyError:
        return f"its user (uid {ids.euid}) has no name here, so its perf data cannot be found"
    folder = root.path("tmp", f"hsperfdata_{user}")
    # Opened without following links, and judged by fstat of the very descriptors that are read:
    # a folder or file swapped for a link after a check is never what gets read.
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        return (f"it has no perf data, {folder} ({os.strerror(e.errno or 0)}): started with -XX:-UsePerfData, "
                "or with another /tmp")
    try:
        st = os.fstat(dfd)
        if st.st_uid != ids.euid or st.st_mode & 0o022:
            return f"{folder} belongs to uid {st.st_uid} or others may write it, not to its user {printable(user)}"
        try:
            fd = os.open(str(pid), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as e:
            return f"it has no perf data, {folder}/{pid} ({os.strerror(e.errno or 0)}): started with -XX:-UsePerfData?"
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != ids.euid or st.st_mode & 0o022:
            return f"{folder}/{pid} is not a file of its user {printable(user)} that only it may write"
        data = os.read(fd, _PERF_LIMIT)
    finally:
        os.close(fd)
    try:
        return parse_perfdata(data, what=f"{folder}/{pid}")
    except ParseError as e:
        return str(e)


def _attach_refusal(check: JvmCheck) -> str:
    """Why coremap does not try to attach to this verified JVM ("" when it does)."""
    if attach_enabled(check.perf) is False:
        return "it was started with -XX:+DisableAttachMechanism"
    me = os.geteuid()
    if me != 0 and me != check.ids.euid:
        try:
            owner = pwd.getpwuid(check.ids.euid).pw_name
        except KeyError:
            owner = f"uid {check.ids.euid}"
        return (f"it belongs to {printable(owner)}, and a JVM lets only its own user and root attach "
                f"(run coremap as {printable(owner)} or root)")
    return ""


def dump_thread_names(pid: int, root: SysRoot | None = None, timeout: float = DUMP_TIMEOUT) -> list[tuple[str, int]]:
    """[(full name, tid)] of every thread in the thread dump of JVM `pid`, verified first. Raises
    JavaThreadError, saying why, for a process that is not a verified JVM or cannot be asked."""
    root = root or SysRoot("/")
    try:
        pidfd = open_pidfd(pid)        # before the checks: a signal can only reach the process checked
    except ProcessLookupError:
        raise JavaThreadError(f"process {pid} does not exist; find the JVM with `coremap threads`") from None
    try:
        check = verify_jvm(pid, root)
        if not check.verified:
            comm = root.read_optional(root.task_dir(pid, None, "comm")) or "?"
            raise JavaThreadError(f"process {pid} ({printable(comm.strip())}) is not a Java VM coremap may "
                                  f"attach to: {check.reason}")
        why = _attach_refusal(check)
        if why:
            raise JavaThreadError(f"JVM {pid}'s thread names cannot be read: {why}")
        target = Target(pid, check.ids.euid, check.ids.egid, check.ids.caught, pidfd)
        lines = request(target, root, "jcmd", "Thread.print", timeout=timeout)
        return [hit for hit in map(dump_thread, lines) if hit is not None]
    except AttachError as e:
        raise JavaThreadError(f"JVM {pid}'s thread names cannot be read: {e}") from None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _comm_threads(root: SysRoot, pid: int) -> list[tuple[str, int]]:
    out = []
    for name in root.listdir(root.task_dir(pid, None, "task")):
        if name.isdigit():
            # read_first_line: None when the thread exited between listing and reading.
            comm = root.read_first_line(root.task_dir(pid, int(name), "comm"))
            if comm is not None:
                out.append((comm, int(name)))
    return out


def _live_named(pid: int, root: SysRoot) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(comm threads, dump threads that are threads of `pid` now) of a verified JVM. A dump line that
    names a tid outside the process (a thread name can hold a newline and a forged line) is dropped."""
    comms = _comm_threads(root, pid)
    if not comms:
        raise JavaThreadError(f"process {pid} does not exist; find the JVM with `coremap threads`")
    alive = {tid for _, tid in comms}
    return comms, [(n, tid) for n, tid in dump_thread_names(pid, root) if tid in alive]


def java_threads(pid: int, root: SysRoot | None = None) -> dict[str, int]:
    """{name: tid} of JVM `pid`: comm names, overlaid by the full names of its thread dump. Raises
    JavaThreadError when the process does not exist or is not a JVM that can be asked."""
    root = root or SysRoot("/")
    comms, named = _live_named(pid, root)
    out: dict[str, int] = {}
    for comm, tid in comms:
        out.setdefault(comm, tid)
    out.update(named)
    return out


def java_thread_ids(pid: int, name: str, root: SysRoot) -> frozenset[int] | None:
    """Every live thread of JVM `pid` called `name` by its thread dump. Raises JavaThreadError for a
    process that is not a verified JVM (checked before anything is sent to it) or a dump that fails."""
    return frozenset(tid for n, tid in _live_named(pid, root)[1] if n == name)


def find_java_thread(pid: int, name: str, root: SysRoot | None = None) -> int:
    """The tid of the Java thread called `name` in JVM `pid`. A name of up to 15 bytes is also found
    by comm in a process that is not a verified JVM (nothing is sent to it)."""
    root = root or SysRoot("/")
    comms = _comm_threads(root, pid)
    if not comms:
        raise JavaThreadError(f"process {pid} does not exist; find the JVM with `coremap threads`")
    if len(name.encode("utf-8")) <= COMM_LEN and not verify_jvm(pid, root).verified:
        return _only(pid, name, [tid for comm, tid in comms if comm == name], "threads")
    _, named = _live_named(pid, root)
    matches = [tid for n, tid in named if n == name]
    if matches:
        return _only(pid, name, matches, "Java threads")
    names = sorted({n for n, _ in named})
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    close += [n for n in names if name.casefold() in n.casefold() and n not in close][:5 - len(close)]
    hint = f"; close names: {', '.join(repr(n) for n in close)}" if close else \
        f"; it has {len(names)} named threads (see `coremap threads --pid {pid}`)"
    raise JavaThreadError(f"JVM {pid} has no thread called {name!r}{hint}")


def _only(pid: int, name: str, tids: list[int], what: str) -> int:
    if len(tids) == 1:
        return tids[0]
    if not tids:
        raise JavaThreadError(f"process {pid} has no thread called {name!r}; see `coremap threads --pid {pid}`")
    raise JavaThreadError(f"{len(tids)} {what} of process {pid} are called {name!r} "
                          f"(tids {', '.join(map(str, tids))}); pass --tid")


@dataclass(frozen=True)
class JvmNames:
    """One JVM's full thread names (its threads' only), or why they could not be read."""
    pid: int
    names: dict[int, str]           # tid -> full name, for threads whose comm is cut
    reason: str = ""
    read_at: float = 0.0            # epoch seconds


def read_java_names(pid: int, root: SysRoot, tids=None) -> JvmNames:
    """The full names of the threads of `pid` (of `tids` when given) whose comm is cut, or why they
    cannot be read. Verifies first; never raises for a JVM that cannot be asked."""
    try:
        dump = dump_thread_names(pid, root)
    except JavaThreadError as e:
        return JvmNames(pid, {}, _clause(str(e), pid), time.time())
    mine = set(_task_ids(pid, root) if tids is None else tids)
    return JvmNames(pid, {tid: n for n, tid in dump if tid in mine and len(n.encode("utf-8")) > COMM_LEN},
                    "", time.time())


def _clause(message: str, pid: int) -> str:
    """The reason part of a JavaThreadError, for "Java thread names cannot be read: <reason>"."""
    for lead in (f"JVM {pid}'s thread names cannot be read: ", "is not a Java VM coremap may attach to: "):
        at = message.find(lead)
        if at >= 0:
            return message[at + len(lead):]
    return message


def _task_ids(pid: int, root: SysRoot) -> list[int]:
    return [int(n) for n in root.listdir(root.task_dir(pid, None, "task")) if n.isdigit()]


def claims_java(pid: int, root: SysRoot, comm: str) -> bool:
    """Whether process `pid` (called `comm`) presents itself as a JVM: its executable is called java,
    or, where its executable is hidden (another user's process), it is called java. A cheap first
    look, not a verification: it decides only whether verify_jvm is worth its reads, and whether a
    JVM whose names cannot be read gets a line saying why."""
    try:
        exe = root.readlink(root.task_dir(pid, None, "exe"))
    except SysRootReadError:
        return comm == "java"           # permission denied: another user's process
    return exe is not None and os.path.basename(exe.removesuffix(" (deleted)")) == "java"


def thread_names_of(threads, root: SysRoot) -> ThreadNames:
    """The full names of every thread with a cut comm in a JVM among `threads` (a ThreadsSample),
    read now, one JVM after another: for `coremap threads`. A capture's are those it stores."""
    return full_thread_names(((t.pid, t.tid, t.comm) for t in threads.tasks.values()), root,
                             {pid: info.comm for pid, info in threads.processes.items()})


def names_by_tid(threads, root: SysRoot) -> dict[int, str]:
    """{tid: the name coremap gives it} for `threads`, (tid, comm) each, whose process is looked up
    now (a trace names a task by tid and comm only). A thread that exited keeps its comm."""
    threads = list(threads)
    pids = {tid: read_tgid(root, tid) for tid, comm in threads if is_cut(comm)}
    names = full_thread_names(((pid, tid, comm) for tid, comm in threads if (pid := pids.get(tid)) is not None), root)
    return {tid: names.name(pids[tid], tid, comm) if pids.get(tid) is not None else comm for tid, comm in threads}


def full_thread_names(threads, root: SysRoot, process_comms=None) -> ThreadNames:
    """The full names of `threads`, (pid, tid, comm) each, read now from the JVMs among them, one JVM
    after another: what names a thread where the window's sampler does not (`coremap pin --tid`,
    `coremap threads`, a jitter run's gap attribution). Only threads whose comm is cut, in a process
    that presents itself as a JVM, cost a read; `process_comms` (pid -> comm) spares a read of each
    process's name. For a capture: the names read when it was taken, which it stores."""
    if not root.is_live:
        return read_captured_names(root)
    by_pid: dict[int, list[int]] = {}
    for pid, tid, comm in threads:
        if is_cut(comm):
            by_pid.setdefault(pid, []).append(tid)
    names, unavailable, read_at = {}, {}, {}
    for pid, tids in sorted(by_pid.items()):
        comm = (process_comms or {}).get(pid)
        if comm is None:
            comm = (root.read_first_line(root.task_dir(pid, None, "comm")) or "").strip()
        if not claims_java(pid, root, comm):
            continue
        got = read_java_names(pid, root, sorted(set(tids)))
        if got.reason:
            unavailable[pid] = got.reason
        else:
            names[pid], read_at[pid] = got.names, got.read_at
    return ThreadNames(names, unavailable, read_at)
