"""/proc/meminfo as {field: bytes}.

Format: Documentation/filesystems/proc.rst (meminfo): one "Name:   value kB" per line; a few fields
(HugePages_Total, HugePages_Free, ...) are counts without the unit and are kept as numbers.
"""
from __future__ import annotations

from app.errors import ParseError, excerpt
from app.parse.number import is_ascii_int


def parse_meminfo(text: str, *, what: str = "/proc/meminfo") -> dict[str, int]:
    """Every field: bytes where the line says kB, else the bare number."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        parts = value.split()
        if not parts:
            continue
        if not is_ascii_int(parts[0]):
            raise ParseError(what, f"{excerpt(key.strip())}: {excerpt(parts[0], 20)} is not a number", n)
        number = int(parts[0])
        out[key.strip()] = number * 1024 if parts[1:2] == ["kB"] else number
    return out
