"""The IRQ table's Node column on master.internal (issue 30, wrong answer 4): the device's NUMA node, the
IRQ's own beside it where the two differ, both named in the cell's tooltip, and a click on the header
sorts the rows by the device's node."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QToolTip

from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.hover import send_tooltip_event
from tests.machines import extract
from widgets.tables.irqs import COL_IRQ, COL_NODE, IrqTableWidget

# The offscreen platform cannot raise the tooltip's window nor size it to its hints; the tooltip is shown.
pytestmark = [pytest.mark.qt_log_level_fail("WARNING"),
              pytest.mark.qt_log_ignore(r"^This plugin does not support (raise\(\)|propagateSizeHints\(\))")]


def _numa_node(root, address: str) -> int:
    return int((root / "sys" / "bus" / "pci" / "devices" / address / "numa_node").read_text())


def test_node_column_shows_the_devices_node_and_the_irqs_own(qtbot):
    root = extract("master.internal")
    assert (root / "proc" / "irq" / "144" / "node").read_text().strip() == "0"
    assert _numa_node(root, "0000:b1:00.0") == 1             # nvme0, whose queue 0 is IRQ 144
    widget = IrqTableWidget()
    qtbot.addWidget(widget)
    widget.resize(1200, 700)
    widget.show()
    widget.set_state(Sampler(SysRoot(root)).tick())

    # The user types the queue's name in the filter and reads the row.
    QTest.keyClicks(widget.filter_edit, "nvme0q0")
    assert widget.proxy.rowCount() == 1
    index = widget.proxy.index(0, COL_NODE)
    assert widget.proxy.index(0, COL_IRQ).data() == "144"
    assert index.data() == "1 (irq 0)"

    # Hovering the cell names the device and the IRQ's own node.
    pos = widget.view.visualRect(index).center()
    send_tooltip_event(widget.view.viewport(), pos)
    tip = QToolTip.text()
    assert "0000:b1:00.0 is on NUMA node 1" in tip and "/proc/irq/144/node" in tip and tip.endswith("is 0")
    QToolTip.hideText()

    assert "PCI numa_node" in widget.model.headerData(COL_NODE, Qt.Orientation.Horizontal,
                                                      Qt.ItemDataRole.ToolTipRole)

    # A click on the Node header sorts by the device's node: node 0's devices first, then node 1's.
    widget.filter_edit.clear()
    header = widget.view.horizontalHeader()
    x = header.sectionViewportPosition(COL_NODE) + header.sectionSize(COL_NODE) // 2
    QTest.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, 5))
    if header.sortIndicatorOrder() != Qt.SortOrder.AscendingOrder:
        QTest.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, 5))
    assert header.sortIndicatorSection() == COL_NODE
    firsts = [widget.proxy.index(r, COL_NODE).data() for r in range(widget.proxy.rowCount())]
    nodes = [int(t.split()[0]) for t in firsts if t]
    assert nodes == sorted(nodes) and {0, 1} <= set(nodes)
    assert "1 (irq 0)" in firsts
