"""A server is not trusted (issue 10's standards, for issue 15): an "agent" that lies — too long a line,
not JSON, another version, silence, a state that is not a state, probe lines that are not probe lines,
sentences and output with terminal escapes — ends in one line or an escaped one, never a hang, a crash,
or an escape reaching the terminal. The agents here are scripts run in place of ssh."""
from __future__ import annotations

import io
import json
import os
import resource
import sys
import tempfile
import time
import weakref
from functools import partial

import pytest

import app
from app.remote import protocol
from app.remote.client import AgentClient, AgentError, VersionMismatch
from app.remote.hosts import HostSpec
from app.remote.probe_runs import RemoteProbeRun
from app.remote.sampler import RemoteSampler
from app.remote.transport import LinkError, SshTransport

HOST = HostSpec("evil")
HELLO = {"type": "hello", "coremap": app.__version__, "protocol": protocol.PROTOCOL, "host": "evil"}


class ScriptTransport(SshTransport):
    """ssh replaced by a Python script that plays the agent."""

    def __init__(self, script: str, connect_timeout: float | None = None):
        super().__init__(HOST, command=["true"])
        self.script = script
        if connect_timeout is not None:
            self.connect_timeout = connect_timeout      # ssh's part of the first line's time

    def argv(self, remote_command: str) -> list[str]:
        if len(self.script) < 64 * 1024:
            return [sys.executable, "-c", self.script]
        # Past the kernel's bound on one argument (MAX_ARG_STRLEN, 128 KiB): a file.
        f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
        with f:
            f.write(self.script)
        weakref.finalize(self, os.unlink, f.name)
        return [sys.executable, f.name]


def agent_script(before: list[str], replies: dict[str, list[dict]], hello: dict | None = HELLO,
                 flood: int = 0) -> str:
    """A fake agent: reads the boot line, writes `flood` bytes with no newline, `before` (raw lines) and
    the hello, then answers each op with its canned messages (the request id filled in). Each message goes
    in as its JSON text, written with the id spliced in: compiling a 10 MB literal (the 70,000-row state
    below) took the agent 10-20 s, and decoding and encoding it again for each request a few more."""
    encoded = {op: [json.dumps(m) for m in msgs] for op, msgs in replies.items()}
    return f"""
import json, sys
sys.stdin.buffer.readline()
out = sys.stdout.buffer
out.write(b"a" * {flood})
for raw in {before!r}:
    out.write(raw.encode() if isinstance(raw, str) else raw); out.flush()
hello = {hello!r}
if hello is not None:
    out.write((json.dumps(hello) + "\\n").encode()); out.flush()
replies = {encoded!r}
for line in sys.stdin.buffer:
    req = json.loads(line)
    for msg in replies.get(req.get("op"), ['{{"type": "result", "result": null}}']):
        out.write(('{{"id": %d, ' % req["id"] + msg[1:] + "\\n").encode()); out.flush()
"""


def connect(script: str, **kw) -> AgentClient:
    return AgentClient.connect(HOST, transport=ScriptTransport(script), **kw)


def test_another_version_is_one_line():
    with pytest.raises(VersionMismatch, match=r"^evil runs coremap 9\.9 \(protocol 1\); this is coremap "):
        connect(agent_script([], {}, dict(HELLO, coremap="9.9")))


def test_a_line_past_the_limit_ends_the_connection(monkeypatch):
    monkeypatch.setattr(protocol, "MAX_LINE", 1 << 20)
    with pytest.raises(LinkError, match="evil sent a line longer than 1 MiB"):
        connect(agent_script([], {}, flood=3 << 20))


@pytest.mark.parametrize("raw, words", [
    ("not json at all\n", "not JSON"),
    ('{"type": "hello", "coremap": NaN}\n', "not JSON"),
    ('[1, 2, 3]\n', "not a JSON object"),
    ('{"type": "result"}\n', "without a valid request id"),
])
def test_garbage_before_the_hello_is_one_line(raw, words):
    with pytest.raises(LinkError, match=words) as e:
        connect(agent_script([raw], {}, None))
    assert "\n" not in str(e.value)


def test_a_silent_agent_is_given_up_within_its_time():
    with pytest.raises(LinkError, match=r"evil: no answer within 0\.3 s"):
        connect("import time; time.sleep(30)", handshake_timeout=0.3)


