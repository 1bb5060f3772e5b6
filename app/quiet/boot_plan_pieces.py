"""The pieces of a boot plan (app/quiet/boot_plan.py): each file or command with the exact commands
that put it in place and the ones that undo it, for the machine's way of keeping its kernel command
line and for tuned.

Every step is one shell line; a line starting with "#" is for the person applying it (an edit only
they can make, or a choice). A file a plan puts where one may already be is copied to
PATH.before-coremap first, and its rollback puts that copy back; a file of coremap's own is removed.

Sources:
- grubby(8): `--update-kernel=ALL` with `--args` (a word whose name is already there replaces it) and
  `--remove-args`.
- Debian's grub-common: grub-mkconfig sources /etc/default/grub, then /etc/default/grub.d/*.cfg;
  update-grub is `grub-mkconfig -o /boot/grub/grub.cfg`.
- tuned's profiles (github.com/redhat-performance/tuned, profiles/*/tuned.conf): cpu-partitioning's
  [bootloader] adds nohz=on, nohz_full= and rcu_nocbs= of isolated_cores, tuned.non_isolcpus= (the
  other CPUs' mask), intel_pstate=disable and nosoftlockup (and isolcpus= only for no_balance_cores);
  it includes network-latency, whose [bootloader] adds skew_tick=1 (tuned 2.9), tsc=reliable and
  rcupdate.rcu_normal_after_boot=1 (2.21), rcutree.nohz_full_patience_delay=1000 (2.26). Its
  [irqbalance] bans the isolated cores and its [systemd] sets CPUAffinity= to the others. The
  bootloader plugin removes what it added when the profile is switched or tuned is stopped, and
  writes what it added to /etc/tuned/bootcmdline.
- systemd.exec(5) CPUAffinity= in a unit's [Service]; systemd-system.conf(5) in [Manager].
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from app.format import cpus_word, format_cpus
from app.machine.boot import BootFacts, BootLoader
from app.machine.irqbalance import BANNED_KEY, banned_line, with_banned_cpus
from app.parse.cpulist import format_cpumask

GUARD_UNIT_PATH = "/etc/systemd/system/coremap-guard.service"
# The unit README.md shows (tests/unit/test_plan.py keeps the two the same).
GUARD_UNIT = """[Unit]
Description=coremap guard: keep CPU pins and quiet CPUs in place
After=irqbalance.service
[Service]
Environment=COREMAP_STATE_DIR=/var/lib/coremap
ExecStart=/usr/bin/coremap guard --interval 1 --reapply
Restart=on-failure
[Install]
WantedBy=multi-user.target
"""
TUNED_VARIABLES = "/etc/tuned/cpu-partitioning-variables.conf"
HOUSEKEEPING_DROPIN = "/etc/systemd/system.conf.d/coremap-housekeeping.conf"
GRUB_DROPIN = "/etc/default/grub.d/coremap-quiet.cfg"


@dataclass(frozen=True)
class Piece:
    title: str                 # "Kernel command line (grubby)", "irqbalance", ...
    why: str
    path: str | None = None    # where its file goes on the machine
    name: str | None = None    # the file's name in the plan folder
    text: str | None = None    # the file
    apply: tuple[str, ...] = ()        # shell lines, run in the plan folder
    rollback: tuple[str, ...] = ()     # shell lines that undo `apply`
    alternative: str | None = None     # one of two ways, for a machine where it holds ("where ...")


@dataclass(frozen=True)
class Change:
    """One kernel parameter as the plan wants it, against the running command line."""
    name: str
    value: str
    running: str | None        # the running command line's value, exactly as written

    @property
    def word(self) -> str:
        return f"{self.name}={self.value}" if self.value else self.name     # "nosoftlockup" has no value

    @property
    def old_word(self) -> str:
        return f"{self.name}={self.running}" if self.running else self.name


def placed_file(path: str, name: str, exists: bool | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(apply, rollback) for putting the plan folder's `name` at `path`: a file that is there is
    kept as PATH.before-coremap and put back; one that was not is removed; where it is not known,
    the commands find out."""
    keep = f"{path}.before-coremap"
    if exists is False:
        return (f"install -D -m 0644 {name} {path}",), (f"rm -f {path}",)
    if exists:
        return (f"cp -p {path} {keep}", f"install -m 0644 {name} {path}"), (f"mv {keep} {path}",)
    return ((f"test ! -e {path} || cp -p {path} {keep}", f"install -D -m 0644 {name} {path}"),
            (f"if test -e {keep}; then mv {keep} {path}; else rm -f {path}; fi",))


