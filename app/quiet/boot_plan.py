"""A plan to keep CPUs quiet across reboots: what to put on the kernel command line and in the
configuration of tuned, irqbalance and systemd. Written, never applied: the user reviews it, and the
running command line is read to say what is already in place.

Sources for the syntax and the kernel versions that honour each piece:
- Documentation/admin-guide/kernel-parameters.txt: `isolcpus=[flag-list,]<cpu-list>` with the flags
  `nohz`, `domain` and `managed_irq` (flags since Linux 4.15, commit 150dfee95feb; `managed_irq` since
  5.6, commit 11ea68f553e2); `nohz_full=<cpu-list>` (3.10, CONFIG_NO_HZ_FULL); `rcu_nocbs=<cpu-list>`
  (3.7, CONFIG_RCU_NOCB_CPU); `irqaffinity=<cpu-list>` (the default affinity of new IRQs, kernel commit
  fbf198030e0b).
- tuned's cpu-partitioning profile reads `isolated_cores=` from
  /etc/tuned/cpu-partitioning-variables.conf.
- irqbalance reads IRQBALANCE_BANNED_CPULIST (1.8 and later; older ones read the hex mask
  IRQBALANCE_BANNED_CPUS) from /etc/default/irqbalance (Debian, Ubuntu) or /etc/sysconfig/irqbalance
  (Fedora, RHEL).
- systemd: CPUAffinity= in a service's [Service] section (systemd.exec(5)) and in system.conf's
  [Manager] section for every service it starts (systemd-system.conf(5)).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from app.atomic import write_atomic
from app.errors import CoremapError, CpuListError
from app.format import cpus_word, format_cpus
from app.machine.topology import Topology
from app.parse.cpulist import format_cpumask, parse_cpulist
from app.parse.topology import parse_cmdline_isolation

ISOLCPUS_FLAGS = ("managed_irq", "domain")
SERVICE_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.@\\")


class PlanError(CoremapError):
    """A quiet set that cannot be planned (offline CPUs, no housekeeping CPU left, a bad name)."""


@dataclass(frozen=True)
class KernelParam:
    name: str                  # "isolcpus"
    value: str                 # "managed_irq,domain,2-3"
    why: str                   # what it does for a quiet CPU
    since: str                 # the kernel that honours it
    in_place: bool             # the running command line already has exactly this
    running: str | None        # what the running command line has instead, or None

    @property
    def word(self) -> str:
        return f"{self.name}={self.value}"


@dataclass(frozen=True)
class PlanFile:
    path: str                  # where it belongs on the machine ("/etc/tuned/...")
    name: str                  # its name in the plan folder
    text: str
    why: str


@dataclass(frozen=True)
class QuietPlan:
    quiet: tuple[int, ...]
    housekeeping: tuple[int, ...]
    params: tuple[KernelParam, ...]
    files: tuple[PlanFile, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cmdline_fragment(self) -> str:
        return " ".join(p.word for p in self.params)


def make_plan(topology: Topology, quiet_text: str, *, service: str | None = None) -> QuietPlan:
    """The plan for making `quiet_text` (a CPU list) quiet on the machine `topology` describes."""
    try:
        quiet = parse_cpulist(quiet_text, what="--quiet")
    except CpuListError as e:
        raise PlanError(str(e)) from None
    online = set(topology.online)
    if not quiet:
        raise PlanError("--quiet names no CPU; write CPUs like 2-5,8")
    absent = [c for c in quiet if c not in online]
    if absent:
        raise PlanError(f"--quiet: CPU{'s' if len(absent) > 1 else ''} {format_cpus(absent)} "
                        f"{'are' if len(absent) > 1 else 'is'} not online; choose among {format_cpus(sorted(online))}")
    housekeeping = tuple(sorted(online - set(quiet)))
    if not housekeeping:
        raise PlanError(f"--quiet {format_cpus(quiet)} leaves no CPU for the kernel's own work and every other "
                        "task; keep at least one (CPU 0 is the usual choice)")
    if service is not None and (not service or set(service) - SERVICE_NAME_CHARS or len(service) > 200):
        raise PlanError(f"--service {service[:40]!r}: a systemd unit name is letters, digits and :-_.@\\ only")
    running = parse_cmdline_isolation(topology.cmdline or "")
    params = _params(quiet, housekeeping, running, topology.cmdline or "")
    files = _files(quiet, housekeeping, service)
    return QuietPlan(quiet, housekeeping, params, files, tuple(_notes(topology, quiet, housekeeping)))


def _params(quiet, housekeeping, running, cmdline: str) -> tuple[KernelParam, ...]:
    q, hk = format_cpus(quiet), format_cpus(housekeeping)
    iso_now = None
    if running.isolcpus is not None:
        iso_now = ",".join([*running.isolcpus_flags, format_cpus(running.isolcpus)])
    wanted_iso = ",".join([*ISOLCPUS_FLAGS, q])
    irqaff_now = _word(cmdline, "irqaffinity")
    return (
        KernelParam("isolcpus", wanted_iso,
                    "domain: the scheduler never balances tasks onto these CPUs (only tasks pinned there run "
                    "there); managed_irq: drivers that spread their own queue IRQs (NVMe, many NICs) keep them "
                    "off these CPUs where the queue also has a housekeeping CPU",
                    "flags since Linux 4.15; managed_irq since 5.6",
                    _same_isolcpus(running, quiet), iso_now),
        KernelParam("nohz_full", q,
                    "stop the scheduler tick on a CPU that runs one task (needs CONFIG_NO_HZ_FULL); the boot CPU "
                    "is never nohz_full", "Linux 3.10",
                    running.nohz_full is not None and tuple(running.nohz_full) == tuple(quiet),
                    format_cpus(running.nohz_full) if running.nohz_full is not None else None),
        KernelParam("rcu_nocbs", q,
                    "run RCU callbacks of these CPUs in kthreads on the housekeeping CPUs (CONFIG_RCU_NOCB_CPU)",
                    "Linux 3.7",
                    running.rcu_nocbs is not None and tuple(running.rcu_nocbs) == tuple(quiet),
                    format_cpus(running.rcu_nocbs) if running.rcu_nocbs is not None else None),
        KernelParam("irqaffinity", hk,
                    "every IRQ starts on the housekeeping CPUs (the default mask), so none lands on a quiet "
                    "CPU before irqbalance or coremap move it", "kernel commit fbf198030e0b",
                    irqaff_now is not None and _same_list(irqaff_now, housekeeping), irqaff_now),
    )


def _files(quiet, housekeeping, service: str | None) -> tuple[PlanFile, ...]:
    q, hk = format_cpus(quiet), format_cpus(housekeeping)
    files = [
        PlanFile("/etc/tuned/cpu-partitioning-variables.conf", "cpu-partitioning-variables.conf",
                 f"# coremap plan: CPUs {q} quiet, {hk} for housekeeping\nisolated_cores={q}\n",
                 "tuned's cpu-partitioning profile (`tuned-adm profile cpu-partitioning`) isolates these "
                 "cores and adds the kernel parameters above through its bootloader plugin"),
        PlanFile("/etc/default/irqbalance (Debian, Ubuntu) or /etc/sysconfig/irqbalance (Fedora, RHEL)",
                 "irqbalance", f"# coremap plan: irqbalance never moves an IRQ onto the quiet CPUs\n"
                 f"IRQBALANCE_BANNED_CPULIST={q}\n# irqbalance before 1.8 reads a hex mask instead:\n"
                 f"# IRQBALANCE_BANNED_CPUS={format_cpumask(quiet)}\n",
                 "irqbalance otherwise spreads IRQs back over every CPU, quiet ones included"),
        PlanFile("/etc/systemd/system.conf.d/coremap-housekeeping.conf", "coremap-housekeeping.conf",
                 f"# coremap plan: services systemd starts run on the housekeeping CPUs\n[Manager]\n"
                 f"CPUAffinity={hk.replace(',', ' ')}\n",
                 "every service and its children start off the quiet CPUs"),
    ]
    if service:
        unit = service if "." in service else f"{service}.service"
        files.append(PlanFile(f"/etc/systemd/system/{unit}.d/coremap-cpuaffinity.conf",
                              f"{unit}.coremap-cpuaffinity.conf",
                              f"# coremap plan: {unit} runs on the quiet CPUs\n[Service]\n"
                              f"CPUAffinity={q.replace(',', ' ')}\n",
                              f"{unit} (the latency-critical service) starts on the quiet CPUs; pin its "
                              "busiest threads one to a CPU from there"))
    return tuple(files)


def _notes(topology: Topology, quiet, housekeeping) -> list[str]:
    notes = []
    if 0 in quiet:
        notes.append("CPU 0 is in the quiet set: on x86 the boot CPU keeps its tick (nohz_full skips it) "
                     "and takes some global timers; a quiet set without CPU 0 works better")
    cores = {c: k for k in topology.cores for c in k.cpus}
    split = sorted({c for c in quiet if c in cores for s in cores[c].cpus if s not in quiet})
    if split:
        notes.append(f"{cpus_word(split)}: each shares a core with a housekeeping CPU, whose work slows its "
                     "hyperthread sibling down; quiet whole cores")
    if topology.isolated and set(topology.isolated) != set(quiet):
        notes.append(f"the running kernel already isolates CPUs {format_cpus(topology.isolated)}")
    return notes


def _word(cmdline: str, key: str) -> str | None:
    value = None
    for word in cmdline.split():
        k, sep, v = word.partition("=")
        if sep and k == key:
            value = v               # the last occurrence wins, as for __setup() parameters
    return value


def _same_list(text: str, cpus) -> bool:
    try:
        return parse_cpulist(text) == tuple(cpus)
    except CpuListError:
        return False


def _same_isolcpus(running, quiet) -> bool:
    return (running.isolcpus is not None and tuple(running.isolcpus) == tuple(quiet)
            and set(ISOLCPUS_FLAGS) <= set(running.isolcpus_flags))


def plan_text(plan: QuietPlan) -> str:
    """The plan as the CLI prints it."""
    out = [f"Plan: CPUs {format_cpus(plan.quiet)} quiet, CPUs {format_cpus(plan.housekeeping)} for housekeeping.",
           "Nothing is applied; review it, then add the pieces below.", "",
           "Kernel command line (add to GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub or "
           "grub2-mkconfig, and reboot):", f"    {plan.cmdline_fragment}", ""]
    for p in plan.params:
        state = "already in place" if p.in_place else \
            (f"running kernel has {p.name}={p.running}" if p.running is not None else "not set now")
        out.append(f"  {p.word}")
        out.append(f"      {p.why}")
        out.append(f"      honoured by: {p.since}; {state}")
    for f in plan.files:
        out += ["", f"{f.path}:", f"  ({f.why})"]
        out += [f"    {line}" for line in f.text.rstrip("\n").split("\n")]
    if plan.notes:
        out.append("")
        out += [f"Note: {n}" for n in plan.notes]
    return "\n".join(out) + "\n"


def write_plan_folder(folder: Path, plan: QuietPlan) -> None:
    """The plan as files in `folder` (created): cmdline.txt, plan.txt and one file per piece."""
    if folder.exists() and not folder.is_dir():
        raise CoremapError(f"{folder}: not a folder; give a folder for the plan's files")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CoremapError(f"{folder}: cannot create it ({os.strerror(e.errno or 0)})") from None
    write_atomic(folder / "cmdline.txt", (plan.cmdline_fragment + "\n").encode())
    write_atomic(folder / "plan.txt", plan_text(plan).encode())
    for f in plan.files:
        write_atomic(folder / f.name, f.text.encode())
