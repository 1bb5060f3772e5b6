"""The pin guard's cost (issue 13): a tick with 5,000 guarded threads, and the window's CPU use with
the guard on beside the same window with it off.

    PYTHONPATH=. QT_QPA_PLATFORM=offscreen python -m tests.benchmarks.bench_guard [--threads 5000]
        [--ticks 60] [--seconds 20] [--rounds 3] [--no-window]

1. Tick: a helper process holds --threads sleeping threads, pinned by pid through AffinityService into
   a scratch journal (root: the threads are this machine's). Guard.tick() is timed --ticks times:
   IRQs and masks all, threads within its budget (app/quiet/guard.py BUDGET_S), the followed process's
   thread count by one stat. Peers in the same run: the bare loop a full comparison needs
   (os.sched_getaffinity over every tid, compared with the pinned set), and the guard with no
   budget (every thread every tick). Target: <= 2 ms per tick.
2. Window: the window sampling this machine at 1 s, offscreen, with those pins in its journal
   ($COREMAP_STATE_DIR), measured --seconds with the guard on (Edit -> Guard pins) and off,
   --rounds alternating pairs, medians of process CPU time (getrusage) and of the guard thread's own.
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app.pinning.service import AffinityService, PinRequest, PinTarget  # noqa: E402
from app.quiet.guard import Guard  # noqa: E402
from app.pinning.journal import Journal  # noqa: E402
from app.sysroot import SysRoot  # noqa: E402

HELPER = r"""
import sys, threading
threading.stack_size(64 * 1024)
stop = threading.Event()
threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(int(sys.argv[1]))]
for t in threads: t.start()
print("ready", flush=True)
sys.stdin.read()
"""


def start_helper(n: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HELPER, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def pin_all(state_dir: Path, pid: int, cpus) -> float:
    """Pin every thread of `pid` to `cpus`, journalled in state_dir's journal; seconds it took."""
    t0 = time.perf_counter()
    with Journal(state_dir / "journal.jsonl") as j:
        results = AffinityService(SysRoot("/"), j).apply(PinRequest((PinTarget("process", pid),), cpus))
    bad = [r for r in results if not r.ok]
    if bad:
        raise SystemExit(f"pinning the helper failed: {bad[0].line()}")
    return time.perf_counter() - t0


def time_ticks(guard: Guard, ticks: int) -> tuple[list[float], list]:
    guard.tick()                                   # the first tick builds what is guarded from the journal
    costs, last = [], []
    for _ in range(ticks):
        t = guard.tick()
        costs.append(t.seconds)
        last.append(t)
    return costs, last


def bare_loop(pid: int, cpus, rounds: int = 20) -> float:
    """The peer: every tid of the helper through os.sched_getaffinity, compared with the pin."""
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    want = set(cpus)
    costs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        changed = [t for t in tids if os.sched_getaffinity(t) != want]
        costs.append(time.perf_counter() - t0)
    assert not changed
    return statistics.median(costs)


def bench_tick(args, state_dir: Path, pid: int, cpus) -> None:
    with Journal(state_dir / "journal.jsonl") as j:
        svc = AffinityService(SysRoot("/"), j)
        costs, ticks = time_ticks(Guard(svc), args.ticks)
        full, _ = time_ticks(Guard(svc, budget_s=float("inf")), max(10, args.ticks // 4))
    t = ticks[-1]
    med, worst = statistics.median(costs), max(costs)
    peer = bare_loop(pid, cpus)
    print(f"guard tick, {t.threads:,} guarded threads ({t.targets} IRQs/masks): median {med * 1e3:.2f} ms, "
          f"max {worst * 1e3:.2f} ms (target <= 2 ms); {t.checked:,} threads compared a tick, every one "
          f"every {t.cycle_ticks} ticks")
    print(f"  peers: every thread every tick (no budget) {statistics.median(full) * 1e3:.2f} ms; the bare "
          f"sched_getaffinity loop over them {peer * 1e3:.2f} ms; guard / bare loop {med / peer:.2f}")


def _thread_cpu(name: str) -> float:
    total = 0.0
    tck = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            data = Path(f"/proc/self/task/{tid}/stat").read_bytes()
        except FileNotFoundError:
            continue        # a Qt pool thread ended between listdir and open
        r = data.rfind(b")")
        if data[data.find(b"(") + 1:r].decode() == name:
            rest = data[r + 2:].split()
            total += (int(rest[11]) + int(rest[12])) / tck
    return total


def window_cpu(app, seconds: float, guard_on: bool) -> tuple[float, float]:
    """(% of one core for the whole process, % for the guard thread) over `seconds`."""
    from widgets import harness
    from app.sources.live import host_of_root
    from widgets.application import build_window
    w = build_window(host_of_root(SysRoot("/"), interval=1.0), interval=1.0)
    thread = w.sampler_thread
    w.resize(1600, 1000)
    w.show()
    thread.start()
    harness.run_for(3.0)                           # warm up: first ticks, the guard's first (full) pass
    w.guard_thread.set_enabled(guard_on)
    assert w.guard_thread.running, "the guard did not start: is the journal in $COREMAP_STATE_DIR?"
    harness.run_for(1.0)
    gc.collect()
    r0, g0, t0 = resource.getrusage(resource.RUSAGE_SELF), _thread_cpu("coremap-guard"), time.monotonic()
    harness.run_for(seconds)
    r1, g1, wall = resource.getrusage(resource.RUSAGE_SELF), _thread_cpu("coremap-guard"), time.monotonic() - t0
    last = w.guard_thread.last_tick
    thread.stop()
    w.guard_thread.stop()
    harness.dispose(w)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(f"  guard {'on ' if guard_on else 'off'}: {100 * cpu / wall:.2f}% of one core "
          f"(guard thread {100 * (g1 - g0) / wall:.2f}%"
          + (f", last tick {last.seconds * 1e3:.2f} ms for {last.threads:,} threads" if guard_on and last else "")
          + ")")
    return 100 * cpu / wall, 100 * (g1 - g0) / wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=5000)
    ap.add_argument("--ticks", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-window", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("  (not root: pins of this user's threads only; that is all the helper holds)")
    cpus = tuple(sorted(os.sched_getaffinity(0)))[-1:]
    helper = start_helper(args.threads)
    state = Path(tempfile.mkdtemp(prefix="coremap-bench-guard-"))
    os.environ["COREMAP_STATE_DIR"] = str(state)
    try:
        took = pin_all(state, helper.pid, cpus)
        print(f"pinned {args.threads:,} threads of process {helper.pid} to CPU {cpus[0]} in {took:.1f} s")
        bench_tick(args, state, helper.pid, cpus)
        if args.no_window:
            return
        from widgets import harness
        app = harness.application("bench_guard")
        print(f"the window's CPU use sampling at 1 s with these pins, {args.seconds:g} s each, "
              f"{args.rounds} alternating pairs:")
        on, off, guard = [], [], []
        for i in range(args.rounds):
            for g in ((True, False) if i % 2 == 0 else (False, True)):
                pct, gpct = window_cpu(app, args.seconds, g)
                (on if g else off).append(pct)
                if g:
                    guard.append(gpct)
        print(f"  median: guard on {statistics.median(on):.2f}%, off {statistics.median(off):.2f}% of one core "
              f"(the guard thread {statistics.median(guard):.2f}%); on / off "
              f"{statistics.median(on) / max(statistics.median(off), 1e-9):.2f}")
    finally:
        helper.stdin.close()
        helper.wait(10)
        import shutil
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
