"""A row dragged out of a table carries a compact chip naming it ("thread 22877 python3", "IRQ 42
virtio3-tx"), not a picture of the whole row stretched across the window (issue 12); the chip never
hides the grid's reason for refusing a drop, nor loses the start of a long name (issue 28)."""
from __future__ import annotations

import os

from PySide6.QtCore import QItemSelectionModel, QRect

from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import show_pins
from tests.machines import extract
from widgets.pinning.drag import chip_text, pin_drag
from widgets.pinning.mime import PinPayload, decode_pin_mime
from widgets.tables.irqs import COL_DEVICE, IrqTableWidget
from widgets.tables.threads import ThreadTableWidget
from widgets.topology.drag import CHIP_MAX_W, CHIP_PAD_X, chip_hotspot, drag_pixmap


def test_chip_text_names_one_target_and_counts_several():
    assert chip_text(PinPayload("thread", (22877,), 22870), "python3") == "thread 22877 python3"
    assert chip_text(PinPayload("irq", (42,)), "virtio3-tx") == "IRQ 42 virtio3-tx"
    assert chip_text(PinPayload("thread", (1, 2, 3), 77), "ignored") == "3 threads of process 77"
    # A Java thread: the full name it will be pinned by, not the tree's "full (comm)" cell.
    java = PinPayload("thread", (28206,), 28190, ((28206, "market-data-feed-handler-0"),))
    assert chip_text(java, "market-data-feed-handler-0 (market-data-fee)") == \
        "thread 28206 market-data-feed-handler-0"


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


# -- the chip and the grid's drop hint (issue 28: the chip covered the red reason, cut on the left) ----------
LONG = "thread 28206 market-data-feed-handler-0 (market-data-fee)"


def _ink_columns(pm) -> list[int]:
    """The columns where the chip's dark grey text (not its one-pixel border) has ink."""
    img = pm.toImage()
    edge = round(2 * pm.devicePixelRatio()) + 1
    cols = []
    for x in range(edge, img.width() - edge):
        for y in range(edge, img.height() - edge):
            c = img.pixelColor(x, y)
            if c.alpha() > 200 and max(c.red(), c.green(), c.blue()) < 110:
                cols.append(x)
                break
    return cols


def test_a_long_thread_name_is_drawn_inside_the_chip_from_its_first_letter():
    for dpr in (1.0, 1.5, 2.0):
        pm = drag_pixmap(LONG, dpr)
        cols = _ink_columns(pm)
        # The text starts at the left padding and ends before the right one: nothing is cut off.
        assert cols and cols[0] >= (CHIP_PAD_X - 2) * dpr and cols[-1] <= pm.width() - (CHIP_PAD_X - 2) * dpr
        assert pm.width() / dpr <= CHIP_MAX_W + 2 * CHIP_PAD_X + 1


def test_the_chip_is_held_above_the_cursor_clear_of_the_hint_below_it():
    pm = drag_pixmap(LONG, 1.0)
    hot = chip_hotspot(pm)
    chip = QRect(-hot, pm.size())                   # where the chip is drawn, the cursor at (0, 0)
    assert chip.bottom() < 0 and chip.left() > 0    # above and to the right: not over the target


def _refused_drag_at(qtbot, view, cell):
    from tests.gui.test_pinning import _enter_move, _mime, _point_on
    pos = _point_on(view, cell)
    enter, move = _enter_move(view, pos, _mime("irq", [999]))
    assert enter.isAccepted() and not move.isAccepted()
    return pos


def test_the_reason_is_readable_beside_the_chip_wherever_the_cursor_is(qtbot, tmp_path):
    from tests.gui.test_pinning import _copy, _window
    root = SysRoot(_copy(tmp_path, "sno"))
    w = _window(qtbot, root)
    journal = Journal(tmp_path / "journal.jsonl")
    show_pins(w, AffinityService(root, journal))
    view = w.topology_view
    chip = drag_pixmap(LONG, view.devicePixelRatioF())
    hot = chip_hotspot(chip)
    vp = view.viewport().rect()
    cells = sorted(view.cells().values(), key=lambda c: (c.sceneBoundingRect().x(), c.sceneBoundingRect().y()))
    for cell in (cells[0], cells[-1]):              # the first and the last cell: a corner of the grid each
        pos = _refused_drag_at(qtbot, view, cell)
        hint = view.pin_drops.hint_rect
        assert "IRQ 999 does not exist" in view.pin_drops.last_hint and hint is not None
        assert vp.contains(hint), (hint, vp)        # never cut by the viewport's edge
        assert not hint.intersects(QRect(pos - hot, chip.size() / chip.devicePixelRatio())), (hint, pos)
    journal.close()
