"""The cpuset writers of the pin flow: a shield the way `cset shield` builds one, so quiet CPUs stay
quiet for tasks that did not exist when they were made quiet (app/machine/cgroups.py says which
machinery the machine has; app/quiet/ decides when to use it).

  cpuset        one of coremap's cpuset cgroups (app/format.py CPUSET_NAMES: index 1 holds every
                other process, 2 the threads pinned onto quiet CPUs, allowed on every CPU and held by
                their own masks), its value the CPUs it allows; () = absent. Writing () first moves every task still in it back to the root (those
                born while it stood included), then removes it.
  cgroup        which of those cgroups a process is in (cgroup.procs moves all its threads);
  cgroupthread  which one a thread is in (cgroup v1 only: its `tasks` file moves one thread)
  subtree       cgroup v2: the cpuset controller in the root's cgroup.subtree_control, which a child
                cgroup needs before it has cpuset files
  slice         systemd: a unit's AllowedCPUs=, set at run time with `systemctl set-property
                --runtime` (systemd then writes the cpuset; coremap never moves a process out of its unit)

A task moved into a cpuset keeps the mask a user asked sched_setaffinity(2) for, within the cpuset's
CPUs (kernel/sched/core.c keeps user_cpus_ptr since Linux 6.2), and gets it back when it leaves; a
task that never asked gets the cpuset's CPUs. That is what makes the give-back exact.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import threading
import time

from app.errors import CpuListError, SysRootReadError
from app.format import CPUSET_NAMES, SLICE_NAMES
from app.machine.cgroups import CpusetLayout, cgroup_of, read_cpuset_layout
from app.machine.threads import TaskGone, read_task
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.pinning.targets import PinTarget
from app.pinning.writers import UNKNOWN_START, Foresight, Outcome, Prepared, Step, checked
from app.sysroot import SysRoot

SYSTEM, PINNED = 1, 2           # indexes into CPUSET_NAMES
SYSTEMCTL_TIMEOUT = 20.0
DRAIN_ROUNDS = 5                # reads of a cpuset's tasks before it is removed (see CpusetWriter.write)
RMDIR_TRIES, RMDIR_WAIT_S = 20, 1.0     # an rmdir kept busy by a task not yet reaped (CpusetWriter._remove)


class _Cgroups:
    """What the cgroup writers share: the layout (read when first needed) and paths built from it."""

    def __init__(self, root: SysRoot):
        self.root = root
        self._layout: CpusetLayout | None = None

    @property
    def layout(self) -> CpusetLayout:
        if self._layout is None:
            self._layout = read_cpuset_layout(self.root)
        return self._layout

    def dir(self, index: int):
        if not 0 <= index < len(CPUSET_NAMES):
            raise ValueError(f"cpuset #{index}: coremap uses only {', '.join(CPUSET_NAMES)}")
        name = CPUSET_NAMES[index].strip("/")
        return self.root.sys(*self.layout.mount, name) if name else self.root.sys(*self.layout.mount)

    def write_line(self, path, text: str) -> None:
        fd = self.root.open_for_write(path)
        try:
            os.write(fd, (text + "\n").encode())
        finally:
            os.close(fd)


class CpusetWriter(_Cgroups):
    """Kind "cpuset": one of coremap's cpusets and the CPUs it allows."""

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        folder = self.dir(target.id)
        if not self.root.is_dir(folder):
            return ()
        text = self.root.read_optional(folder / "cpuset.cpus")
        try:
            return parse_cpulist(text or "", what=str(folder / "cpuset.cpus"))
        except CpuListError as e:
            raise SysRootReadError(folder / "cpuset.cpus", str(e)) from None

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        if not self.layout.usable or t.id not in (SYSTEM, PINNED):
            return Prepared(t, refusal=("invalid", f"{t.describe()}: {self.layout.why or 'no cpuset of coremap'}"))
        try:
            return Prepared(t, self.read(t))
        except SysRootReadError as e:
            return Prepared(t, refusal=("invalid", str(e)))

    def write(self, target: PinTarget, cpus) -> None:
        folder = self.dir(target.id)
        if not cpus:
            # A process forked in it while it drains (another user's shell) is born there after the
            # lists were read, and rmdir then fails with EBUSY: drain again until a round finds none.
            for _ in range(DRAIN_ROUNDS):
                if not self._drain(folder):
                    break
            self._remove(folder)
            return
        if not self.root.is_dir(folder):
            self.root.make_dir(folder)
            if self.layout.kind == "v1":
                # A v1 cpuset takes no task before it has memory nodes (cpusets.rst 2.2).
                self.write_line(folder / "cpuset.mems", format_cpulist(self.layout.mems))
        self.write_line(folder / "cpuset.cpus", format_cpulist(cpus))

    def _remove(self, folder) -> None:
        """rmdir `folder`, drained. A task that exited in it but is not yet reaped is listed nowhere and
        still keeps it busy (EBUSY, seen twice under two suites' load): its parent reaps it within moments,
        so the rmdir is tried again, draining between tries, for up to RMDIR_WAIT_S."""
        for attempt in range(RMDIR_TRIES):
            if not self.root.is_dir(folder):
                return
            try:
                self.root.remove_dir(folder)
                return
            except OSError as e:
                if e.errno != errno.EBUSY or attempt == RMDIR_TRIES - 1:
                    raise
            time.sleep(RMDIR_WAIT_S / RMDIR_TRIES)
            self._drain(folder)

    def _drain(self, folder) -> int:
        """Every task still in `folder` back to the root: those moved there one by one, and those born
        there while it stood (a process started from a shell in the shield). How many it found."""
        top = self.dir(0)
        files = ("cgroup.procs", "tasks") if self.layout.kind == "v1" else ("cgroup.procs",)
        found = 0
        for name in files:
            try:
                text = self.root.read_optional(folder / name, limit=1 << 22) or ""
            except SysRootReadError:
                continue
            found += len(text.split())
            for word in text.split():
                try:
                    self.write_line(top / name, word)
                except ProcessLookupError:
                    continue            # exited while the shield came down
                except OSError as e:
                    if e.errno != errno.ESRCH:
                        raise
        return found

    def forecast(self, target: PinTarget, cpus, sight: Foresight) -> None:
        """A dry run: later steps see the CPUs this cpuset will allow."""
        sight.cpusets[target.id] = tuple(cpus)

    def write_privileged(self, helper, target: PinTarget, cpus) -> None:
        helper.set_cpuset(target.id, tuple(cpus))

    def read_back(self, target: PinTarget, cpus) -> Outcome:
        return checked(target, cpus, self.read(target), what="reads back", why="the kernel kept other CPUs")