def test_a_state_that_is_not_a_state_is_refused():
    bad = {"$c": "MachineState", "f": [1, {"$c": "Popen", "f": [["rm", "-rf", "/"]]}]}
    script = agent_script([], {"open": [{"type": "result", "result": {"root_key": "/"}}],
                               "tick": [{"type": "result", "result": {"state": bad}}]})
    s = RemoteSampler(HOST, connect=lambda h: connect(script))
    with pytest.raises(LinkError, match=r"evil sent a state coremap cannot use \(MachineState.generation|"
                                        r"evil sent a state coremap cannot use"):
        s.tick()
    s.close()


def test_errors_and_probe_lines_from_a_server_are_made_safe():
    lines = [{"type": "event", "event": {"line": {"type": "hello", "cpu": 1}}},
             {"type": "event", "event": {"line": {"type": "interval", "buckets": [[5, 1, "x"]]}}},
             {"type": "event", "event": {"line": {"type": "interval", "elapsed_ns": -5}}},
             {"type": "event", "event": {"line": [1, 2]}},
             {"type": "error", "message": "CPU 1\x1b[2J is \x07 busy\nforged line"}]
    client = connect(agent_script([], {"probe": lines}))
    try:
        run = RemoteProbeRun(client, "jitter", ["--cpu", "1"])
        assert run.wait(10) == 2
        kinds = [line["type"] for line in run.lines]
        assert kinds[0] == "hello" and kinds[1:4] == ["log", "log", "log"] and kinds[-1] == "error"
        assert all("cannot use" in line["text"] for line in run.lines[1:4])
        msg = run.failure("jitter CPU 1")
        assert msg.startswith("evil: ") and "\x1b" not in msg and "\n" not in msg and "\x07" not in msg
        with pytest.raises(AgentError) as e:
            client.call("probe", timeout=5)
        assert str(e.value) == "evil: CPU 1\\x1b[2J is \\x07 busy\\nforged line"
    finally:
        client.close()


def test_a_forwarded_commands_output_is_printed_with_escapes_escaped():
    from app.cli.host import forward
    events = [{"type": "event", "event": {"out": "ok \x1b]0;pwned\x07 line\n\ttab kept\n"}},
              {"type": "event", "event": {"err": "coremap: thread 5 \x1b[31mgone\nsecond"}},
              {"type": "result", "result": {"rc": 1}}]
    client = connect(agent_script([], {"run": events}))
    out, err = io.StringIO(), io.StringIO()
    try:
        rc = forward(client, HOST, ["threads"], out, err)
    finally:
        client.close()
    assert rc == 1
    assert out.getvalue() == "ok \\x1b]0;pwned\\x07 line\n\ttab kept\n"
    assert err.getvalue() == "coremap: evil: thread 5 \\x1b[31mgone\ncoremap: evil: second\n"


def test_a_status_that_is_not_a_number_is_a_failure():
    from app.cli.host import forward
    client = connect(agent_script([], {"run": [{"type": "result", "result": {"rc": "0; rm -rf /"}}]}))
    try:
        assert forward(client, HOST, ["topology"], io.StringIO(), io.StringIO()) == 1
    finally:
        client.close()


def test_json_in_requests_never_carries_nan():
    client = connect(agent_script([], {}))
    try:
        with pytest.raises(ValueError):
            client.call("tick", interval=float("nan"))
        assert client.alive
    finally:
        client.close()
    assert json.loads(protocol.request(1, "tick", interval=1.5)) == {"id": 1, "op": "tick", "interval": 1.5}


# -- issue 24: a remote that lies or stalls, with every read under a deadline and memory bounded ---------------
def _lying_state(change) -> dict:
    """A real state of the sno capture as its agent sends it, with `change` made to it first."""
    from dataclasses import replace

    from app.remote.codec import StateSender
    from tests.states import first_state
    state = first_state("sno")
    return StateSender().form(change(state, replace))       # agent_script encodes it


def _first_cpu(s, replace):
    cpus = list(s.topology.cpus)
    cpus[0] = replace(cpus[0], id=4_000_000_000)
    return replace(s, topology=replace(s.topology, cpus=tuple(cpus)))


def _negative_count(s, replace):
    rows = list(s.sample.interrupts.rows)
    rows[0] = replace(rows[0], counts=(-5,) + rows[0].counts[1:])
    return replace(s, sample=replace(s.sample, interrupts=replace(s.sample.interrupts, rows=tuple(rows))))


