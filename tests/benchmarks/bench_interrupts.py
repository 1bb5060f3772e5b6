"""parse_interrupts against a bare `line.split()` of the same text, in the same run.

Files: the 112-CPU master.internal /proc/interrupts (1,881 rows) and a 1,152-CPU file built from it
(every row's count columns repeated to 1,152 CPUs, descriptions kept). Alternating runs, medians.
Target: parse time <= 2x the bare split.

    PYTHONPATH=. python -m tests.benchmarks.bench_interrupts
"""
from __future__ import annotations

import statistics
import time

from app.parse.interrupts import parse_interrupts
from tests.machines import INTERRUPTS_DIR

PAIRS = 9
WIDE = 1152


def bare_split(text: str) -> int:
    n = 0
    for line in text.split("\n"):
        n += len(line.split())
    return n


def widen(text: str, ncpu: int) -> str:
    """Repeat each row's 11-character count cells (and the header's CPU columns) up to ncpu CPUs."""
    lines = text.split("\n")
    header = lines[0]
    src = len(header.split())
    out = [" " * 12 + "".join(f"CPU{c:<8d}" for c in range(ncpu))]
    for line in lines[1:]:
        colon = line.find(":")
        if colon < 0 or not line.strip():
            out.append(line)
            continue
        label, rest = line[:colon + 1], line[colon + 1:]
        cells = rest[1:1 + 11 * src]
        toks = cells.split()
        if len(toks) != src:                     # ERR: one global count, nothing to widen
            out.append(line)
            continue
        reps = -(-ncpu // src)
        wide = (cells * reps)[: 11 * ncpu]
        out.append(label + " " + wide + rest[1 + 11 * src:])
    return "\n".join(out)


def dense(text: str) -> str:
    """Worst case for the parser's memo of repeated count segments: every cell a different number."""
    lines = text.split("\n")
    src = len(lines[0].split())
    out = [lines[0]]
    for k, line in enumerate(lines[1:]):
        colon = line.find(":")
        cells = line[colon + 2:colon + 2 + 11 * src]
        if colon < 0 or len(cells.split()) != src:
            out.append(line)
            continue
        new = "".join(f"{k * 1000 + i + 1:10d} " for i in range(src))
        out.append(line[:colon + 2] + new + line[colon + 2 + 11 * src:])
    return "\n".join(out)


def measure(text: str) -> tuple[float, float]:
    a, b = [], []
    for _ in range(PAIRS):
        t0 = time.perf_counter()
        parse_interrupts(text)
        a.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        bare_split(text)
        b.append(time.perf_counter() - t0)
    return statistics.median(a) * 1e3, statistics.median(b) * 1e3


def main() -> None:
    text = (INTERRUPTS_DIR / "openshift-nto" / "master.internal-interrupts").read_text()
    wide = widen(text, WIDE)
    t = parse_interrupts(wide)
    assert len(t.cpus) == WIDE and len(t.rows) == len(parse_interrupts(text).rows), "widening broke the file"
    distinct = dense(text)
    assert len(set(parse_interrupts(distinct).row("599").counts)) == 112, "dense file lost its cells"
    for name, txt, cpus in (("master.internal", text, 112), ("widened", wide, WIDE),
                            ("all-distinct", distinct, 112)):
        parse_ms, split_ms = measure(txt)
        rows = len(parse_interrupts(txt).rows)
        print(f"{name:16s} {cpus:5d} CPUs {rows} rows {len(txt) / 1e6:6.2f} MB: parse_interrupts "
              f"{parse_ms:8.2f} ms, bare split {split_ms:8.2f} ms, ratio {parse_ms / split_ms:5.2f}x "
              f"(target <= 2x; medians of {PAIRS} alternating pairs)")


if __name__ == "__main__":
    main()
