"""Reuse of processes that did not run (app/machine/threads.py) and of their rates (app/sampling/sampler.py),
on the live machine: two helper processes, one whose threads all sleep, one with a thread that spins."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.machine.threads import TaskReader
from app.sampling.rates import rates as compute_rates
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot

LIVE = SysRoot("/")


# Every test here counts on its helper processes' threads staying as they are between two reads: another
# suite's isolate (a cpuset shield moves every process, and a process moved is read again) broke one
# in the two-clone check. They hold the machine lock.
pytestmark = pytest.mark.usefixtures("live_machine")


@pytest.fixture(autouse=True)
def threads_read_every_tick(monkeypatch):
    """These tests read the thread list every tick; on a machine busy with other work (thousands of
    threads, e.g. a churn benchmark) the sampler would read it every 3 s instead (app/sampling/sampler.py
    THREAD_SLOW_AT)."""
    import app.sampling.sampler as sampler_mod
    monkeypatch.setattr(sampler_mod, "THREAD_SLOW_AT", 1 << 30)

SLEEPERS = r"""
import sys, threading
stop = threading.Event()
ts = [threading.Thread(target=stop.wait, daemon=True) for _ in range(int(sys.argv[1]))]
for t in ts: t.start()
print("ready", flush=True)
sys.stdin.read()
"""

SPINNER = r"""
import sys, threading
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