def _too_many_rows(s, replace):
    # One row 70,000 times: the agent's encoder sends it once and then 69,999 references to it, which the
    # receiver must count as rows all the same. 70,000 distinct rows (10 MB) took 10 s to make, send and
    # decode, for the same refusal.
    rows = (s.sample.interrupts.rows[0],) * 70_000
    return replace(s, sample=replace(s.sample, interrupts=replace(s.sample.interrupts, rows=rows)))


@pytest.mark.parametrize("change, words", [
    (_first_cpu, "Cpu: id: expected int <= 65535"),
    (_negative_count, "InterruptRow: counts[0]: expected int >= 0"),
    (_too_many_rows, "InterruptTable: rows: expected array of length <= 65536"),
], ids=["cpu-id", "negative-count", "rows"])
def test_a_state_that_lies_is_refused_in_one_line(change, words):
    script = agent_script([], {"open": [{"type": "result", "result": {"root_key": "/"}}],
                               "tick": [{"type": "result", "result": {"state": _lying_state(change)}}]})
    s = RemoteSampler(HOST, connect=lambda h: connect(script))
    with pytest.raises(LinkError, match="evil sent a state coremap cannot use") as e:
        s.tick()
    s.close()
    assert words in str(e.value) and "\n" not in str(e.value)


def test_an_agent_that_stops_answering_after_its_hello_is_given_up(monkeypatch):
    from app.cli.host import forward
    from app.remote import client as client_mod
    monkeypatch.setattr(client_mod, "SILENCE_S", 0.2)
    monkeypatch.setattr(client_mod, "CALL_TIMEOUT", 0.2)
    # It reads every request and answers none; it ends when its stdin does, as an agent does (one that
    # slept through it cost the test close()'s 1 s wait for the agent to end, which is not checked here).
    script = agent_script([], {}).replace("for line in sys.stdin.buffer:", "for line in sys.stdin.buffer:\n    continue\nfor _ in ():")
    client = connect(script)
    t0 = time.monotonic()
    try:
        with pytest.raises(LinkError, match="evil: the agent stopped answering"):
            forward(client, HOST, ["threads"], io.StringIO(), io.StringIO())
    finally:
        client.close()
    assert time.monotonic() - t0 < 30


def test_a_silent_server_is_said_within_its_first_line_time(monkeypatch):
    from app.remote import client as client_mod
    monkeypatch.setattr(client_mod, "FIRST_LINE_S", 0.2)
    t0 = time.monotonic()
    with pytest.raises(LinkError, match="evil: no answer within"):
        AgentClient.connect(HOST, transport=ScriptTransport("import time; time.sleep(60)", connect_timeout=0.2))
    # ssh's connect timeout (set short here: issue 31, no test waits out a real one) and FIRST_LINE_S; the
    # whole handshake's (1 + HANDSHAKE_S) before.
    assert time.monotonic() - t0 < 10


def test_a_silent_host_is_said_within_15_s_by_default():
    # Issue 32: a silent server, or an agent silent after its hello, was said after 30 s. The path that says
    # it is tested above with short times; these are the defaults that path runs with.
    from app.remote import client as client_mod
    from app.remote.transport import CONNECT_TIMEOUT
    assert CONNECT_TIMEOUT + client_mod.FIRST_LINE_S <= 15
    assert client_mod.CALL_TIMEOUT <= 15


def test_endless_boot_lines_end_the_connection():
    flood = "import sys\nsys.stdin.buffer.readline()\nwhile True:\n    sys.stdout.buffer.write(b'{\"type\": \"boot\"}\\n')\n"
    t0 = time.monotonic()
    with pytest.raises(LinkError, match="evil sent more than 16 lines before its hello"):
        connect(flood)
    assert time.monotonic() - t0 < 10


def test_a_reply_that_would_fill_memory_is_refused():
    """One 63 MiB line of `[{},{},...]` took 1.6 GB a connection, ~18 GB for a fleet's eight."""
    script = f"""
import json, sys
sys.stdin.buffer.readline()
out = sys.stdout.buffer
out.write((json.dumps({HELLO!r}) + "\\n").encode()); out.flush()
for line in sys.stdin.buffer:
    rid = json.loads(line)["id"]
    out.write(b'{{"id": %d, "type": "result", "result": [' % rid + b"{{}}," * (21 << 20) + b'{{}}]}}\\n'); out.flush()
"""
    client = connect(script)
    try:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(LinkError, match="not a message .*would take about"):
            client.call("facts", timeout=60)
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 600 * 1024   # KiB
    finally:
        client.close()


