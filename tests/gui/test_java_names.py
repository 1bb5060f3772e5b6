"""The thread tree shows Java threads by their full names (issue 20), with a real JVM on this machine.

tests/jvms.py runs tests/unit/java/MarketData.java: "market-data-feed-handler-0" and "-1", both
"market-data-fee" to the kernel; each thread read its own tid from /proc/thread-self (the oracle). The
states come from the window's own Sampler; each test keeps only the JVM's process in them, so other
processes on the machine (another suite's JVMs) cannot match its filter. Nothing is moved.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import Qt

from app.machine.threads import ThreadsSample
from app.sampling.machine_state import MachineState
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.jvms import COMM, HANDLER, OTHER_HANDLER, MarketData, needs_jdk, wait_until
from widgets.pinning.drag import pin_drag
from widgets.pinning.mime import decode_pin_mime
from widgets.tables.thread_cells import COL_NAME
from widgets.tables.threads import ID_ROLE, ThreadTableWidget

pytestmark = [pytest.mark.qt_log_level_fail("WARNING"), needs_jdk]


def _only(state: MachineState, pid: int) -> MachineState:
    """`state` with the threads of process `pid` alone."""
    threads = state.sample.tasks
    info = threads.processes[pid]
    kept = ThreadsSample({t: threads.tasks[t] for t in info.tids if t in threads.tasks}, {pid: info}, threads.clk_tck)
    return replace(state, sample=replace(state.sample, tasks=kept))


def _state_of(jvm: MarketData, ready) -> MachineState:
    """The Sampler's first state of this machine in which `ready(state)` holds, kept to the JVM."""
    sampler = Sampler(SysRoot("/"))

    def tick():
        state = sampler.tick()
        return state if ready(state) else None
    return _only(wait_until(tick, 30, "the JVM's names in the sampler's state"), jvm.pid)


@pytest.fixture(scope="module")
def jvm():
    m = MarketData()
    yield m
    m.stop()


@pytest.fixture
def table(qtbot, jvm):
    w = ThreadTableWidget()
    qtbot.addWidget(w)
    state = _state_of(jvm, lambda s: s.thread_names.full_name(jvm.pid, jvm.tid(HANDLER), COMM))
    w.set_state(state)
    return w


def test_the_tree_shows_each_full_name_on_its_own_tid(table, jvm, qtmodeltester):
    qtmodeltester.check(table.model)
    for name in (HANDLER, OTHER_HANDLER):
        idx = table.model.thread_index(jvm.pid, jvm.tid(name), COL_NAME)
        assert idx.data() == f"{name} ({COMM})"
        tip = idx.data(Qt.ItemDataRole.ToolTipRole)
        assert tip.startswith(f"{name} (tid {jvm.tid(name)}) in java (pid {jvm.pid})")
        assert f"kernel name (comm, cut to 15 bytes): {COMM}" in tip
    # The column is wide enough for the whole name: its end ("-0", "-1") is what tells the two apart.
    shown = table.view.fontMetrics().horizontalAdvance(f"{HANDLER} ({COMM})") + 2 * table.view.indentation()
    assert table.view.header().sectionSize(COL_NAME) >= shown
    main = [t for t in table.model.tids_of(jvm.pid) if t == jvm.pid]
    assert table.model.thread_index(jvm.pid, main[0], COL_NAME).data() == "java"     # not cut: as it is
    assert "Java thread names read from the JVM at" in table.process_tooltip(jvm.pid)


def test_the_filter_finds_the_full_name_and_a_drag_carries_its_tid(table, jvm, qtbot):
    table.set_filter(HANDLER)
    proc = table.proxy.index(0, 0)
    assert table.proxy.rowCount() == 1 and proc.data(ID_ROLE) == ("process", jvm.pid)
    shown = [table.proxy.index(r, 0, proc).data(ID_ROLE) for r in range(table.proxy.rowCount(proc))]
    assert shown == [("thread", jvm.tid(HANDLER))]              # not its comm twin, handler-1
    assert table.select_thread(jvm.pid, jvm.tid(HANDLER))
    drag = pin_drag(table.view, COL_NAME)
    payload = decode_pin_mime(drag.mimeData())
    assert (payload.kind, payload.ids, payload.pid) == ("thread", (jvm.tid(HANDLER),), jvm.pid)
    table.set_filter("MARKET data-feed-handler-1")               # the words, any case, of the one matcher
    assert [table.proxy.index(r, 0, table.proxy.index(0, 0)).data(ID_ROLE)
            for r in range(table.proxy.rowCount(table.proxy.index(0, 0)))] == [("thread", jvm.tid(OTHER_HANDLER))]


def test_a_jvm_that_cannot_be_asked_says_why(qtbot):
    m = MarketData("-XX:+DisableAttachMechanism")
    try:
        w = ThreadTableWidget()
        qtbot.addWidget(w)
        w.set_state(_state_of(m, lambda s: m.pid in s.thread_names.unavailable))
        why = "the full Java name cannot be read: it was started with -XX:+DisableAttachMechanism"
        for name in (HANDLER, OTHER_HANDLER):
            idx = w.model.thread_index(m.pid, m.tid(name), COL_NAME)
            assert idx.data() == COMM and why in idx.data(Qt.ItemDataRole.ToolTipRole)
        assert "Java thread names cannot be read: it was started with -XX:+DisableAttachMechanism" \
            in w.process_tooltip(m.pid)
        w.set_filter(HANDLER)                                   # nothing can match: the line says why
        assert w.proxy.rowCount() == 0
        assert w.count_label.text() == (f"No thread or process matches \u201c{HANDLER}\u201d; the full Java "
                                         f"thread names of JVM {m.pid} cannot be read: it was started with "
                                         "-XX:+DisableAttachMechanism")
        w.set_filter(COMM)                                      # its kernel name still finds both
        assert w.proxy.rowCount(w.proxy.index(0, 0)) == 2
        assert m.alive()
    finally:
        m.stop()
