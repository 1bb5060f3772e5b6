"""The drop, the Pin to… dialog, `coremap pin --dry-run` and the pin itself agree on every kind of target
(issue 28, "one rule for 'can this go there'"): all four ask the pin flow's dry run of the same batch.
Before, a drop onto a quiet CPU behind a Make quiet shield was refused ("may run only on CPUs 0 (cpuset
/coremap-system)") while Edit → Pin to… and `coremap pin` moved the thread into /coremap-pinned.

Each case is judged by the grid's own drop policy (PinDropPolicy over the controller's check), the
dialog's check as the user types the CPUs, the CLI's dry run (its exit status), then written with
`apply`, and the machine is put back."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.cli.main import main
from app.machine.topology import read_topology
from app.pinning.journal import Journal
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.quiet.isolate import LocalQuiet
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.gui.test_pinning import _drop, _enter_move, _mime, _point_on
from tests.live import cpulist, live_test, restore_quiet
from tests.machines import copy_machine, writable_test_tree
from widgets.application import build_window
from widgets.pinning.dialog import check_pin
from widgets.pinning.drop import PinDropPolicy
from widgets.pinning.mime import PinPayload, pin_mime_data
from widgets.topology.drop import DropTarget

CPUSET_V1 = Path("/sys/fs/cgroup/cpuset")
needs_v1 = pytest.mark.skipif(not (CPUSET_V1 / "cpuset.cpus").exists(), reason="cgroup v1's cpuset is not mounted here")
THREADED = ("import os, threading, time\n"
            "threading.Thread(target=time.sleep, args=(120,), daemon=True).start()\n"
            "print(os.getpid(), flush=True); time.sleep(120)")


def _allowed(pid: int, tid: int) -> frozenset[int]:
    status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
    return cpulist(next(ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list")).split(":", 1)[1])


def _cpuset(pid: int, tid: int) -> str:
    return Path(f"/proc/{pid}/task/{tid}/cpuset").read_text().strip()


def _threaded() -> tuple[subprocess.Popen, int]:
    """A process with a second thread, and that thread's id (the one a user would drag)."""
    p = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    return p, max(int(t) for t in os.listdir(f"/proc/{p.pid}/task"))


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    svc = AffinityService(SysRoot("/"), Journal(tmp_path / "state" / "journal.jsonl"))
    yield svc
    restore_quiet(svc)
    svc.journal.close()


def verdicts(service, payload: PinPayload, cpus: tuple[int, ...], cli: list[str], topology) -> dict[str, bool]:
    """Whether each way in would let the pin go: the drop (the grid's policy), the dialog (as typed),
    the CLI's dry run (exit 0). Nothing is written."""
    drop = PinDropPolicy(lambda r: service.preflight(r)).judge(
        pin_mime_data(payload), DropTarget((), cpus, f"CPU {cpus[0]}"))
    typed = check_pin(payload, ",".join(map(str, cpus)), topology, service.preflight)
    code = main([*cli, "-c", ",".join(map(str, cpus)), "--dry-run"])
    assert drop.ours and code in (0, 1, 2)
    assert (drop.request is None) == bool(service.preflight(PinRequest(payload.targets(), cpus)))
    return {"drop": drop.request is not None, "dialog": typed.ok, "cli": code == 0}


def _applied(service, payload: PinPayload, cpus) -> bool:
    results = service.apply(PinRequest(payload.targets(), cpus, origin="test"))
    return any(r.changed for r in results) and not any(r.failed for r in results)


def _agree(service, payload, cpus, cli, topology, *, goes: bool) -> list:
    seen = verdicts(service, payload, cpus, cli, topology)
    assert seen == {"drop": goes, "dialog": goes, "cli": goes}, seen
    results = service.apply(PinRequest(payload.targets(), cpus, origin="test"))
    assert (any(r.changed for r in results) and not any(r.failed for r in results)) == goes, \
        [r.line() for r in results]
    return results


@needs_v1
@live_test
def test_a_thread_onto_a_quiet_cpu_behind_the_shield_goes_by_every_way_in(state, capsys):
    p, tid = _threaded()
    try:
        LocalQuiet(state).apply(LocalQuiet(state).preview("isolate", (1,)))
        assert _cpuset(p.pid, tid) == "/coremap-system" and _allowed(p.pid, tid) == {0}
        topo = read_topology(SysRoot("/"))
        payload = PinPayload("thread", (tid,), p.pid)
        results = _agree(state, payload, (1,), ["pin", "--tid", str(tid)], topo, goes=True)
        assert [r.target.kind for r in results] == ["cpuset", "cgroupthread", "thread"]    # placed first, as the CLI does
        assert _allowed(p.pid, tid) == {1} and _cpuset(p.pid, tid) == "/coremap-pinned"
        LocalQuiet(state).apply(LocalQuiet(state).preview("include", (1,)))
    finally:
        p.kill()
        p.wait()


