"""`coremap snapshot` keeps the threads (issue 30, wrong answer 8: "holds no proc/PID/task/"), and
`coremap threads --root CAPTURE` lists them with their allowed CPUs, cpuset, policy and last CPU, and the
Java names read when the capture was taken; bounded, and read back through the capture's confined reader."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.cli.main import main
from app.inputs import open_input
from app.machine.cpusets import read_cpuset_cpus
from app.machine.thread_names import CAPTURED_NAMES
from app.machine.threads import read_tasks
from app.store import capture_threads
from app.store.capture import MAX_TARBALL, extract_tarball, take_snapshot
from app.sysroot import SNAPSHOT_META_DIR, SysRoot
from tests.jvms import COMM, HANDLER, MarketData, needs_jdk
from tests.machines import copy_machine, procfs_composite

# A thread named as a JVM names its threads (PR_SET_NAME, 15), pinned to one CPU by itself and put
# under SCHED_BATCH (no privilege needed), then asleep: what the capture must keep of it.
CHILD = """
import ctypes, os, sys, threading
def work():
    ctypes.CDLL(None).prctl(15, b"snap-pinned", 0, 0, 0)
    os.sched_setaffinity(0, {int(sys.argv[1])})
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    print(threading.get_native_id(), flush=True)
    threading.Event().wait()
