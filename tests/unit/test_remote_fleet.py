"""A fleet of 50 (app/remote/fleet.py): at most `parallel` hosts at once, each within its timeout, rows in
the order given; the machine that is not like the others stands out. The hosts here are stand-ins for
agents (real ones: tests/remote/test_fleet.py) so that fifty of them cost no ssh."""
from __future__ import annotations

import threading
import time

import pytest

from app.remote.codec import StateSender
from app.remote.fleet import FleetRow, capture_fleet, csv_rows, odd_cells
from app.remote.hosts import parse_host
from app.remote.transport import HostRefused, LinkError
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.machines import extract

STATES = [Sampler(SysRoot(extract("sno"))).tick() for _ in range(2)]
FACTS = [["Model", "Xeon"], ["Shape", "1 socket × 6 cores × 2 threads = 12 CPUs online"],
         ["Kernel", "5.14.0"], ["isolcpus", "none"], ["irqbalance", "running (pid 77)"]]


class FakeAgent:
    """Answers open/tick/facts like an agent; a host named hang-* never answers a tick until closed."""
    live = 0
    peak = 0
    hung_up = []         # a hang-* host's wait: True when the fleet closed it, False at its own end
    lock = threading.Lock()

    def __init__(self, host):
        self.host = host
        self.hello = {"host": f"name-{host.host}"}
        self._closed = threading.Event()
        self._sender = StateSender()
        self._ticks = 0
        with FakeAgent.lock:
            FakeAgent.live += 1
            FakeAgent.peak = max(FakeAgent.peak, FakeAgent.live)

    def call(self, op, timeout=None, **params):
        if self._closed.is_set():
            raise LinkError(f"{self.host}: closed")
        if op == "tick":
            if self.host.host.startswith("hang"):
                FakeAgent.hung_up.append(self._closed.wait(60))
                raise LinkError(f"{self.host}: closed")
            self._ticks += 1
            return {"state": self._sender.form(STATES[min(self._ticks, 2) - 1])}
        if op == "facts":
            kernel = "6.1.0" if self.host.host == "odd" else "5.14.0"
            return [pair if pair[0] != "Kernel" else ["Kernel", kernel] for pair in FACTS] + \
                [["irqbalance", f"running (pid {hash(self.host.host) % 1000})"]]
        return {"root_key": "/"}

    def close(self, why=None):
        if not self._closed.is_set():
            self._closed.set()
            with FakeAgent.lock:
                FakeAgent.live -= 1


@pytest.fixture(autouse=True)
def short_rate_wait(monkeypatch):
    """A host's two ticks are RATE_WAIT (0.5 s) apart so that its agent has rates; these agents' states are
    made already, so the wait only added 0.5 s a host (50 hosts, 8 at once: 3 s)."""
    from app.remote import fleet
    monkeypatch.setattr(fleet, "RATE_WAIT", 0.02)


def fake_connect(host, connect_timeout=None, handshake_timeout=None):
    time.sleep(0.05)
    if host.host.startswith("down"):
        raise HostRefused(f"{host}: the connection was refused on its ssh port")
    return FakeAgent(host)


def test_fifty_hosts_bounded_and_each_within_its_timeout():
    names = [f"n{i}" for i in range(44)] + ["odd", "down1", "down2", "hang1", "hang2", "hang3"]
    hosts = [parse_host(n) for n in names]
    FakeAgent.live = FakeAgent.peak = 0
    FakeAgent.hung_up = []
    t0 = time.monotonic()
    # 1 s: a stand-in answers in 0.07 s; the hung ones wait the whole of it (the default is 15 s).
    rows = capture_fleet(hosts, parallel=8, timeout=1.0, connect=fake_connect)
    took = time.monotonic() - t0
    assert [r.host for r in rows] == names
    assert 1 < FakeAgent.peak <= 8 and FakeAgent.live == 0
    assert all(r.ok and r.name == f"name-{r.host}" and r.state is not None for r in rows[:45])
    assert rows[45].error == "down1: the connection was refused on its ssh port"
    for r in rows[-3:]:
        assert r.error.startswith(f"{r.host}: no answer within 1 s") and r.seconds > 0.8
    assert FakeAgent.hung_up == [True] * 3                  # each ended by its timeout, none left to hang
    # Side by side: the fleet took less than its hosts' own times added up (one after another, more).
    assert took < sum(r.seconds for r in rows)
    odd = odd_cells(rows)
    assert set(odd) == {(44, "Kernel")}
    assert odd[(44, "Kernel")] == "1 of 45 hosts have this; 44 have '5.14.0'"
    csv = csv_rows(rows)
    assert csv[44]["stands_out"] == "Kernel" and csv[0]["stands_out"] == "" and csv[45]["status"].startswith("down1")


def test_with_no_norm_every_value_stands_out():
    rows = [FleetRow("a", facts=(("Kernel", "5"),)), FleetRow("b", facts=(("Kernel", "6"),)),
            FleetRow("c", error="c: refused")]
    odd = odd_cells(rows)
    assert set(odd) == {(0, "Kernel"), (1, "Kernel")}
    assert "no value is shared by most hosts" in odd[(0, "Kernel")]


