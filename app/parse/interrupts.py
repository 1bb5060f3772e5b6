"""/proc/interrupts and /proc/softirqs.

Format: Documentation/filesystems/proc.rst ("1.2 Kernel data", interrupts) and
kernel/irq/proc.c show_interrupts(): a header of "CPUn" columns for the ONLINE CPUs only, so a
column index is not a CPU number once a CPU is offline; then one row per IRQ: "label:" counts...
chip-name [hwirq[-trigger]] [trigger] actions. Architecture rows (NMI, LOC, ERR, MIS, IPIn, FIQ)
may have one count (ERR, MIS), no count (FIQ on ARM) or a description after the counts.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InterruptRow:
    irq: str                    # "24", "LOC", "IPI0", "Err" (as printed, without the colon)
    counts: tuple[int, ...]     # per CPU, same order as InterruptTable.cpus; () for single/no-count rows
    total: int                  # sum(counts), or the single count
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


@dataclass(frozen=True)
class InterruptTable:
    cpus: tuple[int, ...]              # CPU ids from the header, in column order
    rows: tuple[InterruptRow, ...]

    def row(self, irq: str) -> InterruptRow | None:
        for r in self.rows:
            if r.irq == irq:
                return r
        return None


@dataclass(frozen=True)
class SoftirqTable:
    cpus: tuple[int, ...]                          # CPU ids from the header
    counts: dict[str, tuple[int, ...]]             # "NET_RX" -> per CPU, same order as cpus
