"""Quiet that holds: the cpuset steps of an isolate and of the give-back (app/machine/cgroups.py says
which machinery the machine has; app/pinning/cgroups.py writes it).

  cpuset shield (v1, v2)   /coremap-system allows only the housekeeping CPUs, and every process of
                           the root cpuset moves into it (a process moves with all its threads, and
                           what it starts later begins there: `taskset` or sched_setaffinity(0, all)
                           inside it still gets only the housekeeping CPUs). Kernel threads, processes
                           in someone else's cpuset, and processes with a thread coremap pinned onto
                           the quiet CPUs are moved one by one instead (app/quiet/moves.py).
  systemd                  system.slice, user.slice and init.scope get AllowedCPUs= the housekeeping
                           CPUs at run time; systemd writes their cpusets, nothing leaves its unit.

The give-back of the last quiet CPU takes the shield down: every process in it (those born while it
stood too) goes back to the root cpuset, where each gets its own mask back (the kernel keeps a mask
a user set with sched_setaffinity, Linux >= 6.2) or every CPU; then the cpusets are removed. Giving
back some of the quiet CPUs only widens /coremap-system.
"""
from __future__ import annotations

from app.errors import SysRootReadError
from app.format import CPUSET_NAMES, SLICE_NAMES
from app.machine.cgroups import CpusetLayout, cgroup_of, procs_of, read_cpuset_layout
from app.machine.threads import ThreadsSample
from app.pinning.cgroups import PINNED, SYSTEM, CpusetWriter, SliceWriter, SubtreeWriter
from app.pinning.ledger import Ledger
from app.pinning.targets import PinTarget
from app.quiet.moves import placed_there
from app.quiet.preview import QuietMove, QuietStay
from app.sysroot import SysRoot

CPUSET, SUBTREE = PinTarget("cpuset", SYSTEM), PinTarget("subtree", 0)


def method_of(root: SysRoot) -> tuple[str, CpusetLayout]:
    """("v1" | "v2" | "systemd" | "none", the layout) for this machine; a capture is shown what its
    machine would get, but only the live machine (or a test tree) is written."""
    layout = read_cpuset_layout(root)
    return layout.kind, layout


def isolate_steps(root: SysRoot, layout: CpusetLayout, ledger: Ledger, quiet: set[int], hk, sample: ThreadsSample | None,
                  notes: list[str], *, placed: set[int] = frozenset()) -> tuple[list[QuietMove], set[int]]:
    """The shield's moves, in the order they are written, and the processes it moves whole (their
    threads are not moved one by one). A process with a thread whose mask lies within `placed` (the
    quiet CPUs, unless the user asked to move such tasks) stays in the root cpuset, where its CPUs are
    allowed: the shield would take them from it (app/quiet/moves.py threads lists it, moves the rest)."""
    if layout.kind == "systemd":
        return _slices(root, quiet, hk, notes), _in_slices(root, sample)
    if not layout.usable or sample is None:
        return [], set()
    moves: list[QuietMove] = []
    if layout.kind == "v2":
        now = SubtreeWriter(root).read(SUBTREE)
        if now == (0,):
            moves.append(QuietMove(SUBTREE, now, (1,), "cpuset", "cgroup v2: the root's children get cpuset files"))
    current = CpusetWriter(root).read(CPUSET)
    if not current:
        moves.append(QuietMove(CPUSET, (), tuple(hk), "cpuset", "created: it holds every process"))
    elif set(current) & quiet:
        moves.append(QuietMove(CPUSET, current, tuple(sorted(set(current) - quiet)) or tuple(hk), "cpuset"))
    whole: set[int] = set()
    held = _pids_pinned_onto(ledger, quiet) | _pids_placed(sample, placed)
    for pid, p in sorted(sample.processes.items()):
        leader = sample.tasks.get(pid)
        if leader is None or leader.kthread or leader.state in ("Z", "X"):
            continue
        where = cgroup_of(root, pid)
        if where == CPUSET_NAMES[SYSTEM]:
            whole.add(pid)                  # there already (an earlier isolate, or born there)
        elif where == "/" and pid not in held:
            moves.append(QuietMove(PinTarget("cgroup", pid, None, leader.comm), (0,), (SYSTEM,), "process"))
            whole.add(pid)
    if held:
        notes.append(f"{len(held)} process{'es' if len(held) > 1 else ''} with a thread pinned onto the quiet "
                     "CPUs (by coremap, or by you) stay out of the shield: their other threads are moved one by one")
    return moves, whole


