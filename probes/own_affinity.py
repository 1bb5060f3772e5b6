"""OwnAffinityGuard: keep coremap's own threads off the CPUs a probe measures, and give them back.

A probe measures what happens on its CPU, and coremap's UI thread, sampler thread and the probe's
reader threads are among the things that could. While a probe job runs, every thread of this
process (each /proc/self/task entry: sched_setaffinity on the process changes only the calling
thread, and threads inherit a mask only when created) is moved to the online CPUs the job does not
probe; when it ends each gets its own earlier mask back. The caller starts the job's child before
the move, so the child inherits the full mask and may pin itself to the probed CPU.

Quiet CPUs (issue 13): an isolate moves coremap's own threads off them too, yet probing them is what
they are kept for. `lent` names them; `spawning(cpus)` widens the starting thread's mask by the
probed CPUs among them while a child starts, so the child inherits them and may pin itself there.
"""
from __future__ import annotations

import contextlib
import os

from app.format import format_cpus
from app.machine.cpusets import read_cpuset_cpus
from app.machine.topology import read_online_cpus
from app.pinning.cgroups import outside_the_shield
from app.sysroot import SysRoot


class OwnAffinityGuard:
    """Move every thread of this process off some CPUs, and back."""

    def __init__(self, root: SysRoot | None = None):
        self.root = root or SysRoot("/")
        self._saved: dict[int, set[int]] | None = None
        self._process_mask: set[int] | None = None
        self.lent: frozenset[int] = frozenset()      # quiet CPUs: off-limits to coremap, not to a probe

    @property
    def active(self) -> bool:
        """True while the threads are kept off some CPUs (between exclude and restore)."""
        return self._saved is not None

    def probe_cpus(self) -> set[int]:
        """CPUs a probe started from this process may use: its affinity, and the quiet CPUs."""
        return set(os.sched_getaffinity(0)) | set(self.lent)

    @contextlib.contextmanager
    def spawning(self, cpus):
        """While the block starts a child: the calling thread also allowed on the probed CPUs that are
        lent (quiet), so the child inherits them; its own mask back afterwards. Behind a cpuset shield
        (app/quiet/shield.py) a mask is not enough: the thread steps out of the shield for the spawn."""
        extra = set(cpus) & set(self.lent)
        mine = set(os.sched_getaffinity(0))
        if not extra - mine:
            yield
            return
        with outside_the_shield(self.root):
            os.sched_setaffinity(0, mine | extra)
            try:
                yield
            finally:
                os.sched_setaffinity(0, mine)

    def own_tids(self) -> list[int]:
        return [int(t) for t in self.root.listdir(self.root.task_dir(os.getpid(), None, "task")) if t.isdigit()]

    def exclude(self, cpus) -> str | None:
        """Move all own threads to the online CPUs not in `cpus`. Returns a note when it cannot
        (every online CPU is probed, e.g. a one-CPU machine) and then changes nothing."""
        self.restore()
        probed = set(cpus)
        online = set(read_online_cpus(self.root))
        process_mask = set(os.sched_getaffinity(0))
        keep = (online & process_mask) - probed
        if not keep:
            return (f"coremap's own threads stay where they are: CPUs {format_cpus(sorted(probed))} are "
                    f"all the online CPUs it may use ({format_cpus(sorted(online & process_mask))})")
        saved: dict[int, set[int]] = {}
        for tid in self.own_tids():
            try:
                saved[tid] = set(os.sched_getaffinity(tid))
                os.sched_setaffinity(tid, keep)
            except ProcessLookupError:
                # the thread ended between listing /proc/self/task and this call: nothing to move
                saved.pop(tid, None)
        self._saved = saved
        self._process_mask = process_mask
        return None

    def restore(self) -> None:
        """Give each thread its earlier mask; threads born meanwhile get the process's earlier mask."""
        if self._saved is None:
            return
        saved, mask = self._saved, self._process_mask
        self._saved = self._process_mask = None
        online = set(read_online_cpus(self.root))
        for tid in self.own_tids():
            want = saved.get(tid, mask)
            allowed, _ = read_cpuset_cpus(self.root, os.getpid(), tid)
            if allowed is not None and want == set(allowed) and want != online:
                # The mask the thread had was its cpuset's (a quiet CPU's shield), not one it asked for:
                # ask for every CPU, which the kernel trims to the cpuset, so that the give-back (the
                # shield gone) returns every CPU. Writing the shield's CPUs back would make them the
                # thread's own request (a user mask, kernel 6.2+) and keep it off the CPUs for good.
                want = online
            try:
                os.sched_setaffinity(tid, want)
            except ProcessLookupError:
                # the thread ended between listing /proc/self/task and this call: nothing to restore
                pass
