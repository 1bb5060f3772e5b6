"""A plan to keep CPUs quiet across reboots, in two routes a user takes one of: by hand (the kernel
command line, irqbalance's banned CPUs, systemd's CPUAffinity=) or tuned's cpu-partitioning profile,
which sets its own kernel parameters, irqbalance and systemd pieces (so the two never mix: their
parameters would be set twice). Either route gets the guard unit and, when named, the service's
drop-in. Every piece carries the exact commands that apply it and that undo it
(app/quiet/boot_plan_pieces.py). Written, never applied: the user reviews it, and the machine is read
to say what is already in place and how it keeps its command line (app/machine/boot.py).

The running command line is read first (issue 30, wrong answer 1): the CPUs it isolates stay isolated
and its CPU lists are merged with the plan's (isolcpus=managed_irq,0-4,11-79 and CPUs 6-9 give
isolcpus=managed_irq,domain,0-4,6-9,11-79), unless the user asks to replace them (`plan --replace`);
every word of it that works against the plan is named with why, and the words that would put work
back on the quiet CPUs (systemd.cpu_affinity=, which wins over systemd's CPUAffinity= file, and
tuned.non_isolcpus=) are changed with the rest (app/quiet/boot_plan_words.py). The by-hand route also
adds the boot words tuned's profiles add (nohz=on, skew_tick=1, ...), each with why.

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
from app.machine.boot import BootFacts, Clocksource, read_boot_facts, read_clocksource, unknown_facts
from app.machine.irqbalance import config_path, read_config_text
from app.machine.topology import Topology
from app.parse.cpulist import parse_cpulist
from app.quiet import boot_plan_pieces as pieces
from app.quiet import boot_plan_words as words
from app.quiet.boot_plan_pieces import Change, Piece
from app.quiet.boot_plan_words import KernelParam, LeftOut, running_value
from app.sysroot import SysRoot

# The words the tuned route says must be taken out where they were set: tuned neither sets nor removes
# isolcpus=, irqaffinity= or systemd.cpu_affinity=, nor nohz_full=/rcu_nocbs= it did not add itself.
SET_OUTSIDE_TUNED = ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity", "systemd.cpu_affinity")
SERVICE_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.@\\")
# Debian's own amd64 kernels, checked in its linux-config-6.1 and linux-config-6.12 packages
# (bookworm): config.amd64_none_amd64, _none_cloud-amd64 and _rt_amd64 all have CONFIG_NO_HZ_FULL=y.
NO_HZ_FULL_KERNELS = ("such as Debian's linux-image-amd64, linux-image-cloud-amd64 or linux-image-rt-amd64 "
                      "(bookworm's 6.1 and 6.12 builds)")


class PlanError(CoremapError):
    """A quiet set that cannot be planned (offline CPUs, no housekeeping CPU left, a bad name)."""


@dataclass(frozen=True)
class Route:
    key: str                   # "by-hand" or "tuned"
    title: str
    why: str                   # what it sets, and when to choose it
    pieces: tuple[Piece, ...]
    offered: bool = True       # False: `why` says why not


@dataclass(frozen=True)
class QuietPlan:
    quiet: tuple[int, ...]             # the CPUs the user asked for
    housekeeping: tuple[int, ...]
    tick_cpus: tuple[int, ...]         # every isolated CPU less the boot CPU: nohz_full= and rcu_nocbs=
    params: tuple[KernelParam, ...]    # the by-hand route's kernel command line
    facts: BootFacts
    routes: tuple[Route, ...]
    common: tuple[Piece, ...]          # for either route: the guard unit, the service's drop-in
    notes: tuple[str, ...] = field(default_factory=tuple)
    kept: tuple[int, ...] = ()         # CPUs the running command line isolates, kept (none with --replace)
    left_out: tuple[LeftOut, ...] = ()     # words tuned's profiles add that this plan leaves out here
    replace: bool = False              # the running command line's CPU lists are replaced, not merged

    @property
    def isolated(self) -> tuple[int, ...]:
        """Every CPU the plan leaves isolated: those asked for and those kept."""
        return tuple(sorted({*self.quiet, *self.kept}))

    @property
    def conflicts(self) -> tuple[KernelParam, ...]:
        """The running command line's words that work against the plan, each with why."""
        return tuple(p for p in self.params if p.conflict)

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
              root: SysRoot | None = None, replace: bool = False, intel_pstate: bool = False) -> QuietPlan:
    """The plan for making `quiet_text` (a CPU list) quiet on the machine `topology` describes;
    `root`, that machine's files, tells how it boots (without it, both usual ways are shown). The
    CPUs the running command line isolates stay isolated and its CPU lists are merged with the plan's,
    unless `replace`; `intel_pstate`: route A adds intel_pstate=disable too."""
    quiet = _quiet_set(topology, quiet_text)
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
    cmdline = topology.cmdline or ""
    kept = () if replace else tuple(c for c in words.kept_cpus(cmdline, facts.boot_cpu, topology.online)
                                    if c not in quiet)
    isolated = tuple(sorted({*quiet, *kept}))
    housekeeping = tuple(sorted(set(topology.online) - set(isolated)))
    if not housekeeping:
        with_kept = (f" with {cpus_word(kept)}, which the running command line isolates already "
                     "(--replace isolates only the CPUs asked for)" if kept else "")
        raise PlanError(f"--cpus {format_cpus(quiet)}{with_kept} leaves no CPU for the kernel's own work and every "
                        "other task; keep at least one (CPU 0 is the usual choice)")
    tick = tuple(c for c in isolated if c != facts.boot_cpu)
    clock = read_clocksource(root) if root is not None else Clocksource(None, ())
    params, left_out = _params(quiet, isolated, tick, housekeeping, cmdline, facts, replace=replace, clock=clock,
                               intel_pstate=intel_pstate)
    affinity = next((p for p in params if p.name == "systemd.cpu_affinity"), None)
    by_hand = _by_hand(params, isolated, housekeeping, facts, irqbalance_path, _irqbalance_text(root), affinity)
    set_outside = [p.running_word for p in params if p.running is not None and p.name in SET_OUTSIDE_TUNED]
    tuned = _tuned(isolated, tick, housekeeping, facts, set_outside)
    common = [pieces.guard_piece(facts.exists(pieces.GUARD_UNIT_PATH))]
    if unit:
        common.append(pieces.service_piece(unit, quiet, facts.exists(
            f"/etc/systemd/system/{unit}.d/coremap-cpuaffinity.conf")))
    return QuietPlan(quiet, housekeeping, tick, params, facts, (by_hand, tuned), tuple(common),
                     tuple(_notes(topology, quiet, isolated, tick, facts)), kept, tuple(left_out), replace)


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


