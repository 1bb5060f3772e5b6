"""Pure parsers for the text behind the CPU topology: /proc/cpuinfo, cache sizes, NUMA distance
lines, raw sysfs ids and the CPU-isolation words of the kernel command line.

Formats:
- Documentation/admin-guide/cputopology.rst (topology/ files; -1 means "not known to this
  architecture", arch/arm64 prints cluster_id 65535 for "no cluster" on some kernels, see
  drivers/base/arch_topology.c where cluster_id is initialised to -1 and printed as u16 before 6.1).
- Documentation/ABI/testing/sysfs-devices-system-cpu (cache/indexN/size is "<n>K").
- drivers/base/node.c `node_read_distance`: one distance per online node, in node-id order.
- Documentation/admin-guide/kernel-parameters.txt and kernel/sched/isolation.c
  `housekeeping_isolcpus_setup` (isolcpus=[flag,...,]cpu-list; flags nohz, domain, managed_irq).
- /proc/cpuinfo is per architecture (arch/*/kernel/cpuinfo.c or setup.c): x86 prints one block per
  CPU with "model name" and "flags"; arm64 one block per CPU with "CPU implementer"/"CPU part";
  powerpc per-CPU "cpu : POWER9" blocks and then a machine block; s390 one global block
  ("vendor_id : IBM/S390") followed on newer kernels by per-CPU "cpu number" blocks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from app.errors import CpuListError, ParseError, excerpt
from app.parse.cpulist import parse_cpulist
from app.parse.number import is_ascii_hex, is_ascii_int

# Sentinels the kernel prints for "no such id": -1 everywhere, and 65535 for cluster_id where it
# was kept in a u16 (arm64 and x86 kernels before 6.2 print it for machines without clusters).
_NO_ID = {-1}
_NO_CLUSTER = {-1, 65535, 0xFFFFFFFF}


def parse_topology_id(text: str | None, *, what: str = "topology id", cluster: bool = False) -> int | None:
    """A raw id file (core_id, physical_package_id, die_id, cluster_id): None for absent, empty,
    -1 or (for cluster_id) 65535. Raises ParseError for text that is not an integer."""
    if text is None:
        return None
    s = text.strip()
    if not s:
        return None
    if not is_ascii_int(s):
        raise ParseError(what, f"expected an integer, found {excerpt(s)}")
    v = int(s)
    if v in (_NO_CLUSTER if cluster else _NO_ID):
        return None
    return v


_SIZE = re.compile(r"^([0-9]{1,15})\s*([KMGkmg]?)(?:i?[Bb])?$", re.ASCII)


def parse_cache_size(text: str, *, what: str = "cache size") -> int | None:
    """Bytes in a cache size such as "32K", "1280K", "2M", "512" (sysfs prints KiB with "K").
    Empty text gives None (some VMs leave it blank). Raises ParseError for anything else."""
    s = text.strip()
    if not s:
        return None
    m = _SIZE.match(s)
    if not m:
        raise ParseError(what, f"{s[:40]!r} is not a size like 32K")
    n = int(m.group(1))
    unit = m.group(2).upper()
    return n * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit]




def parse_distances(text: str, *, what: str = "node distance") -> tuple[int, ...]:
    """The integers of a node's `distance` file ("10 21 31")."""
    out = []
    for word in text.split():
        if not is_ascii_int(word):
            raise ParseError(what, f"{excerpt(word, 20)} is not a distance; expected numbers like '10 21'")
        out.append(int(word))
    return tuple(out)


