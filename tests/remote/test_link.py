"""What the window drives over ssh (RemoteSampler, RemoteAffinityService, RemoteProbeRun), against the real
test server: the same states as here, pins through the server's service, and a link that drops and
comes back."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from app.pinning.service import PinRequest, PinTarget
from app.machine.topology import read_topology
from app.remote.hosts import parse_host
from app.remote.pins import RemoteAffinityService
from app.remote.probe_runs import RemoteProbeRun
from app.remote.sampler import RemoteSampler
from app.remote.transport import LinkError
from app.sysroot import SysRoot

CPU = max(os.sched_getaffinity(0))


@pytest.fixture
def sampler(remote_env):
    s = RemoteSampler(parse_host("s1"), interval=0.25)
    yield s
    s.close()


def test_states_over_ssh_hold_this_machines_topology(sampler):
    a = sampler.tick()
    time.sleep(0.3)
    b = sampler.tick()
    assert a.topology == read_topology(SysRoot("/"))
    assert b.topology is a.topology             # an unchanged topology is the same object: no new layout
    assert b.generation == a.generation + 1 and b.host == "s1" and not b.stale
    assert b.rates is not None and set(b.rates.per_cpu) == set(a.topology.online)
    assert any(t.pid == os.getpid() for t in b.sample.tasks.tasks.values())


def test_a_dropped_link_is_stale_then_live_again(sampler, sshd, monkeypatch):
    from app.remote import sampler as sampler_mod
    monkeypatch.setattr(sampler_mod, "BACKOFF", (0.2, 2.0))    # the wait before reconnecting, not checked here
    sampler.tick()
    assert sshd.drop_connections()
    deadline = time.monotonic() + 10
    state = sampler.tick()
    while not state.stale and time.monotonic() < deadline:
        time.sleep(0.1)
        state = sampler.tick()
    assert state.stale.startswith("disconnected — reconnecting in ")
    assert state.notes[0] == state.stale
    assert state.host == "s1"
    # The backoff's first step (0.2 s here); then the next tick connects again.
    deadline = time.monotonic() + 20
    while state.stale and time.monotonic() < deadline:
        time.sleep(0.3)
        state = sampler.tick()
    assert not state.stale and state.sample.tasks is not None
    later = sampler.tick()
    assert later.generation > state.generation


def test_a_host_that_refuses_raises_before_any_state(remote_env):
    s = RemoteSampler(parse_host("refused"))
    with pytest.raises(LinkError, match="refused: the connection was refused .* retrying in 1 s"):
        s.tick()
    s.close()


def test_an_alias_never_rides_another_alias_connection(sampler, remote_env):
    """twin is s1's host, port and user with a known_hosts that lacks the server's key. While s1's shared
    connection lives, twin must still check the key itself, and be refused; under ssh's %C it rode
    s1's connection and was read "ok" (issue 24)."""
    from app.remote.client import AgentClient
    from app.remote.transport import HostKeyUnknown
    assert sampler.tick().topology.cpus         # s1 connected: its shared connection is up
    with pytest.raises(HostKeyUnknown, match="twin: its host key is not in known_hosts"):
        AgentClient.connect(parse_host("twin")).close()
    assert sampler.tick().stale == ""           # s1's own connection is untouched


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    yield p
    p.kill()
    p.wait()


@pytest.mark.usefixtures("live_machine")
def test_pins_go_through_the_servers_service_and_journal(sampler, sleeper):
    sampler.tick()
    service = RemoteAffinityService(sampler.link)
    before = os.sched_getaffinity(sleeper.pid)
    req = PinRequest((PinTarget("thread", sleeper.pid),), (CPU,), origin="drop")
    assert service.preflight(req) == []
    results = service.apply(req)
    assert [r.code for r in results] == ["ok"] and results[0].after == (CPU,)
    assert os.sched_getaffinity(sleeper.pid) == {CPU}
    assert bool(service.ledger().undo) and not bool(service.ledger().redo)
    entries = service.journal.entries()
    assert entries[-1].target_id == sleeper.pid and entries[-1].state == "done"
    assert entries[-1].session == sampler.link.session         # this window's pins are not "left behind"
    assert service.pending_restore() == []
    undone = service.undo()
    assert [r.code for r in undone] == ["ok"] and os.sched_getaffinity(sleeper.pid) == before
    assert bool(service.ledger().redo)


@pytest.mark.usefixtures("live_machine")
def test_a_probe_streams_its_lines(sampler):
    sampler.tick()
    run = RemoteProbeRun.starter(lambda: sampler.client)("jitter", ["--cpu", str(CPU), "--seconds", "0.4"])
    seen = []
    deadline = time.monotonic() + 30
    while run.running and time.monotonic() < deadline:
        seen += [line["type"] for line in run.poll()]
        time.sleep(0.05)
    seen += [line["type"] for line in run.poll()]
    assert run.returncode == 0 and run.failure("jitter") is None
    assert seen[0] == "hello" and seen.count("interval") >= 3 and seen[-1] == "done"
    assert run.pid is not None and run.pid != os.getpid()