class MemberWriter(_Cgroups):
    """Kinds "cgroup" (a process) and "cgroupthread" (one thread, cgroup v1): which cpuset it is in."""

    def _cgroup(self, target: PinTarget) -> str | None:
        if target.kind == "cgroup":
            return cgroup_of(self.root, target.id)
        return cgroup_of(self.root, target.pid if target.pid is not None else target.id, target.id)

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        where = self._cgroup(target)
        if where is None:
            return None
        return (CPUSET_NAMES.index(where),) if where in CPUSET_NAMES else (-1,)

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        if not self.layout.usable:
            return Prepared(t, refusal=("invalid", f"{t.describe()}: {self.layout.why}"))
        if t.kind == "cgroupthread" and self.layout.kind != "v1":
            return Prepared(t, refusal=("invalid", f"{t.describe()}: cgroup v2 moves whole processes, not one thread"))
        pid = t.id if t.kind == "cgroup" else (t.pid if t.pid is not None else t.id)
        try:
            task = read_task(self.root, pid, t.id, detail="fast")
        except TaskGone:
            return Prepared(t, gone=f"{t.describe()} has exited")
        t = PinTarget(t.kind, t.id, pid if t.kind == "cgroupthread" else None, t.label or task.comm)
        if step.expect_starttime is not None and task.starttime != step.expect_starttime:
            # An undo or redo of a move: the task journalled exited and its id was reused (or the journal
            # holds no start time for it). Another process is never moved in its place.
            word = "process" if t.kind == "cgroup" else "thread"
            why = (f"the journal holds no start time for the {word} that was moved, so it cannot be told from a new "
                   "one that reused the id" if step.expect_starttime == UNKNOWN_START else
                   f"the {word} that was moved exited and its id was reused")
            return Prepared(t, starttime=task.starttime, gone=f"{t.describe()}: {why}; left alone")
        where = self._cgroup(t)
        if where is None:
            return Prepared(t, starttime=task.starttime, gone=f"{t.describe()} has exited")
        if where not in CPUSET_NAMES:
            return Prepared(t, refusal=("cpuset", f"{t.describe()} is in cpuset {where}, not one of coremap's; "
                                        "left where it is"))
        return Prepared(t, (CPUSET_NAMES.index(where),), task.starttime)

    def forecast(self, target: PinTarget, value, sight: Foresight) -> None:
        """A dry run: the task's later steps (its threads' masks) see the CPUs of the cpuset it moves
        into, as the batch will have set them or as they are (the root allows every CPU)."""
        index = value[0]
        if index == 0:
            allowed = None
        elif index in sight.cpusets:
            allowed = sight.cpusets[index]
        else:
            allowed = CpusetWriter(self.root).read(PinTarget("cpuset", index)) or None
        pid = target.id if target.kind == "cgroup" else (target.pid if target.pid is not None else target.id)
        sight.place(pid, None if target.kind == "cgroup" else target.id, allowed, CPUSET_NAMES[index])

    def write(self, target: PinTarget, value) -> None:
        name = "cgroup.procs" if target.kind == "cgroup" else "tasks"
        self.write_line(self.dir(value[0]) / name, str(target.id))

    def write_privileged(self, helper, target: PinTarget, value) -> None:
        helper.move_task(target.id, value[0], thread=target.kind == "cgroupthread")

    def read_back(self, target: PinTarget, value) -> Outcome:
        after = self.read(target)
        if after is None:
            return Outcome("gone", f"{target.describe()} exited right after the move")
        return checked(target, value, after, what="is in", why="the kernel did not move it")

    def explain_einval(self, target: PinTarget, value) -> tuple[str, str]:
        """A cpuset refuses a per-CPU kernel thread (PF_NO_SETAFFINITY), like sched_setaffinity does."""
        return "kthread", (f"{target.describe()}: the kernel keeps it in its cpuset (a per-CPU kernel thread); "
                           "leave it where it is")