def _start(code: str, *args: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def _cpu_ns(pid: int) -> int:
    """The process's time on a CPU so far (all its threads), in ns: its CPU-time clock,
    MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of include/linux/posix-timers.h."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)


def _runnable(pid: int) -> bool:
    """Whether a thread of `pid` is running or waits for a CPU (state R in its stat; a busy machine may
    keep a thread on its way to its wait off every CPU for longer than _settled looks)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue                    # exited while listed
        if stat[stat.rindex(")") + 2] == "R":
            return True
    return False


def _settled(p: subprocess.Popen) -> None:
    """Until every thread of `p` has settled into its wait: none ran in the last 20 ms and none is
    runnable (a thread that has printed "ready" may still be on its way to its wait, or waiting for the
    GIL, and would make the process look run between two reads). A wait for the state, not a fixed sleep."""
    deadline = time.monotonic() + 30
    before = _cpu_ns(p.pid)
    while True:
        time.sleep(0.02)
        now = _cpu_ns(p.pid)
        if now == before and not _runnable(p.pid) and _cpu_ns(p.pid) == now:
            return
        assert time.monotonic() < deadline, f"helper process {p.pid} did not settle within 30 s"
        before = _cpu_ns(p.pid)


def _ran(pid: int, since: int) -> None:
    """Until `pid` has had 50 ms more CPU than `since` (the spinner between two reads): its busy thread's
    stat CPU ticks (10 ms each; utime + stime is its run time rounded down) have grown by then."""
    deadline = time.monotonic() + 30
    while _cpu_ns(pid) < since + 50_000_000:
        assert time.monotonic() < deadline, f"process {pid} did not run within 30 s"
        time.sleep(0.01)


@pytest.fixture()
def helpers():
    sleepers, spinner = _start(SLEEPERS, "40"), _start(SPINNER)
    _settled(sleepers)
    try:
        yield sleepers.pid, spinner.pid
    finally:
        for p in (sleepers, spinner):
            p.stdin.close()
            p.kill()
            p.wait(10)


def test_sleeping_process_is_reused_exactly_and_a_spinning_one_is_read(helpers):
    sleepers, spinner = helpers
    reader = TaskReader(LIVE)
    first = reader.sample()
    _ran(spinner, _cpu_ns(spinner))
    second = reader.sample()
    fresh = TaskReader(LIVE)
    fresh.reuse = False
    oracle = fresh.sample()                     # every thread read from its stat file
    mine = second.processes[sleepers].tids
    assert len(mine) == 41
    assert all(second.tasks[t] is first.tasks[t] for t in mine)             # reused, not re-read
    assert second.processes[sleepers] is first.processes[sleepers]
    assert reader.reused >= 41
    # Exact: what was reused is what the kernel shows now.
    assert {t: second.tasks[t] for t in mine} == {t: oracle.tasks[t] for t in mine}
    # The spinner's process ran: read afresh, its busy thread's CPU time went up.
    busy = max(second.processes[spinner].tids, key=lambda t: second.tasks[t].cpu_ticks)
    assert second.tasks[busy] is not first.tasks[busy]
    assert second.tasks[busy].cpu_ticks > first.tasks[busy].cpu_ticks


def test_forget_reads_again_and_detail_threads_are_always_fresh(helpers):
    sleepers, _ = helpers
    reader = TaskReader(LIVE)
    first = reader.sample()
    tids = first.processes[sleepers].tids
    reader.detail_tids = frozenset({tids[1]})
    second = reader.sample()
    assert second.tasks[tids[2]] is first.tasks[tids[2]]
    assert second.tasks[tids[1]] is not first.tasks[tids[1]]
    assert second.tasks[tids[1]].voluntary_switches is not None          # status read for it
    reader.forget([sleepers])
    third = reader.sample()
    assert third.tasks[tids[2]] is not second.tasks[tids[2]]
    assert third.tasks[tids[2]] == second.tasks[tids[2]]


def test_rates_of_still_threads_are_handed_out_again_and_equal_computed_ones(helpers):
    sleepers, spinner = helpers
    s = Sampler(LIVE, interval=1.0)
    states = [s.tick()]
    for _ in range(2):
        _ran(spinner, _cpu_ns(spinner))
        states.append(s.tick())
    a, b = states[1], states[2]
    mine = b.sample.tasks.processes[sleepers].tids
    assert all(b.rates.tasks[t] is a.rates.tasks[t] for t in mine)
    # The same numbers app.sampling.rates gives for the whole pair.
    full = compute_rates(a.sample, b.sample, b.sample.time - a.sample.time).tasks
    assert {t: b.rates.tasks[t] for t in mine} == {t: full[t] for t in mine}
    assert set(b.rates.tasks) == set(full)
    busy = max(b.sample.tasks.processes[spinner].tids, key=lambda t: b.rates.tasks[t].cpu_pct)
    assert b.rates.tasks[busy].cpu_pct > max(b.rates.tasks[t].cpu_pct for t in mine)    # it ran; they slept


def test_sampler_forget_threads_reads_them_again(helpers):
    sleepers, _ = helpers
    s = Sampler(LIVE, interval=1.0)
    a = s.tick()
    b = s.tick()
    tid = a.sample.tasks.processes[sleepers].tids[3]
    assert b.sample.tasks.tasks[tid] is a.sample.tasks.tasks[tid]
    s.forget_threads([sleepers])
    c = s.tick()
    assert c.sample.tasks.tasks[tid] is not b.sample.tasks.tasks[tid]
    assert c.sample.tasks.tasks[tid] == b.sample.tasks.tasks[tid]


def test_a_big_sleeping_process_is_re_read_in_full_proportionally_less_often():
    """REUSE_SECONDS bounds how stale a sleeping process may be; one of more than REUSE_THREADS threads
    is re-read proportionally less often, so its forced re-reads cost no more (issue 12)."""
    from app.machine.threads import REUSE_SECONDS, REUSE_THREADS
    small, big = _start(SLEEPERS, "20"), _start(SLEEPERS, str(2 * REUSE_THREADS))
    now = [0.0]
    try:
        _settled(small)
        _settled(big)
        reader = TaskReader(LIVE, clock=lambda: now[0])
        first = reader.sample()
        # Past every small process's re-read (at most 0.99 x REUSE_SECONDS) and before any of the big
        # one's (at least 1.0002 x: its spread is REUSE_SECONDS x (0.5 + pid % 64 / 128) x its share
        # of REUSE_THREADS); REUSE_SECONDS + 1 failed whenever the big pid was a multiple of 64.
        now[0] = REUSE_SECONDS
        second = reader.sample()
        t_small, t_big = first.processes[small.pid].tids[1], first.processes[big.pid].tids[1]
        assert second.tasks[t_small] is not first.tasks[t_small]        # re-read
        assert second.tasks[t_big] is first.tasks[t_big]                # twice the threads: not yet
        now[0] = 2 * REUSE_SECONDS + 2
        third = reader.sample()
        assert third.tasks[t_big] is not first.tasks[t_big]             # within twice the bound
    finally:
        for p in (small, big):
            p.stdin.close()
            p.kill()
            p.wait(10)


def test_a_sleeping_process_changed_from_outside_is_read_at_its_check():
    """Between full re-reads, a sleeping process is checked every CHECK_SECONDS with syscalls only:
    unchanged, its last read stays (the same objects); a nice, policy or affinity another process
    changed makes it read again, so the change shows within CHECK_SECONDS."""
    import os

    from app.machine.threads import CHECK_SECONDS
    sleepers = _start(SLEEPERS, "6")
    now = [0.0]
    try:
        _settled(sleepers)
        reader = TaskReader(LIVE, clock=lambda: now[0])
        first = reader.sample()
        pid = sleepers.pid
        a, b = first.processes[pid].tids[1], first.processes[pid].tids[2]
        now[0] = CHECK_SECONDS                  # every check due, no re-read due (>= 2 x CHECK_SECONDS)
        second = reader.sample()
        assert second.tasks[a] is first.tasks[a] and second.tasks[b] is first.tasks[b]

        os.setpriority(os.PRIO_PROCESS, a, first.tasks[a].nice + 3)       # from outside: this test
        now[0] = 1.49 * CHECK_SECONDS           # before the next check (>= 1.5 x): the old values stay
        assert reader.sample().tasks[a] is first.tasks[a]
        now[0] = 2.01 * CHECK_SECONDS
        third = reader.sample()
        assert third.tasks[a].nice == first.tasks[a].nice + 3

        os.sched_setaffinity(b, {0})
        now[0] = 3.02 * CHECK_SECONDS
        fourth = reader.sample()
        assert fourth.tasks[b].allowed == (0,)
        assert fourth.tasks[a] is third.tasks[a] or fourth.tasks[a].nice == third.tasks[a].nice
    finally:
        sleepers.stdin.close()
        sleepers.kill()
        sleepers.wait(10)
