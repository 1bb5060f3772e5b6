"""One bounded HTTP JSON request to a metrics engine (pmproxy, Prometheus), with the standard library.

Every request has three limits, so a server that is slow, never ends its answer or sends far too much
costs one clear line and nothing else (issue 21, "Bad input"):
- `timeout`: each connect and each read of the socket (urllib's socket timeout);
- `deadline`: the whole request, checked between the chunks of the body, so a server dripping one byte a
  second (each read within `timeout`) is still cut off;
- `max_bytes`: the body; past it the request stops reading and says so;
- `host_budget(seconds)`: every request made for one host shares one deadline and one byte budget, so
  --timeout bounds a host, not each of its requests (issue 32).
The URL is read by app/parse/url.py, once; a chunk size by the one number parser.

Credentials and TLS come from the user's config file, never from the command line (where `ps` and
shell history would show them): `~/.config/coremap/sources.ini` (or $COREMAP_SOURCES, or --source-config),
one section per base URL:

    [https://prometheus.example.com:9090]
    bearer_token_file = /etc/coremap/prometheus.token
    ca_file = /etc/ssl/private-ca.pem

A section covers a URL of the same scheme, host and port (parsed, never compared as text). sources.ini, a
token file and a CA file are read through the confined reader, and only when they are this user's or
root's and writable by no one else (auth_for). A token is sent as `Authorization: Bearer ...` to the URLs
its section covers only, over plain http only to this machine unless the section allows it; it is never
printed, and an error line never quotes it.
"""
from __future__ import annotations

import configparser
import contextlib
import contextvars
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
from app.inputs import InputFileError, read_input, read_input_text
from app.parse.json_text import JsonInputError, load_json
from app.parse.number import NumberError, parse_int
from app.parse.url import Url, UrlError, parse_url

TIMEOUT = 10.0              # seconds per connect or socket read
DEADLINE = 15.0             # seconds for a whole request, and for one host's requests (host_budget)
MAX_BYTES = 64 * 1024 ** 2  # one answer; 1,000 hosts' per-CPU rates are ~5 MB of Prometheus JSON
MAX_HOST_BYTES = 128 * 1024 ** 2    # every answer for one host (or one batch of hosts) together
CHUNK = 256 * 1024
MAX_TOKEN_BYTES = 16 * 1024
MAX_CONFIG_BYTES = 64 * 1024
MAX_CA_BYTES = 1024 ** 2


class SourceError(CoremapError):
    """A metrics source that cannot be read: unreachable, not the engine named, or an answer out of bounds."""


@dataclass(frozen=True)
class SourceAuth:
    """What the user's config says for one base URL: a bearer token (read from its file) and a CA file."""
    token: str | None = None
    ca_file: str | None = None
    ca_data: str | None = None          # the CA file's PEM text, read once through the confined reader

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
    """The token and CA file sources.ini gives the section that covers `url` (the same scheme, host and
    port, its path a folder of the URL's: app/parse/url.py Url.covers; the longest path wins).

    sources.ini, and every file it names, is read through the confined reader (app/inputs.py): a regular
    file, bounded, this user's or root's and writable by no one else, so a file another user can write
    never decides what coremap reads and sends (issue 32: a world-writable sources.ini had root send a
    root-only file as a token). A token file may not be a link. A token goes over plain http only to this
    machine, unless its section says `allow_plain_http = yes`."""
    try:
        target = parse_url(url, what="source")
    except UrlError as e:
        raise SourceError(str(e)) from None
    path = config_path(explicit_config)
    if not explicit_config and not os.path.lexists(path):
        return SourceAuth()
    what = "--source-config" if explicit_config else "sources.ini"
    try:
        text = read_input_text(path, what=what, limit=MAX_CONFIG_BYTES, trusted=True,
                               hint="give the INI file that names the token and CA files")
    except InputFileError as e:
        raise SourceError(str(e)) from None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as e:
        raise SourceError(f"{path}: not a readable INI file ({type(e).__name__}); fix or remove it") from None
    best: tuple[Url, configparser.SectionProxy] | None = None
    for name in parser.sections():
        try:
            section_url = parse_url(name, what=f"{path}: section")
        except UrlError as e:
            raise SourceError(f"{e}; name each section by its source's URL") from None
        if section_url.covers(target) and (best is None or len(section_url.path) > len(best[0].path)):
            best = section_url, parser[name]
    if best is None:
        return SourceAuth()
    sec = best[1]
    token = None
    if sec.get("bearer_token_file"):
        _check_plain_http(target, sec, path)
        token = _read_token(Path(sec["bearer_token_file"]).expanduser(), path)
    ca = sec.get("ca_file")
    ca_data = _read_ca(Path(ca).expanduser(), path) if ca else None
    return SourceAuth(token, str(Path(ca).expanduser()) if ca else None, ca_data)


