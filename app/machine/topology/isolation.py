"""Which CPUs are isolated and nohz_full: the cpu/isolated and cpu/nohz_full files, or the kernel
command line's isolcpus= and nohz_full= where those files are missing
(Documentation/admin-guide/kernel-parameters.txt, kernel/sched/isolation.c).

"Isolated" means what the scheduler leaves alone: cpu/isolated lists the CPUs outside the
housekeeping domain (drivers/base/cpu.c print_cpus_isolated), which isolcpus= takes out only with
its domain flag or with no flag at all. isolcpus=managed_irq,... keeps managed IRQs off its CPUs and
isolcpus=nohz,... their tick, but the scheduler still balances onto them (issue 30: worker1, booted
with isolcpus=managed_irq,0-4,11-79, was badged "iso"). The flags that do apply are kept apart
(Topology.isolcpus and isolcpus_flags, and isolation_of for one CPU).
"""
from __future__ import annotations

from dataclasses import dataclass

from app.machine.topology.files import read_list
from app.parse.cpulist import format_cpulist
from app.parse.topology import CmdlineIsolation, parse_cmdline_isolation
from app.sysroot import SysRoot


@dataclass(frozen=True)
class Isolation:
    cmdline: str | None
    isolated: tuple[int, ...]          # the scheduler leaves them alone (the domain flag)
    nohz_full: tuple[int, ...]
    isolcpus_flags: tuple[str, ...]
    isolcpus: tuple[int, ...] = ()     # the CPUs isolcpus= names, whatever its flags


def isolation_label(flags: tuple[str, ...]) -> str:
    """How the window and the commands name a CPU's isolation (Topology.isolation_of): "isolated
    (domain, managed_irq, nohz_full)" where the scheduler leaves it alone, else the flags that apply
    ("managed_irq, nohz_full"); "" for none."""
    if "domain" in flags:
        return f"isolated ({', '.join(flags)})"
    return ", ".join(flags)


def read_isolation(root: SysRoot, notes: list) -> Isolation:
    """cpu/isolated and cpu/nohz_full, or the kernel command line's isolcpus= and nohz_full= where
    the files are not there (worker1's capture has no cpu/isolated)."""
    cmdline_text = root.read_optional(root.proc("cmdline"))
    cmdline = cmdline_text.replace("\0", " ").strip() if cmdline_text is not None else None
    cmd = parse_cmdline_isolation(cmdline) if cmdline else None
    named = cmd.isolcpus if cmd is not None and cmd.isolcpus is not None else None
    flags = cmd.isolcpus_flags if named is not None else ()
    isolated = read_list(root, root.cpu_dir("isolated"))
    if isolated is None:
        isolated = cmd.scheduler_isolated if cmd is not None else ()
        if named is not None:
            notes.append(_from_cmdline_note(cmd))
    nohz = read_list(root, root.cpu_dir("nohz_full"))
    if nohz is None:
        if cmd and cmd.nohz_full is not None:
            nohz = cmd.nohz_full
            notes.append("no cpu/nohz_full file: nohz_full CPUs taken from the kernel command line")
        else:
            nohz = ()
    return Isolation(cmdline, tuple(isolated), tuple(nohz), flags, tuple(named or ()))


def _from_cmdline_note(cmd: CmdlineIsolation) -> str:
    word = ",".join((*cmd.isolcpus_flags, format_cpulist(cmd.isolcpus)))
    note = f"no cpu/isolated file: isolation taken from the kernel command line isolcpus={word}"
    if not cmd.scheduler_isolated and cmd.isolcpus:
        # kernel/sched/isolation.c: flags given without "domain" leave scheduler domains alone, so
        # the kernel's own isolated file would read empty.
        note += (f" ({', '.join(cmd.isolcpus_flags)} without the domain flag: the scheduler still balances "
                 "onto them, so none is shown isolated)")
    return note
