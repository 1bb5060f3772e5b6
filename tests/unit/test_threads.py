"""read_tasks / TaskReader / read_task / read_process on the live machine and the procfs fixture tree."""
from __future__ import annotations

import json
import os
import threading
from dataclasses import replace

import pytest

from app.errors import ParseError
from app.machine.thread_names import ThreadNames
from app.machine.threads import (TaskGone, TaskReader, ThreadsSample, find_threads_by_name, name_matcher,
                                 read_task, read_tasks, search_text)
from app.parse.cpulist import parse_cpulist
from app.sysroot import SysRoot
from tests.machines import copy_machine, procfs_composite

LIVE = SysRoot("/")


def _online() -> set[int]:
    return set(parse_cpulist(LIVE.read(LIVE.cpu_dir("online"))))


class _Sleeper:
    """A thread of this test process that waits until told to stop."""

    def __enter__(self):
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="coremap-test")
        self.thread.start()
        self.ready.wait(5)
        # Wait until it is asleep on the Event (status "State:\tS"), so state and switch counts are known.
        for _ in range(500):
            with open(f"/proc/self/task/{self.tid}/status") as f:
                if "\nState:\tS" in f.read():
                    break
            threading.Event().wait(0.002)
        return self

    def _run(self):
        self.tid = threading.get_native_id()
        self.ready.set()
        self.stop.wait(10)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)


@pytest.mark.usefixtures("live_machine")
def test_live_finds_own_process_and_a_test_thread():
    with _Sleeper() as sl:
        s = read_tasks(LIVE)
        me = s.processes[os.getpid()]
        assert threading.get_native_id() in me.tids and sl.tid in me.tids
        t = s.tasks[sl.tid]
        assert t.pid == os.getpid()
        assert t.state == "S"          # waiting on the Event
        assert t.last_cpu in _online()
        # fast: stat only, plus allowed CPUs from sched_getaffinity on the live machine
        assert t.allowed == tuple(sorted(os.sched_getaffinity(t.tid)))
        assert t.voluntary_switches is None and t.migrations is None
        assert me.cmdline and "python" in me.cmdline.split()[0]
    online = _online()
    assert all(t.last_cpu in online for t in s.tasks.values())
    # pid 2 is kthreadd on every Linux since 2.6.22: a kernel thread with no cmdline
    if 2 in s.tasks:
        assert s.tasks[2].kthread and s.processes[2].cmdline == ""


@pytest.mark.usefixtures("live_machine")
def test_live_full_detail_fills_allowed_and_switches():
    with _Sleeper() as sl:
        s = read_tasks(LIVE, detail="full", pids=[os.getpid()])
        t = s.tasks[sl.tid]
        assert set(t.allowed) == os.sched_getaffinity(sl.tid)
        assert t.voluntary_switches >= 1        # it slept at least once on the Event
        assert t.involuntary_switches >= 0
        if os.path.exists(f"/proc/self/task/{sl.tid}/sched"):
            assert t.migrations is not None and t.migrations >= 0
        one = read_task(LIVE, os.getpid(), sl.tid)
        assert one.tid == sl.tid and one.allowed == t.allowed
    assert set(s.tasks) == set(s.processes[os.getpid()].tids)
    assert set(s.processes) == {os.getpid()}


def test_thread_that_exits_between_samples_is_absent():
    reader = TaskReader(LIVE)
    with _Sleeper() as sl:
        before = reader.sample()
        assert sl.tid in before.tasks
    sl.thread.join()
    # join() returns once the Python side is done; the kernel task can linger a moment longer.
    for _ in range(500):
        if not os.path.exists(f"/proc/self/task/{sl.tid}"):
            break
        threading.Event().wait(0.01)
    after = reader.sample()
    assert sl.tid not in after.tasks
    assert sl.tid not in after.processes[os.getpid()].tids
    with pytest.raises(TaskGone, match=f"thread {sl.tid} has exited"):
        read_task(LIVE, os.getpid(), sl.tid)


def test_a_sample_of_one_process_and_of_a_gone_one():
    reader = TaskReader(LIVE, detail="fast", cmdline=True)
    p = reader.sample([os.getpid()]).processes[os.getpid()]
    assert p.pid == os.getpid() and threading.get_native_id() in p.tids
    with open(f"/proc/{os.getpid()}/comm") as f:
        assert p.comm == f.read().strip()
    pid_max = int(LIVE.read(LIVE.proc("sys", "kernel", "pid_max")))
    gone = reader.sample([pid_max + 1])
    assert gone.processes == {} and gone.tasks == {}


def test_cmdline_cache_is_keyed_by_process_start():
    reader = TaskReader(LIVE)
    reader.sample()
    key = next(k for k in reader._cmdlines if k[0] == os.getpid())
    # A recycled pid has another start time: the cached text must not be reused for it.
    reader._cmdlines[(os.getpid(), key[1] + 1)] = "stale"
    s = reader.sample()
    assert s.processes[os.getpid()].cmdline != "stale"
    assert (os.getpid(), key[1] + 1) not in reader._cmdlines


