"""A row dragged out of a table carries a compact chip naming it ("thread 22877 python3", "IRQ 42
virtio3-tx"), not a picture of the whole row stretched across the window (issue 12)."""
from __future__ import annotations

import os

from PySide6.QtCore import QItemSelectionModel

from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.machines import extract
from widgets.pinning.drag import chip_text, pin_drag
from widgets.pinning.mime import PinPayload, decode_pin_mime
from widgets.tables.irqs import COL_DEVICE, IrqTableWidget
from widgets.tables.threads import ThreadTableWidget


def test_chip_text_names_one_target_and_counts_several():
    assert chip_text(PinPayload("thread", (22877,), 22870), "python3") == "thread 22877 python3"
    assert chip_text(PinPayload("irq", (42,)), "virtio3-tx") == "IRQ 42 virtio3-tx"
    assert chip_text(PinPayload("thread", (1, 2, 3), 77), "ignored") == "3 threads of process 77"


def test_an_irq_row_drags_as_a_chip(qtbot):
    w = IrqTableWidget()
    qtbot.addWidget(w)
    w.resize(1500, 400)
    w.set_state(Sampler(SysRoot(extract("master.internal"))).tick())
    irq = next(str(i) for i in range(1, 400) if w.model.row_of(str(i)) >= 0)
    assert w.select_irq(irq)
    w.view.selectionModel().select(w.view.currentIndex(), QItemSelectionModel.SelectionFlag.ClearAndSelect
                                   | QItemSelectionModel.SelectionFlag.Rows)
    drag = pin_drag(w.view, COL_DEVICE)
    assert decode_pin_mime(drag.mimeData()) == PinPayload("irq", (int(irq),))
    device = w.view.currentIndex().siblingAtColumn(COL_DEVICE).data()
    pm = drag.pixmap()
    # A chip: about a line of text high and far narrower than the 1,500-pixel row.
    assert pm.height() / pm.devicePixelRatio() < 40 and pm.width() / pm.devicePixelRatio() <= 380
    assert chip_text(PinPayload("irq", (int(irq),)), device).startswith(f"IRQ {irq} ")


def test_a_thread_row_drags_as_a_chip(qtbot):
    w = ThreadTableWidget()
    qtbot.addWidget(w)
    w.set_state(Sampler(SysRoot("/")).tick())
    pid = os.getpid()
    assert w.select_thread(pid, pid)
    drag = pin_drag(w.view, 0)
    assert decode_pin_mime(drag.mimeData()).ids == (pid,)
    assert drag.pixmap().width() / drag.pixmap().devicePixelRatio() <= 380
