"""Is irqbalance running, and what does it leave alone?

irqbalance rewrites /proc/irq/N/smp_affinity every 10 s, so a hand-made IRQ pin lasts only until
its next pass unless the IRQ is banned (`--banirq=N`, irqbalance(1)) or its CPUs are banned
(IRQBALANCE_BANNED_CPULIST / the older IRQBALANCE_BANNED_CPUS mask, read from its environment or
Debian's /etc/default/irqbalance). It is found by its comm, or by the socket it opens at
/run/irqbalance/irqbalance<pid>.sock (irqbalance's ui/ protocol), which also shows when its process
is hidden in another pid namespace.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from app.errors import CpuListError, SysRootReadError
from app.parse.cpulist import format_cpulist, parse_cpulist, parse_cpumask
from app.sysroot import SysRoot

_SOCKET = re.compile(r"^irqbalance([0-9]{1,7})\.sock$", re.ASCII)


@dataclass(frozen=True)
class IrqbalanceStatus:
    running: bool
    pid: int | None = None
    banned_cpus: tuple[int, ...] = ()
    banned_irqs: tuple[int, ...] = ()
    socket: str | None = None

    def warning_for(self, irq: int) -> str:
        """The warning a pin of `irq` carries, or "" when irqbalance will leave it alone."""
        if not self.running or irq in self.banned_irqs:
            return ""
        who = f"irqbalance (pid {self.pid})" if self.pid is not None else "irqbalance"
        return f"{who} may move IRQ {irq} back; ban it with --banirq={irq} or stop irqbalance"

    def pinned_text(self, irqs=()) -> str:
        """What irqbalance, if it runs, will do to the pinned `irqs`: its pid, what it bans; "" when
        it does not run (the window's result line after a pin)."""
        if not self.running:
            return ""
        who = f"irqbalance (pid {self.pid})" if self.pid is not None else "irqbalance"
        cpus = f"CPUs {format_cpulist(self.banned_cpus)}" if self.banned_cpus else "no CPUs"
        banned = f"IRQ{'s' if len(self.banned_irqs) > 1 else ''} {', '.join(map(str, self.banned_irqs))}" \
            if self.banned_irqs else "no IRQs"
        moved = [i for i in irqs if i not in self.banned_irqs]
        what = f"IRQ{'s' if len(moved) > 1 else ''} {', '.join(map(str, moved))}" if moved else "them"
        return (f"{who} bans {cpus} and {banned}; it may move {what} back within 10 s: "
                f"--banirq={moved[0] if moved else 'N'} or stop it")


def read_irqbalance(root: SysRoot) -> IrqbalanceStatus:
    pid = _find_process(root)
    sock = None
    run_dir = root.path("run", "irqbalance")
    for name in root.listdir(run_dir):
        m = _SOCKET.match(name)
        if m and (pid is None or int(m.group(1)) == pid):
            sock = str(run_dir / name)
            if pid is None:
                pid = int(m.group(1))
            break
    if pid is None:
        return IrqbalanceStatus(False)
    env = _read_environ(root, pid)
    banned_cpus = _banned_cpus(env) if env else ()
    if not banned_cpus:
        banned_cpus = _banned_cpus(_read_default_file(root))
    cmdline = root.read_optional(root.proc(pid, "cmdline")) or ""
    return IrqbalanceStatus(True, pid, banned_cpus, parse_banirq(cmdline.split("\0")), sock)


def _find_process(root: SysRoot) -> int | None:
    for name in root.listdir(root.proc()):
        if not (name.isascii() and name.isdigit()):
            continue
        # read_optional: a process that exits mid-scan has no comm any more (ENOENT); skip it.
        comm = root.read_optional(root.proc(name, "comm"))
        if comm is not None and comm.strip() == "irqbalance":
            return int(name)
    return None


def _read_environ(root: SysRoot, pid: int) -> dict[str, str]:
    try:
        text = root.read_optional(root.proc(pid, "environ"))
    except SysRootReadError:
        # environ is readable only by the process's owner (or root): fall back to the defaults file.
        return {}
    env = {}
    for item in (text or "").split("\0"):
        k, sep, v = item.partition("=")
        if sep:
            env[k] = v
    return env


def _read_default_file(root: SysRoot) -> dict[str, str]:
    """KEY="value" lines of /etc/default/irqbalance (a shell fragment sourced by its unit)."""
    try:
        text = root.read_optional(root.path("etc", "default", "irqbalance"))
    except SysRootReadError:
        return {}
    env = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, _, v = line.partition("=")
        try:
            parts = shlex.split(v)
        except ValueError:
            continue
        env[k.strip()] = parts[0] if parts else ""
    return env


def _banned_cpus(env: dict[str, str]) -> tuple[int, ...]:
    try:
        if env.get("IRQBALANCE_BANNED_CPULIST"):
            return parse_cpulist(env["IRQBALANCE_BANNED_CPULIST"], what="IRQBALANCE_BANNED_CPULIST")
        if env.get("IRQBALANCE_BANNED_CPUS"):
            return parse_cpumask(env["IRQBALANCE_BANNED_CPUS"], what="IRQBALANCE_BANNED_CPUS")
    except CpuListError:
        # irqbalance itself ignores a value it cannot parse; so do we (the warning stays on).
        return ()
    return ()


def parse_banirq(argv: list[str]) -> tuple[int, ...]:
    """IRQ numbers from irqbalance's --banirq=N / --banirq N / -i N / -iN arguments."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        val = None
        if a.startswith("--banirq="):
            val = a.split("=", 1)[1]
        elif a in ("--banirq", "-i") and i + 1 < len(argv):
            val = argv[i + 1]
            i += 1
        elif a.startswith("-i") and len(a) > 2 and not a.startswith("--"):
            val = a[2:]
        if val is not None and val.strip().isascii() and val.strip().isdigit():
            out.append(int(val))
        i += 1
    return tuple(sorted(set(out)))


# -- the fix: banned CPUs in irqbalance's configuration ---------------------------------------------
# Where distributions keep irqbalance's environment file (sourced by its systemd unit): Debian and
# Ubuntu /etc/default/irqbalance, Fedora, RHEL and SUSE /etc/sysconfig/irqbalance.
_CONFIG_FILES = (("etc", "default", "irqbalance"), ("etc", "sysconfig", "irqbalance"))
BANNED_KEY = "IRQBALANCE_BANNED_CPULIST"


def config_path(root: SysRoot):
    """irqbalance's configuration file on `root`: the first that exists, else the first whose folder
    exists (a machine without the file yet), else the Debian path."""
    for parts in _CONFIG_FILES:
        if root.exists(root.path(*parts)):
            return root.path(*parts)
    for parts in _CONFIG_FILES:
        if root.is_dir(root.path(*parts[:-1])):
            return root.path(*parts)
    return root.path(*_CONFIG_FILES[0])


def read_config_text(root: SysRoot) -> str:
    """The configuration file's text ("" when it does not exist yet)."""
    return root.read_optional(config_path(root)) or ""


def banned_line(cpus) -> str:
    """`IRQBALANCE_BANNED_CPULIST=2-3`: irqbalance (1.8 and later) never places an IRQ on these CPUs."""
    return f"{BANNED_KEY}={format_cpulist(cpus)}"


def with_banned_cpus(text: str, cpus) -> str:
    """`text` (the configuration file) with its banned-CPU line set to `cpus`: an existing
    IRQBALANCE_BANNED_CPULIST= line is replaced in place, else the line is appended. Every other
    line is kept as it was."""
    line = banned_line(cpus)
    out, done = [], False
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("export "):
            stripped = stripped[len("export "):].lstrip()
        if stripped.startswith(BANNED_KEY + "="):
            if not done:
                out.append(line)
                done = True
            continue
        out.append(raw)
    if not done:
        out += ["# coremap: irqbalance never moves an IRQ onto the quiet CPUs", line]
    return "\n".join(out) + "\n"
