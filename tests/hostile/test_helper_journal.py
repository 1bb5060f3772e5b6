"""The helper and the journal (issue 24, class 6): the helper starts isolated from its caller's
environment and path; a journal or state folder another user owns or may write is refused; a target is
matched by pid and start time, or it is not touched."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import pytest

from app.parse.cpulist import parse_cpulist
from app.pinning.helper import VERSION, HelperClient, default_command
from app.pinning.journal import Journal
from tests.hostile.conftest import REPO, run_cli, run_main

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="starts the helper as root directly; chowns to uid 65534")


@pytest.fixture
def planted(tmp_path):
    """What a caller's environment would plant: an `app` package on PYTHONPATH, an LD_PRELOAD library,
    a PYTHONSTARTUP script, and PYTHONINSPECT; each leaves a marker file when it runs."""
    markers = tmp_path / "markers"
    markers.mkdir()
    pkg = tmp_path / "planted" / "app" / "pinning"
    pkg.mkdir(parents=True)
    for folder in (pkg.parent, pkg):
        (folder / "__init__.py").write_text(f"open({str(markers / 'app')!r}, 'w').close()\n")
    (pkg / "helper.py").write_text(f"open({str(markers / 'helper')!r}, 'w').close()\n")
    startup = tmp_path / "startup.py"
    startup.write_text(f"open({str(markers / 'startup')!r}, 'w').close()\n")
    env = {"PYTHONPATH": str(tmp_path / "planted"), "PYTHONSTARTUP": str(startup), "PYTHONINSPECT": "1"}
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        src = tmp_path / "preload.c"
        # Marks only the helper: the process whose command line names app.pinning.helper.
        src.write_text(textwrap.dedent(f"""\
            #include <stdio.h>
            #include <string.h>
            __attribute__((constructor)) static void planted(void) {{
                char buf[4096] = {{0}}; FILE *c = fopen("/proc/self/cmdline", "r");
                size_t n = c ? fread(buf, 1, sizeof buf - 1, c) : 0; if (c) fclose(c);
                for (size_t i = 0; i < n; i++) if (!buf[i]) buf[i] = ' ';
                if (strstr(buf, "app.pinning.helper")) {{
                    FILE *f = fopen("{markers / 'preload'}", "w"); if (f) fclose(f);
                }}
            }}
            """))
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "preload.so"), str(src)], check=True)
        env["LD_PRELOAD"] = str(tmp_path / "preload.so")
    return env, markers


@as_root
def test_the_helper_takes_nothing_from_its_callers_environment(planted):
    env, markers = planted
    # coremap, run by root with all of it in its environment, starts its helper (root: directly).
    # (The module is named in two halves: the planted library marks a process whose command line names it.)
    code = ("import importlib\nh = importlib.import_module('app.pinning.' + 'helper')\n"
            "c = h.HelperClient(h.default_command())\nprint(c.hello())\nc.close()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + env["PYTHONPATH"],
                                **{k: v for k, v in env.items() if k != "PYTHONPATH"}))
    assert r.returncode == 0 and r.stdout.strip() == str(VERSION), r.stderr
    # The calling process itself took what its caller gave it (its own business); the helper, none of it.
    assert sorted(p.name for p in markers.iterdir()) == []


def test_the_installed_helper_restarts_itself_isolated(planted, tmp_path):
    """`coremap-helper` (python -m app.pinning.helper) started by hand with PYTHONSTARTUP and
    PYTHONINSPECT: they led to a traceback (and INSPECT to stdin read as code after serve())."""
    env, markers = planted
    e = dict(os.environ, **{k: v for k, v in env.items() if k not in ("PYTHONPATH", "LD_PRELOAD")})
    r = subprocess.run([sys.executable, "-m", "app.pinning.helper"], input=b'{"op": "hello"}\nprint(1)\n',
                       capture_output=True, timeout=60, cwd=REPO, env=e)
    assert r.returncode == 0, r.stderr
    replies = [json.loads(line) for line in r.stdout.splitlines()]
    assert replies[0] == {"ok": True, "version": VERSION}
    assert replies[1]["ok"] is False and r.stderr == b""
    assert sorted(p.name for p in markers.iterdir()) == []


def test_the_helper_command_is_isolated_and_absolute():
    cmd = default_command()
    python = next(c for c in cmd if "python" in os.path.basename(c))
    assert os.path.isabs(python) and cmd[cmd.index(python) + 1] == "-I"


# -- the journal and the state folder -----------------------------------------------------------------------
SPOILS = ["folder-0777", "journal-of-nobody", "folder-of-nobody"]


@as_root
@pytest.mark.parametrize("spoil", SPOILS)
def test_a_journal_another_user_owns_or_can_write_is_refused_as_root(tmp_path, spoil, capsys, monkeypatch):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with Journal(state / "journal.jsonl") as j:
        e = j.record(kind="thread", target_id=os.getpid(), requested=(0,), before=(0, 1), pid=os.getpid(),
                     starttime=1)
        j.mark(e, "done", after=(0,))
    if spoil == "folder-0777":
        os.chmod(state, 0o777)
    elif spoil == "journal-of-nobody":
        os.chown(state / "journal.jsonl", 65534, 65534)
    else:
        os.chown(state, 65534, 65534)
    before = (state / "journal.jsonl").read_bytes()
    # The first spoil's commands as children; the others' in this process (run_main), the same refusal
    # of the one journal check: a child each cost 0.4 s of start-up for six more lines.
    monkeypatch.setenv("COREMAP_STATE_DIR", str(state))
    run = run_cli if spoil == SPOILS[0] else partial(run_main, capsys)
    for command in (["journal"], ["restore"], ["undo"]):
        r = run(*command)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (command, r.stdout, r.stderr)
        assert "refused" in r.stderr and ("uid 65534" in r.stderr or "others may write it" in r.stderr)
    assert (state / "journal.jsonl").read_bytes() == before


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(300)"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    yield p
    p.kill()
    p.wait()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell a pin from none")
def test_a_journal_line_without_a_start_time_touches_no_process(tmp_path, sleeper):
    """An old or forged record of a pin of `sleeper`'s pid with no start time: restore and undo must not
    re-pin it (it may be a new process that reused the pid)."""
    cpus = sorted(os.sched_getaffinity(sleeper.pid))
    # A `before` unlike the sleeper's mask, whatever width another suite's isolate left that at (one run
    # here found it at CPU 0 alone, so before == requested and restore had nothing to undo): restore then
    # has a pin to undo, and must refuse it for want of a start time.
    online = sorted(parse_cpulist(Path("/sys/devices/system/cpu/online").read_text().strip()))
    before = (online[-1],) if cpus != [online[-1]] else (online[0],)
    for command in ("restore", "undo"):
        state = tmp_path / command
        state.mkdir(mode=0o700)
        with Journal(state / "journal.jsonl") as j:
            e = j.record(kind="thread", target_id=sleeper.pid, requested=(cpus[0],), before=before,
                         pid=sleeper.pid, starttime=None)
            j.mark(e, "done", after=(cpus[0],))
        r = run_cli(command, env={"COREMAP_STATE_DIR": str(state)})
        assert r.returncode in (0, 1), r.stderr
        assert sorted(os.sched_getaffinity(sleeper.pid)) == cpus, (command, r.stdout)
        assert "the journal holds no start time for the thread that was pinned" in r.stdout, (command, r.stdout)
