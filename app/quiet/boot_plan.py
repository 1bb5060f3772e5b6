"""A plan to keep CPUs quiet across reboots, in two routes a user takes one of: by hand (the kernel
command line, irqbalance's banned CPUs, systemd's CPUAffinity=) or tuned's cpu-partitioning profile,
which sets its own kernel parameters, irqbalance and systemd pieces (so the two never mix: their
parameters would be set twice). Either route gets the guard unit and, when named, the service's
drop-in. Every piece carries the exact commands that apply it and that undo it
(app/quiet/boot_plan_pieces.py). Written, never applied: the user reviews it, and the machine is read
to say what is already in place and how it keeps its command line (app/machine/boot.py).

Sources for the syntax and the kernel versions that honour each piece:
- Documentation/admin-guide/kernel-parameters.txt: `isolcpus=[flag-list,]<cpu-list>` with the flags
  `nohz`, `domain` and `managed_irq` (flags since Linux 4.15, commit 150dfee95feb; `managed_irq` since
  5.6, commit 11ea68f553e2); `nohz_full=<cpu-list>` (3.10, CONFIG_NO_HZ_FULL); `rcu_nocbs=<cpu-list>`
  (3.7, CONFIG_RCU_NOCB_CPU); `irqaffinity=<cpu-list>` (the default affinity of new IRQs, kernel commit
  fbf198030e0b).
- kernel/time/tick-sched.c tick_nohz_init(): the boot CPU keeps its tick for timekeeping, so it is
  never put in nohz_full= (nor, with it, in rcu_nocbs=).
- irqbalance reads IRQBALANCE_BANNED_CPULIST (1.8 and later; older ones read the hex mask
  IRQBALANCE_BANNED_CPUS) from /etc/default/irqbalance (Debian, Ubuntu) or /etc/sysconfig/irqbalance
  (Fedora, RHEL).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from app.errors import CoremapError, CpuListError, NotASysRoot
from app.format import cpus_word, format_cpus
from app.machine.boot import BootFacts, read_boot_facts, unknown_facts
from app.machine.irqbalance import config_path, read_config_text
from app.machine.topology import Topology
from app.parse.cpulist import parse_cpulist
from app.parse.topology import parse_cmdline_isolation
from app.quiet import boot_plan_pieces as pieces
from app.quiet.boot_plan_pieces import Change, Piece
from app.sysroot import SysRoot

ISOLCPUS_FLAGS = ("managed_irq", "domain")
SERVICE_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.@\\")
# Debian's own amd64 kernels, checked in its linux-config-6.1 and linux-config-6.12 packages
# (bookworm): config.amd64_none_amd64, _none_cloud-amd64 and _rt_amd64 all have CONFIG_NO_HZ_FULL=y.
NO_HZ_FULL_KERNELS = ("such as Debian's linux-image-amd64, linux-image-cloud-amd64 or linux-image-rt-amd64 "
                      "(bookworm's 6.1 and 6.12 builds)")


class PlanError(CoremapError):
    """A quiet set that cannot be planned (offline CPUs, no housekeeping CPU left, a bad name)."""


@dataclass(frozen=True)
class KernelParam:
    name: str                  # "isolcpus"
    value: str                 # "managed_irq,domain,2-3"
    why: str                   # what it does for a quiet CPU
    since: str                 # the kernel that honours it
    in_place: bool             # the running kernel already has this (spelt the same or not)
    running: str | None        # the running command line's value, exactly as written, or None
    needs: str | None = None   # the build option it needs ("CONFIG_NO_HZ_FULL")
    ignored: bool = False      # the running kernel is known to be built without `needs`

    @property
    def word(self) -> str:
        return f"{self.name}={self.value}"


@dataclass(frozen=True)
class Route:
    key: str                   # "by-hand" or "tuned"
    title: str
    why: str                   # what it sets, and when to choose it
    pieces: tuple[Piece, ...]
    offered: bool = True       # False: `why` says why not


@dataclass(frozen=True)
class QuietPlan:
    quiet: tuple[int, ...]
    housekeeping: tuple[int, ...]
    tick_cpus: tuple[int, ...]         # quiet less the boot CPU: nohz_full= and rcu_nocbs=
    params: tuple[KernelParam, ...]    # the by-hand route's kernel command line
    facts: BootFacts
    routes: tuple[Route, ...]
    common: tuple[Piece, ...]          # for either route: the guard unit, the service's drop-in
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cmdline_fragment(self) -> str:
        return " ".join(p.word for p in self.params)

    def route(self, key: str) -> Route:
        return next(r for r in self.routes if r.key == key)

    @property
    def files(self) -> tuple[Piece, ...]:
        """Every piece that is a file, once per file name (for the plan folder)."""
        out: dict[str, Piece] = {}
        for p in [*(p for r in self.routes if r.offered for p in r.pieces), *self.common]:
            if p.name and p.text is not None:
                out.setdefault(p.name, p)
        return tuple(out.values())


def make_plan(topology: Topology, quiet_text: str, *, service: str | None = None,
              root: SysRoot | None = None) -> QuietPlan:
    """The plan for making `quiet_text` (a CPU list) quiet on the machine `topology` describes;
    `root`, that machine's files, tells how it boots (without it, both usual ways are shown)."""
    quiet = _quiet_set(topology, quiet_text)
    housekeeping = tuple(sorted(set(topology.online) - set(quiet)))
    if not housekeeping:
        raise PlanError(f"--cpus {format_cpus(quiet)} leaves no CPU for the kernel's own work and every other "
                        "task; keep at least one (CPU 0 is the usual choice)")
    if service is not None and (not service or set(service) - SERVICE_NAME_CHARS or len(service) > 200):
        raise PlanError(f"--service {service[:40]!r}: a systemd unit name is letters, digits and :-_.@\\ only")
    unit = None if not service else (service if "." in service else f"{service}.service")
    irqbalance_path = "/" + str(config_path(root).relative_to(root.root)) if root else "/etc/default/irqbalance"
    if root is None:
        facts = unknown_facts()
    else:
        replaces = (irqbalance_path, pieces.TUNED_VARIABLES, pieces.HOUSEKEEPING_DROPIN, pieces.GRUB_DROPIN,
                    pieces.GUARD_UNIT_PATH, *([f"/etc/systemd/system/{unit}.d/coremap-cpuaffinity.conf"] if unit else []))
        facts = read_boot_facts(root, topology.kernel_release, replaces=replaces)
    tick = tuple(c for c in quiet if c != facts.boot_cpu)
    params = _params(quiet, tick, housekeeping, topology.cmdline or "", facts)
    by_hand = _by_hand(params, quiet, housekeeping, facts, irqbalance_path, _irqbalance_text(root))
    tuned = _tuned(quiet, tick, housekeeping, facts, [f"{p.name}={p.running}" for p in params if p.running])
    common = [pieces.guard_piece(facts.exists(pieces.GUARD_UNIT_PATH))]
    if unit:
        common.append(pieces.service_piece(unit, quiet, facts.exists(
            f"/etc/systemd/system/{unit}.d/coremap-cpuaffinity.conf")))
    return QuietPlan(quiet, housekeeping, tick, params, facts, (by_hand, tuned), tuple(common),
                     tuple(_notes(topology, quiet, tick, facts)))


