"""The wire's framing, the agent's hello, what ssh's failures mean, and the agent itself run from the
shipped zip with nothing but the standard library."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import app
from app.remote import protocol
from app.remote.client import VersionMismatch, check_hello
from app.remote.codec import StateReceiver
from app.remote.hosts import HostSpec
from app.remote.ship import agent_zip, boot_line, remote_command
from app.remote.transport import (Disconnected, HostKeyUnknown, HostRefused, HostUnreachable, LinkError,
                                  LoginRefused, SshTransport)


def test_lines_are_bounded_and_json_constants_refused():
    assert protocol.read_line(io.BytesIO(b'{"a":1}\nrest'), 100, "x") == b'{"a":1}'
    with pytest.raises(protocol.LineTooLong, match="x sent a line longer than"):
        protocol.read_line(io.BytesIO(b"a" * 200), 100, "x")
    for raw in (b'{"v": NaN}', b'{"v": Infinity}', b"[1]", b"nope", b"[" * 100000):
        with pytest.raises(protocol.ProtocolError):
            protocol.loads(raw, "x")
    with pytest.raises(ValueError):
        protocol.dumps({"v": float("nan")})


@pytest.mark.parametrize("msg, words", [
    ({"type": "who"}, "unknown type"),
    ({"type": "result"}, "without a valid request id"),
    ({"type": "result", "id": True}, "without a valid request id"),
    ({"type": "error", "id": 3}, "without a message"),
    ({"type": "event", "id": 3, "event": [1]}, "not an object"),
])
def test_messages_are_checked(msg, words):
    with pytest.raises(protocol.ProtocolError, match=words):
        protocol.check_message(msg, "s1")


def test_another_version_is_refused_with_one_line_naming_both():
    h = HostSpec("s1")
    with pytest.raises(VersionMismatch) as e:
        check_hello(h, {"type": "hello", "coremap": "0.0.9", "protocol": protocol.PROTOCOL})
    assert str(e.value).startswith(f"s1 runs coremap 0.0.9 (protocol {protocol.PROTOCOL}); this is coremap "
                                   f"{app.__version__} (protocol {protocol.PROTOCOL}): install coremap")
    with pytest.raises(VersionMismatch):
        check_hello(h, {"type": "hello", "coremap": app.__version__, "protocol": protocol.PROTOCOL + 1})
    with pytest.raises(LinkError, match="not coremap's agent"):
        check_hello(h, {"type": "hello"})
    ok = check_hello(h, {"type": "hello", "coremap": app.__version__, "protocol": protocol.PROTOCOL,
                         "host": "n\x1b[31m7", "pid": -4, "user": 5})
    assert ok["host"] == "n\\x1b[31m7" and ok["pid"] is None and ok["user"] is None


# Real OpenSSH 9 messages (exit status 255).
@pytest.mark.parametrize("stderr, cls, words", [
    ("ssh: connect to host 10.1.1.1 port 22: Connection refused", HostRefused, "was refused on port 2222"),
    ("root@10.1.1.1: Permission denied (publickey,password).", LoginRefused,
     "(tried: publickey,password); coremap never asks for a password (ssh batch mode): set up a key "
     "(ssh-copy-id -p 2222 n7)"),
    ("No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\n"
     "Host key verification failed.", HostKeyUnknown, "accept it once with `ssh -p 2222 n7`"),
    ("@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n", HostKeyUnknown, "CHANGED"),
    ("ssh: Could not resolve hostname nodex: Name or service not known", HostUnreachable, "no such host name"),
    ("ssh: connect to host 10.9.9.9 port 22: No route to host", HostUnreachable, "unreachable (No route to host)"),
    ("ssh: connect to host 10.9.9.9 port 22: Connection timed out", HostUnreachable, "no answer within 10 s"),
    ("kex_exchange_identification: read: Connection reset by peer\x1b[2J", LinkError, "\\x1b[2J"),
])
def test_ssh_failures_are_one_line_each(stderr, cls, words):
    t = SshTransport(HostSpec("n7", None, 2222), command=["ssh"])
    err = t.failure(255, stderr, established=False)
    assert type(err) is cls
    assert str(err).startswith("n7:2222: ") and words in str(err) and "\n" not in str(err)
    assert "\x1b" not in str(err)


def test_an_established_link_that_ends_is_a_disconnection():
    t = SshTransport(HostSpec("n7"), command=["ssh"])
    err = t.failure(255, "Connection to 10.0.0.7 closed by remote host.", established=True)
    assert type(err) is Disconnected and str(err) == "n7: the connection ended (Connection to 10.0.0.7 closed by remote host.)"


def test_the_ssh_command_is_batch_mode_multiplexed_and_ends_with_the_destination(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    t = SshTransport(HostSpec("-not-an-option", "u", 22), command=["ssh", "-F", "/dev/null"])
    argv = t.argv("python3 -c x")
    assert argv[:4] == ["ssh", "-F", "/dev/null", "-T"]
    assert "BatchMode=yes" in argv and f"ControlPath={tmp_path}/coremap/{t.control_key()}" in argv
    assert argv[-3:] == ["--", "-not-an-option", "python3 -c x"]
    assert (tmp_path / "coremap").stat().st_mode & 0o777 == 0o700
    assert remote_command() == "python3 -c 'import sys;exec(sys.stdin.buffer.readline())'"


def test_a_control_folder_open_to_others_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "coremap").mkdir(mode=0o777)
    os.chmod(tmp_path / "coremap", 0o777)
    with pytest.raises(LinkError, match="not a private folder"):
        SshTransport(HostSpec("n"), command=["ssh", "-F", "/dev/null"]).argv("x")


def test_the_shipped_agent_is_the_same_bytes_each_time_and_holds_no_qt():
    data, digest = agent_zip()
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "app/cli/agent.py" in names and "app/remote/bootstrap.py" in names
    # every C file the extension is built from (probes/build.py: the far side builds the same set)
    from probes.build import HEADER, native_sources
    root = Path(app.__file__).resolve().parents[1]
    assert {p.relative_to(root).as_posix() for p in native_sources(root)} | {f"probes/{HEADER}"} <= set(names)
    assert not any(n.startswith("widgets/") or "__pycache__" in n for n in names)
    agent_zip.cache_clear()
    assert agent_zip()[1] == digest
    line = boot_line("ship", digest)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and len(line) < 16 * 1024


def test_the_shipped_agent_needs_only_the_standard_library(tmp_path):
    """The zip unpacked and run by a Python without site-packages (-S -I): hello, open, a tick."""
    zipfile.ZipFile(io.BytesIO(agent_zip()[0])).extractall(tmp_path / "agent")
    code = (f"import sys, runpy; sys.path.insert(0, {str(tmp_path / 'agent')!r}); sys.argv = ['coremap', 'agent']; "
            "runpy.run_module('app', run_name='__main__')")
    requests = b"".join([protocol.request(1, "open", interval=0.5), protocol.request(2, "tick"),
                         protocol.request(3, "facts")])
    env = {"PATH": "/usr/bin:/bin", "COREMAP_STATE_DIR": str(tmp_path / "state")}
    r = subprocess.run([sys.executable, "-S", "-I", "-c", code], input=requests, capture_output=True,
                       timeout=60, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    msgs = [json.loads(line) for line in r.stdout.splitlines()]
    assert msgs[0]["type"] == "hello" and msgs[0]["coremap"] == app.__version__ and msgs[0]["agent"] == "installed"
    by_id = {m["id"]: m for m in msgs[1:]}
    assert by_id[1]["result"]["live"] is True
    state = StateReceiver().apply(by_id[2]["result"]["state"])
    assert state.topology.online and state.sample.tasks is not None
    assert dict(by_id[3]["result"])["Kernel"] == os.uname().release
    assert "hdrh" not in r.stderr.decode() and "widgets" not in r.stderr.decode()


def test_a_server_without_a_compiler_says_so_and_nothing_else_stops(tmp_path, monkeypatch):
    from app.remote import server
    src = tmp_path / "probes" / "_native.c"
    src.parent.mkdir()
    src.write_text("/* the shipped source */")
    monkeypatch.setattr(server, "_compiler", lambda: None)
    why = server._cannot_build(src)
    assert why == (f"{os.uname().nodename} has no C compiler, so the probes' timing loops cannot be built there; "
                   "install gcc there (Debian/Ubuntu: apt-get install gcc python3-dev). Sampling and pins work "
                   "without it")
    monkeypatch.setattr(server, "_compiler", lambda: "/usr/bin/cc")
    monkeypatch.setattr(server.sysconfig, "get_paths", lambda: {"include": str(tmp_path / "no-headers")})
    assert "has no Python headers" in server._cannot_build(src)
