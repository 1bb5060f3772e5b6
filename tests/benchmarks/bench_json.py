"""`--json` output against a bare read + split of its input, whole process minus interpreter start,
in the same run (issue 12: each at most 4x).

    coremap irqs --file F --json        F: the 1,152-CPU widening of master.internal's /proc/interrupts
    coremap journal --json              a journal of 20,000 pins
    coremap topology --json --root R    R: master.internal (112 CPUs)
    coremap threads --json              this machine's threads, 2,000 sleeping ones of a helper among them
    coremap probe jitter --json         0.2 s on CPU 0

The peer reads and splits the very files the command reads: for topology the sysfs and proc files
read_topology opens (recorded in this process through SysRoot), for threads each thread's stat,
status and sched and each process's cmdline (what `threads` shows), for the probe the JSON lines of
the same `python -m probes` child, started and read by a bare parent. Each is timed as a whole child
process, minus `python -c pass` (interpreter start); alternating, medians of PAIRS.

Modules are byte-compiled first (compileall), as an installed coremap is: PYTHONDONTWRITEBYTECODE in
a developer's shell would otherwise charge every run for compiling coremap's sources.

    PYTHONPATH=. python -m tests.benchmarks.bench_json
"""
from __future__ import annotations

import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.bench_interrupts import WIDE, widen
from tests.benchmarks.bench_threads import _start_helper
from tests.machines import INTERRUPTS_DIR, extract

PAIRS = 7
HELPER_THREADS = 2000         # the thread count of the window's CPU target (issue 12)
REPO = Path(__file__).resolve().parents[2]
SPLIT_FILES = "import sys\nn = 0\nfor p in sys.argv[1:]:\n    for l in open(p).read().split('\\n'):\n        n += len(l.split())\n"
SPLIT_LIST = ("import sys\nn = 0\nfor p in open(sys.argv[1]).read().split('\\n'):\n"
              "    for l in open(p).read().split('\\n'):\n        n += len(l.split())\n")
# What `coremap threads --json` reads: every thread's stat, status and sched, every process's cmdline.
SPLIT_TASKS = ("import os\nn = 0\nfor p in os.listdir('/proc'):\n    if not p.isdigit(): continue\n"
               "    try:\n        ts = os.listdir(f'/proc/{p}/task')\n"
               "        n += len(open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0'))\n"
               "    except OSError: continue\n"
               "    for t in ts:\n        for f in ('stat', 'status', 'sched'):\n"
               "            try: n += len(open(f'/proc/{p}/task/{t}/{f}', 'rb').read().split())\n"
               "            except OSError: pass\n")
SPLIT_PROBE = ("import subprocess, sys\np = subprocess.run(sys.argv[1:], capture_output=True, check=True)\n"
               "n = sum(len(l.split()) for l in p.stdout.split(b'\\n'))\n")


def _run(argv, env) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env, cwd=REPO)
    return time.perf_counter() - t0


def _journal(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(1, n + 1):
            f.write(json.dumps({"ev": "record", "id": i, "session": "bench", "batch": i, "origin": "cli",
                                "root": "/", "kind": "irq", "target": 24 + i % 20, "pid": None, "label": "",
                                "starttime": None, "before": [0, 1], "requested": [i % 2], "time": 1.7e9 + i}) + "\n")
            f.write(json.dumps({"ev": "mark", "id": i, "state": "done", "after": [i % 2], "effective": [i % 2],
                                "code": "ok", "message": ""}) + "\n")


def files_read_by_topology(root: Path) -> list[str]:
    """Every file read_topology reads from `root`, in order (recorded through SysRoot.read_bytes)."""
    from app.machine.topology import read_topology
    from app.sysroot import SysRoot
    seen: list[str] = []
    original = SysRoot.read_bytes

    def recording(self, path, limit=None):
        seen.append(str(path))
        return original(self, path, limit)
    SysRoot.read_bytes = recording
    try:
        read_topology(SysRoot(root))
    finally:
        SysRoot.read_bytes = original
    return [p for p in dict.fromkeys(seen) if os.path.isfile(p)]


def _probe_argv(py: str) -> list[str]:
    from probes.runner import probe_command
    from probes.spec import ProbeSpec
    job = ProbeSpec("jitter", (0,), seconds=0.2).jobs()[0]
    return [py if a == sys.executable else a for a in probe_command(job.probe, job.args)]


def main() -> None:
    compileall.compile_dir(REPO / "app", quiet=1)
    compileall.compile_dir(REPO / "probes", quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="coremap-bench-json-"))
    try:
        _measure(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _measure(tmp: Path) -> None:
    text = (INTERRUPTS_DIR / "openshift-nto" / "master.internal-interrupts").read_text()
    wide = tmp / "interrupts"
    wide.write_text(widen(text, WIDE))
    state = tmp / "state"
    state.mkdir()
    _journal(state / "journal.jsonl", 20_000)
    master = extract("master.internal")
    topo_files = tmp / "topology-files"
    topo_files.write_text("\n".join(files_read_by_topology(master)))
    env = dict(os.environ, PYTHONPATH=str(REPO), COREMAP_STATE_DIR=str(state))
    py = sys.executable
    cases = [
        ("irqs --file (1,152 CPUs)", [py, "-m", "app", "irqs", "--file", str(wide), "--json"],
         [py, "-c", SPLIT_FILES, str(wide)]),
        ("journal (20,000 pins)", [py, "-m", "app", "journal", "--json"],
         [py, "-c", SPLIT_FILES, str(state / "journal.jsonl")]),
        ("topology --root master", [py, "-m", "app", "topology", "--json", "--root", str(master)],
         [py, "-c", SPLIT_LIST, str(topo_files)]),
        (f"threads (live, +{HELPER_THREADS:,})", [py, "-m", "app", "threads", "--json"], [py, "-c", SPLIT_TASKS]),
        ("probe jitter 0.2 s", [py, "-m", "app", "probe", "jitter", "--cpu", "0", "--seconds", "0.2", "--json"],
         [py, "-c", SPLIT_PROBE, *_probe_argv(py)]),
    ]
    print(f"{'output':28s} {'coremap':>10s} {'bare split':>11s} {'ratio':>7s}   (whole process minus "
          f"interpreter start; medians of {PAIRS} alternating runs; target <= 4x)")
    for name, ours, peer in cases:
        a, b, s = [], [], []
        helper = _start_helper(HELPER_THREADS) if name.startswith("threads") else None
        try:
            for _ in range(PAIRS):
                s.append(_run([py, "-c", "pass"], env))
                a.append(_run(ours, env))
                b.append(_run(peer, env))
        finally:
            if helper is not None:
                helper.stdin.close()
                helper.wait()
        start = statistics.median(s)
        ca, cb = statistics.median(a) - start, statistics.median(b) - start
        print(f"{name:28s} {ca * 1e3:8.0f} ms {cb * 1e3:9.0f} ms {ca / cb:6.2f}x", flush=True)
    print(f"(interpreter start {start * 1e3:.0f} ms, subtracted from both)")


if __name__ == "__main__":
    main()
