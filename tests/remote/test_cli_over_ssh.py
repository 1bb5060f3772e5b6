"""`coremap --host` against a real OpenSSH server (tests/remote/sshd.py) whose "remote" machine is this
one: every answer over ssh must be the one coremap gives here."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from tests.hostile.conftest import run_main
from tests.remote.conftest import coremap
from tests.remote.sshd import REPO

CPU = max(os.sched_getaffinity(0))


def _json(r):
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _here(capsys, *args) -> dict:
    """`coremap ARGS --json` on this machine, in this process (run_main): the side an answer over ssh is
    compared with. The command over ssh stays a child (what is tested); a child for the local side cost
    0.5 s of start-up for each of six reads (issue 31)."""
    return _json(run_main(capsys, *args, "--json"))


def test_topology_over_ssh_is_the_local_one(sshd, capsys):
    assert _json(coremap(sshd, "--host", "s1", "topology", "--json")) == _here(capsys, "topology")


def _read_while_still(sshd, capsys, still, *args) -> tuple[dict, dict, dict]:
    """`coremap ARGS --json` here, over ssh, and here again, until the two local reads agree on `still(d)`
    (what the test compares): a second suite's live tests (an isolate moves every thread and IRQ off a
    CPU, then back) may change this machine between the reads, and the server then read another machine
    than the first read did. A server that answers otherwise than here fails at the first still moment."""
    for _ in range(5):
        before = _here(capsys, *args)
        remote = _json(coremap(sshd, "--host", "s1", *args, "--json"))
        after = _here(capsys, *args)
        if still(before) == still(after):
            break
    return before, remote, after


def _irq_rows(d) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("counts", "total")} for r in d["irqs"]]


def test_irqs_over_ssh_are_the_local_ones(sshd, capsys):
    before, remote, after = _read_while_still(sshd, capsys, _irq_rows, "irqs")
    assert remote["cpus"] == before["cpus"]
    assert _irq_rows(remote) == _irq_rows(before)
    # Counters only grow: what the server read lies between the two local reads.
    for b, r, a in zip(before["irqs"], remote["irqs"], after["irqs"]):
        assert b["total"] <= r["total"] <= a["total"], r["irq"]


def test_irq_rates_over_ssh_take_their_interval(sshd):
    t0 = time.monotonic()
    r = coremap(sshd, "--host", "s1", "irqs", "--interval", "0.2")     # the default is 1 s
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("rates over 0.2")
    assert "per CPU:" in r.stdout
    assert time.monotonic() - t0 >= 0.2


@pytest.fixture
def sleeper():
    """A process with two named threads that sleep (so nothing about them changes while read)."""
    code = ("import threading, time, ctypes, sys\n"
            "libc = ctypes.CDLL(None)\n"
            "def named(n):\n"
            "    libc.prctl(15, n.encode(), 0, 0, 0)\n"
            "    time.sleep(600)\n"
            "for n in ('cm-remote-a', 'cm-remote-b'):\n"
            "    threading.Thread(target=named, args=(n,), daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    # Until both threads have named themselves (a fixed 0.1 s before): "ready" can come first.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _named(p.pid, {"cm-remote-a", "cm-remote-b"}):
        time.sleep(0.005)
    yield p
    p.kill()
    p.wait()


def test_threads_over_ssh_are_the_local_ones(sshd, sleeper, capsys):
    keep = ("pid", "tid", "comm", "process", "cmdline", "allowed", "kthread", "no_setaffinity", "nice", "policy")

    def kept(d):
        return [{k: t[k] for k in keep} for t in d["threads"]]
    local, remote, _ = _read_while_still(sshd, capsys, kept, "threads", "--pid", sleeper.pid)
    assert kept(remote) == kept(local)
    assert {t["comm"] for t in remote["threads"]} >= {"cm-remote-a", "cm-remote-b"}


def _named(pid: int, names: set[str]) -> bool:
    """Whether threads of `pid` bear every one of `names`."""
    comms = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comms.add(f.read().strip())
        except OSError:
            continue        # a thread that ended while we looked
    return names <= comms


def _tid_named(pid: int, name: str) -> int:
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == name:
                return int(tid)
    raise AssertionError(f"no thread {name} in {pid}")


@pytest.mark.usefixtures("live_machine")
def test_a_pin_over_ssh_lands_and_undoes_in_the_servers_journal(sshd, sleeper):
    tid = _tid_named(sleeper.pid, "cm-remote-a")
    before = os.sched_getaffinity(tid)
    r = coremap(sshd, "--host", "s1", "pin", "--tid", tid, "--cpus", CPU)
    assert r.returncode == 0, r.stderr
    assert f"thread {tid} (cm-remote-a)" in r.stdout and r.stdout.rstrip().endswith("ok")
    assert os.sched_getaffinity(tid) == {CPU}
    # The server's own journal (its state folder, set by sshd), not this process's.
    server_journal = sshd.folder / "state" / "journal.jsonl"
    assert f'"target":{tid},' in server_journal.read_text().replace(" ", "")
    r = coremap(sshd, "--host", "s1", "undo")
    assert r.returncode == 0, r.stderr
    assert os.sched_getaffinity(tid) == before


@pytest.mark.usefixtures("live_machine")
def test_a_jitter_probe_over_ssh_returns_a_histogram(sshd, tmp_path):
    hlog = tmp_path / "s1.hlog"
    # 0.3 s: the loop's intervals number millions a second; the run's length is no check here
    r = coremap(sshd, "--host", "s1", "probe", "jitter", "--cpu", CPU, "--seconds", "0.3", "--json",
                "--hlog", hlog)
    res = _json(r)
    assert res["probe"] == "jitter" and res["cpu"] == CPU
    assert sum(b["count"] for b in res["buckets"]) > 1000
    assert res["percentiles"]["p99"] is not None and res["percentiles"]["max"] >= res["percentiles"]["p50"]
    assert res["host"]["kernel"] == os.uname().release
    # --hlog is written here, on the workstation.
    assert hlog.read_text().count("\n") >= 3


def test_a_snapshot_over_ssh_is_written_here(sshd, tmp_path):
    out = tmp_path / "s1.tar.gz"
    r = coremap(sshd, "--host", "s1", "snapshot", out, "--interval", "0.2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{out}: ") and "counters twice" in r.stdout
    with tarfile.open(out) as tf:
        meta = next(m for m in tf if m.name.endswith(".coremap/meta.json"))
        assert json.loads(tf.extractfile(meta).read())["host"] == os.uname().nodename


@pytest.mark.parametrize("alias, words, child", [
    ("refused", "the connection was refused", True),
    ("wrongkey", "the login was refused", False),
    ("stranger", "host key is not in known_hosts", False),
], ids=["refused", "wrongkey", "stranger"])
def test_a_host_that_cannot_be_reached_is_one_line(sshd, remote_env, capsys, alias, words, child):
    # The first as a child (the process path); the others, which differ in ssh's answer only, in this
    # process (run_main: the status and lines a child gives), saving a Python start and coremap's imports.
    if child:
        r = coremap(sshd, "--host", alias, "topology", timeout=60)
    else:
        r = run_main(capsys, "--host", alias, "topology", timeout=60)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"coremap: {alias}: ") and words in lines[0], r.stderr


def test_a_servers_error_says_which_host(sshd):
    r = coremap(sshd, "--host", "s1", "pin", "--tid", "4194303", "--cpus", "0")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["coremap: s1: thread 4194303 does not exist; see `coremap threads`"]


def test_a_file_here_is_refused_with_host(sshd, tmp_path):
    f = tmp_path / "interrupts"
    f.write_text("           CPU0\n  0:          1   IO-APIC   2-edge      timer\n")
    r = coremap(sshd, "--host", "s1", "irqs", "--file", f)
    assert r.returncode == 2 and "names a file on this machine" in r.stderr


def _procs_named(text: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        out.append(int(d))
            except OSError:
                continue        # exited while we looked
    return out


@pytest.mark.usefixtures("live_machine")
def test_a_killed_cli_takes_its_remote_probe_down(sshd):
    """SIGKILL the CLI mid-probe: its ssh dies with it (PR_SET_PDEATHSIG), the agent sees its stdin end
    and cancels the probe there."""
    marker = "--seconds 37.5"
    p = subprocess.Popen([sys.executable, "-m", "app", "--host", "s1", "probe", "jitter", "--cpu", str(CPU),
                          *marker.split()], env=dict(os.environ, **sshd.env, PYTHONPATH=str(REPO)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    probe = []
    while time.monotonic() < deadline and not probe:
        probe = [pid for pid in _procs_named("37.5") if pid != p.pid and "probes" in open(f"/proc/{pid}/cmdline").read()]
        time.sleep(0.02)
    assert probe, "the probe never started on the server"
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in probe):
        time.sleep(0.02)
    assert not any(_alive(pid) for pid in probe)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_screenshot_over_ssh_is_of_the_snapshot_the_host_took(sshd, tmp_path, capsys):
    """`--host H screenshot`: the host takes a snapshot, brought here and opened as the command's machine
    (open_host on it, not on the host over ssh a second time); the picture names the host's machine."""
    out = tmp_path / "grid.png"
    r = coremap(sshd, "--host", "s1", "screenshot", "--what", "grid", "--out", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    topo = _here(capsys, "topology")
    assert r.stdout.startswith(f"{out}: grid of {topo['hostname']}, coloured by ")