def _probe_agent(lines: int, line: dict, end: bool) -> str:
    """An agent whose probe sends `lines` copies of `line`, then ends (or never does); it answers every
    other request (a cancel) at once."""
    return f"""
import json, sys, threading
sys.stdin.buffer.readline()
out = sys.stdout.buffer
lock = threading.Lock()
def send(m):
    with lock:
        out.write((json.dumps(m) + "\\n").encode()); out.flush()
send({HELLO!r})
def probe(rid):
    for _ in range({lines}):
        send({{"id": rid, "type": "event", "event": {{"line": {line!r}}}}})
    if {end!r}:
        send({{"id": rid, "type": "result", "result": {{"rc": 0}}}})
for raw in sys.stdin.buffer:
    req = json.loads(raw)
    if req["op"] == "probe":
        threading.Thread(target=probe, args=(req["id"],), daemon=True).start()
    else:
        send({{"id": req["id"], "type": "result", "result": False}})
"""


def test_a_probe_that_never_ends_is_stopped_after_its_time(monkeypatch):
    from app.remote import probe_runs
    monkeypatch.setattr(probe_runs, "PROBE_GRACE_S", 0.2)
    monkeypatch.setattr(probe_runs, "CANCEL_WAIT_S", 0.2)     # the agent never answers the cancel either
    client = connect(_probe_agent(1, {"type": "hello", "cpu": 1}, end=False))
    try:
        run = RemoteProbeRun(client, "jitter", ["--cpu", "1", "--seconds", "0.2"])
        t0 = time.monotonic()
        assert run.wait() != 0
        assert time.monotonic() - t0 < 20
        assert "the probe did not end within the 0.4 s it may take" in run.failure("jitter CPU 1")
    finally:
        client.close()


def test_a_probe_past_the_time_its_hello_named_is_stopped_then(monkeypatch):
    # The build allowance (PROBE_GRACE_S, 120 s) bounds a run until its hello; after it, the time the
    # probe said it takes and OVERRUN_GRACE_S (issue 32: a probe that never ends, said within 15 s).
    from app.remote import probe_runs
    from probes import runner
    monkeypatch.setattr(runner, "OVERRUN_GRACE_S", 0.4)      # 0.1 * 1.1 + 0.4: said as "1 s"
    monkeypatch.setattr(probe_runs, "CANCEL_WAIT_S", 0.2)     # this agent never ends the run on a cancel
    client = connect(_probe_agent(1, {"type": "hello", "cpu": 1, "expect_s": 0.1}, end=False))
    try:
        run = RemoteProbeRun(client, "jitter", ["--cpu", "1", "--seconds", "0.1"])
        t0 = time.monotonic()
        assert run.wait() != 0
        assert time.monotonic() - t0 < 10
        assert run.failure("jitter CPU 1").startswith("evil: the probe did not end within 1 s (it said it takes 0.1 s)")
    finally:
        client.close()


def test_a_probe_flood_is_bounded_and_said_once(monkeypatch):
    """20,000 interval lines of ~260 KB took 5.4 GB with --hlog; a run now keeps MAX_RUN_VALUES values."""
    from app.remote import probe_runs
    monkeypatch.setattr(probe_runs, "MAX_RUN_VALUES", 200_000)
    line = {"type": "interval", "elapsed_ns": 1, "buckets": [[i, i + 1, 1] for i in range(0, 20_000, 2)]}
    # 40 lines of 40,004 values: MAX_RUN_VALUES is passed at the fifth, so a run that kept them all fails
    # below; 200 only made the agent send, and this side read, 40 MB more.
    client = connect(_probe_agent(40, line, end=True))
    try:
        run = RemoteProbeRun(client, "jitter", ["--cpu", "1", "--seconds", "1"])
        assert run.wait() == 2
        assert run.failure("jitter CPU 1") == ("evil sent more probe data than coremap keeps for one run "
                                               "(200,000 values); the run was stopped")
        assert sum(1 for x in run.lines if x["type"] == "interval") < 10
    finally:
        client.close()


def test_an_empty_host_is_refused_not_this_machine(capsys):
    # The first as a child (the process path), the others in this process (the same status and lines).
    from tests.hostile.conftest import run_cli, run_main
    for run, args in ((run_cli, ["--host", "", "topology"]), (partial(run_main, capsys), ["--host=", "threads"]),
                      (partial(run_main, capsys), ["--host", " ", "irqs"])):
        r = run(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no host given" in r.stderr, r
        assert r.stdout == ""