# -- the kernel command line, by the machine's way of keeping it ---------------------------------------
def kernel_pieces(changes: list[Change], facts: BootFacts, quiet_text: str) -> tuple[Piece, ...]:
    """How to put `changes` on the kernel command line the machine's way (`facts.loader`); both usual
    ways, each saying when it applies, where that is not known."""
    loader, dropin = facts.loader, facts.exists(GRUB_DROPIN)
    todo = [c for c in changes if c.running != c.value]
    if not todo:
        return (Piece("Kernel command line", "the running command line already has every word: nothing to "
                                             "change, nothing to undo"),)
    if loader.kind == "grubby":
        return (_grubby(todo, loader.why),)
    if loader.kind == "grub-debian":
        return (_grub_dropin(todo, loader.why, quiet_text, dropin),)
    if loader.kind == "grub":
        return (_grub_edit(todo, loader),)
    grubby = "where /boot/loader/entries/*.conf exist or grubby is installed (Fedora, RHEL 8 and later)"
    debian = "where update-grub is installed (Debian, Ubuntu)"
    return (replace(_grubby(todo, grubby), alternative=grubby),
            replace(_grub_dropin(todo, debian, quiet_text, dropin), alternative=debian))


def _grubby(todo: list[Change], why: str) -> Piece:
    new = [c for c in todo if c.running is None]
    changed = [c for c in todo if c.running is not None]
    back = []
    if new:
        back.append(f'grubby --update-kernel=ALL --remove-args="{" ".join(c.word for c in new)}"')
    if changed:
        back.append(f'grubby --update-kernel=ALL --args="{" ".join(c.old_word for c in changed)}"')
    return Piece("Kernel command line, with grubby",
                 f"{why}: every boot entry gets the words; a word whose name is there already is replaced, and "
                 "the rollback puts back what the running kernel was booted with",
                 apply=(f'grubby --update-kernel=ALL --args="{" ".join(c.word for c in todo)}"',),
                 rollback=tuple(back))


def _grub_dropin(todo: list[Change], why: str, quiet_text: str, exists: bool | None) -> Piece:
    changed = [c for c in todo if c.running is not None]
    first = tuple(f"# first take {c.old_word} out of /etc/default/grub or /etc/default/grub.d/*.cfg "
                  f"(grep -rn '{c.name}=' /etc/default/grub /etc/default/grub.d), or the kernel gets both"
                  for c in changed)
    put_back = tuple(f"# put {c.old_word} back where you took it out" for c in changed)
    apply, rollback = placed_file(GRUB_DROPIN, "coremap-quiet.cfg", exists)
    text = (f"# coremap plan: CPUs {quiet_text} quiet. Sourced by grub-mkconfig after /etc/default/grub;\n"
            f"# remove this file and run update-grub to undo.\n"
            f'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX {" ".join(c.word for c in todo)}"\n')
    return Piece("Kernel command line, with a file in /etc/default/grub.d",
                 f"{why}: the words are added to GRUB_CMDLINE_LINUX for every kernel; update-grub writes them "
                 "into /boot/grub/grub.cfg", GRUB_DROPIN, "coremap-quiet.cfg", text,
                 first + apply + ("update-grub",), rollback + put_back + ("update-grub",))


