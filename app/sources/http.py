"""One bounded HTTP JSON request to a metrics engine (pmproxy, Prometheus), with the standard library.

Every request has three limits, so a server that is slow, never ends its answer or sends far too much
costs one clear line and nothing else (issue 21, "Bad input"):
- `timeout`: each connect and each read of the socket (urllib's socket timeout);
- `deadline`: the whole request, checked between the chunks of the body, so a server dripping one byte a
  second (each read within `timeout`) is still cut off;
- `max_bytes`: the body; past it the request stops reading and says so.

Credentials and TLS come from the user's config file, never from the command line (where `ps` and
shell history would show them): `~/.config/coremap/sources.ini` (or $COREMAP_SOURCES, or --source-config),
one section per base URL:

    [https://prometheus.example.com:9090]
    bearer_token_file = /etc/coremap/prometheus.token
    ca_file = /etc/ssl/private-ca.pem

A token file is read on each client's creation and sent as `Authorization: Bearer ...` to that base URL
only; it is never printed, and an error line never quotes it.
"""
from __future__ import annotations

import configparser
import contextlib
import http.client
import os
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from app.errors import CoremapError, excerpt
from app.inputs import InputFileError, read_input
from app.parse.json_text import JsonInputError, load_json

TIMEOUT = 10.0              # seconds per connect or socket read
DEADLINE = 30.0             # seconds for a whole request
MAX_BYTES = 64 * 1024 ** 2  # one answer; 1,000 hosts' per-CPU rates are ~5 MB of Prometheus JSON
CHUNK = 256 * 1024
MAX_TOKEN_BYTES = 16 * 1024


class SourceError(CoremapError):
    """A metrics source that cannot be read: unreachable, not the engine named, or an answer out of bounds."""


@dataclass(frozen=True)
class SourceAuth:
    """What the user's config says for one base URL: a bearer token (read from its file) and a CA file."""
    token: str | None = None
    ca_file: str | None = None

    def __repr__(self) -> str:          # never the token, even in a traceback
        return f"SourceAuth(token={'set' if self.token else None}, ca_file={self.ca_file!r})"


def config_path(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    if os.environ.get("COREMAP_SOURCES"):
        return Path(os.environ["COREMAP_SOURCES"])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "coremap" / "sources.ini"


def auth_for(url: str, explicit_config: str | None = None) -> SourceAuth:
    """The token and CA file the config gives the longest section that `url` starts with."""
    path = config_path(explicit_config)
    if not path.exists():
        if explicit_config:
            raise SourceError(f"--source-config {explicit_config}: no such file; give the INI file that names "
                              "the token and CA files")
        return SourceAuth()
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError) as e:
        raise SourceError(f"{path}: not a readable INI file ({type(e).__name__}); fix or remove it") from None
    matches = [s for s in parser.sections() if url.rstrip("/").startswith(s.rstrip("/"))]
    if not matches:
        return SourceAuth()
    sec = parser[max(matches, key=len)]
    token = None
    if sec.get("bearer_token_file"):
        token = _read_token(Path(sec["bearer_token_file"]).expanduser(), path)
    ca = sec.get("ca_file")
    if ca and not Path(ca).expanduser().is_file():
        raise SourceError(f"{path}: ca_file {ca} is not a file; name the PEM file of the CA that signed the server")
    return SourceAuth(token, str(Path(ca).expanduser()) if ca else None)


def _read_token(path: Path, config: Path) -> str:
    # The one reader of a file a user names (app/inputs.py): a regular file, bounded, never a FIFO's wait.
    try:
        data = read_input(path, what=f"{config}: bearer_token_file", limit=MAX_TOKEN_BYTES,
                          hint="name the file that holds the token alone")
    except InputFileError as e:
        raise SourceError(str(e)) from None
    token = data.decode("utf-8", "replace").strip()
    if not token or any(c in token for c in "\r\n"):
        raise SourceError(f"{config}: bearer_token_file {path} must hold one token on one line")
    return token


