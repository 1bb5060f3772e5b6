"""What a HotSpot JVM tells about itself, as values: its perf-data file, its thread dump's thread lines,
and the lines of /proc/PID/status that say whose process it is and what it does with SIGQUIT.

Perf data (`/tmp/hsperfdata_USER/PID`, what `jps` and `jstat` read): HotSpot's PerfDataPrologue and
PerfDataEntry layouts, src/hotspot/share/runtime/perfMemory.hpp and perfData.hpp. A prologue of 32
bytes (magic 0xcafec0c0 stored big-endian, byte order 0 big / 1 little, versions, `accessible`,
used, overflow, mod time stamp, entry_offset, num_entries), then entries: length, name offset, vector
length, type ('B' byte arrays hold strings, 'J' a long), flags, units, variability, data offset.
`sun.rt.jvmCapabilities` is a string of '0'/'1' whose first character says whether the attach
mechanism is on (HotSpot writes '0' there under -XX:+DisableAttachMechanism; `jps` lists only VMs
with '1' as attachable).

Thread dump (`jcmd PID Thread.print`, the attach listener's "threaddump"): one line per thread that
starts with its name in quotes and holds `nid=` (the Linux tid, hex in JDK 17, decimal from JDK 19).
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from app.errors import ParseError

_PERF_MAGIC = 0xCAFEC0C0
_PROLOGUE = 32
_ENTRY = 20
MAX_ENTRIES = 1 << 16          # a JDK 17 VM has ~190; a file claiming more is not HotSpot's

# "name" #12 [daemon] prio=5 os_prio=0 cpu=1.21ms elapsed=1.79s tid=0x... nid=0x30f7 waiting ...
# The name may itself hold quotes, so take everything up to the last quote before the attributes.
_HEADER = re.compile(r'^"(?P<name>.*)"\s.*?\bnid=(?P<nid>0x[0-9a-fA-F]+|[0-9]+)\b', re.ASCII)


def parse_perfdata(data: bytes, *, what: str = "perf data") -> dict[str, str | int]:
    """{name: value} of a HotSpot perf-data file's string ('B') and long ('J') entries. Raises
    ParseError for bytes that are not such a file (a wrong magic, entries out of the file)."""
    if len(data) < _PROLOGUE:
        raise ParseError(what, f"{len(data)} bytes, shorter than HotSpot's 32-byte prologue")
    if struct.unpack_from(">I", data)[0] != _PERF_MAGIC:
        raise ParseError(what, "no 0xcafec0c0 magic: not a HotSpot perf-data file")
    order = {0: ">", 1: "<"}.get(data[4])
    if order is None:
        raise ParseError(what, f"byte order {data[4]} is neither 0 nor 1")
    offset, count = struct.unpack_from(order + "ii", data, 24)
    if not 0 <= count <= MAX_ENTRIES or offset < _PROLOGUE:
        raise ParseError(what, f"{count} entries from offset {offset}: not HotSpot's layout")
    out: dict[str, str | int] = {}
    for _ in range(count):
        if offset + _ENTRY > len(data):
            raise ParseError(what, f"an entry at {offset} past the end ({len(data)} bytes)")
        length, name_at, vector, kind, _flags, _units, _var, data_at = struct.unpack_from(order + "iiibbbbi", data, offset)
        if length < _ENTRY or offset + length > len(data) or not (0 < name_at < length and 0 < data_at < length):
            raise ParseError(what, f"an entry at {offset} of length {length} that does not fit the file")
        end = offset + length
        name = _cstring(data, offset + name_at, end)
        if kind == ord("B") and vector > 0:
            out[name] = _cstring(data, offset + data_at, min(end, offset + data_at + vector))
        elif kind == ord("J") and vector == 0 and offset + data_at + 8 <= end:
            out[name] = struct.unpack_from(order + "q", data, offset + data_at)[0]
        offset = end
    return out


def attach_enabled(perf: dict[str, str | int]) -> bool | None:
    """Whether the JVM's attach mechanism is on, from `sun.rt.jvmCapabilities`; None when the perf
    data does not say (an old or foreign VM)."""
    caps = perf.get("sun.rt.jvmCapabilities")
    if not isinstance(caps, str) or not caps:
        return None
    return caps[0] == "1"


def _cstring(data: bytes, start: int, end: int) -> str:
    stop = data.find(b"\0", start, end)
    return data[start:stop if stop >= 0 else end].decode("utf-8", "replace")


def dump_thread(line: str) -> tuple[str, int] | None:
    """(name, tid) of one thread dump line that names a thread, else None."""
    m = _HEADER.match(line)
    if m is None:
        return None
    nid = m.group("nid")
    return m.group("name"), int(nid, 16) if nid.startswith("0x") else int(nid)


def parse_thread_dump(text: str) -> dict[str, int]:
    """{full thread name: tid} from a HotSpot thread dump. A name that occurs twice (Java allows it)
    keeps its first thread; app/machine/java.py find_java_thread reports the ambiguity."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        hit = dump_thread(line)
        if hit is not None:
            out.setdefault(*hit)
    return out


@dataclass(frozen=True)
class ProcessIds:
    """The lines of /proc/PID/status a JVM check needs (Documentation/filesystems/proc.rst, Table 1-2)."""
    euid: int                 # Uid's second field: whose files it makes (hsperfdata) and who may attach
    egid: int
    nspids: tuple[int, ...]   # NSpid: its pid in each pid namespace, ours first; one entry outside containers
    caught: int               # SigCgt: the signals it has handlers for, bit n-1 for signal n


def parse_process_ids(text: str, *, what: str = "status") -> ProcessIds:
    """ProcessIds from the text of /proc/PID/status. Raises ParseError when a line it needs is
    missing or malformed (NSpid is absent before Linux 4.1: one namespace is assumed then)."""
    fields: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Uid", "Gid", "NSpid", "SigCgt"):
            fields[key] = value.split()
    try:
        uid, gid, caught = fields["Uid"], fields["Gid"], fields["SigCgt"]
        return ProcessIds(_number(uid[1]), _number(gid[1]),
                          tuple(_number(p) for p in fields.get("NSpid", ())),
                          _hex(caught[0]))
    except (KeyError, IndexError, ValueError):
        raise ParseError(what, "no Uid, Gid and SigCgt lines in the kernel's format") from None


def _number(s: str) -> int:
    if not (s.isascii() and s.isdigit()):
        raise ValueError(s)
    return int(s)


def _hex(s: str) -> int:
    if not s or any(c not in "0123456789abcdefABCDEF" for c in s):
        raise ValueError(s)
    return int(s, 16)
