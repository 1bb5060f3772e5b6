"""A server is not trusted (issue 10's standards, for issue 15): an "agent" that lies — too long a line,
not JSON, another version, silence, a state that is not a state, probe lines that are not probe lines,
sentences and output with terminal escapes — ends in one line or an escaped one, never a hang, a crash,
or an escape reaching the terminal. The agents here are scripts run in place of ssh."""
from __future__ import annotations

import io
import json
import sys

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

    def __init__(self, script: str):
        super().__init__(HOST, command=["true"])
        self.script = script

    def argv(self, remote_command: str) -> list[str]:
        return [sys.executable, "-c", self.script]


def agent_script(before: list[str], replies: dict[str, list[dict]], hello: dict | None = HELLO,
                 flood: int = 0) -> str:
    """A fake agent: reads the boot line, writes `flood` bytes with no newline, `before` (raw lines) and
    the hello, then answers each op with its canned messages (the request id filled in)."""
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
replies = {replies!r}
for line in sys.stdin.buffer:
    req = json.loads(line)
    for msg in replies.get(req.get("op"), [{{"type": "result", "result": None}}]):
        m = dict(msg, id=req["id"])
        out.write((json.dumps(m) + "\\n").encode()); out.flush()
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
    with pytest.raises(LinkError, match="evil: no answer within 1 s"):
        connect("import time; time.sleep(30)", handshake_timeout=1)


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
