"""One name for a thread wherever coremap names it (issue 28, item 2): its full Java name where the kernel
cut its comm to 15 bytes and the JVM's names were read, else its comm (ThreadNames.name).

The rule on its own; gap attribution's task names; and, with a real JVM (tests/jvms.py MarketData:
"market-data-feed-handler-0" and "-1", both "market-data-fee" to the kernel, each tid read by the
thread itself), a pin by tid through the service the window and the CLI share, journalled and listed by
`coremap journal` under the full name, with the cut name nowhere on its own.
"""
from __future__ import annotations

import os
import re

import pytest

from app.cli.main import main
from app.machine.java import names_by_tid
from app.machine.thread_names import ThreadNames
from app.parse.cpulist import format_cpulist
from app.pinning.journal import Journal
from app.pinning.names import named_thread
from app.pinning.service import AffinityService, PinRequest
from app.store.folders import journal_path
from app.sysroot import SysRoot
from probes import trace as T
from probes.text import format_attribution
from tests.jvms import COMM, HANDLER, OTHER_HANDLER, MarketData, needs_jdk

ROOT = SysRoot("/")
CPUS = tuple(sorted(os.sched_getaffinity(0)))


def _alone(text: str, cut: str = COMM) -> list[str]:
    """Where `cut` stands in `text` other than as the start of a full name that begins with it."""
    return [m.group(0) for m in re.finditer(re.escape(cut) + r"(?!d-handler)", text)]


# -- the rule -----------------------------------------------------------------------------------------------
def test_a_thread_is_named_by_its_full_name_only_where_the_kernel_cut_it():
    names = ThreadNames({77: {78: HANDLER, 79: "worker", 80: "a-name-that-is-not-its-comm-at-all"}})
    assert names.name(77, 78, COMM) == HANDLER
    assert names.name(77, 79, "worker") == "worker"                 # fits in comm: nothing was cut
    assert names.name(77, 80, COMM) == COMM                         # renamed since the read (or a reused tid)
    assert names.name(77, 81, COMM) == COMM                         # never read
    assert names.name(99, 78, COMM) == COMM                         # another process's tid 78
    assert names.name(77, 78, "market-data") == "market-data"       # its comm is not cut any more


# -- gap attribution ------------------------------------------------------------------------------------------
def _switch(ts_us: int, comm: str, tid: int) -> str:
    return (f"{'probe':>16}-{100:<7} [001] d..2. {ts_us // 1_000_000:>6}.{ts_us % 1_000_000:06d}: sched_switch: "
            f"prev_comm=probe prev_pid=100 prev_prio=120 prev_state=R ==> next_comm={comm} next_pid={tid} "
            "next_prio=120")


def _back(ts_us: int, comm: str, tid: int) -> str:
    return (f"{comm:>16}-{tid:<7} [001] d..2. {ts_us // 1_000_000:>6}.{ts_us % 1_000_000:06d}: sched_switch: "
            f"prev_comm={comm} prev_pid={tid} prev_prio=120 prev_state=S ==> next_comm=probe next_pid=100 "
            "next_prio=120")


def _trace(tasks: list[tuple[str, int]]) -> tuple[str, list[tuple[int, int]]]:
    """A trace where each task runs 50 us inside its own 100 us gap of the probe (pid 100)."""
    lines, gaps = [], []
    for i, (comm, tid) in enumerate(tasks):
        at = 1_000_000 + 1000 * i
        lines += [_switch(at + 20, comm, tid), _back(at + 70, comm, tid)]
        gaps.append((at * 1000, 100_000))
    return "\n".join(lines) + "\n", gaps


def test_a_traced_task_is_named_as_everywhere_and_only_cut_names_are_asked_for():
    text, gaps = _trace([(COMM, 4001), ("kworker/1:1", 4002), (COMM, 4003)])
    asked = []

    def names(threads):
        asked.append(list(threads))
        return {4001: HANDLER, 4003: OTHER_HANDLER}
    a = T.attribute_run(text, {}, gaps, probe_pid=100, started_ns=0, names=names)
    causes = sorted(row["cause"] for row in a["by_cause"])
    assert causes == sorted([f"{HANDLER}/4001", "kworker/1:1/4002", f"{OTHER_HANDLER}/4003"])
    assert asked == [[(4001, COMM), (4003, COMM)]]                  # once, and not for kworker
    assert {g["verdict"] for g in a["gaps"]} == {f"{HANDLER}/4001", "kworker/1:1/4002", f"{OTHER_HANDLER}/4003"}
    # without a namer (a trace read back elsewhere) the trace's comm stays
    plain = T.attribute_run(text, {}, gaps, probe_pid=100, started_ns=0)
    assert sorted(row["cause"] for row in plain["by_cause"]) == sorted([f"{COMM}/4001", "kworker/1:1/4002",
                                                                         f"{COMM}/4003"])


