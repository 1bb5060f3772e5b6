"""probes._native.count_command gives back every pipe it made when the second pipe2() or the fork()
fails (issue 11). Each case runs in a child process that makes the call fail for real: a file
limit with room for one pipe only, or (as root) a user with a process limit of zero."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CHILD = r"""
import errno, json, os, resource, sys
from probes import _native

def fds():
    return sorted(int(x) for x in os.listdir("/proc/self/fd"))

mode = sys.argv[1]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
before = fds()
if mode == "pipe":
    # The lowest two free descriptors make the first pipe; a limit just above them fails the second.
    used = set(before)
    free = [n for n in range(len(used) + 3) if n not in used][:2]
    resource.setrlimit(resource.RLIMIT_NOFILE, (free[1] + 1, hard))
else:
    # root ignores RLIMIT_NPROC: become nobody with no processes allowed, so fork() fails (EAGAIN).
    os.setgid(65534)
    os.setuid(65534)
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
try:
    _native.count_command(["true"], -1, -1)
    err = None
except OSError as e:
    err = e.errno
if mode == "pipe":
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print(json.dumps({"errno": err, "before": before, "after": fds()}))
"""


def _run(mode: str) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=30,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_second_pipe_failing_leaks_no_descriptor():
    out = _run("pipe")
    assert out["errno"] == 24          # EMFILE: the second pipe2 did fail
    assert out["after"] == out["before"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making fork() fail needs root (to become a user with no processes left)")
def test_fork_failing_leaks_no_descriptor():
    out = _run("fork")
    assert out["errno"] == 11          # EAGAIN from fork
    assert out["after"] == out["before"]
