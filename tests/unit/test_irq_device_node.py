"""The IRQ's Node is its device's NUMA node (issue 30, wrong answer 4): /proc/irq/N/node is where the
kernel allocated the IRQ's descriptor, and on master.internal 228 of the IRQs raised by a PCI function
differ from that function's numa_node (nvme0q0: 0, on a device on node 1). The oracle reads the chip
name's PCI address in /proc/interrupts and the two files straight from the capture."""
from __future__ import annotations

import json
import re

import pytest

from app.cli.main import main
from app.machine.interrupts import read_irqs
from app.sysroot import SysRoot
from tests.machines import extract

_CHIP_PCI = re.compile(r"PCI-MSIX?-([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])")


@pytest.fixture(scope="module")
def master():
    root = extract("master.internal")
    return root, read_irqs(SysRoot(root))


def _oracle(root) -> dict[str, tuple[int, int]]:
    """{irq: (its device's numa_node, its own node)} for every IRQ whose chip names a PCI function."""
    out = {}
    for line in (root / "proc" / "interrupts").read_text().splitlines()[1:]:
        label = line.split(":", 1)[0].strip()
        m = _CHIP_PCI.search(line)
        f = root / "sys" / "bus" / "pci" / "devices" / m.group(1) / "numa_node" if m and label.isdigit() else None
        if f is not None and f.exists():
            out[label] = (int(f.read_text()), int((root / "proc" / "irq" / label / "node").read_text()))
    return out


def test_master_node_is_the_devices_with_the_irqs_own_beside_it(master):
    root, table = master
    want = _oracle(root)
    assert len(want) == 1857
    differ = {irq for irq, (dev, own) in want.items() if dev != own}
    assert len(differ) == 228
    for irq, (dev, own) in want.items():
        info = table.info[irq]
        assert (info.device_node, info.node) == (dev, own), irq
        assert info.node_text() == (str(dev) if dev == own else f"{dev} (irq {own})"), irq
    nvme0q0 = table.info["144"]
    assert nvme0q0.device.queue == "q0" and nvme0q0.device.pci_address == "0000:b1:00.0"
    assert (nvme0q0.device_node, nvme0q0.node, nvme0q0.node_text()) == (1, 0, "1 (irq 0)")


def test_an_irq_without_a_device_shows_its_own_node(master):
    _, table = master
    timer = table.info["0"]                         # IR-IO-APIC timer: no PCI function
    assert timer.device is None and timer.device_node is None
    assert timer.node_text() == str(timer.node)


def test_irqs_command_prints_and_writes_both(capsys, master):
    root, _ = master
    assert main(["irqs", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    header = next(ln for ln in out.splitlines() if ln.startswith("IRQ "))
    row = next(ln for ln in out.splitlines() if ln.startswith("144 "))
    node_at = header.index("NODE")
    assert row[node_at:].startswith("1 (irq 0)") and "nvme0q0" in row
    assert main(["irqs", "--root", str(root), "--json"]) == 0
    by = {r["irq"]: r for r in json.loads(capsys.readouterr().out)["irqs"]}
    assert (by["144"]["device_node"], by["144"]["node"]) == (1, 0)
    assert (by["599"]["device_node"], by["599"]["node"]) == (0, 0)
    assert by["0"]["device_node"] is None