class JsonClient:
    """GET/POST of JSON to one base URL within the limits above. Thread-safe: it holds no connection."""

    def __init__(self, base_url: str, *, what: str, auth: SourceAuth | None = None, timeout: float = TIMEOUT,
                 deadline: float = DEADLINE, max_bytes: int = MAX_BYTES):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceError(f"{excerpt(base_url, 80)} is not an http:// or https:// URL; give the {what} "
                              f"address, e.g. http://server:port")
        self.base = base_url.rstrip("/")
        self.what = what
        self.auth = auth or SourceAuth()
        self.timeout, self.deadline, self.max_bytes = timeout, deadline, max_bytes
        self._context = None
        if parts.scheme == "https":
            self._context = ssl.create_default_context(cafile=self.auth.ca_file)

    def get(self, path: str, params: dict | list | None = None) -> object:
        query = urllib.parse.urlencode(params or {}, doseq=True)
        return self._request("GET", path + (f"?{query}" if query else ""), None)

    def post(self, path: str, params: dict | list) -> object:
        return self._request("POST", path, urllib.parse.urlencode(params, doseq=True).encode())

    def _request(self, method: str, path: str, body: bytes | None) -> object:
        # http.client rather than urllib: urllib always sends "Connection: close", and pmproxy 6.0 then
        # closes the socket after the first chunk of a longer answer (curl, which does not send it, gets all).
        headers = {"Accept": "application/json", "User-Agent": "coremap"}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if self.auth.token:
            headers["Authorization"] = f"Bearer {self.auth.token}"
        parts = urllib.parse.urlsplit(self.base)
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=self.timeout, context=self._context)
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
        where = f"{self.what} at {self.base}"
        t0 = time.monotonic()
        # The deadline is kept by a timer that shuts the socket: a read blocked inside http.client (a header
        # line, a chunk size, a body dripping a byte at a time, each within the socket timeout) then returns
        # at once, where a check between reads would wait for the read to finish.
        expired = threading.Event()

        def cut() -> None:
            expired.set()
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        watchdog = threading.Timer(self.deadline, cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request(method, parts.path + path, body=body, headers=headers)
            resp = conn.getresponse()
            data = self._body(resp, t0, where)
            ctype, status = resp.getheader("Content-Type", ""), resp.status
        except (OSError, ssl.SSLError, http.client.HTTPException, SourceError) as e:
            if expired.is_set():
                raise SourceError(f"{where}: the answer took over {self.deadline:g} s and was cut off; ask for "
                                  "fewer hosts or series, or check the server's load") from None
            if isinstance(e, SourceError):
                raise
            if isinstance(e, TimeoutError) or "timed out" in str(e):
                raise SourceError(f"{where}: no answer within {self.timeout:g} s; check that the server is up "
                                  "and reachable") from None
            raise SourceError(f"{where} cannot be reached ({_reason(e)}); check the URL and that the "
                              "server runs") from None
        finally:
            watchdog.cancel()
            conn.close()
        if expired.is_set():
            raise SourceError(f"{where}: the answer took over {self.deadline:g} s and was cut off; ask for "
                              "fewer hosts or series, or check the server's load")
        if status in (401, 403):
            raise SourceError(f"{where} refused coremap (HTTP {status}); give a bearer_token_file for it in "
                              f"{config_path()}")
        return self._decode(data, ctype or "", status, where)

    def _body(self, resp, t0: float, where: str) -> bytes:
        chunks: list[bytes] = []
        got = [0]

        def keep(chunk: bytes) -> None:
            if time.monotonic() - t0 > self.deadline:
                raise SourceError(f"{where}: the answer took over {self.deadline:g} s and was cut off; ask for "
                                  "fewer hosts or series, or check the server's load")
            got[0] += len(chunk)
            if got[0] > self.max_bytes:
                raise SourceError(f"{where}: the answer is over {self.max_bytes // 1024 ** 2} MiB and was cut "
                                  "off; ask for fewer hosts (--match) or series")
            chunks.append(chunk)
        try:
            if resp.chunked and resp.fp is not None:
                _dechunk(resp.fp, keep)
            else:
                # read1: what one receive brings, so the budget is checked as the bytes come
                while chunk := resp.read1(CHUNK):
                    keep(chunk)
        except (TimeoutError, OSError, ValueError, http.client.HTTPException) as e:
            raise SourceError(f"{where}: the answer stalled or broke off ({_reason(e)}); check the server") from None
        return b"".join(chunks)

    def _decode(self, data: bytes, ctype: str, status: int, where: str) -> object:
        try:
            doc = load_json(data, what=where, limit=max(len(data), 1))      # the size: bounded as it arrived
        except JsonInputError:
            kind = ctype.split(";")[0].strip() or "no content type"
            raise SourceError(f"{where} answered {kind} (HTTP {status}), not JSON, so it is not a {self.what}; "
                              "give the address of its HTTP API") from None
        if status >= 400 and not isinstance(doc, dict):
            raise SourceError(f"{where} answered HTTP {status}")
        return doc


def _dechunk(fp, keep) -> None:
    """HTTP/1.1 chunked transfer coding (RFC 9112, 7.1), read here rather than by http.client: pmproxy 6.0
    puts an empty line before its last chunk ("...}\r\n\r\n0\r\n\r\n"), which http.client takes for a
    broken chunk size and curl reads past. An empty size line is skipped; anything else that is not a
    size raises ValueError. Each piece goes to `keep`, which enforces the deadline and the byte budget."""
    while True:
        line = fp.readline(1024)
        if not line:
            raise ValueError("the connection closed inside the answer")
        if not line.strip():
            continue
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            return
        while size:
            piece = fp.read(min(size, CHUNK))
            if not piece:
                raise ValueError("the connection closed inside a chunk")
            keep(piece)
            size -= len(piece)
        fp.readline(8)          # the CRLF after the chunk's data


def _reason(e) -> str:
    text = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return excerpt(text, 80).strip("'\"")