def _check_plain_http(target: Url, sec, config: Path) -> None:
    try:
        allowed = sec.getboolean("allow_plain_http", fallback=False)
    except ValueError:
        raise SourceError(f"{config}: [{sec.name}] allow_plain_http must be yes or no") from None
    if target.scheme == "http" and not target.loopback and not allowed:
        raise SourceError(f"{config}: [{sec.name}] gives a token for plain http:// to another machine, where "
                          "anyone on the way can read it; use https://, or add allow_plain_http = yes to the "
                          "section")


def _read_token(path: Path, config: Path) -> str:
    # The one reader of a file a user names (app/inputs.py): a regular file, bounded, never a FIFO's wait,
    # not a link, and nobody else's to change.
    try:
        data = read_input(path, what=f"{config}: bearer_token_file", limit=MAX_TOKEN_BYTES, no_links=True,
                          trusted=True, hint="name the file that holds the token alone")
    except InputFileError as e:
        raise SourceError(str(e)) from None
    token = data.decode("utf-8", "replace").strip()
    if not token or any(not c.isprintable() or c.isspace() for c in token):
        raise SourceError(f"{config}: bearer_token_file {path} must hold one token on one line")
    return token


def _read_ca(path: Path, config: Path) -> str:
    # A CA file others may write would let them choose whom coremap believes: the same reader and checks.
    try:
        text = read_input_text(path, what=f"{config}: ca_file", limit=MAX_CA_BYTES, trusted=True,
                               hint="name the PEM file of the CA that signed the server")
    except InputFileError as e:
        raise SourceError(str(e)) from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise SourceError(f"{config}: ca_file {path} holds no PEM certificate; name the PEM file of the CA "
                          "that signed the server")
    return text


