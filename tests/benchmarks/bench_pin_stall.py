"""The UI thread during a Make quiet over ssh (issue 19): the longest stall of the window's UI thread
while a Make quiet of about 100 targets runs on a machine over ssh to 127.0.0.1. Goal: <= 50 ms.

    PYTHONPATH=. QT_QPA_PLATFORM=offscreen python -m tests.benchmarks.bench_pin_stall [--rounds 5]

It starts its own OpenSSH server on 127.0.0.1 (tests/remote/sshd.py); the agent there works on a
writable copy of "worker2.internal" (openshift-nto, 32 CPUs, 245 IRQs, and a workqueue cpumask), so no
IRQ of this machine moves. The window is the real one (build_window) over a RemoteHost. A 2 ms timer in the UI
thread stamps each time it runs; a stall is a gap between two stamps beyond the timer's own period.

Each round: Quiet -> Make quiet… on CPUs 1-11 (the preview worked out on the server, then applied: one
batch, each result streamed back), then Edit -> Undo. Printed per round: the batch's size and time,
and the UI thread's longest stall while the preview, the batch and the undo ran.

The server side (sshd and the agent it starts) runs on the last CPU and the window on the others, as
on two machines. Peer, measured in the same run: the same isolate and undo called directly on the UI thread (what the
window did before issue 19's worker), whose stall is the whole call. Medians over the rounds, and the
ratio of the two.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from widgets import harness  # noqa: E402  (Qt is reached through widgets/ only)
from app.remote.hosts import parse_host  # noqa: E402
from app.remote.pins import RemoteAffinityService  # noqa: E402
from app.remote.quiet import RemoteQuiet  # noqa: E402
from app.remote.host import RemoteHost  # noqa: E402
from tests.machines import copy_machine, writable_test_tree  # noqa: E402
from tests.remote.sshd import Sshd, unavailable  # noqa: E402

PERIOD_MS = 2
# openshift-nto's worker2 (32 CPUs, 245 IRQs): making CPUs 1-11 quiet moves 108 targets (106 IRQs, the
# default IRQ affinity and the workqueue cpumask; a capture has no threads to move).
MACHINE = "worker2.internal"
QUIET = list(range(1, 12))


def _watchdog(clock: harness.StallClock) -> None:
    """BENCH_WATCHDOG=1: print where the UI thread is whenever it has not stamped for 40 ms."""
    import threading
    import traceback
    main = threading.main_thread().ident

    def watch():
        while True:
            time.sleep(0.005)
            last = clock.stamps[-1] if clock.stamps else time.perf_counter()
            if time.perf_counter() - last > 0.04:
                frame = sys._current_frames().get(main)
                stack = "".join(traceback.format_stack(frame)[-6:]) if frame is not None else "?"
                print(f"--- UI thread {1000 * (time.perf_counter() - last):.0f} ms without a stamp:\n{stack}",
                      flush=True)
                time.sleep(0.03)
    threading.Thread(target=watch, daemon=True).start()


def _gc_pauses() -> list[tuple[float, int]]:
    """A list that fills with (seconds, generation) of every garbage collection, in any thread."""
    import gc
    out: list[tuple[float, int]] = []
    start = [0.0]

    def callback(phase, info):
        if phase == "start":
            start[0] = time.perf_counter()
        else:
            out.append((time.perf_counter() - start[0], info["generation"]))
    gc.callbacks.append(callback)
    return out


def _tree(sshd: Sshd) -> Path:
    dst = sshd.writable_tree
    shutil.rmtree(dst, ignore_errors=True)
    copy_machine(MACHINE, dst)
    wq = dst / "sys" / "devices" / "virtual" / "workqueue"
    wq.mkdir(parents=True, exist_ok=True)
    (wq / "cpumask").write_text("ffffffff\n")
    return writable_test_tree(dst)


def window_round(w, clock: harness.StallClock) -> tuple[int, float, float]:
    """Make quiet CPUs 1-2 and undo, as the user would; (targets, seconds of the batch, longest stall)."""
    quiet, pins = w.quiet_controller, w.pin_controller
    w.topology_view.select_cpus(QUIET)
    clock.reset()
    quiet.open_isolate()
    assert harness.run_until(quiet.preview_shown, lambda: quiet.dialog is not None and quiet.dialog.isVisible(), 60)
    shown = []
    pins.results_shown.connect(shown.append)
    t0 = time.perf_counter()
    quiet.dialog.accept()
    assert harness.run_until(pins.results_shown, lambda: bool(shown), 120), pins.result_line.text()
    seconds = time.perf_counter() - t0
    n = len(shown[-1])
    led = pins.service.ledger()
    assert pins.undo_action.isEnabled(), f"Edit -> Undo is off after: {pins.result_line.text()} {led.undo} {led.redo} {pins.worker.busy} {pins.worker._jobs} {pins.service.view()['stamp']}"
    pins.undo_action.trigger()
    assert harness.run_until(pins.results_shown, lambda: len(shown) >= 2, 120), pins.result_line.text()
    pins.results_shown.disconnect(shown.append)
    stall = clock.longest()
    quiet.dialog.close()
    quiet.dialog = None
    return n, seconds, stall


def direct_round(service: RemoteAffinityService) -> tuple[int, float]:
    """The same isolate and undo called on this (the UI) thread: the stall is the whole call."""
    quiet = RemoteQuiet(service)
    t0 = time.perf_counter()
    results = quiet.apply(quiet.preview("isolate", QUIET))
    service.undo()
    return len(results), time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    why = unavailable()
    if why is not None:
        print(f"bench_pin_stall: {why}")
        return 1
    folder = Path(tempfile.mkdtemp(prefix="cm-sshd-"))
    sshd = Sshd(folder).start()
    # "The server" gets the last CPU and the window the others, as two machines would: on a 2-CPU VM
    # the agent's batch, sshd and the window's threads otherwise take turns on the same CPUs, and the
    # scheduler's turns, not the window, would be measured. (sshd forks the agent: it inherits this.)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        os.sched_setaffinity(sshd.proc.pid, {cpus[-1]})
        os.sched_setaffinity(0, set(cpus[:-1]))
        print(f"server (sshd, agent) on CPU {cpus[-1]}, the window on CPUs {cpus[:-1]}")
    os.environ.update(sshd.env)
    os.environ.setdefault("COREMAP_STATE_DIR", str(folder / "local-state"))
    try:
        harness.application("bench_pin_stall")
        tree = _tree(sshd)
        from widgets.application import build_window
        # A capture the server may write, over ssh: the RemoteHost pins there as on a live machine.
        host = RemoteHost(parse_host("s1"), interval=1.0, root=str(tree))
        host.connect()
        w = build_window(host, interval=1.0)
        w.resize(1400, 900)
        w.show()
        w.sampler_thread.start()
        assert harness.run_until(w.state_applied, lambda: w.state is not None, 60)
        clock = harness.StallClock(PERIOD_MS)
        # Warm up: the window's first seconds build what it shows lazily (the probe panel's plots import
        # pyqtgraph), which is start-up, not pinning; one unmeasured round then warms the remote side.
        harness.run_for(2.0)
        window_round(w, clock)
        direct_round(w.pin_controller.service)
        rows, direct = [], []
        if os.environ.get("BENCH_WATCHDOG"):
            _watchdog(clock)
        gc_pauses = _gc_pauses()
        import gc
        print(f"objects the collector tracks: {len(gc.get_objects()):,}", flush=True)
        profile = None
        if os.environ.get("BENCH_PROFILE"):
            import cProfile
            profile = cProfile.Profile()
        for i in range(args.rounds):
            if profile is not None:
                profile.enable()
            gc_pauses.clear()
            n, seconds, stall = window_round(w, clock)
            worst = max(gc_pauses, default=(0.0, 0))
            print(f"  (garbage collections in the round: {len(gc_pauses)}, longest {worst[0] * 1000:.1f} ms, "
                  f"generation {worst[1]})", flush=True)
            if profile is not None:
                profile.disable()
            rows.append((n, seconds, stall))
            dn, dseconds = direct_round(w.pin_controller.service)
            direct.append(dseconds)
            print(f"round {i + 1}: {n} targets; window: batch {seconds * 1000:.0f} ms, longest UI stall "
                  f"{stall * 1000:.1f} ms; called on the UI thread: {dseconds * 1000:.0f} ms stalled "
                  f"({dn} targets, isolate + undo)", flush=True)
        if profile is not None:
            import pstats
            pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
        stall_ms = statistics.median(r[2] for r in rows) * 1000
        direct_ms = statistics.median(direct) * 1000
        print(f"\nMake quiet over ssh, {rows[0][0]} targets, {args.rounds} rounds (medians):")
        print(f"  window (pin worker): longest UI stall {stall_ms:.1f} ms (goal <= 50 ms; worst round "
              f"{max(r[2] for r in rows) * 1000:.1f} ms)")
        print(f"  peer, the same calls on the UI thread: {direct_ms:.0f} ms stalled")
        print(f"  ratio: {stall_ms / direct_ms:.3f}x of the stall the UI thread had before")
        harness.dispose(w)
        host.close()
        return 0
    finally:
        sshd.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
