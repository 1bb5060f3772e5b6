"""A server without coremap (the test server's `clean` port: PATH=/usr/bin:/bin, no PYTHONPATH, the
system python3): coremap ships its agent over the connection into a cache folder there, builds the
probes' C loops there, and everything works as with an installed coremap."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.hostile.conftest import run_main
from tests.remote.conftest import coremap

SYSTEM_PYTHON = "/usr/bin/python3"
CPU = max(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def clean(sshd):
    if not os.path.exists(SYSTEM_PYTHON):
        pytest.skip(f"no {SYSTEM_PYTHON} to be the server's Python")
    shutil.rmtree(sshd.folder / "cache-clean", ignore_errors=True)
    # The premise: on that login, there is no coremap, and its Python cannot import one.
    r = subprocess.run(["ssh", "-F", str(sshd.folder / "ssh_config"), "-o", "BatchMode=yes", "clean",
                        f"command -v coremap; echo PYTHONPATH=$PYTHONPATH; {SYSTEM_PYTHON} -c 'import app'"],
                       capture_output=True, text=True, timeout=30)
    assert "PYTHONPATH=\n" in r.stdout and "/coremap" not in r.stdout
    assert "No module named 'app'" in r.stderr
    return sshd


def _env():
    return {"COREMAP_REMOTE_PYTHON": SYSTEM_PYTHON}


def test_the_agent_is_shipped_and_answers_as_here(clean, capsys):
    r = coremap(clean, "--host", "clean", "topology", "--json", env=_env())
    assert r.returncode == 0, r.stderr
    # Here, in this process (run_main): the side compared with, not what is tested; a child cost 0.5 s.
    here = run_main(capsys, "topology", "--json")
    assert here.returncode == 0, here.stderr
    assert json.loads(r.stdout) == json.loads(here.stdout)
    shipped = list((clean.folder / "cache-clean" / "coremap-agent").iterdir())
    assert len(shipped) == 1 and (shipped[0] / "app" / "cli" / "agent.py").exists()
    assert not (shipped[0] / "widgets").exists()          # no Qt on a server


@pytest.mark.usefixtures("live_machine")
def test_a_probe_builds_its_loops_there_and_runs(clean):
    r = coremap(clean, "--host", "clean", "probe", "jitter", "--cpu", CPU, "--seconds", "0.3", "--json", env=_env())
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert sum(b["count"] for b in res["buckets"]) > 100
    shipped = next((clean.folder / "cache-clean" / "coremap-agent").iterdir())
    assert list((shipped / "probes").glob("_native*.so"))


def test_a_second_connection_reuses_what_was_shipped(clean):
    shipped = next((clean.folder / "cache-clean" / "coremap-agent").iterdir())
    mtime = (shipped / "app" / "cli" / "agent.py").stat().st_mtime_ns
    r = coremap(clean, "--host", "clean", "journal", env=_env())
    assert r.returncode == 0, r.stderr
    assert (shipped / "app" / "cli" / "agent.py").stat().st_mtime_ns == mtime
    assert len(list(shipped.parent.iterdir())) == 1


def test_a_server_python_that_is_missing_is_one_line(clean):
    r = coremap(clean, "--host", "clean", "topology", env={"COREMAP_REMOTE_PYTHON": "/usr/bin/no-such-python3"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "coremap: clean: no /usr/bin/no-such-python3 on the login PATH there; coremap needs Python 3.10 or newer "
        "on the server (install it, or set COREMAP_REMOTE_PYTHON to its path)"]