def parse_node_meminfo_total(text: str) -> int | None:
    """MemTotal in kB from a node's meminfo ("Node 0 MemTotal:       15728640 kB")."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "Node" and parts[2] == "MemTotal:":
            if not is_ascii_int(parts[3]):
                raise ParseError("node meminfo", f"MemTotal {excerpt(parts[3], 20)} is not a number")
            return int(parts[3])
    return None


# -- kernel command line ------------------------------------------------------------------------

@dataclass(frozen=True)
class CmdlineIsolation:
    """The CPU-isolation words of /proc/cmdline. None means the parameter is absent."""
    isolcpus: tuple[int, ...] | None
    isolcpus_flags: tuple[str, ...]
    nohz_full: tuple[int, ...] | None
    rcu_nocbs: tuple[int, ...] | None

    @property
    def scheduler_isolated(self) -> tuple[int, ...]:
        """The CPUs isolcpus= takes out of the scheduler's load balancing: its list when it has the
        domain flag, or no flag at all (kernel/sched/isolation.c housekeeping_isolcpus_setup gives a
        bare list HK_FLAG_DOMAIN); none for managed_irq or nohz alone, which leave the scheduler
        balancing onto them (issue 30: worker1's isolcpus=managed_irq,0-4,11-79 isolates nothing
        from it)."""
        if self.isolcpus is None or (self.isolcpus_flags and "domain" not in self.isolcpus_flags):
            return ()
        return self.isolcpus


def parse_cmdline_isolation(text: str) -> CmdlineIsolation:
    """isolcpus=, nohz_full= and rcu_nocbs= from a kernel command line. The last occurrence wins,
    as it does for __setup() parameters. Raises CpuListError naming the word when a list is bad."""
    iso = nohz = nocbs = None
    flags: tuple[str, ...] = ()
    for word in text.split():
        key, sep, value = word.partition("=")
        if not sep:
            continue
        if key == "isolcpus":
            flags, iso = _parse_isolcpus(value)
        elif key == "nohz_full":
            nohz = parse_cpulist(value, what="kernel command line nohz_full=")
        elif key == "rcu_nocbs":
            # rcu_nocbs without a list (5.x+) means "all CPUs"; we keep only explicit lists.
            nocbs = parse_cpulist(value, what="kernel command line rcu_nocbs=") if value else None
    return CmdlineIsolation(iso, flags, nohz, nocbs)


def _parse_isolcpus(value: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    # kernel/sched/isolation.c: leading alphabetic words ending in "," are flags.
    flags = []
    rest = value
    while rest and (rest[0].isalpha()):
        word, sep, after = rest.partition(",")
        if not sep:
            raise CpuListError(f"kernel command line isolcpus={value!r}: flag {word!r} has no CPU list after it")
        flags.append(word)
        rest = after
    return tuple(flags), parse_cpulist(rest, what="kernel command line isolcpus=")


# -- /proc/cpuinfo --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CpuinfoProcessor:
    """One per-CPU block of /proc/cpuinfo (fields absent on an architecture are None)."""
    id: int
    model_name: str | None = None
    physical_id: int | None = None
    core_id: int | None = None
    implementer: int | None = None      # arm64 "CPU implementer"
    part: int | None = None             # arm64 "CPU part"
    mhz: float | None = None


@dataclass(frozen=True)
class Cpuinfo:
    arch: str | None                     # guessed from the file's shape: x86_64, aarch64, ppc64, s390x
    model_name: str | None
    processors: tuple[CpuinfoProcessor, ...]
    machine: dict                        # key -> value lines outside per-CPU blocks (POWER, s390)


# arm64 MIDR parts (arch/arm64/include/asm/cputype.h) for the names people recognise.
_ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD04): "Cortex-A35", (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72", (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75", (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD0D): "Cortex-A77", (0x41, 0xD40): "Neoverse-V1", (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1", (0x41, 0xD46): "Cortex-A510", (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2", (0x41, 0xD49): "Neoverse-N2", (0x41, 0xD4F): "Neoverse-V2",
    (0x41, 0xD80): "Cortex-A520", (0x41, 0xD81): "Cortex-A720", (0x41, 0xD82): "Cortex-X4",
    (0x41, 0xD84): "Neoverse-V3", (0x41, 0xD85): "Cortex-X925", (0x41, 0xD87): "Cortex-A725",
    (0x48, 0xD01): "Kunpeng-920", (0x4E, 0x004): "Carmel", (0x51, 0xC00): "Falkor",
    (0x61, 0x022): "Apple M1 Icestorm", (0x61, 0x023): "Apple M1 Firestorm",
    (0xC0, 0xAC3): "Ampere-1", (0x46, 0x001): "A64FX",
}


def arm_part_name(implementer: int | None, part: int | None) -> str:
    """"Cortex-A76" for a known (implementer, part), else "ARM 0xd0c"."""
    if part is None:
        return "ARM"
    name = _ARM_PARTS.get((implementer or 0, part))
    return name if name else f"ARM {part:#05x}"


def _int_auto(s: str) -> int | None:
    s = s.strip()
    hexa = s[:2] in ("0x", "0X")
    if not (is_ascii_int(s) if not hexa else is_ascii_hex(s)):
        return None
    try:
        return int(s, 0)
    except ValueError:          # "010": base 0 takes no leading zero
        return None


def parse_cpuinfo(text: str) -> Cpuinfo:
    """Blocks of "key : value" lines separated by blank lines. Never raises on odd lines: fields
    that do not parse are left None (cpuinfo is informational; sysfs is the source of truth)."""
    blocks: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    s390_lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if cur:
                blocks.append(cur)
                cur = {}
            continue
        key, sep, value = raw.partition(":")
        if not sep:
            continue
        key = key.strip()
        value = value.strip()
        if key.startswith("processor ") and key[10:].strip().isdigit():
            # s390: "processor 0: version = 00,  identification = ...,  machine = 2817"
            s390_lines.append((int(key[10:].strip()), value))
            continue
        if key == "processor" and cur and "processor" in cur:
            # A new block without a blank line between (seen on some dumps).
            blocks.append(cur)
            cur = {}
        cur.setdefault(key, value)
    if cur:
        blocks.append(cur)

    procs: list[CpuinfoProcessor] = []
    machine: dict[str, str] = {}
    for b in blocks:
        pid_text = b.get("processor", b.get("cpu number"))
        pid = _int_auto(pid_text) if pid_text is not None else None
        if pid is None or pid < 0:
            for k, v in b.items():
                machine.setdefault(k, v)
            continue
        name = b.get("model name") or (b.get("cpu") if "processor" in b else None)
        mhz = None
        for k in ("cpu MHz", "cpu MHz static"):
            if k in b:
                try:
                    mhz = float(b[k].replace("MHz", ""))
                except ValueError:
                    mhz = None
                break
        if mhz is None and "clock" in b:
            try:
                mhz = float(b["clock"].replace("MHz", ""))
            except ValueError:
                mhz = None
        procs.append(CpuinfoProcessor(
            id=pid,
            model_name=" ".join(name.split()) if name else None,
            physical_id=_int_auto(b["physical id"]) if "physical id" in b else None,
            core_id=_int_auto(b["core id"]) if "core id" in b else None,
            implementer=_int_auto(b["CPU implementer"]) if "CPU implementer" in b else None,
            part=_int_auto(b["CPU part"]) if "CPU part" in b else None,
            mhz=mhz,
        ))
    first = blocks[0] if blocks else {}
    arch = _guess_arch(first, machine, procs)
    model = _model_name(arch, procs, machine, s390_lines)
    procs.sort(key=lambda p: p.id)
    return Cpuinfo(arch, model, tuple(procs), machine)


def _guess_arch(first: dict, machine: dict, procs) -> str | None:
    if "vendor_id" in machine and "S390" in machine["vendor_id"].upper() or \
            first.get("vendor_id", "").upper().startswith("IBM/S390"):
        return "s390x"
    if "flags" in first and ("vendor_id" in first or "model name" in first):
        return "x86_64" if " lm " in f" {first['flags']} " else "i686"
    if "CPU implementer" in first:
        return "aarch64" if first.get("CPU architecture", "8").strip() in ("8", "9", "AArch64") else "arm"
    if first.get("cpu", "").upper().startswith(("POWER", "PPC")) or "timebase" in machine:
        return "ppc64"
    if "isa" in first and first.get("isa", "").startswith("rv"):
        return "riscv64"
    return None


def _model_name(arch, procs, machine, s390_lines) -> str | None:
    if arch == "s390x":
        vendor = machine.get("vendor_id", "IBM/S390")
        mtype = None
        for _, value in s390_lines:
            m = re.search(r"machine\s*=\s*(\w+)", value)
            if m:
                mtype = m.group(1)
                break
        mtype = mtype or machine.get("machine")
        return f"{vendor} (machine {mtype})" if mtype else vendor
    if arch in ("aarch64", "arm"):
        names = []
        for p in procs:
            n = arm_part_name(p.implementer, p.part) if p.part is not None else (p.model_name or "ARM")
            if n not in names:
                names.append(n)
        if names:
            return " + ".join(names)
        hw = machine.get("Hardware")
        return hw
    for p in procs:
        if p.model_name:
            return p.model_name
    return machine.get("model") or machine.get("Hardware")