def giveback_steps(root: SysRoot, layout: CpusetLayout, ledger: Ledger, back: set[int], remaining: set[int],
                   stays: list[QuietStay]) -> list[QuietMove]:
    """The shield's part of an include, in the order it is written: a wider /coremap-system while CPUs
    stay quiet; else every process back to the root, the cpusets removed, the controller as found."""
    if layout.kind == "systemd":
        return _slices_back(root, ledger, back, remaining)
    if not layout.usable:
        return []
    writer = CpusetWriter(root)
    current = writer.read(CPUSET)
    if not current:
        return []
    if remaining:
        wider = tuple(sorted(set(current) | back))
        return [QuietMove(CPUSET, current, wider, "cpuset")] if wider != current else []
    moves = [QuietMove(PinTarget("cgroup", pid, None, _comm(root, pid)), (SYSTEM,), (0,), "process")
             for pid in procs_of(root, layout, CPUSET_NAMES[SYSTEM].strip("/"))]
    pinned = writer.read(PinTarget("cpuset", PINNED))
    if pinned:
        moves.append(QuietMove(PinTarget("cpuset", PINNED), pinned, (), "cpuset",
                               "removed: the threads pinned in it keep their own masks in the root cpuset"))
    moves.append(QuietMove(CPUSET, current, (), "cpuset", "removed: every process is back in the root cpuset"))
    sub = ledger.moved.get(("subtree", None, 0))
    if layout.kind == "v2" and sub is not None and sub.before == (0,):
        moves.append(QuietMove(SUBTREE, (1,), (0,), "cpuset", "as it was before the isolate"))
    return moves


def _pids_pinned_onto(ledger: Ledger, quiet: set[int]) -> set[int]:
    return {e.pid for e in ledger.pinned.values() if e.kind == "thread" and e.pid is not None
            and set(e.requested) & quiet}


def _pids_placed(sample: ThreadsSample, placed: set[int]) -> set[int]:
    """Processes with a thread of their own whose mask lies within `placed` (app/quiet/moves.py placed)."""
    if not placed:
        return set()
    return {t.pid for t in sample.tasks.values() if placed_there(t, placed)}


def _comm(root: SysRoot, pid: int) -> str:
    try:
        return (root.read_first_line(root.proc(pid, "comm")) or "").strip()
    except SysRootReadError:
        return ""


# -- systemd ---------------------------------------------------------------------------------------------
def _slices(root: SysRoot, quiet: set[int], hk, notes: list[str]) -> list[QuietMove]:
    writer, moves = SliceWriter(root), []
    for i, unit in enumerate(SLICE_NAMES):
        t = PinTarget("slice", i)
        now = writer.read(t)
        if now is None:
            notes.append(f"{unit}: systemctl cannot read its AllowedCPUs; left alone")
            continue
        new = tuple(sorted(set(now) - quiet)) if now else tuple(hk)
        if new != now:
            moves.append(QuietMove(t, now, new or tuple(hk), "cpuset"))
    notes.append("a thread you pin onto a quiet CPU must be in a unit allowed there: start its program with "
                 "`systemd-run --scope -p AllowedCPUs=<quiet CPUs> ...`")
    return moves


def _slices_back(root: SysRoot, ledger: Ledger, back: set[int], remaining: set[int]) -> list[QuietMove]:
    writer, moves = SliceWriter(root), []
    for i in range(len(SLICE_NAMES)):
        t = PinTarget("slice", i)
        m = ledger.moved.get(("slice", None, i))
        now = writer.read(t)
        if m is None or now is None:
            continue
        new = tuple(sorted(set(now) | back)) if remaining else m.before
        if new != now:
            moves.append(QuietMove(t, now, new, "cpuset"))
    return moves


def _in_slices(root: SysRoot, sample: ThreadsSample | None) -> set[int]:
    """Processes in the slices whose AllowedCPUs= keeps them off the quiet CPUs."""
    if sample is None:
        return set()
    units = tuple("/" + u for u in SLICE_NAMES)
    return {pid for pid in sample.processes if (cgroup_of(root, pid) or "").startswith(units)}
