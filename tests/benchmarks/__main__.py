"""`make bench` / `python -m tests.benchmarks [NAME ...]`: run every bench_*.py (or the named ones),
each in its own process, and let each print its figures and ratios.

Each runs under the machine-wide lock of the live tests (tests/live.py): a benchmark pins threads and
runs probes on real CPUs, which a test suite (or another benchmark) on the same machine must not
share, both for its own figures and for theirs. A suite waiting for the lock gets it between two
benchmarks."""
import pkgutil
import subprocess
import sys
from pathlib import Path

from tests.live import machine_lock

here = Path(__file__).parent
names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
rc = 0
for name in names:
    if wanted and not any(w in name for w in wanted):
        continue
    print(f"\n=== {name}", flush=True)
    with machine_lock():
        rc |= subprocess.call([sys.executable, "-m", f"tests.benchmarks.{name}"], cwd=here.parents[1])
sys.exit(rc)
