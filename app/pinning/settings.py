"""The kernel settings a quiet CPU wants besides masks, as writers of the pin flow (scalar kinds of
app/pinning/kinds.py): journalled with their old value, written, read back, and given back by undo,
include and restore like any pin. Where a setting is absent (a kernel without it, a CPU without
cpufreq) nothing is journalled and nothing is written, so nothing is restored either.

  sysctl   one of SYSCTLS, by its index (the journal never names a path): what tuned's
           cpu-partitioning profile sets at run time (profiles/cpu-partitioning/tuned.conf [sysctl]):
             kernel.timer_migration = 0   timers stay on the CPU that armed them, so a housekeeping
                                          CPU's timers are not pulled onto a quiet one
                                          (Documentation/admin-guide/sysctl/kernel.rst)
             vm.stat_interval = 10        the per-CPU vmstat update runs every 10 s, not every 1 s
                                          (Documentation/admin-guide/sysctl/vm.rst)
           and kernel.watchdog_cpumask (a CPU set: kind "watchdog", app/pinning/masks.py) keeps the
           lockup detectors on housekeeping CPUs instead of turning them off as tuned does with
           nmi_watchdog = 0. Then the knobs an isolate sets only where asked (app/quiet/knobs.py):
           kernel.hung_task_timeout_secs, kernel.numa_balancing, kernel.sched_rt_runtime_us
           (Documentation/admin-guide/sysctl/kernel.rst, scheduler/sched-rt-group.rst) and KSM's
           run (sys/kernel/mm/ksm/run, Documentation/admin-guide/mm/ksm.rst).
  thp      sys/kernel/mm/transparent_hugepage/enabled: "always [madvise] never", the bracketed word
           in force (Documentation/admin-guide/mm/transhuge.rst)
  pmqos    sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us: the resume latency a CPU's
           idle governor must honour (Documentation/admin-guide/pm/cpuidle.rst, "Power Management
           Quality of Service for CPUs"); 0 keeps it out of deep idle states, "n/a" (value ()) is no
           constraint. Optional: a quiet CPU that sleeps deep wakes slowly, one that never does burns
           power.
  governor sys/devices/system/cpu/cpuN/cpufreq/scaling_governor (a link to its policy's folder:
           the write sets every CPU of that policy; Documentation/admin-guide/pm/cpufreq.rst)
  epb      sys/devices/system/cpu/cpuN/power/energy_perf_bias: 0 (performance) to 15 (power saving)
           (Documentation/admin-guide/pm/intel_epb.rst); Intel only
  dmalatency  /dev/cpu_dma_latency held at a latency by coremap's guard while it runs
           (Documentation/power/pm_qos_interface.rst: the request lasts as long as the file is open,
           so no write can leave it behind). Its value is what the journal asks for: the newest write
           of it that happened (DmaLatencyWriter); app/quiet/guard.py opens and closes the file.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from app.errors import SysRootReadError
from app.format import GOVERNORS, THP_MODES, WIDE_LIMIT, number_value, value_number
from app.pinning.kinds import CPU_SCALAR_KINDS
from app.pinning.targets import PinTarget
from app.pinning.writers import Outcome, Prepared, Step, checked
from app.sysroot import SysRoot


@dataclass(frozen=True)
class Sysctl:
    name: str                        # what the user knows it by: "kernel.numa_balancing"
    parts: tuple[str, ...]           # its path under the root: ("proc", "sys", "kernel", "numa_balancing")
    lo: int = 0                      # the values the kernel takes
    hi: int = 65535


# The index is what a journal records: append only.
SYSCTLS = (Sysctl("kernel.timer_migration", ("proc", "sys", "kernel", "timer_migration"), 0, 1),
           Sysctl("vm.stat_interval", ("proc", "sys", "vm", "stat_interval")),
           Sysctl("kernel.hung_task_timeout_secs", ("proc", "sys", "kernel", "hung_task_timeout_secs"),
                  0, WIDE_LIMIT - 1),
           Sysctl("kernel.numa_balancing", ("proc", "sys", "kernel", "numa_balancing"), 0, 3),
           Sysctl("kernel.sched_rt_runtime_us", ("proc", "sys", "kernel", "sched_rt_runtime_us"),
                  -1, WIDE_LIMIT // 2 - 1),
           Sysctl("KSM (mm/ksm/run)", ("sys", "kernel", "mm", "ksm", "run"), 0, 2))
# What an isolate sets them to (tuned's cpu-partitioning values).
QUIET_SYSCTLS = {0: 0, 1: 10}
NO_CONSTRAINT = "n/a"
MAX_EPB = 15
# The latency a held /dev/cpu_dma_latency may ask for (µs); a journal value holds 0-65535.
MAX_LATENCY = 65535


def sysctl_index(name: str) -> int:
    return next(i for i, s in enumerate(SYSCTLS) if s.name == name)


def sysctl_target(index: int) -> PinTarget:
    return PinTarget("sysctl", index, None, SYSCTLS[index].name)


def valid_scalar(kind: str, ident: int, value) -> bool:
    """Whether `value` is one a scalar kind's target can be set to (the one rule: the pin flow's checks
    and the privileged helper ask it)."""
    value = tuple(value)
    if kind == "sysctl":
        n = value_number(value)
        return 0 <= ident < len(SYSCTLS) and n is not None and SYSCTLS[ident].lo <= n <= SYSCTLS[ident].hi
    if kind == "pmqos":
        return not value or (len(value) == 1 and 0 <= value[0] <= 65535)
    if kind in ("thp", "governor"):
        words = THP_MODES if kind == "thp" else GOVERNORS
        return (ident == 0 or kind == "governor") and len(value) == 1 and 0 <= value[0] < len(words)
    if kind == "epb":
        return len(value) == 1 and 0 <= value[0] <= MAX_EPB
    if kind == "dmalatency":
        return ident == 0 and (not value or (len(value) == 1 and 0 <= value[0] <= MAX_LATENCY))
    return False


class ScalarWriter:
    """sysctl, thp, pmqos, governor and epb: one number or word in one file."""

    def __init__(self, root: SysRoot):
        self.root = root

    def _path(self, target: PinTarget):
        kind, ident = target.kind, int(target.id)
        if kind == "sysctl":
            if not 0 <= ident < len(SYSCTLS):
                raise ValueError(f"sysctl #{ident}: coremap sets only {', '.join(s.name for s in SYSCTLS)}")
            return self.root.path(*SYSCTLS[ident].parts)
        if kind == "thp":
            return self.root.sys("kernel", "mm", "transparent_hugepage", "enabled")
        if kind not in CPU_SCALAR_KINDS:
            raise ValueError(f"{kind} is not a setting of one file")
        cpu = f"cpu{ident}"
        if kind == "governor":
            return self.root.cpu_dir(cpu, "cpufreq", "scaling_governor")
        return self.root.cpu_dir(cpu, "power", "pm_qos_resume_latency_us" if kind == "pmqos" else "energy_perf_bias")

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        """The value now; None when the setting is absent; SysRootReadError when it holds what coremap
        cannot journal (and so could not give back)."""
        try:
            text = self.root.read_optional(self._path(target))
        except SysRootReadError:
            return None
        if text is None:
            return None
        return self._parse(target, text.strip())

    def _parse(self, target: PinTarget, word: str) -> tuple[int, ...]:
        kind = target.kind
        if kind == "pmqos" and word == NO_CONSTRAINT:
            return ()
        if kind == "thp":
            # "always [madvise] never": the bracketed word is the mode in force; a file that holds one
            # word (a test tree's, after coremap wrote it) holds that mode.
            words = word.split()
            mode = next((w[1:-1] for w in words if w.startswith("[") and w.endswith("]")),
                        words[0] if len(words) == 1 else "")
            if mode in THP_MODES:
                return (THP_MODES.index(mode),)
        elif kind == "governor":
            if word in GOVERNORS:
                return (GOVERNORS.index(word),)
        else:
            digits = word[1:] if word.startswith("-") else word
            if digits.isascii() and digits.isdigit() and len(digits) <= 10:
                n = int(word)
                ok = (valid_scalar(kind, target.id, number_value(n)) if abs(n) < WIDE_LIMIT and kind != "pmqos"
                      else 0 <= n <= 65535)
                if ok:
                    return number_value(n)
        raise SysRootReadError(self._path(target), f"{word[:40]!r} is not a value coremap can journal and give "
                               "back; left alone")

    def text(self, target: PinTarget, value) -> str:
        """What is written to the file for `value`."""
        if target.kind == "thp":
            return THP_MODES[value[0]]
        if target.kind == "governor":
            return GOVERNORS[value[0]]
        return str(value_number(value)) if value else NO_CONSTRAINT

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
        fd = self.root.open_for_write(self._path(target))
        try:
            os.write(fd, (self.text(target, value) + "\n").encode())
        finally:
            os.close(fd)

    def write_privileged(self, helper, target: PinTarget, value) -> None:
        helper.set_setting(target.kind, target.id, tuple(value))

    def read_back(self, target: PinTarget, value) -> Outcome:
        return checked(target, value, self.read(target), what="reads back", why="the kernel kept another value")


def held_latency(entries) -> tuple[int, ...]:
    """The latency the journal asks coremap's guard to hold /dev/cpu_dma_latency at: the newest write of
    it that happened (an isolate's, or the undo, give-back or restore that set it back to ()), in
    `entries` of one machine, oldest first (Ledger.entries)."""
    for e in reversed(entries):
        if e.kind == "dmalatency" and e.state == "done":
            return tuple(e.after if e.after is not None else e.requested)
    return ()


class DmaLatencyWriter:
    """dmalatency: the request is the journal line the flow writes; coremap's guard acts on it (opens
    /dev/cpu_dma_latency and writes the latency while it runs, closes it when the request ends or the
    guard stops). `entries()` returns this machine's journal entries (Ledger.entries)."""

    def __init__(self, root: SysRoot, entries: Callable[[], tuple] | None = None):
        self.root = root
        self._entries = entries or (lambda: ())
        self._seen: tuple[object, tuple[int, ...]] | None = None

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        if not self.root.exists(latency_path(self.root)):
            return None
        entries = self._entries()
        # The guard reads it every tick: the entries are worked out again only when the journal grew
        # (AffinityService.ledger() hands back the same tuple until then), not walked each time.
        if self._seen is None or self._seen[0] is not entries:
            self._seen = (entries, held_latency(entries))
        return self._seen[1]

    def prepare(self, step: Step) -> Prepared:
        before = self.read(step.target)
        if before is None:
            return Prepared(step.target, refusal=("invalid", f"{step.target.describe()} does not exist on this "
                                                  "machine (a kernel without CPU latency QoS)"))
        return Prepared(step.target, before)

    def write(self, target: PinTarget, value) -> None:
        """Nothing to write to the machine: the journal line is the request (see the class docstring)."""

    def write_privileged(self, helper, target: PinTarget, value) -> None:
        """As write: nothing needs privilege here (the guard, run as root, opens the file)."""

    def read_back(self, target: PinTarget, value) -> Outcome:
        return Outcome("ok", "", tuple(value), done=True)


def latency_path(root: SysRoot):
    return root.path("dev", "cpu_dma_latency")


def hold_latency(root: SysRoot, usec: int) -> int:
    """Open /dev/cpu_dma_latency and ask for `usec` µs: the request holds until the fd is closed
    (Documentation/power/pm_qos_interface.rst: a binary s32 written to the open file). OSError
    (EACCES: only root may open it) to the caller."""
    fd = root.open_for_write(latency_path(root))
    try:
        os.write(fd, struct.pack("i", int(usec)))
    except OSError:
        os.close(fd)
        raise
    return fd


def pmqos_target(cpu: int) -> PinTarget:
    return PinTarget("pmqos", int(cpu))
