"""What a boot plan needs to know about a machine beyond its topology: how its kernel command line is
kept (BLS entries and grubby, Debian's GRUB, another GRUB), whether its kernel was built with
CONFIG_NO_HZ_FULL and CONFIG_RCU_NOCB_CPU, which CPU it booted on, and tuned's active profile.

Sources, read through the SysRoot (a capture holds few of them, so every fact may be unknown):
- Boot Loader Specification entries in /boot/loader/entries/*.conf (Fedora, RHEL 8+), changed with
  grubby (`--update-kernel=ALL --args/--remove-args`); Debian's grub-mkconfig (grub-common) reads
  /etc/default/grub and then /etc/default/grub.d/*.cfg, and update-grub runs it into
  /boot/grub/grub.cfg; other GRUBs are regenerated from /etc/default/grub by grub2-mkconfig.
- The kernel's configuration: /boot/config-RELEASE (Debian, Fedora and RHEL install it beside the
  kernel), else /proc/config.gz (CONFIG_IKCONFIG_PROC). Without either, drivers/base/cpu.c shows
  /sys/devices/system/cpu/nohz_full only in kernels built with CONFIG_NO_HZ_FULL, so on the live
  machine, or in a coremap snapshot (which copies that folder's files), its absence says "not built".
- The boot CPU: kernel/time/tick-sched.c tick_nohz_init() drops the CPU it runs on (the boot CPU)
  from nohz_full= "for timekeeping" (where CONFIG_PM_SLEEP_SMP is set without
  PM_SLEEP_SMP_NONZERO_CPU, as on x86), so a CPU on the running nohz_full= that the sysfs file
  lacks is the boot CPU; otherwise CPU 0, the CPU Linux boots on.
- tuned keeps its active profile's name in /etc/tuned/active_profile (tuned/consts.py), and its
  profiles in /usr/lib/tuned/NAME (2.20, Debian 12's) or /usr/lib/tuned/profiles/NAME (later).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from app.errors import CpuListError, SysRootReadError
from app.parse.cpulist import parse_cpulist
from app.parse.kconfig import config_enabled, parse_kernel_config
from app.parse.topology import parse_cmdline_isolation
from app.sysroot import SysRoot

MiB = 1 << 20
_RELEASE = re.compile(r"^[A-Za-z0-9._+~-]{1,200}$")      # `uname -r`: never a path
_GRUBBY = (("usr", "sbin", "grubby"), ("sbin", "grubby"), ("usr", "bin", "grubby"))
_UPDATE_GRUB = (("usr", "sbin", "update-grub"), ("sbin", "update-grub"))


@dataclass(frozen=True)
class BootLoader:
    kind: str                  # "grubby", "grub-debian", "grub" or "unknown"
    why: str                   # what on the machine says so
    mkconfig: str | None = None        # the command that remakes grub.cfg ("update-grub", ...)
    grub_cmdline: str | None = None    # /etc/default/grub's GRUB_CMDLINE_LINUX value ("grub" only)


@dataclass(frozen=True)
class KernelConfig:
    release: str | None
    no_hz_full: bool | None    # None: not known
    rcu_nocb_cpu: bool | None
    source: str | None         # where it was read: "/boot/config-6.1.0-18-amd64", "/proc/config.gz", ...


@dataclass(frozen=True)
class BootFacts:
    loader: BootLoader
    kernel: KernelConfig
    boot_cpu: int
    boot_cpu_why: str
    tuned_profile: str | None = None   # tuned's active profile, None when not known or none
    tuned_installed: bool | None = None    # tuned's cpu-partitioning profile is on the machine
    files: tuple[tuple[str, bool | None], ...] = ()   # (path, exists) of files a plan replaces

    def exists(self, path: str) -> bool | None:
        """Whether `path` exists on the machine (None: not known)."""
        return dict(self.files).get(path)


def unknown_facts() -> BootFacts:
    """The facts of a machine nothing could be read of (a remote window without a local root)."""
    return BootFacts(BootLoader("unknown", "the machine's /boot and /etc were not read"),
                     KernelConfig(None, None, None, None), 0, "CPU 0, the CPU Linux boots on")


def read_boot_facts(root: SysRoot, release: str | None, *, replaces=()) -> BootFacts:
    """The facts of the machine under `root`, whose kernel is `release` (`uname -r`); `replaces`:
    absolute paths of files a plan would replace, each told as existing or not."""
    cpu, why = read_boot_cpu(root)
    files = tuple((p, _exists(root, p)) for p in replaces)
    return BootFacts(read_boot_loader(root), read_kernel_config(root, release), cpu, why,
                     _first_line(root, root.path("etc", "tuned", "active_profile")), _tuned_installed(root), files)


def read_boot_loader(root: SysRoot) -> BootLoader:
    """How the kernel command line is kept on `root` (module docstring)."""
    entries_dir = root.path("boot", "loader", "entries")
    try:
        entries = [n for n in root.listdir(entries_dir) if n.endswith(".conf")]
        denied = False
    except SysRootReadError:
        entries, denied = [], True         # Fedora keeps the folder 0700: it is there, unread
    grubby = next(("/" + "/".join(p) for p in _GRUBBY if root.exists(root.path(*p))), None)
    if entries or (denied and root.is_dir(entries_dir)) or grubby:
        says = (f"/boot/loader/entries holds {len(entries)} boot entr{'y' if len(entries) == 1 else 'ies'}"
                if entries else "/boot/loader/entries is there" if root.is_dir(entries_dir) else "")
        says = " and ".join(s for s in (says, f"{grubby} is installed" if grubby else "") if s)
        return BootLoader("grubby", f"{says}: Boot Loader Specification entries keep each kernel's options "
                                    "in its own entry, and grubby changes them all")
    has_default = root.exists(root.path("etc", "default", "grub"))
    update_grub = next(("/" + "/".join(p) for p in _UPDATE_GRUB if root.exists(root.path(*p))), None)
    if update_grub or (has_default and root.exists(root.path("etc", "debian_version"))):
        return BootLoader("grub-debian", f"{update_grub or '/etc/debian_version'} is there (Debian, Ubuntu): "
                                         "grub-mkconfig reads /etc/default/grub and then "
                                         "/etc/default/grub.d/*.cfg, so a file of coremap's own there adds "
                                         "the words and removing it takes them out", "update-grub")
    if has_default:
        grub2 = root.is_dir(root.path("boot", "grub2"))
        text = root.read_optional(root.path("etc", "default", "grub"), limit=1 * MiB) or ""
        return BootLoader("grub", "/etc/default/grub is there, with no boot entries, grubby or update-grub: "
                                  "grub.cfg is made from it",
                          "grub2-mkconfig -o /boot/grub2/grub.cfg" if grub2 else "grub-mkconfig -o /boot/grub/grub.cfg",
                          _grub_cmdline_value(text))
    where = "this machine" if root.is_live else str(root.root)
    return BootLoader("unknown", f"{where} has none of /boot/loader/entries, grubby, update-grub or "
                                 "/etc/default/grub")


def _grub_cmdline_value(text: str) -> str | None:
    """The value /etc/default/grub gives GRUB_CMDLINE_LINUX (its last plain assignment, quotes
    removed), or None when it has none or one a shell would expand ($VAR, backquotes)."""
    value = None
    for line in text.splitlines():
        m = re.match(r'^\s*(?:export\s+)?GRUB_CMDLINE_LINUX=(.*)$', line)
        if not m:
            continue
        raw = m.group(1).strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
            raw = raw[1:-1]
        value = None if any(c in raw for c in "$`\\\"'") else raw
    return value


def read_kernel_config(root: SysRoot, release: str | None) -> KernelConfig:
    """Whether the running kernel was built with CONFIG_NO_HZ_FULL and CONFIG_RCU_NOCB_CPU, from the
    first source that can be read (module docstring)."""
    if release and _RELEASE.match(release):
        path = root.path("boot", f"config-{release}")
        text = _read_quietly(root, path)
        if text is not None:
            return _from_config(release, parse_kernel_config(text), f"/boot/config-{release}")
    data = _read_bytes_quietly(root, root.proc("config.gz"))
    if data is not None:
        try:
            # Bounded: a config is ~300 KB; a crafted capture must not inflate without end.
            text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, 64 * MiB).decode("utf-8", "replace")
        except zlib.error:
            text = None
        if text:
            return _from_config(release, parse_kernel_config(text), "/proc/config.gz")
    nohz = root.cpu_dir("nohz_full")
    if root.exists(nohz):
        return KernelConfig(release, True, None, "/sys/devices/system/cpu/nohz_full (shown only with it)")
    if root.is_live or _is_coremap_snapshot(root):
        return KernelConfig(release, False, None,
                            "no /sys/devices/system/cpu/nohz_full, which the kernel shows only when built with it")
    return KernelConfig(release, None, None, None)


def read_boot_cpu(root: SysRoot) -> tuple[int, str]:
    """(the boot CPU, what says so): module docstring."""
    cmdline = (_read_quietly(root, root.proc("cmdline")) or "").replace("\0", " ")
    sysfs = (_read_quietly(root, root.cpu_dir("nohz_full")) or "").replace("\0", "").strip()
    try:
        asked = parse_cmdline_isolation(cmdline).nohz_full or ()
        running = parse_cpulist(sysfs) if sysfs and sysfs != "(null)" else ()
    except CpuListError:
        asked, running = (), ()
    online_text = (_read_quietly(root, root.cpu_dir("online")) or "").strip()
    try:
        online = set(parse_cpulist(online_text)) if online_text else set(asked)
    except CpuListError:
        online = set(asked)
    dropped = sorted((set(asked) - set(running)) & online) if running else []
    if len(dropped) == 1:
        return dropped[0], (f"CPU {dropped[0]}: the running kernel dropped it from nohz_full= at boot, as it "
                            "does the CPU it boots on")
    return 0, "CPU 0, the CPU Linux boots on"


def _tuned_installed(root: SysRoot) -> bool | None:
    # tuned 2.20 (Debian 12) keeps its profiles in /usr/lib/tuned/NAME, later ones in /usr/lib/tuned/profiles/NAME.
    for parts in (("usr", "lib", "tuned", "cpu-partitioning"), ("usr", "lib", "tuned", "profiles", "cpu-partitioning")):
        if root.exists(root.path(*parts, "tuned.conf")):
            return True
    return False if root.is_live or root.is_dir(root.path("usr", "lib")) else None


def _from_config(release, config: dict[str, str], source: str) -> KernelConfig:
    return KernelConfig(release, config_enabled(config, "CONFIG_NO_HZ_FULL"),
                        config_enabled(config, "CONFIG_RCU_NOCB_CPU"), source)


def _is_coremap_snapshot(root: SysRoot) -> bool:
    try:
        return root.snapshot_meta() is not None
    except SysRootReadError:
        return False          # a damaged meta.json: not a snapshot this can vouch for


def _exists(root: SysRoot, path: str) -> bool | None:
    if root.exists(root.path(*path.strip("/").split("/"))):
        return True
    # A capture without /etc says nothing of the files there; a live machine or a tree with /etc does.
    return False if root.is_live or root.is_dir(root.path("etc")) else None


def _first_line(root: SysRoot, path) -> str | None:
    text = _read_quietly(root, path)
    line = text.split("\n", 1)[0].strip() if text else ""
    return line or None


def _read_quietly(root: SysRoot, path) -> str | None:
    data = _read_bytes_quietly(root, path)
    return None if data is None else data.decode("utf-8", "replace")


def _read_bytes_quietly(root: SysRoot, path) -> bytes | None:
    # A boot fact that cannot be read (absent, or root-only like /boot/config on some systems) is
    # not known; the plan says so instead of failing.
    try:
        return root.read_bytes(path, limit=8 * MiB)
    except SysRootReadError:
        return None


# -- the clocksource (whether the plan offers tsc=reliable) ----------------------------------------------
@dataclass(frozen=True)
class Clocksource:
    current: str | None            # "tsc", "kvm-clock", "hpet", ...; None when not read
    available: tuple[str, ...]     # the others the kernel could switch to


_CLOCKSOURCE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def read_clocksource(root: SysRoot) -> Clocksource:
    """The clocksource in use and the ones available, from
    /sys/devices/system/clocksource/clocksource0/{current,available}_clocksource (kernel/time/
    clocksource.c, current_clocksource_show and available_clocksource_show); a name that is not one
    word (a damaged capture) counts as not read."""
    folder = ("devices", "system", "clocksource", "clocksource0")
    current = (_read_quietly(root, root.sys(*folder, "current_clocksource")) or "").strip()
    available = (_read_quietly(root, root.sys(*folder, "available_clocksource")) or "").split()
    return Clocksource(current if _CLOCKSOURCE_NAME.match(current) else None,
                       tuple(n for n in available if _CLOCKSOURCE_NAME.match(n)))