threading.Thread(target=work, daemon=True).start()
threading.Event().wait()
"""


def _extracted(tarball: Path, dest: Path) -> SysRoot:
    """The capture read back the one way coremap reads a tarball (checked, "data" filter)."""
    with open_input(tarball, what="", limit=MAX_TARBALL) as f:
        return SysRoot(extract_tarball(f, dest, str(tarball)))


def _threads_json(capsys, *argv, err: list | None = None) -> list[dict]:
    capsys.readouterr()
    assert main(["threads", *argv, "--json"]) == 0
    got = capsys.readouterr()
    if err is not None:
        err.append(got.err)
    return json.loads(got.out)["threads"]


def test_a_snapshot_keeps_a_pinned_thread_and_threads_root_lists_it(live_machine, tmp_path, capsys):
    cpu = max(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(cpu)], stdout=subprocess.PIPE, text=True)
    try:
        tid = int(child.stdout.readline())
        out = tmp_path / "s.tar.gz"
        assert main(["snapshot", str(out), "--no-second"]) == 0
        assert "threads" in capsys.readouterr().out
    finally:
        child.kill()
        child.wait(10)
    root = _extracted(out, tmp_path / "x")
    meta = root.snapshot_meta()
    assert meta["threads"]["tasks"] >= 2 and meta["threads"]["cut"] is None
    rows = {r["tid"]: r for r in _threads_json(capsys, "--root", str(root.root), "--pid", str(child.pid))}
    t = rows[tid]
    assert (t["comm"], t["allowed"], t["last_cpu"], t["policy"]) == ("snap-pinned", [cpu], cpu, os.SCHED_BATCH)
    assert rows[child.pid]["allowed"] == sorted(os.sched_getaffinity(0))     # the process's own thread
    # The cpuset it was in is kept with the cgroup's CPUs (app/machine/cpusets.py reads them back).
    where, cpus = read_cpuset_cpus(SysRoot("/"), os.getpid(), threading.get_native_id())[::-1]
    assert (t["cpuset"], t["cpuset_cpus"]) == (where, list(cpus))
    # The table, as people read it.
    capsys.readouterr()
    assert main(["threads", "--root", str(root.root), "--pid", str(child.pid)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if f" {tid} " in ln)
    assert "snap-pinned" in line and f" {cpu} " in line


def test_no_threads_keeps_none(tmp_path):
    """The capture as it was before issue 30, for a machine whose threads must not leave it."""
    res = take_snapshot(tmp_path / "n.tar.gz", SysRoot("/"), second=False, threads=False)
    root = _extracted(res.path, tmp_path / "x")
    assert res.threads is None and not read_tasks(root).tasks


@needs_jdk
def test_a_capture_names_java_threads_as_the_jvm_did(live_machine, tmp_path, capsys):
    jvm = MarketData()
    try:
        tid = jvm.tids[HANDLER]
        res = take_snapshot(tmp_path / "j.tar.gz", SysRoot("/"), second=False)
    finally:
        jvm.stop()
    root = _extracted(res.path, tmp_path / "x")
    # Stored as data, not asked for again: the JVM is gone when the capture is read.
    stored = json.loads(root.read(root.path(SNAPSHOT_META_DIR, CAPTURED_NAMES)))
    assert stored["names"][str(jvm.pid)][str(tid)] == HANDLER
    rows = _threads_json(capsys, "--root", str(root.root), "--name", HANDLER)
    assert [(r["tid"], r["name"], r["comm"]) for r in rows] == [(tid, HANDLER, COMM)]


def _composite_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "procfs"
    copy_machine(procfs_composite(), dst)
    return dst


@pytest.fixture(scope="module")
def composite_for_names(tmp_path_factory) -> Path:
    """One copy of the procfs composite (2,752 files) for the cases that write only the stored names'
    file, each the whole file: they differ in nothing else (a copy each was 4 copies of the same tree)."""
    return _composite_copy(tmp_path_factory.mktemp("names"))


@pytest.mark.parametrize("bound, value", [("MAX_TASKS", 20), ("MAX_THREAD_BYTES", 64 * 1024)])
def test_a_capture_past_its_bounds_keeps_whole_processes_and_says_so(tmp_path, monkeypatch, bound, value):
    monkeypatch.setattr(capture_threads, bound, value)
    res = take_snapshot(tmp_path / "c.tar.gz", SysRoot("/"), second=False)
    root = _extracted(res.path, tmp_path / "x")
    kept = read_tasks(root)
    assert 1 in kept.processes and len(kept.tasks) == res.threads
    held = sum(f.stat().st_size for d in (root.root / "proc").iterdir() if d.name.isdigit()
               for f in d.rglob("*") if f.is_file())
    if bound == "MAX_TASKS":
        assert res.threads <= value and f"at most {value} threads" in res.threads_cut
    else:
        assert held <= value and "0 MiB of their files" in res.threads_cut
    assert root.snapshot_meta()["threads"]["cut"] == res.threads_cut
    # Whole processes, the first by pid: each kept one has every thread its status counted.
    for pid, p in kept.processes.items():
        status = root.read(root.path("proc", str(pid), "status"))
        assert f"Threads:\t{len(p.tids)}\n" in status, pid
    processes = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    assert max(kept.processes) < max(processes)


@pytest.mark.parametrize("doc", [
    {"format": 1, "names": {"0": {"1": "x"}}},                      # pid 0 is no process
    {"format": 1, "names": {"5": {"6": "n" * 5000}}},                # longer than any name
    {"format": 2, "names": {}},                                      # a format this coremap does not know
    [1, 2],
])
def test_stored_names_out_of_bounds_are_refused_with_a_note(composite_for_names, capsys, doc):
    dst = composite_for_names
    (dst / SNAPSHOT_META_DIR).mkdir(exist_ok=True)
    (dst / SNAPSHOT_META_DIR / CAPTURED_NAMES).write_text(json.dumps(doc))
    err = []
    rows = _threads_json(capsys, "--root", str(dst), err=err)
    assert rows and all(r["name"] == r["comm"] for r in rows)
    assert CAPTURED_NAMES in err[0] and len(err[0].strip().splitlines()) <= 2, err


@pytest.fixture(scope="module")
def cut_java_name(tmp_path_factory):
    """A copy of the composite whose first thread's comm is a JVM thread's, cut by the kernel to 15 bytes
    (COMM), and whose stored names give its full name (HANDLER): (the copy, that thread). Both tests below
    only read it, one through `coremap threads`, one through the window's Sampler."""
    dst = _composite_copy(tmp_path_factory.mktemp("cut"))
    t = next(t for t in read_tasks(SysRoot(dst)).tasks.values())
    stat = dst / "proc" / str(t.pid) / "task" / str(t.tid) / "stat"
    text = stat.read_text()
    stat.write_text(text[:text.index("(") + 1] + COMM + text[text.rindex(")"):])
    (dst / SNAPSHOT_META_DIR).mkdir(exist_ok=True)
    (dst / SNAPSHOT_META_DIR / CAPTURED_NAMES).write_text(json.dumps(
        {"format": 1, "names": {str(t.pid): {str(t.tid): HANDLER}}}))
    return dst, t


def test_stored_names_name_a_captured_thread_whose_comm_is_cut(cut_java_name, capsys):
    dst, t = cut_java_name
    rows = _threads_json(capsys, "--root", str(dst), "--name", "feed-handler-0")
    assert [(r["tid"], r["name"]) for r in rows] == [(t.tid, HANDLER)]


def test_the_window_sampler_names_a_captured_thread_by_its_stored_java_name(cut_java_name):
    """The window shows a capture through the Sampler: its state carries the names the capture stored."""
    from app.sampling.sampler import Sampler
    dst, t = cut_java_name
    state = Sampler(SysRoot(dst)).tick()
    assert state.thread_names.name(t.pid, t.tid, state.sample.tasks.tasks[t.tid].comm) == HANDLER
