"""Giving freed memory back to the system, for a window that runs for hours.

glibc keeps the heap pages Python and Qt free, for reuse, and a heap fragmented by thousands of
thread rows that come and go is seldom reused whole: under 2,000 threads a second of churn the
window's RSS went from 96 to 136 MB in ten minutes with 3 MB of Python objects alive
(tests/benchmarks/bench_window.py). glibc's malloc_trim(0) every TRIM_SECONDS kept it at 96-98 MB,
0.3 ms a call (issue 12: RSS flat). Where there is no glibc (musl), nothing is done.
"""
from __future__ import annotations

import ctypes
import time

TRIM_SECONDS = 15.0


def _malloc_trim():
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):      # not glibc: the allocator gives memory back its own way
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class MemoryTrimmer:
    """`maybe_trim()` on every tick: gives freed heap pages back at most every TRIM_SECONDS (no timer
    of its own wakes the process)."""

    def __init__(self, clock=time.monotonic, trim=None):
        self._clock = clock
        self._trim = trim if trim is not None else _malloc_trim()
        self._last = clock()
        self.trims = 0

    def maybe_trim(self) -> bool:
        now = self._clock()
        if self._trim is None or now - self._last < TRIM_SECONDS:
            return False
        self._last = now
        self._trim()
        self.trims += 1
        return True