def machine_root(source: str | None) -> SysRoot | None:
    """The SysRoot a plan reads a machine's boot facts from: `source` (what the window shows: "/" or a
    capture's folder) when it is a sysroot, else None (a session file, a remote host: "")."""
    if not source:
        return None
    try:
        return SysRoot(source)
    except NotASysRoot:
        return None            # a session file: its machine's /boot and /etc were never captured


def _quiet_set(topology: Topology, quiet_text: str) -> tuple[int, ...]:
    try:
        quiet = parse_cpulist(quiet_text, what="--cpus")
    except CpuListError as e:
        raise PlanError(str(e)) from None
    online = set(topology.online)
    if not quiet:
        raise PlanError("--cpus names no CPU; write CPUs like 2-5,8")
    absent = [c for c in quiet if c not in online]
    if absent:
        raise PlanError(f"--cpus: CPU{'s' if len(absent) > 1 else ''} {format_cpus(absent)} "
                        f"{'are' if len(absent) > 1 else 'is'} not online; choose among {format_cpus(sorted(online))}")
    return quiet


def _irqbalance_text(root: SysRoot | None) -> str | None:
    if root is None:
        return None
    try:
        return read_config_text(root) if root.exists(config_path(root)) else None
    except CoremapError:
        return None            # unreadable: the piece says which line to set instead of the whole file


def _params(quiet, tick, housekeeping, cmdline: str, facts: BootFacts) -> tuple[KernelParam, ...]:
    running = parse_cmdline_isolation(cmdline)
    q, t, hk = format_cpus(quiet), format_cpus(tick), format_cpus(housekeeping)
    boot = facts.boot_cpu
    out = [KernelParam("isolcpus", ",".join([*ISOLCPUS_FLAGS, q]),
                       "domain: the scheduler never balances tasks onto these CPUs (only tasks pinned there run "
                       "there); managed_irq: drivers that spread their own queue IRQs (NVMe, many NICs) keep them "
                       "off these CPUs where the queue also has a housekeeping CPU",
                       "flags since Linux 4.15; managed_irq since 5.6",
                       running.isolcpus is not None and tuple(running.isolcpus) == tuple(quiet)
                       and set(ISOLCPUS_FLAGS) <= set(running.isolcpus_flags), _word(cmdline, "isolcpus"))]
    if tick:
        # The kernel drops the boot CPU from nohz_full= itself, so a running list that has it is in place.
        nohz_now = None if running.nohz_full is None else tuple(c for c in running.nohz_full if c != boot)
        out += [KernelParam("nohz_full", t, f"stop the scheduler tick on a CPU that runs one task; never on the "
                                            f"boot CPU ({boot}), which keeps it for timekeeping", "Linux 3.10",
                            nohz_now == tuple(tick), _word(cmdline, "nohz_full"), "CONFIG_NO_HZ_FULL",
                            facts.kernel.no_hz_full is False),
                KernelParam("rcu_nocbs", t, "run RCU callbacks of these CPUs in kthreads on the housekeeping CPUs",
                            "Linux 3.7", running.rcu_nocbs is not None and tuple(running.rcu_nocbs) == tuple(tick),
                            _word(cmdline, "rcu_nocbs"), "CONFIG_RCU_NOCB_CPU", facts.kernel.rcu_nocb_cpu is False)]
    irqaff = _word(cmdline, "irqaffinity")
    out.append(KernelParam("irqaffinity", hk,
                           "every IRQ starts on the housekeeping CPUs (the default mask), so none lands on a quiet "
                           "CPU before irqbalance or coremap move it", "kernel commit fbf198030e0b",
                           irqaff is not None and _same_list(irqaff, housekeeping), irqaff))
    return tuple(out)


