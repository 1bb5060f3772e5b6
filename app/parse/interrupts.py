"""/proc/interrupts and /proc/softirqs.

Format: Documentation/filesystems/proc.rst ("1.2 Kernel data", interrupts) and
kernel/irq/proc.c show_interrupts(): a header of "CPUn" columns for the ONLINE CPUs only, so a
column index is not a CPU number once a CPU is offline; then one row per IRQ: "label:" counts...
chip-name [hwirq[-trigger]] [trigger] actions. Architecture rows (NMI, LOC, ERR, MIS, IPIn, FIQ)
may have one count (ERR, MIS), no count (FIQ on ARM) or a description after the counts.

Each count is printed "%10u " (kernel/irq/proc.c), so counts are separated by at least one space;
only the label can touch the first count: arm64's arch_show_interrupts prints "%*s%u:%s" for IPIn
with no space when the label width is under 4, giving "IPI0:2768808080" (node_exporter's fixture).

/proc/softirqs (fs/proc/softirqs.c show_softirqs) iterates for_each_possible_cpu, unlike
/proc/interrupts (for_each_online_cpu): its columns are the POSSIBLE CPUs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from app.errors import ParseError, excerpt
from app.parse.cpulist import MAX_CPU
from app.parse.json_text import Count, CpuId, Meta


@dataclass(frozen=True)
class InterruptRow:
    irq: str                    # "24", "LOC", "IPI0", "Err" (as printed, without the colon)
    counts: tuple[Count, ...]     # per CPU, same order as InterruptTable.cpus; () for single/no-count rows
    total: Count                  # sum(counts), or the single count
    chip: str | None = None     # "IR-PCI-MSI", "PCI-MSIX-0000:00:01.0", "GICv3"; None for arch rows
    hwirq: str | None = None    # "524288", "0"; None where not printed
    trigger: str | None = None  # "edge", "fasteoi", "level", "Edge"...
    actions: tuple[str, ...] = ()   # handler names ("i40e-eno1-TxRx-0", "ehci_hcd:usb1")
    description: str = ""       # everything after the counts, as printed (whitespace-collapsed)

    @property
    def numbered(self) -> bool:
        """A device IRQ with a /proc/irq/N folder (as opposed to LOC, NMI, IPI...)."""
        return self.irq.isdigit()

    @property
    def name(self) -> str:
        """Best short name: the actions joined, else the description."""
        return ", ".join(self.actions) if self.actions else self.description

    @property
    def per_cpu(self) -> bool:
        """True when the row has one count per CPU column (ERR, MIS and FIQ do not)."""
        return bool(self.counts)


@dataclass(frozen=True)
class InterruptTable:
    cpus: tuple[CpuId, ...]              # CPU ids from the header, in column order
    rows: Annotated[tuple[InterruptRow, ...], Meta(max_length=MAX_ROWS)]

    def row(self, irq: str) -> InterruptRow | None:
        for r in self.rows:
            if r.irq == irq:
                return r
        return None


@dataclass(frozen=True)
class SoftirqTable:
    cpus: tuple[CpuId, ...]                          # CPU ids from the header
    counts: dict[str, tuple[Count, ...]]             # "NET_RX" -> per CPU, same order as cpus


# Rows a table may hold: IRQ numbers are below 65,536 on every machine coremap reads (the helper and the
# journal take no larger; the largest real table here has 1,881 rows), plus a few dozen per-CPU rows.
MAX_ROWS = 65_536

# Rows the architectures print with one global count and no per-CPU columns:
# x86 arch/x86/kernel/irq.c arch_show_interrupts ("ERR", "MIS"), arm/arm64 (older) "Err",
# alpha/mips/sh/xtensa "ERR", "BAD" on some older ports.
_SINGLE_COUNT_ROWS = frozenset({"ERR", "MIS", "Err", "BAD"})

# Flow-handler names (desc->name, set by irq_set_chip_and_handler_name) that old kernels glued to
# the chip name: "IR-IO-APIC-edge", "IR-PCI-MSI-edge", "DMAR_MSI-edge", "IO-APIC-fasteoi".
_FLOW_NAMES = frozenset({"edge", "level", "fasteoi", "simple", "percpu", "percpu_devid",
                         "fasteoi_ack", "bad", "edge_eoi", "ioapic"})
# CONFIG_GENERIC_IRQ_SHOW_LEVEL (ARM, RISC-V) prints "Level"/"Edge" after the hwirq.
_LEVELS = frozenset({"Level", "Edge"})


def _cpu_header(line: str, what: str, lineno: int) -> tuple[int, ...]:
    cpus = []
    for tok in line.split():
        n = tok[3:]
        if not (tok.startswith("CPU") and n.isdigit() and n.isascii() and len(n) <= 5 and int(n) < MAX_CPU):
            raise ParseError(what, f"header column {excerpt(tok, 30)} is not CPUn (n below {MAX_CPU}); "
                                   "expected a header like 'CPU0 CPU1 ...'", lineno)
        cpus.append(int(n))
    if len(set(cpus)) != len(cpus):
        raise ParseError(what, "header names a CPU twice", lineno)
    return tuple(cpus)


def _header(lines: list[str], what: str) -> tuple[int, tuple[int, ...]]:
    """(index of the header line, CPU ids)."""
    for i, line in enumerate(lines):
        if line.strip():
            cpus = _cpu_header(line, what, i + 1)
            return i, cpus
    raise ParseError(what, "empty: no 'CPU0 CPU1 ...' header; is this the right file?")


def _describe(rest: list[str]) -> tuple[str | None, str | None, str | None, tuple[str, ...]]:
    """(chip, hwirq, trigger, actions) from the tokens after the counts of a numbered row.

    kernel/irq/proc.c show_interrupts prints " %8s" chip (or irq_print_chip's own text, e.g.
    "IR-PCI-MSIX-0000:b1:00.0"), " %*lu" hwirq when the IRQ has a domain, " %-8s" Level/Edge with
    GENERIC_IRQ_SHOW_LEVEL, "-%-8s" desc->name (so "2-edge" glues to the hwirq), then "  action" and
    ", action" for each further handler. Kernels before the hwirq column printed "chip-name" glued.
    """
    n = len(rest)
    if n == 0:
        return None, None, None, ()
    chip = rest[0]
    hwirq = trigger = None
    i = 1
    if i < n:
        t = rest[i]
        if t.isdigit():
            hwirq, i = t, i + 1
            if i < n and rest[i] in _LEVELS:
                trigger, i = rest[i], i + 1
        elif t in _LEVELS:
            trigger, i = t, i + 1
        elif t[:1] == "-" and t[1:] in _FLOW_NAMES:
            # a chip without an irq domain: blank hwirq, then "-edge"
            trigger, i = t[1:], i + 1
        else:
            head, sep, tail = t.partition("-")
            if sep and head.isdigit() and tail in _FLOW_NAMES:
                hwirq, trigger, i = head, tail, i + 1
    if i < n and trigger in _LEVELS and rest[i][:1] == "-" and rest[i][1:] in _FLOW_NAMES:
        i += 1          # "Level   -fasteoi": SHOW_LEVEL then desc->name; the flow name adds nothing
    if hwirq is None and trigger is None:
        base, sep, flow = chip.rpartition("-")
        if sep and base and flow in _FLOW_NAMES:
            chip, trigger = base, flow
    actions = tuple(a for a in " ".join(rest[i:]).split(", ") if a) if i < n else ()
    return chip, hwirq, trigger, actions


# Small counts spelled as the kernel prints them. Most cells of a big machine's table are small
# ("0" fills most of a 112-CPU table), and a C-level dict lookup per token is ~3x cheaper than int().
# Fixed and never grown, so repeated parses in a sampler do not accumulate memory.
_SMALL = {str(i): i for i in range(1000)}


def _counter():
    """A converter of count tokens -> tuple of ints. Raises ValueError for a token that is not
    a count: ASCII digits only (int() would also take "+1", "-1", "1_0" and other scripts' digits)."""
    get = _SMALL.__getitem__

    def convert(toks: list[str]) -> tuple[int, ...]:
        try:
            return tuple(map(get, toks))
        except KeyError:
            pass
        joined = "".join(toks)
        if not (joined.isdigit() and joined.isascii()):
            raise ValueError(joined[:40])
        return tuple(map(int, toks))

    return convert


class RowMemo:
    """The rows of the previous parse of one file by their line, for a caller that parses it again
    and again (the sampler, every tick): a line printed exactly as last time (an idle IRQ's) gives
    the same row, which is then taken as it is, the same object, without a split or a conversion.
    Kept only for files up to MEMO_MAX_BYTES, so the lines it holds stay small."""

    __slots__ = ("header", "rows")

    def __init__(self):
        self.header: str | None = None
        self.rows: dict[str, InterruptRow] = {}


MEMO_MAX_BYTES = 1 << 20


def parse_interrupts(text: str, *, what: str = "interrupts", memo: RowMemo | None = None) -> InterruptTable:
    """The table of /proc/interrupts. Raises ParseError naming the line for a truncated row. With a
    `memo`, lines unchanged since the parse that filled it give its rows (see RowMemo)."""
    n = text.count("\n")
    if n > MAX_ROWS + 64:
        # Counted before anything is split: 3 million rows (200 MB, under the file's 256 MiB bound)
        # took 124 s and 5.3 GB as rows.
        raise ParseError(what, f"{n:,} lines, more than the {MAX_ROWS:,} IRQs any machine has; "
                               "not /proc/interrupts")
    lines = text.split("\n")
    start, cpus = _header(lines, what)
    ncpu = len(cpus)
    rows = []
    seen = set()
    append = rows.append
    conv = _counter()
    known = memo.rows if memo is not None and memo.header == lines[start] else {}
    keep = {} if memo is not None and len(text) <= MEMO_MAX_BYTES else None
    # Fast path. kernel/irq/proc.c prints every CPU cell 11 characters wide ("%10u " after "N: ",
    # or " %10u" after "N:" since v6.x), so the counts of a row are the 11*ncpu+1 characters after
    # its colon. Rows on a big machine repeat the same cells (most queues idle: all zeros), so the
    # whole count segment is looked up in a per-parse memo before anything is split or converted.
    # The segment is trusted only when it ends on whitespace (a count is never cut) and splits into
    # exactly ncpu ASCII-digit tokens; any other row takes the token path below.
    width = 11 * ncpu + 1
    segments: dict[str, tuple[tuple[int, ...], int]] = {}
    for lineno in range(start + 1, len(lines)):
        line = lines[lineno]
        row = known.get(line)
        if row is None:
            row = _parse_row(line, ncpu, width, segments, conv, what, lineno + 1)
            if row is None:
                continue            # blank lines occur (prometheus-procfs before PIN:, trailing newline)
        if row.irq in seen:
            raise ParseError(what, f"row {row.irq!r} appears twice", lineno + 1)
        seen.add(row.irq)
        append(row)
        if keep is not None:
            keep[line] = row
    if memo is not None:
        memo.header, memo.rows = lines[start], keep or {}
    return InterruptTable(cpus, tuple(rows))


def _parse_row(line: str, ncpu: int, width: int, segments: dict, conv, what: str,
               lineno: int) -> InterruptRow | None:
    """One row of the table (None for a blank line): the fast path of parse_interrupts, else tokens."""
    colon = line.find(":")
    label = line[:colon].strip() if colon > 0 else ""
    # isprintable() is False for every whitespace but " " (categories Zs/Zl/Zp/Cc), so this
    # accepts exactly the labels str.split() would keep as one token.
    if label and label.isprintable() and " " not in label and label not in _SINGLE_COUNT_ROWS:
        seg = line[colon + 1:colon + 1 + width]
        hit = segments.get(seg)
        if hit is None and (len(seg) < width or seg[-1] in " \t"):
            c = _counts(seg.split(), ncpu, conv)
            if c is not None:
                hit = segments[seg] = (c, sum(c))
        if hit is not None:
            counts, total = hit
            rest = line[colon + 1 + width:].split()
            if label.isdigit():
                chip, hwirq, trigger, actions = _describe(rest)
                return InterruptRow(label, counts, total, chip, hwirq, trigger, actions, " ".join(rest))
            return InterruptRow(label, counts, total, description=" ".join(rest))
    toks = line.split()
    if not toks:
        return None
    return _row_from_tokens(toks, ncpu, conv, what, lineno)


def _counts(toks: list[str], ncpu: int, conv) -> tuple[int, ...] | None:
    """The ncpu counts of a row from its tokens; None when there are not that many, or one is not a
    count (the caller then reads the row another way, or refuses it)."""
    if len(toks) != ncpu:
        return None
    try:
        return conv(toks)
    except ValueError:
        return None


def _row_from_tokens(toks: list[str], ncpu: int, conv, what: str, lineno: int) -> InterruptRow:
    """A row whose counts are not where the kernel's fixed widths put them: hand-edited or
    re-indented files (telegraf's), single-count (ERR, MIS) and no-count (FIQ) rows, and errors."""
    first = toks[0]
    if first[-1:] == ":":
        label = first[:-1]
        off = 1
    else:
        label, sep, glued = first.partition(":")
        if not sep:
            raise ParseError(what, f"row {first[:30]!r} has no 'label:'", lineno)
        toks[0] = glued     # "IPI0:2768808080": the label touches its first count
        off = 0
    if not label:
        raise ParseError(what, "row has an empty label", lineno)
    body = toks[off:]
    # Checked first: on a 1-CPU machine "ERR: 0" would otherwise pass for a per-CPU row.
    if label in _SINGLE_COUNT_ROWS and body and body[0].isdigit() and body[0].isascii():
        return InterruptRow(label, (), int(body[0]), description=" ".join(body[1:]))
    counts = _counts(toks[off:off + ncpu], ncpu, conv)
    if counts is not None:
        rest = toks[off + ncpu:]
        if label.isdigit():
            chip, hwirq, trigger, actions = _describe(rest)
            return InterruptRow(label, counts, sum(counts), chip, hwirq, trigger, actions, " ".join(rest))
        return InterruptRow(label, counts, sum(counts), description=" ".join(rest))
    if not label.isdigit() and label not in _SINGLE_COUNT_ROWS and body and not body[0][:1].isdigit():
        # A row with no counts at all: the Raspberry Pi kernel's "FIQ:  usb_fiq"
        # (arch/arm/kernel/fiq.c show_fiq_list).
        return InterruptRow(label, (), 0, description=" ".join(body))
    have = 0
    for t in body:
        if not (t.isdigit() and t.isascii()):
            break
        have += 1
    raise ParseError(
        what, f"row {label!r} has {min(have, ncpu)} counts where the header names {ncpu} CPUs "
              "(truncated, or not /proc/interrupts); capture the file again", lineno)


def parse_softirqs(text: str, *, what: str = "softirqs") -> SoftirqTable:
    """The table of /proc/softirqs: kind ("NET_RX") -> counts per CPU column."""
    if text.count("\n") > MAX_ROWS:
        raise ParseError(what, f"more than {MAX_ROWS:,} lines; the kernel prints ten kinds: not /proc/softirqs")
    lines = text.split("\n")
    start, cpus = _header(lines, what)
    ncpu = len(cpus)
    counts: dict[str, tuple[int, ...]] = {}
    for lineno in range(start + 1, len(lines)):
        toks = lines[lineno].split()
        if not toks:
            continue
        first = toks[0]
        label, sep, glued = first.partition(":")
        if not sep or not label:
            raise ParseError(what, f"row {first[:30]!r} has no 'NAME:'", lineno + 1)
        body = toks[1:]
        if glued:
            body.insert(0, glued)
        joined = "".join(body)
        if len(body) != ncpu or not (joined.isdigit() and joined.isascii()):
            raise ParseError(what, f"row {label!r} needs {ncpu} counts, one per header CPU; "
                                   "capture the file again", lineno + 1)
        if label in counts:
            raise ParseError(what, f"row {label!r} appears twice", lineno + 1)
        counts[label] = tuple(map(int, body))
    return SoftirqTable(cpus, counts)
