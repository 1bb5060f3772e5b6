"""A probe run leaves no thread behind once it has ended (probes/runner.py ProbeLines._ended).

The overrun watch of a run whose hello named its length was a threading.Timer left to run out: it
lived OVERRUN_GRACE_S (15 s) past the run, on the mask of the thread that read the hello, which is
coremap's own threads' narrowed mask while a run lasts. The window's verification then left a thread
on CPU 0 alone after the give-back, and the next job's fingerprint of the machine saw it widened."""
from __future__ import annotations

import sys
import threading
import time

from probes.runner import ProbeRun

HELLO_THEN_DONE = ("import json; print(json.dumps({'type': 'hello', 'expect_s': 0.05})); "
                   "print(json.dumps({'type': 'done'}))")


def _born_since(before: set, deadline_s: float = 5.0) -> list[str]:
    """The names of the threads alive now that were not in `before`, once none is left or the deadline passed
    (other tests' threads may end meanwhile: only those born since count)."""
    end = time.monotonic() + deadline_s
    while (born := set(threading.enumerate()) - before) and time.monotonic() < end:
        time.sleep(0.01)
    return sorted(t.name for t in born)


def test_a_run_that_ended_keeps_no_overrun_watch():
    before = set(threading.enumerate())
    with ProbeRun([sys.executable, "-c", HELLO_THEN_DONE]) as run:
        assert run.wait(30) == 0
    assert [line["type"] for line in run.lines] == ["hello", "done"]
    assert _born_since(before) == []