class JsonClient:
    """GET/POST of JSON to one base URL within the limits above. Thread-safe: it holds no connection."""

    def __init__(self, base_url: str, *, what: str, auth: SourceAuth | None = None, timeout: float = TIMEOUT,
                 deadline: float = DEADLINE, max_bytes: int = MAX_BYTES):
        try:
            self.url = parse_url(base_url, what=what)
        except UrlError as e:
            raise SourceError(str(e)) from None
        self.base = self.url.base
        self.what = what
        self.auth = auth or SourceAuth()
        self.timeout, self.deadline, self.max_bytes = timeout, deadline, max_bytes
        self._context = None
        if self.url.scheme == "https":
            try:
                self._context = ssl.create_default_context(cadata=self.auth.ca_data)
            except (ssl.SSLError, ValueError):
                raise SourceError(f"{self.auth.ca_file}: not a CA certificate ssl can load; name the PEM file "
                                  "of the CA that signed the server") from None

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
        u = self.url
        budget = _BUDGET.get()
        deadline = self.deadline if budget is None else min(self.deadline, budget.left())
        where = f"{self.what} at {self.base}"
        # What a cut-off answer is said to have overrun: the host's whole budget when that is what ran out.
        allowed = self.deadline if budget is None or deadline >= self.deadline else budget.seconds
        if deadline <= 0:
            raise SourceError(f"{where}: no answer within the {budget.seconds:g} s given to one host (--timeout); "
                              "check the server's load")
        timeout = min(self.timeout, deadline)
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.host, u.port, timeout=timeout, context=self._context)
        else:
            conn = http.client.HTTPConnection(u.host, u.port, timeout=timeout)
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
        watchdog = threading.Timer(deadline, cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request(method, u.path + path, body=body, headers=headers)
            resp = conn.getresponse()
            data = self._body(resp, t0, deadline, budget, where, allowed)
            ctype, status = resp.getheader("Content-Type", ""), resp.status
        except (OSError, ssl.SSLError, http.client.HTTPException, SourceError) as e:
            timed_out = isinstance(e, TimeoutError) or "timed out" in str(e)
            # The socket's timeout is the deadline's when the deadline is the nearer: whichever of it and
            # the watchdog fires first, the deadline ran out (a loaded machine said "no answer within
            # 0.594984 s" where the host's budget was meant).
            if expired.is_set() or (timed_out and timeout < self.timeout):
                raise SourceError(_cut_off(where, allowed)) from None
            if isinstance(e, SourceError):
                raise
            if timed_out:
                raise SourceError(f"{where}: no answer within {timeout:g} s; check that the server is up "
                                  "and reachable") from None
            raise SourceError(f"{where} cannot be reached ({_reason(e)}); check the URL and that the "
                              "server runs") from None
        finally:
            watchdog.cancel()
            conn.close()
        if expired.is_set():
            raise SourceError(_cut_off(where, allowed))
        if status in (401, 403):
            raise SourceError(f"{where} refused coremap (HTTP {status}); give a bearer_token_file for it in "
                              f"{config_path()}")
        return self._decode(data, ctype or "", status, where)

    def _body(self, resp, t0: float, deadline: float, budget: "Budget | None", where: str,
              allowed: float) -> bytes:
        chunks: list[bytes] = []
        got = [0]
        most = self.max_bytes if budget is None else min(self.max_bytes, budget.bytes_left)

        def keep(chunk: bytes) -> None:
            if time.monotonic() - t0 > deadline:
                raise SourceError(_cut_off(where, allowed))
            got[0] += len(chunk)
            if budget is not None:
                budget.bytes_left -= len(chunk)
            if got[0] > most:
                raise SourceError(f"{where}: the answer is over {_mib(most)} and was cut off; ask for fewer "
                                  "hosts (--match) or series")
            chunks.append(chunk)
        try:
            if resp.chunked and resp.fp is not None:
                _dechunk(resp.fp, keep, most)
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


def _dechunk(fp, keep, most: int) -> None:
    """HTTP/1.1 chunked transfer coding (RFC 9112, 7.1), read here rather than by http.client: pmproxy 6.0
    puts an empty line before its last chunk ("...}\r\n\r\n0\r\n\r\n"), which http.client takes for a
    broken chunk size and curl reads past. An empty size line is skipped; anything else that is not a
    size raises ValueError. A size is read by the one number parser: a negative one (which read(-1) took
    for "all there is": 8 GB, issue 32), or one past the byte budget `most`, is refused before a byte of
    it is read. Each piece goes to `keep`, which enforces the deadline and the byte budget."""
    while True:
        line = fp.readline(1024)
        if not line:
            raise ValueError("the connection closed inside the answer")
        if not line.strip():
            continue
        text = line.split(b";", 1)[0].strip().decode("ascii", "replace")
        try:
            size = parse_int(text, what="a chunk size", lo=0, hi=most, base=16)
        except NumberError as e:
            raise ValueError(str(e)) from None
        if size == 0:
            return
        while size:
            piece = fp.read(min(size, CHUNK))
            if not piece:
                raise ValueError("the connection closed inside a chunk")
            keep(piece)
            size -= len(piece)
        fp.readline(8)          # the CRLF after the chunk's data


class Budget:
    """What one host may cost across all the requests made for it (issue 32: --timeout was per request, so
    a slow server ran a `--timeout 4` fleet for 46 s): a deadline and a byte budget."""

    def __init__(self, seconds: float, max_bytes: int):
        self.seconds, self.bytes_left = seconds, max_bytes
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        return self._end - time.monotonic()


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("coremap_host_budget", default=None)


@contextlib.contextmanager
def host_budget(seconds: float, max_bytes: int = MAX_HOST_BYTES, *, going_on: Budget | None = None):
    """Every request made inside the block (in this thread) shares one Budget; nested blocks keep the outer,
    tighter one. `going_on`: a Budget an earlier block began, spent on here rather than a new one."""
    outer = _BUDGET.get()
    if outer is not None and outer.left() <= seconds:
        yield outer
        return
    token = _BUDGET.set(going_on or Budget(seconds, max_bytes))
    try:
        yield _BUDGET.get()
    finally:
        _BUDGET.reset(token)


def _cut_off(where: str, seconds: float) -> str:
    return (f"{where}: the answer took over {seconds:g} s and was cut off; ask for fewer hosts or series, "
            "or check the server's load")


def _mib(n: int) -> str:
    return f"{n // 1024 ** 2} MiB" if n >= 1024 ** 2 else f"{n:,} bytes"


def _reason(e) -> str:
    text = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return excerpt(text, 80).strip("'\"")
