"""The kernel settings a quiet CPU wants besides masks, as writers of the pin flow (scalar kinds of
app/pinning/kinds.py): journalled with their old value, written, read back, and given back by undo,
include and restore like any pin.

  sysctl   one of SYSCTLS, by its index (the journal never names a path): what tuned's
           cpu-partitioning profile sets at run time (profiles/cpu-partitioning/tuned.conf [sysctl]):
             kernel.timer_migration = 0   timers stay on the CPU that armed them, so a housekeeping
                                          CPU's timers are not pulled onto a quiet one
                                          (Documentation/admin-guide/sysctl/kernel.rst)
             vm.stat_interval = 10        the per-CPU vmstat update runs every 10 s, not every 1 s
                                          (Documentation/admin-guide/sysctl/vm.rst)
           and kernel.watchdog_cpumask (a CPU set: kind "watchdog", app/pinning/masks.py) keeps the
           lockup detectors on housekeeping CPUs instead of turning them off as tuned does with
           nmi_watchdog = 0.
  pmqos    sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us: the resume latency a CPU's
           idle governor must honour (Documentation/admin-guide/pm/cpuidle.rst, "Power Management
           Quality of Service for CPUs"); 0 keeps it out of deep idle states, "n/a" (value ()) is no
           constraint. Optional: a quiet CPU that sleeps deep wakes slowly, one that never does burns
           power.
"""
from __future__ import annotations

import os

from app.errors import SysRootReadError
from app.pinning.targets import PinTarget
from app.pinning.writers import Outcome, Prepared, Step, checked
from app.sysroot import SysRoot

# (name, path under proc/sys): the index is what a journal records.
SYSCTLS = (("kernel.timer_migration", ("kernel", "timer_migration")),
           ("vm.stat_interval", ("vm", "stat_interval")))
# What an isolate sets them to (tuned's cpu-partitioning values).
QUIET_SYSCTLS = {0: 0, 1: 10}
MAX_VALUE = 65535           # the journal keeps values as small integers (app/pinning/kinds.py)
NO_CONSTRAINT = "n/a"


def sysctl_index(name: str) -> int:
    return next(i for i, (n, _) in enumerate(SYSCTLS) if n == name)


def sysctl_target(index: int) -> PinTarget:
    return PinTarget("sysctl", index, None, SYSCTLS[index][0])


class ScalarWriter:
    """sysctl and pmqos: one number (or n/a) in one file."""

    def __init__(self, root: SysRoot):
        self.root = root

    def _path(self, target: PinTarget):
        if target.kind == "sysctl":
            if not 0 <= target.id < len(SYSCTLS):
                raise ValueError(f"sysctl #{target.id}: coremap sets only {', '.join(n for n, _ in SYSCTLS)}")
            return self.root.proc("sys", *SYSCTLS[target.id][1])
        return self.root.cpu_dir(f"cpu{int(target.id)}", "power", "pm_qos_resume_latency_us")

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        try:
            text = self.root.read_optional(self._path(target))
        except SysRootReadError:
            return None
        if text is None:
            return None
        word = text.strip()
        if word == NO_CONSTRAINT:
            return ()
        if not (word.isascii() and word.isdigit()) or int(word) > MAX_VALUE:
            raise SysRootReadError(self._path(target), f"{word[:20]!r} is not a number coremap can journal "
                                   f"(0-{MAX_VALUE} or {NO_CONSTRAINT})")
        return (int(word),)

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        if t.kind == "sysctl" and 0 <= t.id < len(SYSCTLS) and not t.label:
            t = sysctl_target(t.id)
        try:
            before = self.read(t)
        except (ValueError, SysRootReadError) as e:
            return Prepared(t, refusal=("invalid", f"{t.describe()}: {e}"))
        if before is None:
            return Prepared(t, refusal=("invalid", f"{t.describe()} does not exist on this machine (this "
                                        "kernel has no such setting)"))
        return Prepared(t, before)

    def write(self, target: PinTarget, value) -> None:
        text = str(value[0]) if value else NO_CONSTRAINT
        fd = self.root.open_for_write(self._path(target))
        try:
            os.write(fd, (text + "\n").encode())
        finally:
            os.close(fd)

    def write_privileged(self, helper, target: PinTarget, value) -> None:
        helper.set_setting(target.kind, target.id, tuple(value))

    def read_back(self, target: PinTarget, value) -> Outcome:
        return checked(target, value, self.read(target), what="reads back", why="the kernel kept another value")


def pmqos_target(cpu: int) -> PinTarget:
    return PinTarget("pmqos", int(cpu))
