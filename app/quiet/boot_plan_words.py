"""The by-hand route's kernel command line words (app/quiet/boot_plan.py), each against the running
command line: CPU lists merged with what is there unless the user asks to replace them, the words
the running line has that would undo the plan (systemd.cpu_affinity=, tuned.non_isolcpus=) changed
with the rest, and the boot words tuned's cpu-partitioning profile and the network-latency profile it
includes add, each with why (issue 30, wrong answer 1 and "tuned's knobs, where they belong").

Sources:
- Documentation/admin-guide/kernel-parameters.txt for every word's syntax; a word given twice counts
  as its last occurrence, as for __setup() parameters.
- kernel-command-line(7): systemd.cpu_affinity= "overrides the CPU affinity mask for the service
  manager and the default for all child processes", the same list as CPUAffinity= in
  systemd-system.conf(5), which the command line wins over.
- tuned's profiles/cpu-partitioning/00-tuned-pre-udev.sh (also in RHCOS's initrd): reads
  tuned.non_isolcpus= (a hex CPU mask) and writes it to /sys/devices/virtual/workqueue/cpumask, so
  unbound kernel work runs only on those CPUs.
- kernel/time/clocksource.c: the clocksource watchdog checks the TSC against a slower clock from a
  timer that moves to the next online CPU each time it fires; tsc=reliable (arch/x86/kernel/tsc.c)
  marks the TSC as needing no watchdog.
- kernel/watchdog.c: the soft-lockup detector's per-CPU hrtimer fires every 2/5 of watchdog_thresh
  (4 s by default); nosoftlockup turns the detector off.
"""
from __future__ import annotations

from dataclasses import dataclass

from app.errors import CpuListError
from app.format import cpus_word, format_cpus
from app.machine.boot import Clocksource
from app.parse.cpulist import format_cpumask, parse_cpulist, parse_cpumask

# The flags the plan asks of isolcpus=: the scheduler leaves the CPUs alone (domain), and drivers'
# managed queue IRQs keep off them (managed_irq).
ISOLCPUS_FLAGS = ("managed_irq", "domain")
# Clocksources of a virtual machine's host: the TSC is not what the kernel reads time from there.
VM_CLOCKS = ("kvm-clock", "xen", "hyperv_clocksource_tsc_page", "hyperv_clocksource_msr", "vmware-tsc")


@dataclass(frozen=True)
class KernelParam:
    name: str                  # "isolcpus"
    value: str                 # "managed_irq,domain,2-3"; "" for a word without "=" (nosoftlockup)
    why: str                   # what it does for a quiet CPU
    since: str                 # the kernel that honours it
    in_place: bool             # the running kernel already has this (spelt the same or not)
    running: str | None        # the running command line's value, exactly as written, or None
    needs: str | None = None   # the build option it needs ("CONFIG_NO_HZ_FULL")
    ignored: bool = False      # the running kernel is known to be built without `needs`
    conflict: str | None = None    # why the running command line's word works against the plan

    @property
    def word(self) -> str:
        return f"{self.name}={self.value}" if self.value else self.name

    @property
    def running_word(self) -> str | None:
        if self.running is None:
            return None
        return f"{self.name}={self.running}" if self.running else self.name


@dataclass(frozen=True)
class LeftOut:
    """A word tuned's profiles add that this plan leaves out here, and why."""
    word: str
    why: str


def running_value(cmdline: str, key: str) -> str | None:
    """The value of `key` on the command line (its last occurrence), "" for a bare word, or None."""
    value = None
    for word in cmdline.split():
        if word == "--":
            break               # what follows is init's arguments, not the kernel's (init/main.c)
        k, sep, v = word.partition("=")
        if k == key:
            value = v if sep else ""
    return value


def running_cpus(cmdline: str, key: str) -> tuple[int, ...] | None:
    """The CPUs of the running `key`= (isolcpus= without its flags; tuned.non_isolcpus= is a hex
    mask), or None when it is absent or not a CPU list (then the plan writes its own in its place)."""
    text = running_value(cmdline, key)
    if not text:
        return None
    if key == "isolcpus":
        text = ",".join(text.split(",")[len(running_flags(cmdline)):])
    try:
        return parse_cpumask(text, what=key) if key == "tuned.non_isolcpus" else parse_cpulist(text, what=key)
    except CpuListError:
        return None


def running_flags(cmdline: str) -> tuple[str, ...]:
    """The flags of the running isolcpus= ("managed_irq", "domain", "nohz"), in the order written."""
    flags = []
    for part in (running_value(cmdline, "isolcpus") or "").split(","):
        if not part[:1].isalpha():
            break
        flags.append(part)
    return tuple(flags)


