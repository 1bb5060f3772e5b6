"""The per-tick thread sample against `ps -eLo tid,psr` on the same ~2,000 threads.

A helper process starts 2,000 sleeping threads; then, alternating, `ps -eLo tid,psr` (subprocess wall
time; ps reads stat and status of every task) and `read_tasks(SysRoot("/"), detail="fast")`
(in-process wall time) each read every thread of the machine. Prints µs per thread, the medians and the
ratio (target: ≤ 1x), plus a warm TaskReader (what the sampler really calls each tick: it reuses the
processes whose CPU clock did not move, app/machine/threads.py), the same without reuse, and the
"full" detail for information. Then the same reads of a capture (`threads --root`): every process's
stat, comm, cmdline and its threads' stat, status and sched copied from /proc into a folder, read
through the capture's confinement (app/sysroot/: never through a link out, regular files only, each
read bounded).

    python -m tests.benchmarks.bench_threads [--threads N] [--rounds R]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from app.machine.threads import TaskReader, read_tasks
from app.sysroot import SysRoot

HELPER = r"""
import sys, threading
n = int(sys.argv[1])
threading.stack_size(64 * 1024)
stop = threading.Event()
ts = [threading.Thread(target=stop.wait, daemon=True) for _ in range(n)]
for t in ts:
    t.start()
print("ready", flush=True)
sys.stdin.read()          # until the benchmark closes our stdin
stop.set()
"""


def _start_helper(n: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HELPER, str(n)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        raise SystemExit(f"helper did not start its {n} threads (said {line!r})")
    return p


def _ps() -> tuple[float, int]:
    t0 = time.perf_counter()
    out = subprocess.run(["ps", "-eLo", "tid,psr"], capture_output=True, check=True).stdout
    dt = time.perf_counter() - t0
    return dt, len(out.splitlines()) - 1      # minus the header


def _capture_of_tasks(dest: str) -> None:
    """proc/PID/{stat,comm,cmdline} and proc/PID/task/TID/{stat,status,sched} of this machine, copied."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            tids = [t for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()]
            files = {f"{pid}/{n}": open(f"/proc/{pid}/{n}", "rb").read() for n in ("stat", "comm", "cmdline")}
            for tid in tids:
                files.update({f"{pid}/task/{tid}/{n}": open(f"/proc/{pid}/task/{tid}/{n}", "rb").read()
                              for n in ("stat", "status", "sched")})
        except (FileNotFoundError, ProcessLookupError):
            continue        # exited while being copied
        for rel, data in files.items():
            os.makedirs(os.path.dirname(f"{dest}/proc/{rel}"), exist_ok=True)
            with open(f"{dest}/proc/{rel}", "wb") as f:
                f.write(data)
    os.makedirs(f"{dest}/sys/devices/system/cpu", exist_ok=True)


def _timed(fn) -> tuple[float, int]:
    t0 = time.perf_counter()
    s = fn()
    return time.perf_counter() - t0, len(s.tasks)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    root = SysRoot("/")
    helper = _start_helper(a.threads)
    folder = None
    try:
        warm = TaskReader(root, detail="fast")
        warm.sample()
        no_reuse = TaskReader(root, detail="fast")
        no_reuse.reuse = False
        no_reuse.sample()
        folder = tempfile.mkdtemp(prefix="coremap-bench-threads-")
        _capture_of_tasks(folder)
        capture = SysRoot(folder)
        rows = {"ps -eLo tid,psr": [], "read_tasks fast": [], "TaskReader.sample (warm)": [],
                "TaskReader warm, no reuse": [], "read_tasks full": [], "capture fast": [], "capture full": []}
        for i in range(a.rounds):
            for name, fn in (("ps -eLo tid,psr", _ps),
                             ("read_tasks fast", lambda: _timed(lambda: read_tasks(root, detail="fast"))),
                             ("TaskReader.sample (warm)", lambda: _timed(warm.sample)),
                             ("TaskReader warm, no reuse", lambda: _timed(no_reuse.sample)),
                             ("read_tasks full", lambda: _timed(lambda: read_tasks(root, detail="full"))),
                             ("capture fast", lambda: _timed(lambda: read_tasks(capture, detail="fast"))),
                             ("capture full", lambda: _timed(lambda: read_tasks(capture, detail="full")))):
                dt, n = fn()
                rows[name].append(dt / n * 1e6)
                if i == 0:
                    print(f"  {name:26s} {n} threads")
        print(f"{'':26s} " + " ".join(f"r{i:<6d}" for i in range(a.rounds)) + "  median µs/thread")
        med = {}
        for name, us in rows.items():
            med[name] = statistics.median(us)
            print(f"{name:26s} " + " ".join(f"{u:7.2f}" for u in us) + f"  {med[name]:7.2f}")
        ps = med["ps -eLo tid,psr"]
        print(f"ratio read_tasks fast / ps:          {med['read_tasks fast'] / ps:.2f}x (target <= 1x)")
        print(f"ratio TaskReader warm / ps:          {med['TaskReader.sample (warm)'] / ps:.2f}x")
        print(f"ratio TaskReader no reuse / ps:      {med['TaskReader warm, no reuse'] / ps:.2f}x")
        print(f"ratio read_tasks full / ps (info):   {med['read_tasks full'] / ps:.2f}x")
        print(f"ratio capture fast / ps:             {med['capture fast'] / ps:.2f}x")
        print(f"ratio capture full / ps (info):      {med['capture full'] / ps:.2f}x")
        print(f"({os.cpu_count()} CPUs)")
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        helper.stdin.close()
        try:
            helper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            helper.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
