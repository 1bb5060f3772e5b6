"""The first-touch probe under `perf stat -e page-faults,minor-faults`, the same run, BENCH_PAIRS runs
(default 6) of --size 1G on the last CPU, THP never, then madvise:

  the process's minor faults as the kernel counts them for the probe (getrusage at its last line)
      vs perf's minor-faults and page-faults of the whole run                 within 5%
  first-touch minor faults vs pages touched (THP never: one fault per page)     exact
  first / second touch cost per page and per GiB, the share in the kernel, huge pages, compaction
      stalls                                                                   reported
  `-- java -Xms1g -Xmx1g -version` with -XX:+AlwaysPreTouch: the heap the kernel saw touched at start
      (extra minor faults x page size) vs -Xms                                 within 10%

Run: `make bench ARGS=probes_first_touch` (linux-perf; 1 GiB free).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from probes.first_touch.measure import summarize
from tests.benchmarks.peers import CPUS, HERE, PAIRS, find_perf, med, report, whole_affinity

SIZE = "1G"


def run(perf: str, thp: str) -> tuple[dict, dict]:
    """(the probe's result, perf's counts) of one run."""
    whole_affinity()
    r = subprocess.run([perf, "stat", "-x,", "-e", "page-faults,minor-faults", "--", sys.executable, "-m", "probes",
                        "first-touch", "--cpu", str(CPUS[-1]), "--size", SIZE, "--thp", thp], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})
    if r.returncode != 0:
        raise SystemExit(f"perf stat first-touch: exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}")
    counts = {}
    for line in r.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].split(":")[0] in ("page-faults", "minor-faults"):
            counts[f[2].split(":")[0]] = float(f[0])
    return summarize([json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]), counts


def main() -> None:
    perf = find_perf()
    if perf is None:
        raise SystemExit("perf: not found (apt install linux-perf)")
    print(f"bench_probes_first_touch: {SIZE} on CPU {CPUS[-1]}, {PAIRS} runs; kernel {os.uname().release}", flush=True)
    for thp in ("never", "madvise"):
        results, counts = zip(*(run(perf, thp) for _ in range(PAIRS)))
        kernel = [r["process_minor_faults"] for r in results]
        report(f"first-touch thp {thp}: process minor faults vs perf minor-faults", kernel,
               [c["minor-faults"] for c in counts], 0.95, 1.05)
        report(f"first-touch thp {thp}: process minor faults vs perf page-faults", kernel,
               [c["page-faults"] for c in counts], 0.95, 1.05)
        rows = [r["nodes"][0] for r in results]
        touch = [row["first"]["minor_faults"] for row in rows]
        pages = [row["first"]["pages"] for row in rows]
        print(f"first-touch thp {thp}: first-touch minor faults {med(touch):,.0f} for {med(pages):,.0f} pages; "
              f"huge pages {med([row['huge_pages'] for row in rows]):,.0f}; first {med([row['first']['ns_per_page'] for row in rows]):.0f} ns/page, "
              f"second {med([row['second']['ns_per_page'] for row in rows]):.1f} ns/page, ratio "
              f"{med([row['ratio'] for row in rows]):.0f}x (runs: {[round(row['ratio']) for row in rows]}), "
              f"in the kernel {100 * med([row['first']['sys_share'] for row in rows]):.0f}%", flush=True)
        print(f"first-touch thp {thp}: per GiB first {med([row['first']['ms_per_gib'] for row in rows]):,.0f} ms wall, "
              f"{med([row['first']['cpu_ms_per_gib'] for row in rows]):,.0f} ms CPU; pre-touched "
              f"{med([row['second']['ms_per_gib'] for row in rows]):,.1f} ms; compaction stalls "
              f"{[(row['first'].get('vmstat') or {}).get('compact_stall') for row in rows]}", flush=True)
        print(f"  verdict (last run): {results[-1]['verdict']}", flush=True)
    jvm()


def jvm() -> None:
    """`first-touch -- java -Xms1g ...`: the heap pre-touched as the kernel counts it (the extra minor
    faults times the page size) against the -Xms asked for."""
    import shutil
    if shutil.which("java") is None:
        print("java: not installed; the AlwaysPreTouch comparison skipped")
        return
    heap = 1 << 30
    touched, asked = [], []
    for _ in range(PAIRS):
        whole_affinity()
        r = subprocess.run([sys.executable, "-m", "probes", "first-touch", "--cpu", str(CPUS[-1]), "--", "java",
                            "-Xms1g", "-Xmx1g", "-version"], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})
        res = summarize([json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")])
        touched.append(res["pretouched_bytes"] or 0)
        asked.append(heap)
    report("AlwaysPreTouch: heap touched at start vs -Xms", touched, asked, 0.9, 1.1)
    print(f"  verdict (last run): {res['verdict']}", flush=True)


if __name__ == "__main__":
    main()
