"""Pin by drag and drop in the window, with synthesized drag events carrying the real MIME type.

Threads: real threads of this test, pinned on the live machine and put back afterwards. IRQs: a
temporary copy of the captured "sno" machine (openshift-nto), with an AffinityService over the copy so
the write lands in the copy's proc/irq/N/smp_affinity_list. Refusals: an offline CPU on a copy of
hwloc's 16em64t-4s2c2t-offlines, a snapshot without a service, a per-CPU kernel thread.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from app.host import CaptureHost, LocalHost
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.pinning.journal import Journal
from app.machine.threads import TaskGone, read_task
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.machines import copy_machine, extract, writable_test_tree
from widgets.application import build_window
from widgets.pinning.mime import (PIN_MIME, PinPayload, PinPayloadError, parse_pin_payload, payload_from_rows,
                                  pin_mime_data)

CPUS = tuple(sorted(os.sched_getaffinity(0)))
needs_two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="pinning needs at least 2 CPUs to move between")
ACTIONS = Qt.DropAction.CopyAction | Qt.DropAction.MoveAction


def _aff(tid):
    return tuple(sorted(os.sched_getaffinity(tid)))


def _comm(tid):
    return Path(f"/proc/{os.getpid()}/task/{tid}/comm").read_text().strip()


# -- fixtures -------------------------------------------------------------------------------------------------
@pytest.fixture
def parked_thread(live_machine):
    ev = threading.Event()
    th = threading.Thread(target=ev.wait, name="pin-me")
    th.start()
    original = _aff(th.native_id)
    yield th
    try:
        os.sched_setaffinity(th.native_id, original)
    finally:
        ev.set()
        th.join()


def _window(qtbot, root: SysRoot, host=None):
    w = build_window(host)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    assert w.set_state(Sampler(root).tick())
    w.topology_view.zoom_fit()
    return w


@pytest.fixture
def live(live_machine, qtbot, tmp_path):
    """The window on this machine, pinning through a service whose journal is the test's own."""
    w = _window(qtbot, SysRoot("/"))
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(SysRoot("/"), journal)
    show_pins(w, service)
    yield w, service
    journal.close()


def _copy(tmp_path, name) -> Path:
    dst = tmp_path / name
    copy_machine(name, dst)
    return writable_test_tree(dst)


@pytest.fixture
def sno(qtbot, tmp_path):
    """The window on a writable copy of sno, with an AffinityService over the copy."""
    root = SysRoot(_copy(tmp_path, "sno"))
    w = _window(qtbot, root)
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(root, journal)
    show_pins(w, service)
    yield w, service, root
    journal.close()


# -- synthesized drags ------------------------------------------------------------------------------------------
def _mime(kind, ids, pid=None) -> QMimeData:
    m = QMimeData()
    m.setData(PIN_MIME, json.dumps({"kind": kind, "ids": list(ids), "pid": pid}).encode())
    return m


def _point_on(view, item) -> QPoint:
    """A viewport point where `item` is the topmost item (a box's padding, not one of its children);
    zooms in when the padding is thinner than a pixel at the fitted scale."""
    for zoom in (None, 3.0):
        if zoom is not None:
            view.resetTransform()
            view.scale(zoom, zoom)
            view.centerOn(item)
        r = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
        for y in range(r.top() + 1, r.bottom()):
            for x in range(r.left() + 1, r.right()):
                p = QPoint(x, y)
                hits = view.items(p)
                if hits and hits[0] is item:
                    return p
    raise AssertionError(f"no point of {item} is on top in the view")