def _grub_edit(todo: list[Change], loader: BootLoader) -> Piece:
    keys = {c.name for c in todo}
    keep = "/etc/default/grub.before-coremap"
    if loader.grub_cmdline is not None:
        words = [w for w in loader.grub_cmdline.split() if w.partition("=")[0] not in keys]
        line = f'GRUB_CMDLINE_LINUX="{" ".join([*words, *(c.word for c in todo)])}"'
        edit = (f"sed -i 's|^GRUB_CMDLINE_LINUX=.*|{line}|' /etc/default/grub"
                if not set(line) & set("|&\\") else f"# in /etc/default/grub, make the line read: {line}")
    else:
        edit = (f"# in /etc/default/grub, add to GRUB_CMDLINE_LINUX: {' '.join(c.word for c in todo)} (and take "
                f"out any other {', '.join(sorted(k + '=' for k in keys))})")
    return Piece("Kernel command line, in /etc/default/grub",
                 f"GRUB_CMDLINE_LINUX gets the words; {loader.mkconfig} writes them into grub.cfg",
                 apply=(f"cp -p /etc/default/grub {keep}", edit, loader.mkconfig or "grub2-mkconfig"),
                 rollback=(f"mv {keep} /etc/default/grub", loader.mkconfig or "grub2-mkconfig"))


# -- files of the hand-written route ---------------------------------------------------------------------
def irqbalance_piece(quiet, path: str, now: str | None, exists: bool | None) -> Piece:
    """irqbalance's file with the banned-CPU line: the whole file where its text was read (`now`),
    else the line to set in it."""
    line = banned_line(quiet)
    old = f"# irqbalance before 1.8 reads a hex mask instead: IRQBALANCE_BANNED_CPUS={format_cpumask(quiet)}"
    text = with_banned_cpus(now or "", quiet)
    if old not in text:
        text += old + "\n"
    why = "irqbalance otherwise spreads IRQs back over every CPU, the quiet ones included"
    restart = "systemctl restart irqbalance"
    if exists is None or (exists and now is None):
        keep = f"{path}.before-coremap"
        return Piece("irqbalance", why, path, "irqbalance", text,
                     (f"test ! -e {path} || cp -p {path} {keep}",
                      f"# in {path}, set the line {line} (replacing any {BANNED_KEY}= line)", restart),
                     (f"if test -e {keep}; then mv {keep} {path}; else rm -f {path}; fi", restart))
    apply, rollback = placed_file(path, "irqbalance", exists)
    return Piece("irqbalance", why, path, "irqbalance", text, apply + (restart,), rollback + (restart,))


def housekeeping_piece(housekeeping, exists: bool | None, word: str | None = None) -> Piece:
    """systemd's CPUAffinity= for every service; `word`: the kernel command line's
    systemd.cpu_affinity= the plan writes, which wins over this file (kernel-command-line(7))."""
    hk = format_cpus(housekeeping)
    apply, rollback = placed_file(HOUSEKEEPING_DROPIN, "coremap-housekeeping.conf", exists)
    why = "every service systemd starts, and its children, starts off the quiet CPUs (from the next boot)"
    if word:
        why += (f"; the kernel command line's systemd.cpu_affinity= wins over this file, so the command line "
                f"gets {word} too (the kernel command line piece) and the two say the same")
    return Piece("systemd: every service on the housekeeping CPUs", why,
                 HOUSEKEEPING_DROPIN, "coremap-housekeeping.conf",
                 f"# coremap plan: services systemd starts run on the housekeeping CPUs\n[Manager]\n"
                 f"CPUAffinity={hk.replace(',', ' ')}\n", apply, rollback)


