"""The "Pin to…" dialog: the CPU list is validated as typed against the machine, OK is off while it is
invalid, and Ctrl+P opens it for the selected rows of the thread and IRQ tables."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.pinning.journal import Journal
from app.machine.topology import read_topology
from app.parse.cpulist import parse_cpulist
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.machines import copy_machine, extract, writable_test_tree
from widgets.application import build_window
from widgets.pinning.dialog import PinDialog, check_cpu_text
from widgets.pinning.mime import PinPayload

CPUS = tuple(sorted(os.sched_getaffinity(0)))


@pytest.fixture(scope="module")
def sno_topology():
    return read_topology(SysRoot(extract("sno")))


def _type(qtbot, dialog, text):
    dialog.cpu_edit.clear()
    qtbot.keyClicks(dialog.cpu_edit, text)


def test_dialog_validates_as_typed(qtbot, sno_topology):
    d = PinDialog(PinPayload("irq", (27,)), sno_topology)
    qtbot.addWidget(d)
    d.show()
    assert d.target_label.text() == "Pin IRQ 27 to:"
    assert not d.ok_button.isEnabled()                      # empty to start with
    _type(qtbot, d, "2-x")
    assert not d.ok_button.isEnabled() and d.cpus() is None
    assert d.reason_label.text() == "CPU list '2-x': '2-x' is not a CPU number or range; write CPUs like 2-5,8"
    _type(qtbot, d, "0")
    assert d.ok_button.isEnabled() and d.cpus() == (0,) and d.reason_label.text() == "1 CPU: 0"
    _type(qtbot, d, "5-3")
    assert not d.ok_button.isEnabled() and "runs backwards" in d.reason_label.text()
    _type(qtbot, d, "10-13")                                # sno has CPUs 0-11
    assert not d.ok_button.isEnabled()
    assert d.reason_label.text() == "CPUs 12-13 do not exist on this machine; it has CPUs 0-11"
    _type(qtbot, d, "2-5,8")
    assert d.ok_button.isEnabled() and d.cpus() == (2, 3, 4, 5, 8)
    # Enter in the line edit accepts only a valid list.
    with qtbot.waitSignal(d.accepted, timeout=1000):
        qtbot.keyClick(d.cpu_edit, Qt.Key.Key_Return)


def test_enter_on_an_invalid_list_does_not_accept(qtbot, sno_topology):
    d = PinDialog(PinPayload("thread", (10, 11), 10), sno_topology, initial="1,")
    qtbot.addWidget(d)
    d.show()
    assert d.target_label.text() == "Pin 2 threads of process 10 to:"
    assert not d.ok_button.isEnabled()
    with qtbot.assertNotEmitted(d.accepted):
        qtbot.keyClick(d.cpu_edit, Qt.Key.Key_Return)
    assert d.isVisible()


def test_offline_cpus_are_refused():
    topo = read_topology(SysRoot(extract("16em64t-4s2c2t-offlines")))
    assert 2 in topo.offline
    c = check_cpu_text("0-2", topo)
    assert not c.ok and c.message.startswith("CPU 2 is offline; choose among the online CPUs 0-1,3-4,")
    assert check_cpu_text("0-1", topo).cpus == (0, 1)


# -- Ctrl+P in the window ------------------------------------------------------------------------------------------
def _window(qtbot, root):
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    assert w.set_state(Sampler(root).tick())
    w.activateWindow()
    return w


def _ctrl_p(qtbot, w, view):
    w.activateWindow()              # a closed dialog leaves no active window on the offscreen platform
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=2000)
    view.setFocus()
    qtbot.waitUntil(view.hasFocus, timeout=2000)
    qtbot.keyClick(view, Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier)


@pytest.fixture
def parked_thread(live_machine):
    ev = threading.Event()
    th = threading.Thread(target=ev.wait, name="pin-me")
    th.start()
    original = tuple(sorted(os.sched_getaffinity(th.native_id)))
    yield th
    try:
        os.sched_setaffinity(th.native_id, original)
    finally:
        ev.set()
        th.join()


@pytest.mark.usefixtures("live_machine")
def test_ctrl_p_opens_the_dialog_for_the_selected_thread(qtbot, tmp_path, parked_thread):
    tid, pid = parked_thread.native_id, os.getpid()
    w = _window(qtbot, SysRoot("/"))
    journal = Journal(tmp_path / "journal.jsonl")
    show_pins(w, AffinityService(SysRoot("/"), journal))
    table = w.thread_table
    assert table.select_thread(pid, tid)
    _ctrl_p(qtbot, w, table.view)
    d = w.pin_controller.sources.dialog
    assert d is not None and d.isVisible()
    assert d.payload == PinPayload("thread", (tid,), pid)
    _type(qtbot, d, str(CPUS[-1]))
    qtbot.mouseClick(d.ok_button, Qt.MouseButton.LeftButton)
    settle(w)
    assert tuple(sorted(os.sched_getaffinity(tid))) == (CPUS[-1],)
    assert w.pin_controller.result_line.text().endswith(f"-> {CPUS[-1]} ok")
    assert journal.entries()[-1].origin == "dialog"
    journal.close()


def test_ctrl_p_on_the_irq_table_and_context_menu(qtbot, tmp_path):
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    root = SysRoot(writable_test_tree(dst))
    w = _window(qtbot, root)
    journal = Journal(tmp_path / "journal.jsonl")
    show_pins(w, AffinityService(root, journal))
    table = w.irq_table
    assert table.select_irq("27")
    menu = w.pin_controller.sources.menu(table.view)
    [act] = menu.actions()
    assert act.text() == "Pin to…\tCtrl+P" and act.isEnabled()
    _ctrl_p(qtbot, w, table.view)
    d = w.pin_controller.sources.dialog
    assert d is not None and d.isVisible() and d.payload == PinPayload("irq", (27,))
    _type(qtbot, d, "4-5")
    qtbot.mouseClick(d.ok_button, Qt.MouseButton.LeftButton)
    settle(w)
    assert parse_cpulist(Path(root.irq_dir(27, "smp_affinity_list")).read_text()) == (4, 5)
    # LOC is a per-CPU counter row, not an IRQ with an affinity: nothing to pin, and it says so.
    assert table.select_irq("LOC")
    [act] = w.pin_controller.sources.menu(table.view).actions()
    assert not act.isEnabled()
    d.close()
    w.pin_controller.sources.dialog = None
    _ctrl_p(qtbot, w, table.view)
    assert w.pin_controller.sources.dialog is None
    assert w.pin_controller.result_line.text().startswith("nothing to pin in that selection")
    journal.close()


def test_the_dialog_shows_the_pins_own_refusal_before_the_user_confirms(qtbot, tmp_path):
    """Issue 28: the dialog asks what a drop asks (the pin flow's dry run), as the CPUs are typed, and
    says why not in its line, OK off: a managed IRQ here, as the pin itself would refuse it."""
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    dbg = dst / "sys" / "kernel" / "debug" / "irq" / "irqs"
    dbg.mkdir(parents=True)
    (dbg / "33").write_text("dstate:   0x37400200\n            IRQD_AFFINITY_MANAGED\n")
    root = SysRoot(writable_test_tree(dst))
    journal = Journal(tmp_path / "journal.jsonl")
    svc = AffinityService(root, journal)
    d = PinDialog(PinPayload("irq", (33,)), read_topology(root), check=svc.preflight)
    qtbot.addWidget(d)
    d.show()
    _type(qtbot, d, "0")
    assert not d.ok_button.isEnabled() and d.cpus() is None
    [r] = svc.apply(PinRequest((PinTarget("irq", 33),), (0,)))
    assert d.reason_label.text() == f"cannot pin IRQ 33 to CPU 0: {r.message}" and r.code == "managed"
    ok = PinDialog(PinPayload("irq", (24,)), read_topology(root), check=svc.preflight)
    qtbot.addWidget(ok)
    ok.show()
    _type(qtbot, ok, "0")
    assert ok.ok_button.isEnabled() and ok.cpus() == (0,) and ok.reason_label.text() == "1 CPU: 0"
    assert journal.entries() == []            # typing asked, nothing was written
    journal.close()
