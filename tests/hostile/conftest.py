"""Hostile inputs: captures unpacked with plain `tar xf` that hold links out and devices, output paths
that are not files, journals with forged lines. Each test asserts one clear line, the exit status, and
that nothing outside its temporary folder changed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.machines import extract

REPO = Path(__file__).resolve().parents[2]
SECRET = "coremap-hostile-secret-7f3a"


def run_cli(*args, timeout=60, env=None):
    """`python -m app ARGS` in a child (so a hang is a timeout, not a stuck suite)."""
    e = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=e)


@pytest.fixture
def secret(tmp_path):
    """A file outside every capture whose text must never appear in any output."""
    p = tmp_path / "outside" / "secret"
    p.parent.mkdir()
    p.write_text(SECRET + "\n")
    return p


@pytest.fixture
def capture(tmp_path):
    """A copy of a real 12-CPU capture with interrupts (openshift-nto sno), ours to spoil."""
    dest = tmp_path / "capture"
    shutil.copytree(extract("sno"), dest, symlinks=True)
    return dest


def replace_with_link(member: Path, target: str) -> None:
    member.unlink()
    member.symlink_to(target)
