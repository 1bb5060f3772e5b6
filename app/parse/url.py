"""The one reader of a URL coremap is given: a metrics source on the command line (--prometheus, --pcp),
a section of sources.ini, and every client that connects (app/sources/http.py).

urllib.parse.urlsplit takes almost anything and defers its complaints: `.port` raises ValueError for
"99999" or "abc" only when asked, "http://[::1" raises at the split, and a host label of 64+ characters
or one that is not IDNA raises UnicodeError inside http.client at connect time (issue 32: 30 tracebacks).
Here a URL is checked once, whole: http or https, a host that is an IP address or a DNS name whose
labels are 1-63 characters (after IDNA, RFC 5890), a port in 1-65535, no user:password (which `ps` and
shell history would show; tokens belong in sources.ini), nothing a terminal would act on. UrlError is
one line naming what was read.
"""
from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass

from app.errors import CoremapError, excerpt
from app.parse.number import NumberError, parse_int

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?", re.ASCII)
_MAX_URL = 2048


class UrlError(CoremapError, ValueError):
    """Text that is not an http(s) URL coremap can connect to; str() names what was read."""


@dataclass(frozen=True)
class Url:
    scheme: str             # "http" or "https"
    host: str               # lower case; IDNA (xn--) for a DNS name; an IPv6 address without brackets
    port: int               # the scheme's default when the URL names none
    path: str               # without a trailing "/" ("" for the root)

    @property
    def base(self) -> str:
        """The URL as coremap connects to it and names it in lines."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = _DEFAULT_PORTS[self.scheme] == self.port
        return f"{self.scheme}://{host}{'' if default else f':{self.port}'}{self.path}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    @property
    def loopback(self) -> bool:
        """Whether the host is this machine (127.0.0.0/8, ::1, localhost): plain http there crosses no wire."""
        if self.host == "localhost" or self.host.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def covers(self, other: "Url") -> bool:
        """Whether a sources.ini section for this URL applies to `other`: the same scheme, host and port,
        and this path equal to `other`'s or a folder of it (never a string prefix: 127.0.0.1 is not
        127.0.0.12, port 4000 is not 40000, /api is not /api2)."""
        return self.origin == other.origin and (not self.path or other.path == self.path
                                                or other.path.startswith(self.path + "/"))


def parse_url(text: str, *, what: str) -> Url:
    """`text` as a Url; UrlError naming `what` ("--prometheus") otherwise."""
    shown = f"{what} {excerpt(text if isinstance(text, str) else str(text), 80)}"
    if not isinstance(text, str) or not text or len(text) > _MAX_URL or not text.isprintable() or " " in text:
        raise UrlError(f"{shown}: not a URL; give the address as http://server:port")
    try:
        parts = urllib.parse.urlsplit(text)
        raw_port = parts.netloc.rpartition("]")[2].rpartition("@")[2]
    except ValueError:              # "http://[::1": an unclosed IPv6 bracket
        raise UrlError(f"{shown}: not a URL (an unclosed [ in the host); give http://[::1]:9090 or "
                       "http://server:port") from None
    if parts.scheme not in _DEFAULT_PORTS or not parts.netloc:
        raise UrlError(f"{shown}: not an http:// or https:// URL; give the address as http://server:port")
    if "@" in parts.netloc:         # not quoted: it may hold a password
        raise UrlError(f"{what} {parts.scheme}://…@{excerpt(parts.netloc.rpartition('@')[2], 60)}: a user or "
                       "password in the URL would show in `ps` and the shell's history; give the URL without it "
                       "and the token in sources.ini")
    if raw_port and not raw_port.startswith(":") and parts.netloc.startswith("["):
        raise UrlError(f"{shown}: not a URL (text after the ] of an IPv6 host); give http://[::1]:9090")
    if parts.query or parts.fragment:
        raise UrlError(f"{shown}: a source's address has no ?query or #fragment; give http://server:port")
    host = _host(parts.hostname or "", shown)
    port = _DEFAULT_PORTS[parts.scheme]
    if ":" in raw_port:
        try:
            port = parse_int(raw_port.rpartition(":")[2], what="port", lo=1, hi=65535)
        except NumberError as e:
            raise UrlError(f"{shown}: {e}") from None
    return Url(parts.scheme, host, port, parts.path.rstrip("/"))


def _host(host: str, shown: str) -> str:
    if not host:
        raise UrlError(f"{shown}: no host; give the address as http://server:port")
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0] if ":" in host else host))
    except ValueError:
        pass                        # a name, checked below
    if ":" in host:
        raise UrlError(f"{shown}: {excerpt(host, 60)} is not an IPv6 address")
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise UrlError(f"{shown}: the host is not a valid name (each dot-separated label 1 to 63 characters "
                       "of letters, digits and -)") from None
    labels = ascii_host.rstrip(".").split(".")
    if len(ascii_host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise UrlError(f"{shown}: the host is not a valid name (each dot-separated label 1 to 63 characters "
                       "of letters, digits and -)")
    return ascii_host.rstrip(".")


def url_argument(what: str):
    """An argparse type for a source URL option (`what` names it in help only: argparse names the option
    in the message): the URL checked before any work, its base returned."""
    import argparse

    def parse(text: str) -> str:
        try:
            return parse_url(text, what="URL").base
        except UrlError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = "URL"
    return parse