class SubtreeWriter(_Cgroups):
    """Kind "subtree": cgroup v2's cpuset controller enabled for the root's children."""

    def _path(self):
        return self.root.sys(*self.layout.mount, "cgroup.subtree_control")

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        text = self.root.read_optional(self._path())
        return None if text is None else ((1,) if "cpuset" in text.split() else (0,))

    def prepare(self, step: Step) -> Prepared:
        if self.layout.kind != "v2":
            return Prepared(step.target, refusal=("invalid", "the cpuset controller is switched on only in cgroup v2"))
        return Prepared(step.target, self.read(step.target))

    def write(self, target: PinTarget, value) -> None:
        self.write_line(self._path(), "+cpuset" if value == (1,) else "-cpuset")

    def write_privileged(self, helper, target: PinTarget, value) -> None:
        helper.set_subtree(value == (1,))

    def read_back(self, target: PinTarget, value) -> Outcome:
        return checked(target, value, self.read(target), what="reads back", why="the kernel kept it")


class SliceWriter:
    """Kind "slice": a systemd unit's AllowedCPUs=, at run time (systemctl set-property --runtime)."""

    def __init__(self, root: SysRoot, run=subprocess.run):
        self.root = root
        self._run = run

    def _unit(self, target: PinTarget) -> str:
        if not 0 <= target.id < len(SLICE_NAMES):
            raise ValueError(f"slice #{target.id}: coremap sets only {', '.join(SLICE_NAMES)}")
        return SLICE_NAMES[target.id]

    def _systemctl(self, *args: str) -> str:
        exe = shutil.which("systemctl")
        if exe is None:
            raise OSError(errno.ENOENT, "systemctl is not installed")
        r = self._run([exe, *args], capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT)
        if r.returncode != 0:
            raise OSError(errno.EPERM if "access denied" in r.stderr.lower() else errno.EINVAL,
                          (r.stderr.strip() or f"systemctl exited with status {r.returncode}")[:300])
        return r.stdout

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        try:
            text = self._systemctl("show", "--value", "-p", "AllowedCPUs", self._unit(target)).strip()
            return parse_cpulist(text, what=f"{self._unit(target)} AllowedCPUs") if text else ()
        except (OSError, subprocess.TimeoutExpired, CpuListError):
            return None

    def prepare(self, step: Step) -> Prepared:
        if not self.root.is_live:
            return Prepared(step.target, refusal=("invalid", "systemd units are set only on the live machine"))
        before = self.read(step.target)
        if before is None:
            return Prepared(step.target, refusal=("invalid", f"{step.target.describe()}: systemctl cannot read it"))
        return Prepared(step.target, before)

    def write(self, target: PinTarget, cpus) -> None:
        self._systemctl("set-property", "--runtime", self._unit(target), f"AllowedCPUs={format_cpulist(cpus)}")

    def write_privileged(self, helper, target: PinTarget, cpus) -> None:
        helper.set_slice(target.id, tuple(cpus))

    def read_back(self, target: PinTarget, cpus) -> Outcome:
        return checked(target, cpus, self.read(target), what="reads back", why="systemd kept other CPUs")


def cgroup_writers(root: SysRoot) -> dict[str, object]:
    member = MemberWriter(root)
    return {"cpuset": CpusetWriter(root), "cgroup": member, "cgroupthread": member, "subtree": SubtreeWriter(root),
            "slice": SliceWriter(root)}


@contextlib.contextmanager
def outside_the_shield(root: SysRoot):
    """While the block runs, the calling thread (cgroup v1; the whole process in v2, which moves only
    processes) is in the root cpuset, if a shield holds it: a probe child it starts then inherits a
    cpuset that allows the quiet CPUs it is to measure. It goes back into the shield after. Not
    journalled: coremap's own thread, moved back at once. PermissionError (EACCES) without root."""
    layout = read_cpuset_layout(root)
    pid = os.getpid()
    tid = threading.get_native_id()
    if not root.is_live or not layout.usable or cgroup_of(root, pid, tid) != CPUSET_NAMES[SYSTEM]:
        yield
        return
    writer = MemberWriter(root)
    target = PinTarget("cgroupthread", tid, pid) if layout.kind == "v1" else PinTarget("cgroup", pid)
    writer.write(target, (0,))
    try:
        yield
    finally:
        try:
            writer.write(target, (SYSTEM,))
        except FileNotFoundError:
            pass        # the shield came down meanwhile (an include in another window): stay in the root
