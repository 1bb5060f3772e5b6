"""Credentials of the metrics sources (issue 32, "Credentials sent where they do not belong"): a section of
sources.ini covers a URL of the same scheme, host and port only; sources.ini and its token and CA files are
believed only when they are this user's (or root's) and no one else may write them; a token crosses a wire
in clear text only where its section allows it. Each refusal is one line that never quotes the token."""
from __future__ import annotations

import os
import time

import pytest

from app.sources.http import SourceError, auth_for
from app.sources.prometheus import Prometheus
from tests.hostile.test_sources import buildinfo, send, serve  # noqa: F401 (serve: the fixture)

TOKEN = "coremap-test-token-32c9"
NOBODY = 65534


class _Guarded:
    """A Prometheus that records the Authorization header of every request and wants TOKEN."""

    def __init__(self):
        self.seen: list[str | None] = []

    def __call__(self, h):
        self.seen.append(h.headers.get("Authorization"))
        if h.headers.get("Authorization") != f"Bearer {TOKEN}":
            send(h, b'{"status": "error", "error": "unauthorized"}', status=401)
        else:
            buildinfo(h)


def _config(tmp_path, sections: dict[str, str]):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    config = tmp_path / "sources.ini"
    config.write_text("".join(f"[{name}]\nbearer_token_file = {token}\n{extra}\n" for name, extra in sections.items()))
    config.chmod(0o600)
    return config, token


def test_a_section_for_one_host_gives_no_token_to_a_host_whose_address_starts_the_same(serve, tmp_path):
    guarded = _Guarded()
    other = serve({"*": guarded}, host="127.0.0.12")       # all of 127/8 is this machine
    port = other.httpd.server_address[1]
    config, _ = _config(tmp_path, {"http://127.0.0.1": "", f"http://127.0.0.1:{port}": ""})
    # A string prefix: "http://127.0.0.12:PORT" starts with "http://127.0.0.1", and got the token.
    with pytest.raises(SourceError, match="HTTP 401"):
        Prometheus(other.url, auth=auth_for(other.url, str(config))).check()
    assert guarded.seen == [None]
    config, _ = _config(tmp_path, {other.url: ""})
    assert Prometheus(other.url, auth=auth_for(other.url + "/", str(config))).check() == "2.42.0"
    assert guarded.seen == [None, f"Bearer {TOKEN}"]


@pytest.mark.parametrize("section, url", [
    ("http://127.0.0.1:4000", "http://127.0.0.1:40000"),      # a port that starts the same
    ("http://127.0.0.1:4000", "http://127.0.0.1.evil.example:4000"),
    ("https://prom.example", "http://prom.example"),            # another scheme
    ("https://prom.example", "https://prom.example.evil.example"),
    ("https://prom.example/api", "https://prom.example/api2"),  # a path that is not a folder of the section's
    ("http://localhost:9090", "http://127.0.0.1:9090"),         # another name is another host
])
def test_a_section_covers_the_same_scheme_host_and_port_only(tmp_path, section, url):
    config, _ = _config(tmp_path, {section: "allow_plain_http = yes"})
    assert auth_for(url, str(config)).token is None


@pytest.mark.parametrize("section, url", [
    ("http://127.0.0.1:4000", "http://127.0.0.1:4000/"),
    ("HTTPS://Prom.Example:443/", "https://prom.example/"),      # case and the default port: the same origin
    ("https://prom.example/api", "https://prom.example/api/v1"),
    ("http://[::1]:9090", "http://[0:0:0:0:0:0:0:1]:9090"),
])
def test_the_same_origin_spelled_otherwise_is_covered(tmp_path, section, url):
    config, _ = _config(tmp_path, {section: ""})
    assert auth_for(url, str(config)).token == TOKEN


def _refused(config, url="http://127.0.0.1:9090", explicit=True) -> str:
    t0 = time.monotonic()
    with pytest.raises(SourceError) as e:
        auth_for(url, str(config) if explicit else None)
    assert time.monotonic() - t0 < 2
    line = str(e.value)
    assert "\n" not in line and TOKEN not in line
    return line