def _enter_move(view, pos: QPoint, mime: QMimeData):
    # QDragEnter/MoveEvent take a QPoint (PySide6 < 6.12 has no QPointF overload); QDropEvent a QPointF.
    enter = QDragEnterEvent(QPoint(pos), ACTIONS, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    enter.setDropAction(Qt.DropAction.CopyAction)
    QApplication.sendEvent(view.viewport(), enter)
    move = QDragMoveEvent(QPoint(pos), ACTIONS, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(view.viewport(), move)
    return enter, move


def _drop(view, pos: QPoint, mime: QMimeData) -> QDropEvent:
    drop = QDropEvent(QPointF(pos), ACTIONS, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(view.viewport(), drop)
    return drop


def _drag_drop(qtbot, view, item, mime, ctl=None) -> PinRequest:
    pos = _point_on(view, item)
    enter, move = _enter_move(view, pos, mime)
    assert enter.isAccepted() and move.isAccepted(), view.pin_drops.last_hint
    assert view.pin_drops.highlight_accepts is True
    lit = view.pin_drops.highlight_path.boundingRect()
    assert lit.contains(item.sceneBoundingRect())
    with qtbot.waitSignal(view.pin_requested, timeout=1000) as blocker:
        drop = _drop(view, pos, mime)
    assert drop.isAccepted()
    assert view.pin_drops.highlight_path is None          # the highlight goes with the drag
    settle(ctl or view.window())
    return blocker.args[0]


def _core_of(view, cpu):
    return next(c for c in view.core_items() if c is not None and cpu in c.cpus)


# -- payload ---------------------------------------------------------------------------------------------------
def test_payload_round_trip_and_refusals():
    p = PinPayload("thread", (12, 13), 12)
    mime = pin_mime_data(p)
    assert mime.formats() == [PIN_MIME] and not mime.hasText()     # never plain text
    assert parse_pin_payload(bytes(mime.data(PIN_MIME).data())) == p
    for bad in (b"12", b"not json", b'{"kind":"disk","ids":[1]}', b'{"kind":"irq","ids":[]}',
                b'{"kind":"irq","ids":["24"]}', b'{"kind":"irq","ids":[true]}', b'{"kind":"irq","ids":[-1]}',
                b'{"kind":"thread","ids":[1],"pid":"x"}', b"\xff\xfe"):
        with pytest.raises(PinPayloadError):
            parse_pin_payload(bad)
    assert payload_from_rows([("irq", 24, None), ("irq", 9, None)]) == PinPayload("irq", (9, 24))
    assert payload_from_rows([("thread", 5, 4), ("thread", 6, 4)]) == PinPayload("thread", (5, 6), 4)
    # A process selected with a thread of another process: each of its threads, no common pid.
    assert payload_from_rows([("process", 4, 4), ("thread", 9, 8)], {4: [4, 5]}.get) == \
        PinPayload("thread", (4, 5, 9), None)


# -- threads on the live machine -------------------------------------------------------------------------------
@needs_two_cpus
def test_drop_thread_on_cell_core_and_package(live, qtbot, parked_thread):
    w, service = live
    view = w.topology_view
    tid, pid = parked_thread.native_id, os.getpid()
    comm = _comm(tid)
    mime = _mime("thread", [tid], pid)
    one = CPUS[-1]
    core = _core_of(view, one)
    package = view.group_item("package", next(c for c in w.state.topology.cpus if c.id == one).package_id)
    online = set(w.state.topology.online)
    for item, want in ((view.cell_item(one), (one,)),
                       (core, tuple(sorted(set(core.cpus) & online))),
                       (package, tuple(sorted(set(package.cpus) & online)))):
        before = _aff(tid)
        req = _drag_drop(qtbot, view, item, mime)
        assert req.targets == (PinTarget("thread", tid, pid),) and req.cpus == want
        assert _aff(tid) == want
        assert w.pin_controller.result_line.text() == \
            f"thread {tid} ({comm}): {format_cpulist(before)} -> {format_cpulist(want)} ok"
        e = service.journal.entries()[-1]
        assert (e.kind, e.target_id, e.state, e.before, e.requested, e.origin) == \
            ("thread", tid, "done", before, want, "drop")
        top = w.pin_controller.journal_widget.row_texts()[0]
        assert top[5] == str(e.id) and top[2] == f"thread {tid} ({comm})" and top[4] == "done"
        assert top[3] == f"{format_cpulist(before)} -> {format_cpulist(want)}"


@needs_two_cpus
def test_undo_redo_restore_from_the_edit_menu(live, qtbot, parked_thread):
    w, service = live
    ctl = w.pin_controller
    tid = parked_thread.native_id
    original = _aff(tid)
    assert not ctl.undo_action.isEnabled()
    _drag_drop(qtbot, w.topology_view, w.topology_view.cell_item(CPUS[0]), _mime("thread", [tid], os.getpid()))
    assert _aff(tid) == (CPUS[0],) and ctl.undo_action.isEnabled() and ctl.restore_action.isEnabled()
    ctl.undo_action.trigger()
    settle(ctl)
    assert _aff(tid) == original and ctl.result_line.text().startswith("undo: thread ")
    assert ctl.redo_action.isEnabled() and not ctl.undo_action.isEnabled()
    ctl.redo_action.trigger()
    settle(ctl)
    assert _aff(tid) == (CPUS[0],)
    ctl.restore_action.trigger()
    settle(ctl)
    assert _aff(tid) == original and not ctl.restore_action.isEnabled()
    assert [r[1] for r in ctl.journal_widget.row_texts()] == ["restore", "redo", "undo", "drop"]


def test_drop_of_an_exited_thread_says_so_and_changes_nothing(live, qtbot):
    # The drop asks the pin's own dry run: an exited thread leaves nothing to pin, so the target is
    # refused, red, saying so (as `coremap pin --dry-run` says and exits 1), and nothing is journalled.
    w, service = live
    th = threading.Thread(target=lambda: None)
    th.start()
    tid = th.native_id
    th.join()
    # join() returns when Python's side is done; the kernel task lingers for a moment after.
    qtbot.waitUntil(lambda: not Path(f"/proc/{os.getpid()}/task/{tid}").exists(), timeout=2000)
    mine = {int(t): _aff(int(t)) for t in os.listdir(f"/proc/{os.getpid()}/task")}
    view = w.topology_view
    mime = _mime("thread", [tid], os.getpid())
    pos = _point_on(view, view.cell_item(CPUS[0]))
    with qtbot.assertNotEmitted(view.pin_requested):
        enter, move = _enter_move(view, pos, mime)
        assert enter.isAccepted() and not move.isAccepted()
        assert view.pin_drops.highlight_accepts is False
        assert view.pin_drops.last_hint == f"cannot pin thread {tid} to CPU {CPUS[0]}: thread {tid} has exited; " \
                                           "refresh the list"
        assert not _drop(view, pos, mime).isAccepted()
    assert service.journal.entries() == []
    for t, cpus in mine.items():
        try:
            assert _aff(t) == cpus
        except ProcessLookupError:     # a pytest/Qt helper thread that ended meanwhile: not ours to check
            pass


def test_plain_text_and_malformed_drops_are_ignored(live, qtbot, parked_thread):
    w, service = live
    view = w.topology_view
    pos = _point_on(view, view.cell_item(CPUS[0]))
    text = QMimeData()
    text.setText(str(parked_thread.native_id))
    bad = QMimeData()
    bad.setData(PIN_MIME, b'{"kind":"thread","ids":"12"}')
    for mime in (text, bad):
        with qtbot.assertNotEmitted(view.pin_requested):
            enter, move = _enter_move(view, pos, mime)
            drop = _drop(view, pos, mime)
        assert not enter.isAccepted() and not move.isAccepted() and not drop.isAccepted()
    assert "ids must be a non-empty list" in view.pin_drops.last_hint
    assert service.journal.entries() == []


def _no_setaffinity_kthread():
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                t = read_task(SysRoot("/"), int(name), int(name), detail="fast")
            except TaskGone:            # exited between listing and reading: try the next
                continue
            if t.no_setaffinity:
                return t
    return None


def test_kernel_thread_target_is_refused_before_the_drop(live, qtbot):
    w, service = live
    t = _no_setaffinity_kthread()
    if t is None:
        pytest.skip("no kernel thread with PF_NO_SETAFFINITY here")
    view = w.topology_view
    mime = _mime("thread", [t.tid], t.pid)
    pos = _point_on(view, view.cell_item(CPUS[0]))
    hints = []
    view.drop_hint.connect(hints.append)
    with qtbot.assertNotEmitted(view.pin_requested):
        enter, move = _enter_move(view, pos, mime)
        assert not move.isAccepted()
        assert view.pin_drops.highlight_accepts is False
        assert w.statusBar().currentMessage() == hints[-1]
        drop = _drop(view, pos, mime)
    assert not drop.isAccepted()
    assert hints[-1] == (f"cannot pin thread {t.tid} to CPU {CPUS[0]}: kernel thread {t.tid} ({t.comm}) "
                         "refuses affinity changes (a per-CPU kernel thread); leave it where it is")
    assert service.journal.entries() == []


# -- IRQs on a copy of a captured machine ------------------------------------------------------------------------
def _irq_file(root: SysRoot, irq: int) -> tuple[int, ...]:
    return parse_cpulist(Path(root.irq_dir(irq, "smp_affinity_list")).read_text())


def test_drop_irq_on_cell_core_and_package_writes_the_copy(sno, qtbot):
    w, service, root = sno
    view = w.topology_view
    irq = 27
    d = Path(root.irq_dir(irq))
    assert not [p for p in d.iterdir() if p.is_dir()]       # no handler folder: its label is empty
    mime = _mime("irq", [irq])
    package = view.group_item("package", 0)
    for item, want in ((view.cell_item(3), (3,)), (_core_of(view, 5), (5,)),
                       (package, tuple(range(12)))):
        before = _irq_file(root, irq)
        req = _drag_drop(qtbot, view, item, mime)
        assert req.targets == (PinTarget("irq", irq),) and req.cpus == want
        assert _irq_file(root, irq) == want                   # the write landed in the copy
        code = "ok"       # a copy's effective list is a file: never "moving" (issue 10)
        text = w.pin_controller.result_line.text()
        assert text.startswith(f"IRQ {irq}: {format_cpulist(before)} -> {format_cpulist(want)} {code}")
        e = service.journal.entries()[-1]
        assert (e.kind, e.target_id, e.state, e.code, e.requested) == ("irq", irq, "done", code, want)
    assert Path(extract("sno"), "proc", "irq", str(irq), "smp_affinity_list").read_text().strip() == "0"


def test_drop_on_a_selected_cell_pins_to_every_selected_cpu(sno, qtbot):
    w, service, root = sno
    view = w.topology_view
    view.select_cpus([2, 3, 4])
    req = _drag_drop(qtbot, view, view.cell_item(3), _mime("irq", [25]))
    assert req.cpus == (2, 3, 4) and _irq_file(root, 25) == (2, 3, 4)
    req = _drag_drop(qtbot, view, view.cell_item(7), _mime("irq", [25]))     # not selected: that CPU
    assert req.cpus == (7,) and _irq_file(root, 25) == (7,)


def test_irqbalance_warning_names_what_it_bans(sno, qtbot):
    w, service, root = sno
    # irqbalance as it shows in /proc: comm, argv with a banned IRQ, environment with banned CPUs.
    proc = Path(root.proc()) / "4242"
    proc.mkdir()
    (proc / "comm").write_text("irqbalance\n")
    (proc / "cmdline").write_text("/usr/sbin/irqbalance\0--foreground\0--banirq=30\0")
    (proc / "environ").write_text("IRQBALANCE_BANNED_CPULIST=0-1\0")
    _drag_drop(qtbot, w.topology_view, w.topology_view.cell_item(6), _mime("irq", [28]))
    line = w.pin_controller.result_line
    assert line.warning_label.isVisibleTo(w)
    assert line.warning_label.text() == ("irqbalance (pid 4242) bans CPUs 0-1 and IRQ 30; it may move IRQ 28 back "
                                         "within 10 s: --banirq=28 or stop it")
    # A banned IRQ is left alone by irqbalance: no warning.
    _drag_drop(qtbot, w.topology_view, w.topology_view.cell_item(6), _mime("irq", [30]))
    assert not line.warning_label.isVisibleTo(w)


# -- refusals ----------------------------------------------------------------------------------------------------
def test_offline_cpu_says_why_during_the_drag_and_rejects(qtbot, tmp_path, parked_thread):
    root = SysRoot(_copy(tmp_path, "16em64t-4s2c2t-offlines"))
    w = _window(qtbot, root)
    journal = Journal(tmp_path / "journal.jsonl")
    show_pins(w, AffinityService(root, journal))
    view = w.topology_view
    topo = w.state.topology
    assert 2 in topo.offline and 0 in topo.online
    mime = _mime("thread", [parked_thread.native_id], os.getpid())
    hints = []
    view.drop_hint.connect(hints.append)
    with qtbot.assertNotEmitted(view.pin_requested):
        pos = _point_on(view, view.cell_item(2))
        enter, move = _enter_move(view, pos, mime)
        assert enter.isAccepted() and not move.isAccepted()
        assert hints[-1].startswith(f"cannot pin thread {parked_thread.native_id} to CPU 2: CPU 2 is offline; "
                                    f"choose among the online CPUs {format_cpulist(topo.online)}")
        assert view.pin_drops.highlight_accepts is False
        assert not _drop(view, pos, mime).isAccepted()
        # A box holding only offline CPUs takes nothing either.
        core = view.cell_item(13).parentItem()         # offline cores have no index in core_items()
        assert set(core.cpus) <= set(topo.offline)
        _, move = _enter_move(view, _point_on(view, core), mime)
        assert not move.isAccepted() and "has no online CPU" in hints[-1]
        # An online CPU passes the CPU check; what stands then is the thread itself, as the pin would say
        # (a capture pins no thread: the drop asks the pin flow's own dry run, issue 28).
        _, move = _enter_move(view, _point_on(view, view.cell_item(0)), mime)
        assert not move.isAccepted() and "is offline" not in hints[-1]
        assert hints[-1].startswith(f"cannot pin thread {parked_thread.native_id} to CPU 0: ")
        assert "threads can be pinned only on the live machine" in hints[-1]
    [r] = w.pin_controller.service.apply(PinRequest((PinTarget("thread", parked_thread.native_id, os.getpid()),),
                                                    (0,)))
    assert r.code == "invalid" and r.message in hints[-1]
    assert journal.entries() == []
    journal.close()


def test_snapshot_without_a_service_refuses_pinning(qtbot, parked_thread):
    w = _window(qtbot, SysRoot(extract("sno")))
    state = w.state
    w.set_host(CaptureHost(SysRoot(extract("sno"))))
    assert w.set_state(state)
    view = w.topology_view
    host = w.state.topology.hostname or w.state.source
    mime = _mime("thread", [parked_thread.native_id], os.getpid())
    with qtbot.assertNotEmitted(view.pin_requested):
        pos = _point_on(view, view.cell_item(0))
        _, move = _enter_move(view, pos, mime)
        assert not move.isAccepted()
        assert not _drop(view, pos, mime).isAccepted()
    assert view.pin_drops.last_hint.endswith(f"this is a snapshot of {host}: pinning needs the live machine")
    assert w.pin_controller.service is None


# -- restore on start --------------------------------------------------------------------------------------------
@needs_two_cpus
@pytest.mark.usefixtures("live_machine")
def test_restore_bar_offers_what_an_earlier_session_left(qtbot, tmp_path, parked_thread):
    tid = parked_thread.native_id
    original = _aff(tid)
    path = tmp_path / "journal.jsonl"
    with Journal(path) as earlier:       # an earlier coremap that pinned and never restored
        [r] = AffinityService(SysRoot("/"), earlier).apply(PinRequest((PinTarget("thread", tid),), (CPUS[-1],)))
        assert r.ok
    w = _window(qtbot, SysRoot("/"))
    journal = Journal(path)
    show_pins(w, AffinityService(SysRoot("/"), journal))
    bar = w.pin_controller.restore_bar
    assert bar.isVisibleTo(w)
    assert bar.label.text().startswith(f"1 pin from an earlier coremap session is still in place (thread {tid} "
                                       f"({_comm(tid)}) was {format_cpulist(original)})")
    qtbot.mouseClick(bar.restore_button, Qt.MouseButton.LeftButton)
    settle(w)
    assert _aff(tid) == original and not bar.isVisibleTo(w)
    assert w.pin_controller.result_line.text().startswith(f"restore: thread {tid} ")
    journal.close()


@pytest.mark.usefixtures("live_machine")
def test_restore_bar_dismiss_changes_nothing(qtbot, tmp_path, parked_thread):
    tid = parked_thread.native_id
    path = tmp_path / "journal.jsonl"
    with Journal(path) as earlier:
        AffinityService(SysRoot("/"), earlier).apply(PinRequest((PinTarget("thread", tid),), (CPUS[0],)))
    w = _window(qtbot, SysRoot("/"))
    journal = Journal(path)
    show_pins(w, AffinityService(SysRoot("/"), journal))
    bar = w.pin_controller.restore_bar
    qtbot.mouseClick(bar.dismiss_button, Qt.MouseButton.LeftButton)
    assert not bar.isVisibleTo(w) and _aff(tid) == (CPUS[0],)
    journal.close()


# -- a whole process, and the result line ------------------------------------------------------------------------
@needs_two_cpus
def test_drop_a_process_pins_each_of_its_threads(live, qtbot):
    import subprocess
    import sys
    w, service = live
    code = ("import threading, time, sys\n"
            "for _ in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('ready', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        tids = sorted(int(t) for t in os.listdir(f"/proc/{p.pid}/task"))
        assert len(tids) == 4
        req = _drag_drop(qtbot, w.topology_view, w.topology_view.cell_item(CPUS[-1]), _mime("process", [p.pid]))
        assert req.targets == (PinTarget("process", p.pid),)
        assert all(_aff(t) == (CPUS[-1],) for t in tids)
        line = w.pin_controller.result_line
        assert line.text() == "4 targets: 4 ok, 0 failed"
        assert [x.split(":")[0] for x in line.label.toolTip().splitlines()] == \
            [f"thread {t} ({Path(f'/proc/{p.pid}/task/{t}/comm').read_text().strip()})" for t in tids]
    finally:
        p.kill()
        p.wait()


def test_result_line_offers_retry_only_for_denied_writes(qtbot):
    from app.pinning.service import PinResult
    from widgets.pinning.feedback import PinResultLine
    line = PinResultLine()
    qtbot.addWidget(line)        # not shown: a top-level with a layout warns on the offscreen platform
    t = PinTarget("thread", 4321, 4321, "sshd")
    denied = PinResult(t, False, "denied", "thread 4321 (sshd) belongs to another user; needs the helper",
                       (0, 1), (1,), None, None, 7)
    ok = PinResult(PinTarget("irq", 24), True, "ok", "", (0, 1), (1,), (1,), (1,), 8)
    line.show_results([denied, ok], can_retry=True)
    assert not line.retry_button.isHidden()
    assert line.text() == ("thread 4321 (sshd) belongs to another user; needs the helper; "
                           "IRQ 24: 0-1 -> 1 ok (effective 1)")
    line.show_results([denied], can_retry=False)          # a capture: no helper can write there
    assert line.retry_button.isHidden()
    line.show_results([ok], can_retry=True)
    assert line.retry_button.isHidden()


# -- drag sources: the tables' own mimeData, dropped on the grid --------------------------------------------------
def test_irq_rows_drag_as_the_pin_type_and_drop_on_the_grid(sno, qtbot):
    w, service, root = sno
    model, proxy = w.irq_table.model, w.irq_table.proxy
    row = proxy.mapFromSource(model.index(model.row_of("27"), 0))
    loc = proxy.mapFromSource(model.index(model.row_of("LOC"), 0))
    assert proxy.flags(row) & Qt.ItemFlag.ItemIsDragEnabled
    assert not proxy.flags(loc) & Qt.ItemFlag.ItemIsDragEnabled       # a per-CPU counter: no affinity
    assert proxy.mimeData([loc]) is None
    mime = proxy.mimeData([row, proxy.index(row.row(), 3)])             # a whole row: one IRQ
    assert mime.formats() == [PIN_MIME] and not mime.hasText()
    req = _drag_drop(qtbot, w.topology_view, w.topology_view.cell_item(9), mime)
    assert req.targets == (PinTarget("irq", 27),) and _irq_file(root, 27) == (9,)
    # The CPU details' IRQ list is a source too.
    w.cpu_details.set_cpu(9)
    table = w.cpu_details.irq_table
    keys = [table.item(r, 0).text() for r in range(table.rowCount())]
    numbered = [k for k in keys if k.isdigit()]
    assert numbered, keys
    table.selectRow(keys.index(numbered[0]))
    mime = table.model().mimeData(table.selectionModel().selectedRows(0))
    assert parse_pin_payload(bytes(mime.data(PIN_MIME).data())) == PinPayload("irq", (int(numbered[0]),))


def test_thread_rows_drag_as_the_pin_type(parked_thread, live, qtbot):   # thread first: the window lists it
    w, _ = live
    tid, pid = parked_thread.native_id, os.getpid()
    table = w.thread_table
    assert table.select_thread(pid, tid)
    mime = table.proxy.mimeData(table.view.selectionModel().selectedRows(0))
    assert mime.formats() == [PIN_MIME]
    assert parse_pin_payload(bytes(mime.data(PIN_MIME).data())) == PinPayload("thread", (tid,), pid)
    proc = table.proxy.mapFromSource(table.model.process_index(pid))
    mime = table.proxy.mimeData([proc])
    assert parse_pin_payload(bytes(mime.data(PIN_MIME).data())) == PinPayload("process", (pid,))


@needs_two_cpus
@pytest.mark.usefixtures("live_machine")
def test_live_window_opens_its_own_journal_and_offers_restore_on_start(qtbot, tmp_path, monkeypatch,
                                                                        parked_thread):
    from app.store.folders import journal_path
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    tid = parked_thread.native_id
    original = _aff(tid)
    w = _window(qtbot, SysRoot("/"), LocalHost())
    assert w.pin_controller.service is None              # no journal yet: none is created just to look
    assert not (tmp_path / "state").exists()
    with Journal(journal_path()) as earlier:
        AffinityService(SysRoot("/"), earlier).apply(PinRequest((PinTarget("thread", tid),), (CPUS[-1],)))
    w2 = _window(qtbot, SysRoot("/"), LocalHost())
    ctl = w2.pin_controller
    assert ctl.service is not None and ctl.service.journal.path == journal_path()
    assert ctl.restore_bar.isVisibleTo(w2) and f"thread {tid}" in ctl.restore_bar.label.text()
    ctl.restore_action.trigger()
    settle(ctl)
    assert _aff(tid) == original and not ctl.restore_bar.isVisibleTo(w2)
    # The first window opens the journal when it first needs it: the check of a drop.
    _, move = _enter_move(w.topology_view, _point_on(w.topology_view, w.topology_view.cell_item(CPUS[0])),
                          _mime("thread", [tid], os.getpid()))
    assert move.isAccepted() and w.pin_controller.service is not None
    w.pin_controller.service.journal.close()
    ctl.service.journal.close()


@needs_two_cpus
def test_a_pin_has_the_sampler_re_read_the_pinned_process(live, qtbot, parked_thread):
    """The sampler reuses a sleeping process's last read for up to REUSE_SECONDS; a pin must make it
    re-read that process, and tick at once, so the new allowed CPUs show now."""
    w, _ = live
    forgotten = []

    class Recorder:
        def forget_threads(self, pids=None):
            forgotten.append(pids)

        def sample_now(self):
            forgotten.append("now")

    w.sampler_thread = Recorder()
    try:
        tid = parked_thread.native_id
        _drag_drop(qtbot, w.topology_view, w.topology_view.cell_item(CPUS[0]), _mime("thread", [tid], os.getpid()))
        assert forgotten == [[os.getpid()], "now"]
        w.pin_controller.undo_action.trigger()
        settle(w.pin_controller)
        assert forgotten[-2:] == [[os.getpid()], "now"]
    finally:
        w.sampler_thread = None


# -- the controller's narrow needs -------------------------------------------------------------------------------
def test_the_controller_pins_without_a_window(qtbot, tmp_path):
    """PinController gets a grid, its sources, a menu, a status bar and a state signal, and needs no
    MainWindow: a drop on a lone grid pins, the result line sits in the status bar, undo puts it back."""
    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QMenu, QStatusBar

    from widgets.pinning.controller import PinController
    from widgets.topology.view import TopologyView

    class Host(QObject):
        state_applied = Signal(object)

    root = SysRoot(_copy(tmp_path, "sno"))
    state = Sampler(root).tick()
    grid = TopologyView()
    qtbot.addWidget(grid)
    grid.resize(900, 600)
    grid.show()
    qtbot.waitExposed(grid)
    grid.set_state(state)
    grid.zoom_fit()
    status_bar, menu, host = QStatusBar(), QMenu("&Edit"), Host()
    qtbot.addWidget(status_bar)
    qtbot.addWidget(menu)
    ctl = PinController(grid, (), menu, status_bar, host.state_applied)
    journal = Journal(tmp_path / "journal.jsonl")
    ctl.set_host(LocalHost(root, pins=AffinityService(root, journal)))
    host.state_applied.emit(state)
    assert [a.text() for a in menu.actions() if not a.isSeparator()] == \
        ["Pin to…", "Undo pin", "Redo pin", "Restore all", "Cancel pinning"]
    before = _irq_file(root, 27)
    hints = []
    grid.drop_hint.connect(hints.append)
    req = _drag_drop(qtbot, grid, grid.cell_item(3), _mime("irq", [27]), ctl)
    assert req.cpus == (3,) and _irq_file(root, 27) == (3,)
    assert hints[-2] == "pin IRQ 27 to CPU 3" and hints[-1] == ""
    assert status_bar.isAncestorOf(ctl.result_line) and ctl.result_line.text().startswith("IRQ 27: ")
    ctl.undo_action.trigger()
    settle(ctl)
    assert _irq_file(root, 27) == before
    journal.close()