def test_composite_fixture_tree():
    root = SysRoot(procfs_composite())
    s = read_tasks(root, detail="full")
    assert isinstance(s, ThreadsSample)
    # Only 27079 has a task/ folder in prometheus/procfs's tree; its 5 threads, values from task/TID/stat.
    assert set(s.processes) == {27079}
    assert s.processes[27079].tids == (27079, 27080, 27081, 27082, 27083)
    assert {t: x.last_cpu for t, x in s.tasks.items()} == {27079: 2, 27080: 0, 27081: 5, 27082: 1, 27083: 4}
    # task/TID/stat, not proc/27079/stat (which holds the whole group's utime 58125)
    assert s.tasks[27079].utime == 0 and s.tasks[27080].utime == 34136
    assert s.tasks[27080].allowed is None      # the fixture has no task status files
    assert s.processes[27079].comm == "pthread_load"
    with pytest.raises(TaskGone, match="not in this capture"):
        read_task(root, 27079, 99999)


def test_bad_stat_in_tree_names_the_file(tmp_path):
    src = procfs_composite()
    copy_machine(src, tmp_path, only=("proc/27079",))
    (tmp_path / "proc" / "stat").write_text("cpu 1 2 3 4\n")
    bad = tmp_path / "proc" / "27079" / "task" / "27081" / "stat"
    bad.write_text("27081 (x) S 1 2\n")
    with pytest.raises(ParseError, match="27081/stat"):
        read_tasks(SysRoot(tmp_path))


def test_find_threads_by_name():
    with _Sleeper() as sl:
        s = read_tasks(LIVE, pids=[os.getpid()])
    mine = s.tasks[sl.tid].comm
    found = find_threads_by_name(s, mine.upper()[:4])
    assert sl.tid in [t.tid for t in found]
    assert find_threads_by_name(s, "no-such-thread-name-xyz") == []
    s2 = read_tasks(SysRoot(procfs_composite()))
    assert [t.tid for t in find_threads_by_name(s2, "LOAD")] == [27079, 27080, 27081, 27082, 27083]


def test_the_one_name_matcher():
    """What the window's filter and `coremap threads --name` both ask (issue 20): every word, any case,
    somewhere in the names."""
    hay = search_text("market-data-feed-handler-0", "market-data-fee", None, "1234")
    assert hay == "market-data-feed-handler-0 market-data-fee 1234"
    for query in ("market-data-feed-handler-0", "MARKET-DATA-FEED", "handler-0 market", "  1234 ", ""):
        assert name_matcher(query)(hay), query
    for query in ("market-data-feed-handler-1", "handler-0 nope", "market data feed handler 0x"):
        assert not name_matcher(query)(hay), query
    # Case-folded both ways: "Straße" is found by "STRASSE".
    assert name_matcher("STRASSE")(search_text("straße-worker"))


def test_find_threads_by_their_full_names():
    s2 = read_tasks(SysRoot(procfs_composite()))
    t = s2.tasks[27080]
    full = t.comm + "-and-the-rest-of-a-long-name"
    cut = ThreadNames({t.pid: {27080: full}})
    # Only a comm of 15 bytes can have been cut: a shorter one gets no full name however it was read.
    assert len(t.comm.encode()) < 15 and find_threads_by_name(s2, "rest-of-a-long", cut) == []
    fifteen = t.comm.ljust(15, "x")[:15]
    s3 = ThreadsSample({27080: replace(t, comm=fifteen)}, {}, s2.clk_tck)
    names = ThreadNames({t.pid: {27080: fifteen + "-and-the-rest"}})
    assert [x.tid for x in find_threads_by_name(s3, "AND-THE-REST", names)] == [27080]
    assert find_threads_by_name(s3, "and-the-rest") == []          # without the names: only comm


@pytest.mark.usefixtures("live_machine")
def test_cli_threads_json_with_cpu_percent(capsys):
    import json

    from app.cli.main import main
    stop = threading.Event()
    box = {}

    def spin():
        box["tid"] = threading.get_native_id()
        while not stop.is_set():
            pass

    th = threading.Thread(target=spin)
    th.start()
    try:
        while "tid" not in box:
            threading.Event().wait(0.001)
        assert main(["threads", "--pid", str(os.getpid()), "--json", "--interval", "0.3"]) == 0
    finally:
        stop.set()
        th.join()
    rows = {r["tid"]: r for r in json.loads(capsys.readouterr().out)["threads"]}
    busy = rows[box["tid"]]
    assert busy["pid"] == os.getpid() and set(busy["allowed"]) == os.sched_getaffinity(0)
    # One spinning thread uses at most one CPU (tick skew above that is clamped in app/sampling/rates.py).
    assert 0 < busy["cpu_pct"] <= 100.0


