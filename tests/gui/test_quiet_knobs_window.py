"""tuned's knobs in the window's Make quiet preview (issue 30): tick boxes under the preview, clicked with
the mouse, ask for the preview again with each knob a kernel-settings row with tuned's reason; THP is
never or madvise, not both; Make quiet writes them in the batch and Undo gives them back. On a writable
copy of "sno" (openshift-nto) with the knob files it lacks added with the kernel's defaults."""
from __future__ import annotations

import struct

import pytest
from PySide6.QtCore import QPoint, Qt

from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.machines import copy_machine, writable_test_tree
from widgets.application import build_window

KNOB_FILES = {"proc/sys/kernel/hung_task_timeout_secs": "120\n",
              "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n"}


@pytest.fixture
def sno(qtbot, tmp_path):
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    for rel, text in KNOB_FILES.items():
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_text(text)
    (dst / "dev").mkdir()
    (dst / "dev" / "cpu_dma_latency").write_bytes(struct.pack("i", 2000000000))     # the kernel's default
    root = SysRoot(writable_test_tree(dst))
    sampler = Sampler(root)
    # The window's guard looks every 0.25 s, not every second: the guard test waits for its looks (the
    # hold, then the release), and no test reads the interval.
    w = build_window(None, interval=0.25)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    assert w.set_state(sampler.tick())
    journal = Journal(tmp_path / "journal.jsonl")
    show_pins(w, AffinityService(root, journal))
    assert w.set_state(sampler.tick())
    yield w, root
    journal.close()


def _click(qtbot, w, box):
    # on the box itself: a check box takes a click on its indicator and its text, not the room beside them
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(6, box.height() // 2))
    settle(w)
    return w.quiet_controller.dialog


def test_ticking_knobs_previews_them_with_tuneds_reason_and_undo_gives_them_back(sno, qtbot):
    w, root = sno
    w.topology_view.select_cpus([1])
    w.quiet_controller.open_isolate()
    settle(w)
    d = w.quiet_controller.dialog
    assert d.knobs.isVisible() and not any(b.isChecked() for b in d.knob_boxes.values())
    assert not any(r[0] == "kernel.hung_task_timeout_secs" for r in d.row_texts())
    d = _click(qtbot, w, d.knob_boxes["hung_task"])
    row = next(r for r in d.row_texts() if r[0] == "kernel.hung_task_timeout_secs")
    assert row[1] == "120 -> 600" and row[2].startswith("tuned's network-latency:")
    d = _click(qtbot, w, d.knob_boxes["thp_never"])
    d = _click(qtbot, w, d.knob_boxes["thp_madvise"])          # never or madvise: the other is unticked
    assert d.knob_boxes["thp_madvise"].isChecked() and not d.knob_boxes["thp_never"].isChecked()
    assert d.knob_boxes["hung_task"].isChecked()
    assert not any(r[0] == "transparent huge pages" for r in d.row_texts())   # madvise already
    assert "transparent huge pages is already madvise: nothing to set" in d.summary.text()
    d = _click(qtbot, w, d.knob_boxes["thp_never"])
    assert ("transparent huge pages", "madvise -> never") == next(r for r in d.row_texts()
                                                                 if r[0] == "transparent huge pages")[:2]
    assert (root.root / "proc/sys/kernel/hung_task_timeout_secs").read_text() == "120\n"   # nothing written yet
    qtbot.mouseClick(d.apply_button, Qt.MouseButton.LeftButton)
    settle(w)
    assert (root.root / "proc/sys/kernel/hung_task_timeout_secs").read_text() == "600\n"
    assert (root.root / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "never\n"
    w.pin_controller.undo_action.trigger()
    settle(w.pin_controller)
    assert (root.root / "proc/sys/kernel/hung_task_timeout_secs").read_text() == "120\n"
    assert (root.root / "sys/kernel/mm/transparent_hugepage/enabled").read_text() == "madvise\n"


def test_a_give_back_preview_offers_no_knobs(sno, qtbot):
    w, root = sno
    w.topology_view.select_cpus([2])
    w.quiet_controller.open_isolate()
    settle(w)
    qtbot.mouseClick(w.quiet_controller.dialog.apply_button, Qt.MouseButton.LeftButton)
    settle(w)
    w.quiet_controller.open_include()
    settle(w)
    d = w.quiet_controller.dialog
    assert d.preview.action == "include" and not d.knobs.isVisible()


def test_the_windows_guard_holds_dma_latency_and_says_so(sno, qtbot):
    """The window runs the guard: it holds /dev/cpu_dma_latency (here the copy's file) once the isolate
    that asked for it is written, says so on the status line, and lets go at Undo."""
    w, root = sno
    w.topology_view.select_cpus([1])
    w.quiet_controller.open_isolate()
    settle(w)
    d = _click(qtbot, w, w.quiet_controller.dialog.knob_boxes["force_latency"])
    assert ("/dev/cpu_dma_latency", "not held -> held at 0 µs") == next(
        r for r in d.row_texts() if r[0] == "/dev/cpu_dma_latency")[:2]
    qtbot.mouseClick(d.apply_button, Qt.MouseButton.LeftButton)
    settle(w)
    held = f"{root.root}/dev/cpu_dma_latency held at 0 µs while the guard runs"
    qtbot.waitUntil(lambda: w.statusBar().currentMessage() == held, timeout=10000)
    assert (root.root / "dev" / "cpu_dma_latency").read_bytes() == struct.pack("i", 0)
    w.pin_controller.undo_action.trigger()
    settle(w.pin_controller)
    qtbot.waitUntil(lambda: w.statusBar().currentMessage().endswith("released (was held at 0 µs)"), timeout=10000)