@needs_v1
@live_test
def test_a_thread_its_cpuset_limits_is_refused_by_every_way_in(state):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cpuset")
    cg = CPUSET_V1 / f"coremap-test-{os.getpid()}"
    cg.mkdir()
    p = None
    try:
        (cg / "cpuset.cpus").write_text("0")
        (cg / "cpuset.mems").write_text((CPUSET_V1 / "cpuset.mems").read_text().strip().split(",")[0].split("-")[0])
        p, tid = _threaded()
        for t in os.listdir(f"/proc/{p.pid}/task"):
            (cg / "tasks").write_text(t)
        payload = PinPayload("thread", (tid,), p.pid)
        [r] = _agree(state, payload, (1,), ["pin", "--tid", str(tid)], read_topology(SysRoot("/")), goes=False)
        assert r.code == "cpuset" and f"of its cpuset /{cg.name}" in r.message and _allowed(p.pid, tid) == {0}
    finally:
        if p is not None:
            p.kill()
            p.wait()
        cg.rmdir()


def _kthread() -> tuple[int, int] | None:
    from app.machine.threads import TaskGone, read_task
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                t = read_task(SysRoot("/"), int(name), int(name), detail="fast")
            except TaskGone:            # exited between listing and reading: try the next
                continue
            if t.no_setaffinity:
                return t.pid, t.tid
    return None


@live_test
def test_a_kernel_thread_and_an_exited_thread_are_refused_by_every_way_in(state):
    topo = read_topology(SysRoot("/"))
    k = _kthread()
    if k is not None:
        before = tuple(sorted(os.sched_getaffinity(k[1])))
        [r] = _agree(state, PinPayload("thread", (k[1],), k[0]), (0,), ["pin", "--tid", str(k[1])], topo, goes=False)
        assert r.code == "kthread" and tuple(sorted(os.sched_getaffinity(k[1]))) == before
    th = threading.Thread(target=lambda: None)
    th.start()
    tid = th.native_id
    th.join()
    while Path(f"/proc/{os.getpid()}/task/{tid}").exists():
        threading.Event().wait(0.01)
    # The CLI says it of --tid itself ("thread T does not exist", exit 2); the plan, the drop and the
    # dialog say it has exited; the pin finds it gone. None of them writes anything.
    [r] = _agree(state, PinPayload("thread", (tid,), os.getpid()), (0,), ["pin", "--tid", str(tid)], topo,
                 goes=False)
    assert r.code == "gone"


def test_a_managed_irq_is_refused_by_every_way_in(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    dbg = dst / "sys" / "kernel" / "debug" / "irq" / "irqs"
    dbg.mkdir(parents=True)
    (dbg / "33").write_text("dstate:   0x37400200\n            IRQD_AFFINITY_MANAGED\n")
    root = SysRoot(writable_test_tree(dst))
    j = Journal(tmp_path / "journal.jsonl")
    try:
        svc, topo = AffinityService(root, j), read_topology(root)
        [r] = _agree(svc, PinPayload("irq", (33,)), (0,), ["pin", "--irq", "33", "--root", str(root.root)], topo,
                     goes=False)
        assert r.code == "managed" and root.irq_dir(33, "smp_affinity_list").read_text().strip() != "0"
        _agree(svc, PinPayload("irq", (24,)), (0,), ["pin", "--irq", "24", "--root", str(root.root)], topo, goes=True)
    finally:
        j.close()


# -- the drop itself, on the window --------------------------------------------------------------------------
@needs_v1
@live_test
def test_a_real_drop_onto_a_quiet_cpus_cell_pins_the_thread_there(state, qtbot):
    p, tid = _threaded()
    w = build_window(None)
    qtbot.addWidget(w)
    try:
        LocalQuiet(state).apply(LocalQuiet(state).preview("isolate", (1,)))
        w.resize(1400, 900)
        w.show()
        qtbot.waitExposed(w)
        assert w.set_state(Sampler(SysRoot("/")).tick())
        w.topology_view.zoom_fit()
        show_pins(w, state)
        view = w.topology_view
        mime = _mime("thread", [tid], p.pid)
        pos = _point_on(view, view.cell_item(1))
        enter, move = _enter_move(view, pos, mime)
        assert enter.isAccepted() and move.isAccepted(), view.pin_drops.last_hint
        assert view.pin_drops.highlight_accepts is True
        assert view.pin_drops.last_hint == f"pin thread {tid} to CPU 1"
        with qtbot.waitSignal(view.pin_requested, timeout=2000):
            assert _drop(view, pos, mime).isAccepted()
        settle(w)
        assert _allowed(p.pid, tid) == {1} and _cpuset(p.pid, tid) == "/coremap-pinned"
        assert "failed" not in w.pin_controller.result_line.text()
        LocalQuiet(state).apply(LocalQuiet(state).preview("include", (1,)))
    finally:
        p.kill()
        p.wait()