def _params(quiet, isolated, tick, housekeeping, cmdline: str, facts: BootFacts, *, replace: bool,
            clock: Clocksource, intel_pstate: bool) -> tuple[tuple[KernelParam, ...], list[LeftOut]]:
    merge, boot = not replace, facts.boot_cpu
    out = [words.isolcpus_param(isolated, quiet, cmdline, merge=merge)]
    if tick:
        out += [words.quiet_list_param(
                    "nohz_full", tick, quiet, cmdline, merge=merge, boot_cpu=boot,
                    why=f"stop the scheduler tick on a CPU that runs one task; never on the boot CPU ({boot}), which "
                        "keeps it for timekeeping", since="Linux 3.10", needs="CONFIG_NO_HZ_FULL",
                    ignored=facts.kernel.no_hz_full is False),
                words.quiet_list_param(
                    "rcu_nocbs", tick, quiet, cmdline, merge=merge, boot_cpu=None,
                    why="run RCU callbacks of these CPUs in kthreads on the housekeeping CPUs", since="Linux 3.7",
                    needs="CONFIG_RCU_NOCB_CPU", ignored=facts.kernel.rcu_nocb_cpu is False)]
    out.append(words.housekeeping_param(
        "irqaffinity", housekeeping, isolated, cmdline, merge=merge,
        why="every IRQ starts on the housekeeping CPUs (the default mask), so none lands on a quiet CPU before "
            "irqbalance or coremap move it", since="kernel commit fbf198030e0b",
        overlap_says="new IRQs start on CPUs {now}, {overlap} among them"))
    # Words the running line has that would put work back on the quiet CPUs: changed, never left behind.
    if running_value(cmdline, "systemd.cpu_affinity") is not None:
        out.append(words.housekeeping_param(
            "systemd.cpu_affinity", housekeeping, isolated, cmdline, merge=merge,
            why="systemd's own CPUs and every service's default; on the kernel command line it wins over "
                "CPUAffinity= in system.conf (kernel-command-line(7)), so the word changes, not only the file",
            since="systemd, which reads it at boot (kernel-command-line(7))",
            overlap_says="systemd starts every service on CPUs {now}, {overlap} among them, and this word wins "
                         "over CPUAffinity= in /etc/systemd/system.conf and its drop-ins (kernel-command-line(7)), "
                         "so the file alone would change nothing"))
    if running_value(cmdline, "tuned.non_isolcpus") is not None:
        out.append(words.housekeeping_param(
            "tuned.non_isolcpus", housekeeping, isolated, cmdline, merge=merge,
            why="tuned's boot hook (cpu-partitioning's 00-tuned-pre-udev.sh, also in RHCOS) writes this mask to "
                "/sys/devices/virtual/workqueue/cpumask: unbound kernel work runs only there", since="tuned's boot hook, in the initrd",
            overlap_says="tuned's boot hook keeps unbound workqueues on CPUs {now}, {overlap} among them; tuned "
                         "writes this word from isolated_cores=, so where tuned manages the machine change that "
                         "(route B) or tuned puts the word back"))
    tuned, left_out = words.tuned_params(cmdline, clock, intel_pstate=intel_pstate)
    return tuple(out + tuned), left_out