# -- pieces of either route --------------------------------------------------------------------------------
def service_piece(unit: str, quiet, exists: bool | None) -> Piece:
    path = f"/etc/systemd/system/{unit}.d/coremap-cpuaffinity.conf"
    name = f"{unit}.coremap-cpuaffinity.conf"
    apply, rollback = placed_file(path, name, exists)
    reload = ("systemctl daemon-reload", f"systemctl restart {unit}")
    return Piece(f"systemd: {unit} on the quiet CPUs",
                 f"{unit} (the latency-critical service) starts on the quiet CPUs; pin its busiest threads one "
                 "to a CPU from there", path, name,
                 f"# coremap plan: {unit} runs on the quiet CPUs\n[Service]\n"
                 f"CPUAffinity={format_cpus(quiet).replace(',', ' ')}\n", apply + reload, rollback + reload)


def guard_piece(exists: bool | None) -> Piece:
    apply, rollback = placed_file(GUARD_UNIT_PATH, "coremap-guard.service", exists)
    return Piece("coremap guard as a service",
                 "puts back pins and quiet CPUs that something else changes (coremap guard --reapply); "
                 "ExecStart= needs coremap's full path: `command -v coremap` says where it is",
                 GUARD_UNIT_PATH, "coremap-guard.service", f"# {GUARD_UNIT_PATH}\n{GUARD_UNIT}",
                 apply + ("systemctl daemon-reload", "systemctl enable --now coremap-guard.service"),
                 ("systemctl disable --now coremap-guard.service", *rollback, "systemctl daemon-reload"))


# -- the tuned route -------------------------------------------------------------------------------------
def tuned_words(tick_cpus, housekeeping) -> tuple[str, ...]:
    """What cpu-partitioning (and the network-latency profile it includes) add to the kernel command
    line for isolated_cores=`tick_cpus` (module docstring; the newest tuned's, older ones add fewer)."""
    t = format_cpus(tick_cpus)
    return ("nohz=on", f"nohz_full={t}", f"rcu_nocbs={t}", f"tuned.non_isolcpus={format_cpumask(housekeeping)}",
            "intel_pstate=disable", "nosoftlockup", "skew_tick=1", "tsc=reliable",
            "rcupdate.rcu_normal_after_boot=1", "rcutree.nohz_full_patience_delay=1000")


def tuned_pieces(tick_cpus, housekeeping, facts: BootFacts) -> tuple[Piece, ...]:
    t = format_cpus(tick_cpus)
    apply, rollback = placed_file(TUNED_VARIABLES, "cpu-partitioning-variables.conf", facts.exists(TUNED_VARIABLES))
    variables = Piece("tuned: the cores to isolate", "cpu-partitioning reads isolated_cores= from this file",
                      TUNED_VARIABLES, "cpu-partitioning-variables.conf",
                      f"# coremap plan: CPUs {t} isolated by tuned's cpu-partitioning profile\nisolated_cores={t}\n",
                      apply, rollback)
    prev = facts.tuned_profile
    back = ((f"tuned-adm profile {prev}",) if prev and prev != "cpu-partitioning" else
            ("# no other tuned profile was found active: if `tuned-adm active` named one before, switch back to "
             "it (tuned-adm profile NAME) instead", "tuned-adm off"))
    words = tuned_words(tick_cpus, housekeeping)
    profile = Piece("tuned: the cpu-partitioning profile",
                    f"tuned adds to the kernel command line itself: {' '.join(words[:6])} and, from the "
                    f"network-latency profile it includes, {' '.join(words[6:])} (as tuned 2.26 has it: 2.21 to 2.25 "
                    f"lack the last one, 2.9 to 2.20 add only skew_tick=1 there). It adds no isolcpus=, managed_irq "
                    f"or irqaffinity=. It also bans {cpus_word(tick_cpus)} in irqbalance and sets systemd's CPUAffinity= to the others. Switching profile (or tuned-adm "
                    f"off) removes what it added",
                    apply=("tuned-adm profile cpu-partitioning",
                           "cat /etc/tuned/bootcmdline   # the words this tuned added"),
                    rollback=back)
    return variables, profile
