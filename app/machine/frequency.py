"""Each CPU's current frequency: cpufreq's scaling_cur_freq where there is a cpufreq driver, else the
APERF and MPERF counters where this process may read them (issue 22).

scaling_cur_freq (Documentation/admin-guide/pm/cpufreq.rst) is kHz. APERF counts at the actual clock
and MPERF at the TSC's while the CPU runs (not in idle), so over an interval the busy frequency is the
TSC rate times dAPERF / dMPERF (Intel SDM vol. 3B 14.2, "Hardware Feedback for P-state"; turbostat's
Bzy_MHz); they are MSRs 0xE8 and 0xE7, the TSC 0x10, read through /dev/cpu/N/msr (root, the msr
module). Reading an MSR of another CPU interrupts it (the kernel runs rdmsr there), so `msr_cpus`
names the CPUs a caller is willing to disturb: the sampler leaves out isolated and nohz_full CPUs.
"""
from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field

from app.sysroot import SysRoot

MSR_TSC, MSR_MPERF, MSR_APERF = 0x10, 0xE7, 0xE8


@dataclass(frozen=True)
class FreqSample:
    time: float                                                 # monotonic seconds
    khz: dict[int, int] = field(default_factory=dict)           # scaling_cur_freq
    msr: dict[int, tuple[int, int, int]] = field(default_factory=dict)   # (tsc, aperf, mperf)
    msr_why: str = ""                                           # why no MSR was read, where none was


def read_frequency(root: SysRoot, cpus, *, msr_cpus=(), clock=time.monotonic) -> FreqSample:
    """scaling_cur_freq of `cpus` (those that have one); where none has it, APERF/MPERF of `msr_cpus`."""
    now = clock()
    khz = {}
    for cpu in cpus:
        v = root.read_int(root.cpu_dir(f"cpu{cpu}", "cpufreq", "scaling_cur_freq"))
        if v:
            khz[cpu] = v
    if khz or not msr_cpus:
        return FreqSample(now, khz)
    msr, why = read_msrs(root, msr_cpus)
    return FreqSample(now, khz, msr, why)


def read_msrs(root: SysRoot, cpus) -> tuple[dict[int, tuple[int, int, int]], str]:
    """({cpu: (tsc, aperf, mperf)}, why none was read)."""
    if not root.is_live:
        return {}, "a capture has no MSRs"
    out = {}
    why = ""
    for cpu in cpus:
        try:
            fd = os.open(root.path("dev", "cpu", str(cpu), "msr"), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return {}, "no /dev/cpu/N/msr (load the msr module: modprobe msr)"
        except PermissionError:
            return {}, "/dev/cpu/N/msr is root's (and needs CAP_SYS_RAWIO)"
        try:
            out[cpu] = tuple(struct.unpack("<Q", os.pread(fd, 8, reg))[0] for reg in (MSR_TSC, MSR_APERF, MSR_MPERF))
        except OSError as e:
            # EIO: this CPU has no APERF/MPERF (a VM that does not pass them through)
            why = f"APERF/MPERF unreadable ({os.strerror(e.errno)}): this CPU or hypervisor does not offer them"
        finally:
            os.close(fd)
    return out, why if not out else ""


def busy_mhz(before: tuple[int, int, int], after: tuple[int, int, int], seconds: float) -> float | None:
    """The frequency while running over an interval: TSC rate x dAPERF / dMPERF, in MHz."""
    tsc, aperf, mperf = (b - a for a, b in zip(before, after))
    if seconds <= 0 or tsc <= 0 or mperf <= 0 or aperf < 0:
        return None
    return tsc / seconds * aperf / mperf / 1e6
