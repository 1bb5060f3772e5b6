"""Hosts as written (`[user@]server[:port]`): what reaches ssh, what is refused, recent hosts, host files."""
from __future__ import annotations

import pytest

from app.remote.hosts import (HostError, HostSpec, parse_host, parse_hosts_text, recent_hosts, remember_host)


@pytest.mark.parametrize("text, spec, shown", [
    ("node7", HostSpec("node7"), "node7"),
    ("root@node7", HostSpec("node7", "root"), "root@node7"),
    ("admin@10.0.0.7:2222", HostSpec("10.0.0.7", "admin", 2222), "admin@10.0.0.7:2222"),
    ("[fe80::1%eth0]:22", HostSpec("fe80::1%eth0", None, 22), "[fe80::1%eth0]:22"),
    ("u@[::1]", HostSpec("::1", "u"), "u@[::1]"),
    ("::1", HostSpec("::1"), "[::1]"),
    ("  lab-node_3.example.org  ", HostSpec("lab-node_3.example.org"), "lab-node_3.example.org"),
])
def test_hosts_parse(text, spec, shown):
    assert parse_host(text) == spec
    assert str(spec) == shown
    assert parse_host(shown) == spec


def test_ssh_args_end_with_the_destination_after_a_double_dash():
    assert HostSpec("n", "u", 2).ssh_args() == ["-l", "u", "-p", "2", "--", "n"]
    assert HostSpec("n").ssh_args() == ["--", "n"]


@pytest.mark.parametrize("text", [
    "", "   ", "-oProxyCommand=touch /tmp/pwned", "node 7", "node7:0", "node7:65536", "node7:22x",
    "node7:", "a'b", "node7;reboot", "@node7", "us er@node7", "[::1", "[::1]x", "[zz::1]:22", "\x1b[31mred",
    "x" * 300, "n\u0663de",
])
def test_what_is_not_a_host_is_one_line(text):
    with pytest.raises(HostError) as e:
        parse_host(text)
    msg = str(e.value)
    assert "\n" not in msg and "\x1b" not in msg and len(msg) < 300
    assert "[user@]server[:port]" in msg or "no host given" in msg


def test_host_files_skip_comments_and_name_a_bad_line():
    assert parse_hosts_text("# rack 3\nnode1\n\nroot@node2:2222  # spare\nnode1\n", what="f") == [
        HostSpec("node1"), HostSpec("node2", "root", 2222)]
    with pytest.raises(HostError, match="f, line 2: "):
        parse_hosts_text("node1\n-oX=y\n", what="f")


def test_recent_hosts_newest_first_and_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path))
    assert recent_hosts() == []
    for i in range(12):
        remember_host(parse_host(f"n{i}"))
    remember_host(parse_host("n3"))
    hosts = recent_hosts()
    assert hosts[0] == "n3" and hosts[1] == "n11" and len(hosts) == 10 and hosts.count("n3") == 1
    (tmp_path / "recent-hosts.json").write_text('["ok", "-bad", 7, "fine@x:22"]')
    assert recent_hosts() == ["ok", "fine@x:22"]
    (tmp_path / "recent-hosts.json").write_text("{not json")
    assert recent_hosts() == []
