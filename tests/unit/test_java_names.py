"""JavaNameReader (app/sampling/java_names.py): which JVMs are asked for their names, and how seldom.

The reader's own rules are driven with a counting `read` and a clock the test moves; the last test
runs the window's Sampler on this machine with a real JVM (tests/jvms.py) and reads the names from
its MachineState. Nothing here moves anything on the machine.
"""
from __future__ import annotations

import time

import pytest

from app.machine.java import JvmNames
from app.machine.thread_names import NO_THREAD_NAMES
from app.machine.threads import ProcessInfo, TaskSample, ThreadsSample
from app.sampling.java_names import READ_GAP_S, JavaNameReader
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.jvms import COMM, HANDLER, OTHER_HANDLER, MarketData, needs_jdk, wait_until

JVM, OTHER = 100, 200


def _task(pid: int, tid: int, comm: str, start: int = 5) -> TaskSample:
    return TaskSample(pid, tid, comm, "S", 0, 0, 0, 0, start)


def _sample(threads: dict[int, list[tuple[int, str]]], start: int = 5) -> ThreadsSample:
    """{pid: [(tid, comm)], leader first} as the TaskReader would hand it out (new ProcessInfo objects)."""
    tasks = {tid: _task(pid, tid, comm, start) for pid, ts in threads.items() for tid, comm in ts}
    processes = {pid: ProcessInfo(pid, ts[0][1], "", tuple(t for t, _ in ts)) for pid, ts in threads.items()}
    return ThreadsSample(tasks, processes)


class Rig:
    """A reader whose reads are counted and answered at once, and whose clock the test sets."""

    def __init__(self, java=(JVM,), reason: str = ""):
        self.now = 1000.0
        self.reads: list[tuple[int, tuple]] = []
        self.claims: list[int] = []
        self.reason = reason
        self.reader = JavaNameReader(SysRoot("/"), clock=lambda: self.now, read=self._read,
                                     claims=lambda pid, root, comm: self.claims.append(pid) or pid in java)

    def _read(self, pid, root, tids):
        self.reads.append((pid, tids))
        if self.reason:
            return JvmNames(pid, {}, self.reason, 1.0)
        return JvmNames(pid, {t: f"{COMM}-thread-{t}" for t in tids}, "", 1.0)

    def update(self, sample):
        self.reader.update(sample)
        wait_until(lambda: not self.reader.busy, 10, "the reader's worker to finish")
        return self.reader.collect()


JVM_THREADS = [(JVM, "java"), (101, "C2 CompilerThre"), (102, COMM)]


def test_a_process_that_is_not_java_is_never_read_and_looked_at_once():
    rig = Rig(java=())
    sample = _sample({OTHER: [(OTHER, "python3"), (201, COMM)]})
    for _ in range(3):
        assert rig.update(sample) is NO_THREAD_NAMES
    assert rig.reads == [] and rig.claims == [OTHER]
    rig.update(_sample({OTHER: [(OTHER, "python3"), (201, COMM), (202, COMM)]}))     # it ran: same pid, start, comm
    assert rig.claims == [OTHER]


def test_a_jvm_is_read_once_while_its_cut_threads_stay():
    rig = Rig()
    first = rig.update(_sample({JVM: JVM_THREADS}))
    assert rig.reads == [(JVM, (101, 102))]
    assert first.full_name(JVM, 102, COMM) == f"{COMM}-thread-102"
    rig.now += 10 * READ_GAP_S
    for _ in range(3):
        assert rig.update(_sample({JVM: JVM_THREADS})) is first      # the same object: nothing to redraw
    assert len(rig.reads) == 1


def test_changed_threads_are_read_again_but_not_within_the_gap():
    rig = Rig()
    rig.update(_sample({JVM: JVM_THREADS}))
    grown = _sample({JVM: [*JVM_THREADS, (103, COMM)]})
    rig.now += READ_GAP_S / 2
    rig.update(grown)
    assert len(rig.reads) == 1                                         # due, not yet
    rig.now += READ_GAP_S / 2
    rig.update(grown)                                                  # the very same ProcessInfo: still looked at
    assert rig.reads[-1] == (JVM, (101, 102, 103)) and len(rig.reads) == 2


def test_a_jvm_without_cut_names_is_not_read():
    rig = Rig()
    rig.update(_sample({JVM: [(JVM, "java"), (101, "GC Thread#0")]}))
    assert rig.reads == [] and rig.claims == [JVM]


def test_why_names_cannot_be_read_and_a_gone_jvm():
    rig = Rig(reason="it was started with -XX:+DisableAttachMechanism")
    names = rig.update(_sample({JVM: JVM_THREADS}))
    assert names.unavailable == {JVM: "it was started with -XX:+DisableAttachMechanism"}
    assert names.note(JVM, COMM) and names.note(JVM, "java") is None        # only cut names lack a full one
    assert rig.update(_sample({OTHER: [(OTHER, "bash")]})).unavailable == {}


def test_a_reused_pid_does_not_inherit_names():
    rig = Rig()
    rig.update(_sample({JVM: JVM_THREADS}))
    later = rig.update(_sample({JVM: JVM_THREADS}, start=99))         # another process under the pid
    assert len(rig.reads) == 2 and later.names[JVM]                   # read anew, for the new one
    assert rig.claims == [JVM, JVM]


@needs_jdk
def test_the_samplers_state_carries_the_full_names():
    m = MarketData()
    try:
        sampler = Sampler(SysRoot("/"))
        sampler.tick()

        def named():
            state = sampler.tick()
            return state if state.thread_names.full_name(m.pid, m.tid(HANDLER), COMM) else None
        state = wait_until(named, 30, "the JVM's names in a state")
        assert state.thread_names.full_name(m.pid, m.tid(OTHER_HANDLER), COMM) == OTHER_HANDLER
        assert state.thread_names.full_name(m.pid, m.tid(HANDLER), COMM) == HANDLER
        assert abs(state.thread_names.read_at[m.pid] - time.time()) < 60
        again = sampler.tick()
        assert again.thread_names is state.thread_names                 # not read again: the same value
    finally:
        m.stop()


@pytest.mark.parametrize("tids", [(101,), (101, 102)])
def test_only_the_threads_asked_for_are_named(tids):
    rig = Rig()
    threads = [(JVM, "java")] + [(t, COMM) for t in tids]
    names = rig.update(_sample({JVM: threads}))
    assert set(names.names[JVM]) == set(tids)


def test_the_names_cross_the_wire():
    """A remote window gets the server's names: MachineState.thread_names is in the wire's schema, and
    an unchanged value costs nothing from tick to tick."""
    from dataclasses import replace

    from app.machine.thread_names import ThreadNames
    from app.remote.codec import Encoder, StateReceiver, StateSender
    from tests.machines import extract
    state = Sampler(SysRoot(extract("sno"))).tick()
    names = ThreadNames({JVM: {102: f"{COMM}-thread-102"}}, {OTHER: "it was started with -XX:+DisableAttachMechanism"},
                        {JVM: 1795612743.5})
    sender, receiver = StateSender(), StateReceiver()
    receiver.apply(sender.form(state))
    got = receiver.apply(sender.form(replace(state, generation=state.generation + 1, thread_names=names)))
    assert got.thread_names == names and got.thread_names.full_name(JVM, 102, COMM) == f"{COMM}-thread-102"
    later = replace(state, generation=state.generation + 2, thread_names=names)
    assert Encoder().diff(replace(later, generation=0), later) == {"$p": [[0, later.generation]]}
