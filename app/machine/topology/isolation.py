"""Which CPUs are isolated and nohz_full: the cpu/isolated and cpu/nohz_full files, or the kernel
command line's isolcpus= and nohz_full= where those files are missing
(Documentation/admin-guide/kernel-parameters.txt, kernel/sched/isolation.c)."""
from __future__ import annotations

from dataclasses import dataclass

from app.machine.topology.files import read_list
from app.parse.cpulist import format_cpulist
from app.parse.topology import parse_cmdline_isolation
from app.sysroot import SysRoot


@dataclass(frozen=True)
class Isolation:
    cmdline: str | None
    isolated: tuple[int, ...]
    nohz_full: tuple[int, ...]
    isolcpus_flags: tuple[str, ...]


def read_isolation(root: SysRoot, notes: list) -> Isolation:
    """cpu/isolated and cpu/nohz_full, or the kernel command line's isolcpus= and nohz_full= where
    the files are not there (worker1's capture has no cpu/isolated)."""
    cmdline_text = root.read_optional(root.proc("cmdline"))
    cmdline = cmdline_text.replace("\0", " ").strip() if cmdline_text is not None else None
    cmd = parse_cmdline_isolation(cmdline) if cmdline else None
    isolated = read_list(root, root.cpu_dir("isolated"))
    isolcpus_flags: tuple[str, ...] = ()
    if cmd and cmd.isolcpus is not None:
        isolcpus_flags = cmd.isolcpus_flags
    if isolated is None:
        if cmd and cmd.isolcpus is not None:
            isolated = cmd.isolcpus
            flag_text = ",".join(cmd.isolcpus_flags)
            note = "no cpu/isolated file: isolated CPUs taken from the kernel command line isolcpus="
            if flag_text:
                note += f"{flag_text},{format_cpulist(isolated)}"
                if "domain" not in cmd.isolcpus_flags:
                    # kernel/sched/isolation.c: flags given without "domain" leave scheduler
                    # domains alone, so the kernel's own isolated file would read empty.
                    note += " (without the domain flag the scheduler still balances onto them)"
            notes.append(note)
        else:
            isolated = ()
    nohz = read_list(root, root.cpu_dir("nohz_full"))
    if nohz is None:
        if cmd and cmd.nohz_full is not None:
            nohz = cmd.nohz_full
            notes.append("no cpu/nohz_full file: nohz_full CPUs taken from the kernel command line")
        else:
            nohz = ()
    return Isolation(cmdline, tuple(isolated), tuple(nohz), isolcpus_flags)