def kept_cpus(cmdline: str, boot_cpu: int, online) -> tuple[int, ...]:
    """The CPUs the running command line already isolates (isolcpus=, and nohz_full= less the boot
    CPU, which the kernel drops from it), among those online: a plan that adds CPUs keeps these."""
    kept = set(running_cpus(cmdline, "isolcpus") or ())
    kept |= set(running_cpus(cmdline, "nohz_full") or ()) - {boot_cpu}
    return tuple(sorted(kept & set(online)))


def isolcpus_param(isolated, asked, cmdline: str, *, merge: bool) -> KernelParam:
    """isolcpus= for `isolated` (the CPUs `asked` for and those kept), the running word's flags kept."""
    running = running_value(cmdline, "isolcpus")
    now, flags_now = running_cpus(cmdline, "isolcpus"), running_flags(cmdline)
    flags = [*(flags_now if merge and now is not None else ()), *ISOLCPUS_FLAGS]
    value = ",".join([*dict.fromkeys(flags), format_cpus(isolated)])
    in_place = now is not None and set(now) == set(isolated) and set(ISOLCPUS_FLAGS) <= set(flags_now)
    conflict = None
    if running is not None and not in_place:
        conflict = _list_conflict("isolates", now, isolated, asked, merge, "ends the isolation of {lost}")
        added = [f for f in ISOLCPUS_FLAGS if f not in flags_now]
        if now and merge and "domain" in added:
            conflict += (f"; it adds the domain flag, so the scheduler also stops balancing tasks onto "
                         f"{format_cpus(now)}, which it does now (kernel/sched/isolation.c)")
    return KernelParam("isolcpus", value,
                       "domain: the scheduler never balances tasks onto these CPUs (only tasks pinned there run "
                       "there); managed_irq: drivers that spread their own queue IRQs (NVMe, many NICs) keep them "
                       "off these CPUs where the queue also has a housekeeping CPU",
                       "flags since Linux 4.15; managed_irq since 5.6", in_place, running, conflict=conflict)


def quiet_list_param(name: str, cpus, asked, cmdline: str, *, merge: bool, boot_cpu: int | None, why: str,
                     since: str, needs: str, ignored: bool) -> KernelParam:
    """nohz_full= or rcu_nocbs= for `cpus`, merged with the running word's CPUs unless replacing.
    `boot_cpu`: the CPU the kernel drops from this list itself (nohz_full=), so one that has it or
    not is the same list; the plan never writes it there."""
    running, now = running_value(cmdline, name), running_cpus(cmdline, name)
    if running == "" and name == "rcu_nocbs":
        # A bare rcu_nocbs offloads every CPU (kernel-parameters.txt, 5.17 and later): kept as it is.
        return KernelParam(name, "", why + "; the running bare rcu_nocbs offloads every CPU, kept", since, True,
                           running, needs, ignored)
    drop = {boot_cpu} if boot_cpu is not None else set()
    value = (set(cpus) | (set(now) if merge and now else set())) - drop
    in_place = now is not None and set(now) - drop == value - drop
    conflict = None
    if running is not None and not in_place:
        conflict = _list_conflict(f"{'stops the tick' if name == 'nohz_full' else 'offloads RCU callbacks'} on",
                                  None if now is None else tuple(sorted(set(now) - drop)), cpus,
                                  sorted(set(asked) - drop), merge,
                                  "gives the tick back to {lost}" if name == "nohz_full" else
                                  "runs RCU callbacks on {lost} again")
    return KernelParam(name, format_cpus(sorted(value)), why, since, in_place, running, needs, ignored,
                       conflict)


def _list_conflict(does: str, now, cpus, asked, merge: bool, loses: str) -> str:
    """Why a running CPU list differs from the plan's `cpus` (the CPUs `asked` for, and in a merge
    the running ones kept)."""
    if now is None:
        return "not a CPU list the plan can read: the plan writes its own in its place"
    new, lost = sorted(set(cpus) - set(now)), sorted(set(now) - set(asked))
    if merge:
        text = f"{does} {format_cpus(now)} now, not {format_cpus(new)}: the plan keeps {format_cpus(now)} and adds " \
               f"{format_cpus(new)}"
        return text + (f" (--replace would write {format_cpus(asked)} alone, which "
                       f"{loses.format(lost=cpus_word(lost))})" if lost else "")
    text = f"{does} {format_cpus(now)} now; --replace writes {format_cpus(cpus)} in its place"
    return text + (f", which {loses.format(lost=cpus_word(lost))}" if lost else "")


