"""app/sampling/heap_trim.py: freed memory is given back at most every TRIM_SECONDS, on the ticks that come."""
from app.sampling.heap_trim import TRIM_SECONDS, MemoryTrimmer


def test_trims_at_most_every_trim_seconds():
    now, calls = [0.0], []
    t = MemoryTrimmer(clock=lambda: now[0], trim=lambda: calls.append(now[0]))
    for step in range(1, 80):
        now[0] = step * 1.0
        t.maybe_trim()
    assert calls == [TRIM_SECONDS * k for k in range(1, len(calls) + 1)] and len(calls) == int(79 // TRIM_SECONDS)


def test_the_real_trim_runs():
    import ctypes
    import pytest
    if not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("not glibc: nothing to trim with")
    t = MemoryTrimmer(clock=iter([0.0, TRIM_SECONDS]).__next__)
    assert t.maybe_trim() and t.trims == 1
