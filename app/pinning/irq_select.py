"""Which IRQs a pin names: numbers and lists ("24", "24,25,30-33"), patterns of handler names
("i40e-eno1-TxRx-*", matched as fnmatch against each action name /proc/interrupts prints, the names
`coremap irqs --json` lists), and devices ("eno1", "nvme0", "0000:19:00.0": every vector of the PCI
function behind the name, its msi_irqs where sysfs lists them, else the function /proc/interrupts names
in its chip or handler). `coremap pin --irq/--device` and tuna's `-q` select this way; every word must
select something, or the pin is refused before anything is read back or written (issue 30: two --irq
kept only the last).
"""
from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence

from app.errors import CoremapError, excerpt
from app.machine.interrupts import IrqTable, parse_action_name

IRQ_MAX = 65535
MAX_WORD = 256            # a handler name is at most a few dozen characters; a pattern no longer
_NUMBERS = re.compile(r"[0-9][0-9,\- ]*")
_RANGE = re.compile(r"\s*([0-9]{1,5})\s*(?:-\s*([0-9]{1,5})\s*)?")
_PCI = re.compile(r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


class IrqSelectionError(CoremapError):
    """A word of --irq or --device that selects no IRQ, or is not a number, list, name or pattern."""


def irq_numbers(word: str) -> tuple[int, ...] | None:
    """The IRQ numbers of "24" or "24,25,30-33"; None when `word` is a name or pattern instead.
    IrqSelectionError for a list that is not one ("30-2x", "70000")."""
    if not _NUMBERS.fullmatch(word):
        return None
    out: dict[int, None] = {}
    for piece in word.split(","):
        m = _RANGE.fullmatch(piece)
        lo, hi = (int(m[1]), int(m[2] or m[1])) if m else (-1, -1)
        if not m or hi < lo or hi > IRQ_MAX:
            raise IrqSelectionError(f"--irq {excerpt(word)}: {excerpt(piece)} is not an IRQ number or range "
                                    f"(0-{IRQ_MAX}, low-high); write IRQs like 24,25,30-33 or a name like "
                                    "'i40e-eno1-TxRx-*'")
        out.update(dict.fromkeys(range(lo, hi + 1)))
    return tuple(out)


def check_word(word: str, what: str = "--irq") -> str:
    """A word as it may be matched: printable, not empty, not longer than a handler name could be."""
    if not word.strip() or len(word) > MAX_WORD or not word.isprintable():
        raise IrqSelectionError(f"{what} {excerpt(word)}: not an IRQ number, list, handler name or pattern; "
                                "see `coremap irqs` for the names")
    return word


def select_irqs(words: Sequence[str], devices: Sequence[str], *, exists: Callable[[int], bool],
                table: Callable[[], IrqTable], where: str) -> tuple[int, ...]:
    """Every IRQ the words and devices select, in number order, each once. `exists(n)` says whether IRQ
    n is there (numbers need no table); `table()` reads the machine's IRQs (only names and devices do);
    `where` names the machine in the refusal ("this machine", a --root)."""
    chosen: set[int] = set()
    for word in words:
        numbers = irq_numbers(check_word(word))
        if numbers is not None:
            missing = [n for n in numbers if not exists(n)]
            if missing:
                raise IrqSelectionError(f"IRQ {missing[0]} does not exist on {where}; see `coremap irqs`")
            chosen.update(numbers)
            continue
        found = [int(r.irq) for r in table().rows if r.numbered and any(fnmatch.fnmatchcase(a, word)
                                                                          for a in r.actions)]
        if not found:
            raise IrqSelectionError(f"--irq {excerpt(word)}: no IRQ handler on {where} is named like that; "
                                    "`coremap irqs --json` lists each IRQ's handler names")
        chosen.update(found)
    for name in devices:
        found = device_irqs(table(), check_word(name, "--device"))
        if not found:
            raise IrqSelectionError(f"--device {excerpt(name)}: no IRQ of that device on {where}; name a network "
                                    "interface (eno1), a disk (nvme0) or a PCI address (0000:19:00.0) as "
                                    "`coremap irqs` shows them")
        chosen.update(found)
    return tuple(sorted(chosen))


def device_irqs(table: IrqTable, name: str) -> list[int]:
    """Every numbered IRQ of device `name`: a PCI address, or a network interface or disk one of the IRQs
    names; all the vectors of the PCI functions found (a NIC's misc vector too), else those IRQs alone."""
    if _PCI.fullmatch(name):
        addresses = {(name if name.count(":") == 2 else f"0000:{name}").lower()}
        named: list[int] = []
    else:
        rows = {r.irq: r for r in table.rows}
        named = [int(irq) for irq, info in table.info.items() if irq.isdigit() and _names(rows.get(irq), info, name)]
        addresses = {a for irq in named if (a := _address(table, str(irq)))}
    on_device = [int(irq) for irq in table.info if irq.isdigit() and _address(table, irq) in addresses]
    return sorted(set(named) | set(on_device))


def _address(table: IrqTable, irq: str) -> str | None:
    info = table.info.get(irq)
    return info.device.pci_address if info is not None and info.device is not None else None


def _names(row, info, name: str) -> bool:
    """Whether the IRQ of `row` and `info` is one of device `name`'s: its network interface, or a disk
    its handler names."""
    if info.device is not None and info.device.netdev == name:
        return True
    return row is not None and any(parse_action_name(a).block == name for a in row.actions)