def housekeeping_param(name: str, housekeeping, isolated, cmdline: str, *, merge: bool, why: str,
                       since: str, overlap_says: str) -> KernelParam:
    """A word that lists the CPUs left for housekeeping (irqaffinity=, systemd.cpu_affinity=,
    tuned.non_isolcpus=): the running word's CPUs less the quiet ones unless replacing, else (or
    when none would be left) the housekeeping CPUs."""
    running, now = running_value(cmdline, name), running_cpus(cmdline, name)
    kept = sorted(set(now or ()) - set(isolated)) if merge else []
    cpus = tuple(kept or housekeeping)
    value = format_cpumask(cpus) if name == "tuned.non_isolcpus" else format_cpus(cpus)
    in_place = now is not None and set(now) == set(cpus)
    conflict = None
    if running is not None and not in_place:
        overlap = sorted(set(now or ()) & set(isolated))
        conflict = (f"{overlap_says.format(now=format_cpus(now), overlap=format_cpus(overlap))}; the plan writes "
                    f"{name}={value}" if overlap else
                    f"the plan writes {name}={value} in its place" + ("" if merge else " (--replace)"))
    return KernelParam(name, value, why, since, in_place, running, conflict=conflict)


def tuned_params(cmdline: str, clock: Clocksource, *, intel_pstate: bool) -> tuple[list[KernelParam], list[LeftOut]]:
    """The boot words tuned's cpu-partitioning profile (with network-latency, which it includes) adds
    to the command line, for the by-hand route; tsc=reliable only where the TSC is the clocksource,
    intel_pstate=disable only when asked."""
    words = [("nohz", "on", "idle CPUs stop their tick (the kernel's default where built with NO_HZ; "
                            "written so that a distribution's nohz=off cannot win)", "Linux 2.6.21"),
             ("skew_tick", "1", "each CPU's tick fires at its own offset, so the CPUs do not all contend "
                                "for the timekeeping and RCU locks at the same instant", "Linux 3.5"),
             ("rcupdate.rcu_normal_after_boot", "1", "once booted, expedited RCU grace periods run as normal "
                                                     "ones, which send no IPI to every CPU", "Linux 4.6")]
    left: list[LeftOut] = []
    tsc_why = _tsc_left_out(clock)
    if tsc_why is None:
        words.append(("tsc", "reliable", "the kernel trusts the TSC it reads time from, so the clocksource "
                                         "watchdog, whose timer moves from CPU to CPU over every online one, "
                                         "the quiet ones too, stops", "Linux 2.6.28"))
    else:
        left.append(LeftOut("tsc=reliable", tsc_why))
    words.append(("nosoftlockup", "", "no soft-lockup detector: its hrtimer fires every 4 s on every CPU "
                                      "nohz_full= does not cover", "every kernel with the soft-lockup detector"))
    if intel_pstate:
        words.append(("intel_pstate", "disable", "acpi-cpufreq instead of the CPU choosing its own frequency "
                                                 "(HWP): the performance governor then holds one frequency; "
                                                 "ignored on CPUs that are not Intel's", "Linux 3.9"))
    else:
        left.append(LeftOut("intel_pstate=disable", "only with --intel-pstate-disable: it trades the CPU's own "
                                                    "frequency control for acpi-cpufreq's fixed one, a choice "
                                                    "tuned makes and this plan leaves to you"))
    out = []
    for name, value, why, since in words:
        running = running_value(cmdline, name)
        conflict = (f"the plan writes {name}={value} in its place"
                    if running is not None and running != value and value else None)
        out.append(KernelParam(name, value, why, since, running == value, running, conflict=conflict))
    return out, left


def _tsc_left_out(clock: Clocksource) -> str | None:
    """Why tsc=reliable is left out on this machine, or None where the TSC is the clocksource."""
    where = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
    if clock.current == "tsc":
        return None
    if clock.current is None:
        return (f"whether the TSC is the clocksource is not known ({where} was not read): add it only where that "
                "file reads tsc")
    if clock.current in VM_CLOCKS:
        return (f"the clocksource is {clock.current}, a virtual machine's: the kernel does not read time from "
                "the TSC here, and vouching for a TSC that may jump when the host moves the VM is the host "
                "owner's call")
    if "tsc" in clock.available or clock.current in ("hpet", "acpi_pm"):
        return (f"the kernel reads time from {clock.current}, not the TSC (it found the TSC unstable, or "
                "lacks one): tsc=reliable would overrule that")
    return f"the clocksource is {clock.current}: there is no TSC to vouch for"
