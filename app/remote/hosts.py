"""Which machine: `[user@]server[:port]` as the user writes it, checked before it reaches ssh; the hosts
File → Connect… offers again; the host files `coremap fleet --file` reads.

A host is handed to the system ssh as its destination after `--`, so an ~/.ssh/config alias works
(`coremap --host node7`). Still, it is checked here first: a name that starts with "-" would be an ssh
option (`-oProxyCommand=...`), and a space, a quote or a control character has no business in a host
name. Anything else is refused with one line that shows what a host looks like.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from app.atomic import write_atomic
from app.errors import CoremapError, excerpt
from app.inputs import MiB, read_input, read_input_text
from app.parse.json_text import load_json
from app.store.folders import state_dir

MAX_HOST_TEXT = 255              # a DNS name is at most 253 characters; user@ and :port fit in the rest
MAX_HOSTS_FILE = 1 * MiB
MAX_FLEET = 1000                 # hosts in one fleet (tested with 50)
PARALLEL = 8                     # hosts a fleet reads at once (default)
TIMEOUT = 15.0                   # seconds each host may take, connecting included (default; issue 32: at most 15)
RECENT_KEPT = 10
RECENT_FILE = "recent-hosts.json"
RECENT_LIMIT = 64 * 1024

_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
# Host names, ssh aliases and IPv4 addresses; IPv6 comes in brackets (below).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]{2,45}(%[A-Za-z0-9_.-]{1,32})?")
EXAMPLE = "write [user@]server[:port], e.g. node7, root@node7 or admin@10.0.0.7:2222"


class HostError(CoremapError):
    """A host as written that cannot be a host."""


@dataclass(frozen=True)
class HostSpec:
    """One machine to reach over ssh: `host` as the user wrote it (a name, an alias of their ssh
    config, an address), and the user and port when given (else ssh's config decides)."""
    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return (f"{self.user}@" if self.user else "") + h + (f":{self.port}" if self.port else "")

    def command_text(self, program: str = "ssh") -> str:
        """How a person types it: `ssh -p 2222 root@node7` (advice in messages)."""
        port = f" -p {self.port}" if self.port else ""
        h = self.host if ":" not in self.host else f"[{self.host}]" if program == "ssh-copy-id" else self.host
        return f"{program}{port} {self.user + '@' if self.user else ''}{h}"

    def ssh_args(self) -> list[str]:
        """ssh's arguments naming this machine, ending with the destination after `--`."""
        a: list[str] = []
        if self.user:
            a += ["-l", self.user]
        if self.port:
            a += ["-p", str(self.port)]
        return a + ["--", self.host]


def parse_host(text: str) -> HostSpec:
    """`[user@]server[:port]` (IPv6 in brackets: `[fe80::1%eth0]:22`) -> HostSpec; HostError otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise HostError(f"no host given; {EXAMPLE}")
    s = text.strip()
    if len(s) > MAX_HOST_TEXT:
        raise HostError(f"host {excerpt(s)}: longer than {MAX_HOST_TEXT} characters; {EXAMPLE}")
    user = None
    if "@" in s:
        user, s = s.rsplit("@", 1)
        if not _USER.fullmatch(user):
            raise HostError(f"host {excerpt(text)}: {excerpt(user)} is not a user name; {EXAMPLE}")
    port = None
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise HostError(f"host {excerpt(text)}: an address opened with [ is not closed; {EXAMPLE}")
        host, rest = s[1:end], s[end + 1:]
        if not _IPV6.fullmatch(host):
            raise HostError(f"host {excerpt(text)}: {excerpt(host)} is not an IPv6 address; {EXAMPLE}")
        if rest:
            if not rest.startswith(":"):
                raise HostError(f"host {excerpt(text)}: expected :PORT after the address; {EXAMPLE}")
            port = _port(rest[1:], text)
    elif s.count(":") > 1:
        # A bare IPv6 address: no port can follow it unambiguously.
        if not _IPV6.fullmatch(s):
            raise HostError(f"host {excerpt(text)}: not an IPv6 address; put one in brackets, {EXAMPLE}")
        host = s
    else:
        host, _, p = s.partition(":")
        if p or s.endswith(":"):
            port = _port(p, text)
        if not _NAME.fullmatch(host):
            raise HostError(f"host {excerpt(text)}: {excerpt(host)} is not a host name; {EXAMPLE}")
    return HostSpec(host, user, port)


def _port(text: str, whole: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise HostError(f"host {excerpt(whole)}: port {excerpt(text)} is not 1-65535; {EXAMPLE}")
    return int(text)


def parse_hosts_text(text: str, *, what: str) -> list[HostSpec]:
    """One host per line; blank lines and `#` comments skipped; the first bad line is refused with its
    number. Duplicates are kept once, in their first place."""
    hosts: list[HostSpec] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            hosts.append(parse_host(line))
        except HostError as e:
            raise HostError(f"{what}, line {n}: {e}") from None
        if len(hosts) > MAX_FLEET:
            raise HostError(f"{what}: more than {MAX_FLEET} hosts; split the fleet")
    return list(dict.fromkeys(hosts))


def read_hosts_file(path) -> list[HostSpec]:
    text = read_input_text(path, what="--file", limit=MAX_HOSTS_FILE, stream=True,
                           hint="give a text file with one [user@]server[:port] per line")
    return parse_hosts_text(text, what=f"--file {path}")


# -- recent hosts (File → Connect…) ---------------------------------------------------------------------
def _recent_path(create: bool) -> Path:
    return state_dir(create) / RECENT_FILE


def recent_hosts() -> list[str]:
    """The hosts connected to last, newest first; [] when none (or the file is not ours to read)."""
    try:
        path = _recent_path(False)
        items = load_json(read_input(path, what="", limit=RECENT_LIMIT, no_links=True), what=str(path),
                          limit=RECENT_LIMIT)
    except CoremapError:
        return []
    if not isinstance(items, list):
        return []
    out = []
    for item in items[:RECENT_KEPT]:
        try:
            out.append(str(parse_host(item)))
        except HostError:
            continue        # a hand edit or an older spelling: leave it out, keep the rest
    return list(dict.fromkeys(out))


def remember_host(host: HostSpec) -> None:
    """Put `host` first among the recent hosts (written atomically; at most RECENT_KEPT)."""
    items = [str(host)] + [h for h in recent_hosts() if h != str(host)]
    write_atomic(_recent_path(True), (json.dumps(items[:RECENT_KEPT]) + "\n").encode())
