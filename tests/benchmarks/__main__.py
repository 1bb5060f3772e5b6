"""`make bench` / `python -m tests.benchmarks [NAME ...]`: run every bench_*.py (or the named ones),
each in its own process, and let each print its figures and ratios."""
import pkgutil
import subprocess
import sys
from pathlib import Path

here = Path(__file__).parent
names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
rc = 0
for name in names:
    if wanted and not any(w in name for w in wanted):
        continue
    print(f"\n=== {name}", flush=True)
    rc |= subprocess.call([sys.executable, "-m", f"tests.benchmarks.{name}"], cwd=here.parents[1])
sys.exit(rc)