def _by_hand(params, quiet, housekeeping, facts: BootFacts, irqbalance_path: str, irqbalance_now,
             affinity: KernelParam | None) -> Route:
    changes = [Change(p.name, p.value, p.running) for p in params]
    # systemd's file says what the command line's word says: where both are set, the word wins.
    services = parse_cpulist(affinity.value) if affinity else housekeeping
    kernel = pieces.kernel_pieces(changes, facts, format_cpus(quiet))
    return Route("by-hand", "By hand: the kernel command line, irqbalance and systemd",
                 "every word and file written out here; the kernel command line has isolcpus= with domain and "
                 "managed_irq, and irqaffinity=, which tuned's profile does not set",
                 (*kernel, pieces.irqbalance_piece(quiet, irqbalance_path, irqbalance_now,
                                                   facts.exists(irqbalance_path)),
                  pieces.housekeeping_piece(services, facts.exists(pieces.HOUSEKEEPING_DROPIN),
                                            word=affinity.word if affinity else None)))


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


def _notes(topology: Topology, quiet, isolated, tick, facts: BootFacts) -> list[str]:
    notes = []
    if facts.boot_cpu in quiet:
        notes.append(f"CPU {facts.boot_cpu} is the boot CPU ({facts.boot_cpu_why}): it stays out of nohz_full= and "
                     f"rcu_nocbs= (the kernel keeps its tick for timekeeping) and still takes some global "
                     f"timers; a quiet set without it works better")
    if facts.kernel.rcu_nocb_cpu is False and tick:
        notes.append(f"this kernel lacks CONFIG_RCU_NOCB_CPU ({facts.kernel.source}): rcu_nocbs= will be ignored")
    cores = {c: k for k in topology.cores for c in k.cpus}
    split = sorted({c for c in isolated if c in cores for s in cores[c].cpus if s not in isolated})
    if split:
        notes.append(f"{cpus_word(split)}: each shares a core with a housekeeping CPU, whose work slows its "
                     "hyperthread sibling down; quiet whole cores")
    if set(topology.isolated) - set(isolated):
        notes.append(f"the running kernel already isolates CPUs {format_cpus(topology.isolated)}")
    return notes