def test_cli_threads_on_fixtures(capsys):
    from app.cli.main import main
    from tests.machines import extract
    assert main(["threads", "--root", str(procfs_composite()), "--name", "LOAD"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:5] == ["PID", "TID", "NAME", "S", "CPU"]
    assert [ln.split()[1] for ln in out[1:]] == ["27079", "27080", "27081", "27082", "27083"]
    assert main(["threads", "--root", str(procfs_composite()), "--name", "nope"]) == 1
    assert main(["--root", str(extract("sno")), "threads"]) == 2
    assert "no proc/PID/task" in capsys.readouterr().err
    assert main(["threads", "--root", str(procfs_composite()), "--interval", "1"]) == 2


def test_detail_tids_get_switches_in_fast_mode():
    ev = threading.Event()
    th = threading.Thread(target=ev.wait, daemon=True)
    th.start()
    try:
        reader = TaskReader(SysRoot("/"))
        reader.detail_tids = frozenset({th.native_id})
        s = reader.sample([os.getpid()])
        chosen = s.tasks[th.native_id]
        other = s.tasks[threading.get_native_id()]
        assert chosen.voluntary_switches is not None and chosen.allowed is not None
        assert other.voluntary_switches is None
    finally:
        ev.set()
        th.join()


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root (CAP_SYS_NICE)")
@pytest.mark.usefixtures("live_machine")
def test_policy_and_priority_read_by_every_path_and_a_change_seen_while_asleep():
    """A sleeping child set to SCHED_FIFO 80 reads so through the fast path, the full path and
    read_task; changed back while it sleeps, the reader's kept copy is caught by the check (policy and
    RT priority are among what it compares), not shown stale until the next full read."""
    import subprocess
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.sched_setscheduler(child.pid, os.SCHED_FIFO, os.sched_param(80))
        now = [0.0]
        reader = TaskReader(LIVE, clock=lambda: now[0])
        t = reader.sample([child.pid]).tasks[child.pid]
        assert (t.policy, t.rt_priority, t.sched_label) == (os.SCHED_FIFO, 80, "fifo 80")
        full = read_tasks(LIVE, detail="full", pids=[child.pid]).tasks[child.pid]
        assert (full.policy_name, full.rt_priority) == ("fifo", 80)
        assert read_task(LIVE, child.pid, child.pid).sched_label == "fifo 80"
        os.sched_setscheduler(child.pid, os.SCHED_OTHER, os.sched_param(0))
        now[0] = 40.0          # past the check (15-30 s), before the re-read (60-120 s)
        t = reader.sample([child.pid]).tasks[child.pid]
        assert (t.policy_name, t.rt_priority) == ("other", 0)
    finally:
        child.kill()
        child.wait()


def test_thread_kinds_by_kernel_name_and_flag():
    """The kinds the tree's filter and `coremap threads --kind` offer, from comm and PF_KTHREAD: a user
    thread that names itself like a kernel one stays a user thread."""
    from app.parse.task_stat import thread_kind
    assert thread_kind("irq/24-ACPI:Ged", True) == "irq"
    assert thread_kind("irq/24-ACPI:Ged", False) == "user"
    assert thread_kind("ksoftirqd/3", True) == "softirq"
    assert [thread_kind(n, True) for n in ("rcuc/5", "rcuop/5", "rcuog/0", "rcu_preempt", "rcub/0")] == ["rcu"] * 5
    assert thread_kind("kworker/1:1H-kblockd", True) == "kworker"
    assert thread_kind("migration/0", True) == thread_kind("kthreadd", True) == "kernel"


@pytest.mark.usefixtures("live_machine")
def test_cli_threads_by_kind_on_the_live_machine(capsys):
    """ksoftirqd/N runs on every Linux, one per CPU: --kind softirq lists exactly those, and a user
    thread of this test that calls itself "ksoftirqd/9" is not among them."""
    from app.cli.main import main
    ev = threading.Event()
    th = threading.Thread(target=ev.wait, name="ksoftirqd/9")
    th.start()
    try:
        with open(f"/proc/self/task/{th.native_id}/comm", "w") as f:
            f.write("ksoftirqd/9")
        assert main(["threads", "--kind", "softirq", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["threads"]
        assert rows and all(r["comm"].startswith("ksoftirqd/") and r["kthread"] and r["kind"] == "softirq" for r in rows)
        assert th.native_id not in {r["tid"] for r in rows}
        assert main(["threads", "--pid", str(os.getpid()), "--kind", "user", "--json"]) == 0
        mine = {r["tid"]: r for r in json.loads(capsys.readouterr().out)["threads"]}
        assert mine[th.native_id]["comm"] == "ksoftirqd/9" and mine[th.native_id]["kind"] == "user"
        assert main(["threads", "--pid", str(os.getpid()), "--kind", "irq"]) == 1
        assert capsys.readouterr().err == "coremap: no thread is of kind irq\n"
    finally:
        ev.set()
        th.join()