def test_a_sources_ini_others_may_write_is_refused(tmp_path):
    config, _ = _config(tmp_path, {"http://127.0.0.1:9090": ""})
    config.chmod(0o666)
    assert "others may write it (mode 0666)" in _refused(config)
    config.chmod(0o620)
    assert "others may write it (mode 0620)" in _refused(config)


def test_the_default_sources_ini_others_may_write_is_refused_too(tmp_path, monkeypatch):
    config, _ = _config(tmp_path, {"http://127.0.0.1:9090": ""})
    monkeypatch.setenv("COREMAP_SOURCES", str(config))
    config.chmod(0o646)
    assert "sources.ini" in _refused(config, explicit=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to nobody takes root")
def test_a_sources_ini_of_another_user_naming_a_root_only_file_is_refused(tmp_path):
    config, token = _config(tmp_path, {"http://127.0.0.1:9090": ""})
    os.chown(config, NOBODY, NOBODY)
    assert f"belongs to uid {NOBODY}" in _refused(config)
    os.chown(config, 0, 0)
    os.chown(token, NOBODY, NOBODY)
    assert f"bearer_token_file {token}: is refused: it belongs to uid {NOBODY}" in _refused(config)


def test_a_token_file_that_is_a_link_or_others_may_write_is_refused(tmp_path):
    config, token = _config(tmp_path, {"http://127.0.0.1:9090": ""})
    token.chmod(0o602)
    assert "others may write it (mode 0602)" in _refused(config)
    token.chmod(0o600)
    real = tmp_path / "real-token"
    token.rename(real)
    token.symlink_to(real)
    assert "is a symbolic link, which coremap does not follow here" in _refused(config)


def test_a_ca_file_others_may_write_or_that_is_no_certificate_is_refused(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    ca.chmod(0o600)
    config = tmp_path / "sources.ini"
    config.write_text(f"[https://prom.example]\nca_file = {ca}\n")
    config.chmod(0o600)
    assert "holds no PEM certificate" in _refused(config, "https://prom.example")
    ca.chmod(0o666)
    assert "others may write it" in _refused(config, "https://prom.example")
    ca.unlink()
    os.mkfifo(ca)
    assert "is a pipe, not a file" in _refused(config, "https://prom.example")


def test_a_token_goes_over_plain_http_to_this_machine_only_unless_the_section_says_so(tmp_path):
    config, _ = _config(tmp_path, {"http://192.0.2.7:9090": "", "http://192.0.2.8:9090": "allow_plain_http = yes",
                                   "https://192.0.2.9:9090": "", "http://localhost:9090": ""})
    line = _refused(config, "http://192.0.2.7:9090")
    assert "gives a token for plain http:// to another machine" in line and "allow_plain_http = yes" in line
    assert auth_for("http://192.0.2.8:9090", str(config)).token == TOKEN
    assert auth_for("https://192.0.2.9:9090", str(config)).token == TOKEN
    assert auth_for("http://localhost:9090", str(config)).token == TOKEN


@pytest.mark.parametrize("kind", ["fifo", "zero", "sparse", "folder"])
def test_a_sources_ini_that_is_no_small_regular_file_is_one_line_at_once(tmp_path, kind):
    config = tmp_path / "sources.ini"
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "zero":
        config.symlink_to("/dev/zero")
    elif kind == "sparse":
        with open(config, "wb") as f:
            f.truncate(2 << 30)
        config.chmod(0o600)
    else:
        config.mkdir()
    line = _refused(config)
    assert line.startswith(f"--source-config {config}: ")


def test_a_section_that_is_no_url_is_one_line(tmp_path):
    config, _ = _config(tmp_path, {"http://127.0.0.1:99999": ""})
    assert "section 'http://127.0.0.1:99999': port '99999': out of range" in _refused(config)