def _by_hand(params, quiet, housekeeping, facts: BootFacts, irqbalance_path: str, irqbalance_now) -> Route:
    changes = [Change(p.name, p.value, p.running) for p in params]
    kernel = pieces.kernel_pieces(changes, facts, format_cpus(quiet))
    return Route("by-hand", "By hand: the kernel command line, irqbalance and systemd",
                 "every word and file written out here; the kernel command line has isolcpus= with domain and "
                 "managed_irq, and irqaffinity=, which tuned's profile does not set",
                 (*kernel, pieces.irqbalance_piece(quiet, irqbalance_path, irqbalance_now,
                                                   facts.exists(irqbalance_path)),
                  pieces.housekeeping_piece(housekeeping, facts.exists(pieces.HOUSEKEEPING_DROPIN))))


def _tuned(quiet, tick, housekeeping, facts: BootFacts, running_words: list[str]) -> Route:
    title = "With tuned: its cpu-partitioning profile"
    if not tick:
        return Route("tuned", title, f"not offered: cpu-partitioning puts every isolated core in nohz_full= and "
                                     f"rcu_nocbs=, and the only quiet CPU is the boot CPU ({facts.boot_cpu})", (),
                     offered=False)
    left = [c for c in quiet if c not in tick]
    why = ("one file and one command; tuned sets its own kernel parameters, irqbalance's banned CPUs and "
           "systemd's CPUAffinity=, and takes them all back when its profile is switched")
    if left:
        why += (f"; CPU {left[0]} (the boot CPU) is left out of isolated_cores, which tuned puts in nohz_full=: "
                "only the by-hand route keeps it out of scheduling (isolcpus=)")
    if running_words:
        # tuned's bootloader plugin manages only the words it added (its documentation says so).
        why += (f"; the running command line already has {' '.join(running_words)}, set outside tuned, which "
                "tuned neither replaces nor removes: take them out where they are set before taking this route")
    if facts.tuned_installed is False:
        why += ("; tuned's cpu-partitioning profile is not installed here: apt install tuned (Debian 12's tuned "
                "has it) or dnf install tuned-profiles-cpu-partitioning (Fedora, RHEL)")
    return Route("tuned", title, why, pieces.tuned_pieces(tick, housekeeping, facts))


def kernel_config_line(facts: BootFacts) -> str:
    """The one line that says whether nohz_full= will work on this kernel, and what to do if not."""
    k = facts.kernel
    name = f"this kernel ({k.release})" if k.release else "this kernel"
    if k.no_hz_full is False:
        # One line, never wrapped (the text prints it whole): what is missing, what follows, what to do.
        return (f"{name[0].upper()}{name[1:]} lacks CONFIG_NO_HZ_FULL ({k.source}): nohz_full= will be ignored and "
                f"the quiet CPUs keep their tick; boot a kernel built with it, {NO_HZ_FULL_KERNELS}.")
    if k.no_hz_full:
        return f"{name[0].upper()}{name[1:]} has CONFIG_NO_HZ_FULL ({k.source})."
    return (f"Whether {name} has CONFIG_NO_HZ_FULL (which nohz_full= needs) is not known: none of "
            "/boot/config-RELEASE, /proc/config.gz or /sys/devices/system/cpu/nohz_full could be read.")


def _notes(topology: Topology, quiet, tick, facts: BootFacts) -> list[str]:
    notes = []
    if facts.boot_cpu in quiet:
        notes.append(f"CPU {facts.boot_cpu} is the boot CPU ({facts.boot_cpu_why}): it stays out of nohz_full= and "
                     f"rcu_nocbs= (the kernel keeps its tick for timekeeping) and still takes some global "
                     f"timers; a quiet set without it works better")
    if facts.kernel.rcu_nocb_cpu is False and tick:
        notes.append(f"this kernel lacks CONFIG_RCU_NOCB_CPU ({facts.kernel.source}): rcu_nocbs= will be ignored")
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
