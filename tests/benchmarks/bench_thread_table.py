"""Applying one tick to the thread table: in-place updates against a model reset, ~2,000 live threads.

A helper process runs N threads that wake now and then to do a little work, and keeps starting and
joining short-lived threads, so every tick has changed cells and threads that appear and exit. The
benchmark samples the live machine with the real Sampler to collect consecutive MachineStates, then
applies them, alternating, to two ThreadTableWidgets (proxy sorted by CPU %, tree view shown and
painted offscreen):
- `incremental`: ThreadTreeModel.set_state (dataChanged per changed cell, rows in/out);
- `reset`: the same rows rebuilt under beginResetModel/endResetModel, the naive peer, which also
  loses the selection and the expanded processes every tick.
Prints the median ms per tick of each (model update + proxy + view layout/paint) and their ratio.

    python -m tests.benchmarks.bench_thread_table [--threads N] [--ticks T]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from widgets import harness  # noqa: E402  (Qt is reached through widgets/ only)

from app.sampling.sampler import Sampler  # noqa: E402
from app.sysroot import SysRoot  # noqa: E402
from widgets.tables.threads import ThreadTableWidget, ThreadTreeModel  # noqa: E402

HELPER = r"""
import random, sys, threading
n = int(sys.argv[1])
threading.stack_size(64 * 1024)
stop = threading.Event()
def worker():
    while not stop.wait(random.uniform(0.02, 0.5)):
        sum(range(2000))
def churn():
    while not stop.is_set():
        short = [threading.Thread(target=stop.wait, args=(0.15,), daemon=True) for _ in range(5)]
        for t in short:
            t.start()
        for t in short:
            t.join()
ts = [threading.Thread(target=worker, daemon=True) for _ in range(n)]
ts.append(threading.Thread(target=churn, daemon=True))
for t in ts:
    t.start()
print("ready", flush=True)
sys.stdin.read()
stop.set()
"""


class ResetThreadTreeModel(ThreadTreeModel):
    """The peer: every tick rebuilds all rows inside one model reset."""

    def set_state(self, state) -> None:
        self.beginResetModel()
        self.blockSignals(True)          # the row signals of the rebuild are covered by the reset
        try:
            self._pids, self._pid_row, self._tids, self._tid_row = [], {}, {}, {}
            self._pcells, self._tcells, self._pfilter, self._tfilter = {}, {}, {}, {}
            super().set_state(state)
        finally:
            self.blockSignals(False)
        self.endResetModel()


def _widget(model_cls) -> ThreadTableWidget:
    w = ThreadTableWidget()
    if model_cls is not ThreadTreeModel:
        w.model = model_cls(w)
        w.proxy.setSourceModel(w.model)
    w.resize(1200, 800)
    w.show()
    return w


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2000)
    ap.add_argument("--ticks", type=int, default=15)
    args = ap.parse_args()
    app = harness.application()
    helper = subprocess.Popen([sys.executable, "-c", HELPER, str(args.threads)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        if helper.stdout.readline().strip() != "ready":
            raise SystemExit("helper did not start its threads")
        sampler = Sampler(SysRoot("/"), interval=0.25)
        states = []
        for _ in range(args.ticks + 1):
            states.append(sampler.tick())
            time.sleep(0.25)
    finally:
        helper.stdin.close()
        helper.wait(10)
    n_threads = [len(s.sample.tasks.tasks) for s in states]
    inc, reset = _widget(ThreadTreeModel), _widget(ResetThreadTreeModel)
    for w in (inc, reset):
        w.set_state(states[0])
        app.processEvents()
    times = {"incremental": [], "reset": []}
    changes = []
    for s in states[1:]:
        for name, w in (("incremental", inc), ("reset", reset)) if s.generation % 2 else (
                ("reset", reset), ("incremental", inc)):
            t0 = time.perf_counter()
            w.set_state(s)
            app.processEvents()          # proxy re-sort and the view's layout and paint
            times[name].append(time.perf_counter() - t0)
        changes.append(s.generation)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"threads per tick: {min(n_threads)}-{max(n_threads)}, ticks applied: {len(states) - 1}")
    for k in ("incremental", "reset"):
        print(f"{k:12s} median {med[k]:7.2f} ms/tick   (min {min(times[k]) * 1e3:.2f}, "
              f"max {max(times[k]) * 1e3:.2f})")
    print(f"ratio incremental/reset: {med['incremental'] / med['reset']:.2f}x")
    # Model-only cost (no event processing), for information.
    model = ThreadTreeModel()
    model.set_state(states[0])
    only = []
    for s in states[1:]:
        t0 = time.perf_counter()
        model.set_state(s)
        only.append(time.perf_counter() - t0)
    print(f"model alone  median {statistics.median(only) * 1e3:7.2f} ms/tick (no view)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
