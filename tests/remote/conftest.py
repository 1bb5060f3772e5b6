"""Tests against a real OpenSSH server (tests/remote/sshd.py), started once per session."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.remote.sshd import REPO, sshd_fixture

sshd = pytest.fixture(scope="session")(sshd_fixture)


@pytest.fixture
def remote_env(sshd, monkeypatch):
    """This process talks to the test server only (its ssh config, its own control sockets)."""
    for k, v in sshd.env.items():
        monkeypatch.setenv(k, v)
    return sshd


def coremap(sshd, *args, timeout=90, env=None, **kw):
    """`python -m app ARGS` against the test server, in a child."""
    e = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen", **sshd.env)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=e, **kw)