def test_jitter_stands_out_past_twice_the_others():
    rows = [FleetRow(h, probe={"cpu": 1, "p99_ns": v, "max_ns": v * 2}) for h, v in
            (("a", 1000), ("b", 1100), ("c", 900), ("d", 5000))]
    assert set(odd_cells(rows)) == {(3, "Jitter")}


def test_the_ssh_fleet_streams_rows_as_hosts_answer_round_after_round():
    """app/sources/stream.py ssh_rounds: a slow host does not hold back the others' rows; the probe runs
    in a host's first answered round only and its later rows keep the result; a host that stops
    answering keeps its last state, stale, under when it was last seen; a stream stopped in the middle of
    a round starts no more hosts."""
    from app.sources.stream import FleetStream, ssh_rounds
    probes: list[str] = []
    gone: set[str] = set()
    answered: set[str] = set()
    others_in = threading.Event()           # the slow host answers once the others' rows are out

    def connect(host, connect_timeout=None, handshake_timeout=None):
        if host.host in gone:
            raise HostRefused(f"{host}: the connection was refused on its ssh port")
        if host.host == "slow":
            assert others_in.wait(10), "the other hosts' rows waited for the slow one"
        return FakeAgent(host)

    def on_rows(rows):
        batches.append([r.host for r in rows])
        answered.update(r.host for r in rows)
        if {"a", "b"} <= answered:
            others_in.set()

    def probe(client):
        probes.append(client.host.host)
        return {"cpu": 1, "p99_ns": 1000, "max_ns": 2000}

    hosts = [parse_host(n) for n in ("slow", "a", "b")]
    batches: list[list[str]] = []
    stream = FleetStream(ssh_rounds(hosts, parallel=3, timeout=5.0, probe=probe, connect=connect), interval=0.1,
                         on_rows=on_rows)
    stream.run_round()
    assert batches[-1] == ["slow"] and sorted(h for b in batches for h in b) == ["a", "b", "slow"]
    assert all(len(b) == 1 for b in batches)                          # each row as its host answered
    assert sorted(probes) == ["a", "b", "slow"]
    first = {r.host: r for r in stream.rows()}
    assert all(r.ok and r.seen > 0 and r.probe["p99_ns"] == 1000 for r in first.values())
    gone.add("b")
    stream.run_round()
    assert sorted(probes) == ["a", "b", "slow"]                       # not measured again
    now = {r.host: r for r in stream.rows()}
    assert now["a"].probe == first["a"].probe and now["a"].seen >= first["a"].seen
    assert now["b"].state is first["b"].state and now["b"].stale.startswith("no answer since ")
    assert "refused" in now["b"].stale
    # Stopped after the first row of a round of 20, one host at a time: the rest are never started.
    started: list[str] = []

    def counting(host, connect_timeout=None, handshake_timeout=None):
        started.append(host.host)
        return FakeAgent(host)

    many = FleetStream(ssh_rounds([parse_host(f"m{i}") for i in range(20)], parallel=1, timeout=5.0,
                                  connect=counting), interval=0.1)
    many.on_rows = lambda rows: many.stop()
    many.run_round()
    assert len(many.rows()) == 1 and len(started) <= 2


def test_a_fleets_hosts_find_the_wires_schema_once(monkeypatch):
    """Each host of a fleet makes its StateReceiver on its own thread, at once: msgspec reading the wire's
    annotations on eight threads together crashed the interpreter (SIGSEGV in 5 of 15 runs of 16 threads).
    The schema is found by one of them; the others wait for it."""
    from app.remote import codec
    made = []

    class SlowSchema(codec.Schema):
        def __init__(self, *a, **kw):
            made.append(threading.get_ident())
            time.sleep(0.2)             # long enough for every other thread to ask meanwhile
            super().__init__(*a, **kw)

    monkeypatch.setattr(codec, "_SCHEMA", None)
    monkeypatch.setattr(codec, "Schema", SlowSchema)
    got = []
    threads = [threading.Thread(target=lambda: got.append(codec.StateReceiver())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(made) == 1 and len(got) == 8
    assert len({id(r._decoder.schema) for r in got}) == 1


def test_a_stream_stopped_early_does_not_wait_for_a_host_still_answering():
    """The fleet window's close ends its stream thread, and waits for it, in the UI thread: the host still
    answering (a capture bounded only by its own timeout, 15 s) is left to finish on its own, unwaited."""
    from app.sources.rows import failed_row
    from app.sources.stream import as_answered
    started, release = threading.Event(), threading.Event()

    def one(host: str) -> FleetRow:
        if host == "slow":
            started.set()
            release.wait(60)
        return failed_row(host, f"{host}: answered")

    rows = as_answered(["fast", "slow"], one, parallel=2, name="coremap-test")
    [first] = next(rows)
    assert first.host == "fast" and started.wait(20)      # the slow host is being asked (not cancellable)
    closing = threading.Thread(target=rows.close)
    closing.start()
    closing.join(20)
    stopped = not closing.is_alive()
    release.set()
    assert stopped, "closing the stream waited for the host still answering"