def test_the_text_never_cuts_a_long_cause():
    long = "order-matcher-pool-thread-7-of-the-east-coast-gateway/28207"
    a = {"available": True, "attributed_gaps": 1, "cpu_events": 2, "untraced_gaps": 0,
         "by_cause": [{"cause": long, "gaps": 1, "ns": 50_000}], "gaps": []}
    row = format_attribution(a)[2]
    assert long in row and row.split(long)[1].split()[0] == "1", row     # whole, then its count of gaps


# -- a real JVM ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jvm():
    m = MarketData()
    yield m
    m.stop()


@needs_jdk
def test_a_jvms_traced_threads_get_their_full_names_and_an_exited_one_its_comm(jvm):
    h0, h1 = jvm.tid(HANDLER), jvm.tid(OTHER_HANDLER)
    gone = 4194000                      # beyond any tid this machine hands out (pid_max is 4194304 at most)
    text, gaps = _trace([(COMM, h0), (COMM, h1), (COMM, gone)])
    a = T.attribute_run(text, {}, gaps, probe_pid=100, started_ns=0, names=lambda t: names_by_tid(t, ROOT))
    causes = {row["cause"] for row in a["by_cause"]}
    assert causes == {f"{HANDLER}/{h0}", f"{OTHER_HANDLER}/{h1}", f"{COMM}/{gone}"}
    assert jvm.alive()


@needs_jdk
@pytest.mark.usefixtures("live_machine")
def test_a_java_thread_pinned_by_tid_is_journalled_and_listed_by_its_full_name(jvm, tmp_path, monkeypatch, capsys):
    if len(CPUS) < 2:
        pytest.skip("needs 2 CPUs to move the thread between")
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path))
    tid = jvm.tid(HANDLER)
    before = tuple(sorted(os.sched_getaffinity(tid)))
    one = CPUS[-1]
    target = named_thread(ROOT, tid)
    assert (target.id, target.pid, target.label) == (tid, jvm.pid, HANDLER)
    journal = Journal(journal_path())
    try:
        [r] = AffinityService(ROOT, journal).apply(PinRequest((target,), (one,), origin="drop"))
        assert r.line() == f"thread {tid} ({HANDLER}): {format_cpulist(before)} -> {one} ok"
        assert journal.entries()[-1].label == HANDLER
    finally:
        journal.close()
    assert os.sched_getaffinity(tid) == {one}
    try:
        # The CLI's --tid names it the same way.
        assert main(["pin", "--tid", str(tid), "--cpus", str(CPUS[0])]) == 0
        assert capsys.readouterr().out == f"thread {tid} ({HANDLER}): {one} -> {CPUS[0]} ok\n"
        assert main(["journal"]) == 0
        out = capsys.readouterr().out
        assert out.count(f"thread {tid} ({HANDLER})") == 2, out
        assert not _alone(out), out
        assert main(["journal", "--json"]) == 0
        assert not _alone(capsys.readouterr().out)
    finally:
        assert main(["restore"]) == 0
    assert tuple(sorted(os.sched_getaffinity(tid))) == before
    out = capsys.readouterr().out
    assert f"thread {tid} ({HANDLER})" in out and not _alone(out), out


@needs_jdk
@pytest.mark.usefixtures("tracefs", "live_machine")
def test_a_jitter_run_names_the_java_thread_that_ran_on_its_cpu_by_its_full_name(jvm):
    """The handler (awake every 50 ms) shares the probed CPU; the run's own record names it. Every gap is
    summed up by cause, so the run's ~12 wakeups of the handler name it as surely as 2 s's 40 did."""
    from probes.runner import run_to_end
    tid, cpu = jvm.tid(HANDLER), CPUS[-1]
    before = os.sched_getaffinity(tid)
    os.sched_setaffinity(tid, {cpu})
    try:
        rc, lines, run = run_to_end("jitter", ["--cpu", str(cpu), "--seconds", "0.6", "--attribute"], timeout=60)
    finally:
        os.sched_setaffinity(tid, before)
    assert rc == 0, run.stderr_lines
    a = next(line for line in lines if line["type"] == "attribution")
    causes = [row["cause"] for row in a["by_cause"]]
    assert f"{HANDLER}/{tid}" in causes, causes
    assert not any(_alone(c) for c in causes), causes
    assert jvm.alive()
