"""Children die with their parent (issue 10): a probe started by the CLI is gone soon after the CLI is
killed with SIGTERM, SIGHUP or SIGKILL, and `counters -- COMMAND` takes its command down too."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.hostile.conftest import REPO

CPU = str(max(os.sched_getaffinity(0)))


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue        # exited while we looked
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == pid:
            out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _wait_for(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    return cond()


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "app", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(REPO)))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
@pytest.mark.usefixtures("live_machine")
def test_probe_dies_with_the_cli(sig):
    cli = _start("probe", "jitter", "--cpu", CPU, "--seconds", "60", "--duty", "10")
    try:
        probe = _wait_for(lambda: _children(cli.pid))
        assert probe, "the probe did not start"
        os.kill(cli.pid, sig)
        cli.wait(10)
        assert _wait_for(lambda: not any(_alive(p) for p in probe), 5), f"probe {probe} outlived the CLI"
    finally:
        if cli.poll() is None:
            cli.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
@pytest.mark.usefixtures("live_machine")
def test_counted_command_dies_with_the_cli(sig):
    cli = _start("probe", "counters", "--cpu", CPU, "--", "sleep", "45")
    try:
        probe = _wait_for(lambda: _children(cli.pid))
        assert probe
        command = _wait_for(lambda: [c for p in probe for c in _children(p)])
        assert command, "the counted command did not start"
        os.kill(cli.pid, sig)
        cli.wait(10)
        assert _wait_for(lambda: not any(_alive(p) for p in probe + command), 5), \
            f"probe {probe} or command {command} outlived the CLI"
    finally:
        if cli.poll() is None:
            cli.kill()
        subprocess.run(["pkill", "-f", "^sleep 45$"])


@pytest.fixture(scope="module")
def session_windows(tmp_path_factory):
    """A window on a saved session per signal, each with a TMPDIR of its own, started together and waited
    for in one pass (one after the other, each start and quiet stretch was waited out alone): the signal
    -> (window, its TMPDIR, the session folders it extracted there)."""
    from app.store.session import save_session, session_from_root
    from app.sysroot import SysRoot
    from tests.machines import extract
    from tests.processes import settle_all
    base = tmp_path_factory.mktemp("sessions")
    path = base / "sno.coremap"
    save_session(path, session_from_root(SysRoot(extract("sno"))))
    wins = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            folder = base / sig.name
            tmp = folder / "tmp"
            tmp.mkdir(parents=True)
            env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp), QT_QPA_PLATFORM="offscreen",
                       COREMAP_STATE_DIR=str(folder / "state"), COREMAP_REPORTS_DIR=str(folder / "reports"))
            wins[sig] = (subprocess.Popen([sys.executable, "-m", "app", "--session", str(path)], cwd=REPO,
                                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), tmp)
        extracted = {sig: _wait_for(lambda: [p for p in tmp.iterdir() if p.name.startswith("coremap-")], 30)
                     for sig, (_, tmp) in wins.items()}
        settle_all([win for win, _ in wins.values()], quiet_s=0.5)     # the windows are up and idle
        yield {sig: (win, tmp, extracted[sig]) for sig, (win, tmp) in wins.items()}
    finally:
        for win, _ in wins.values():
            if win.poll() is None:
                win.kill()
                win.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_the_window_removes_its_session_folder_on_a_signal(session_windows, sig):
    """Opening a session extracts its machine into a temporary folder; a window stopped by SIGTERM or
    SIGHUP (not only one closed by hand) removes it."""
    win, tmp, folders = session_windows[sig]
    assert folders, "the session was not extracted"
    assert win.poll() is None, win.stderr.read()[-500:]
    os.kill(win.pid, sig)
    win.wait(20)
    left = [p.name for p in tmp.iterdir() if p.name.startswith("coremap-")]
    assert left == [], (left, win.stderr.read()[-500:])
