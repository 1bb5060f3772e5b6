"""/proc/meminfo as {field: bytes}.

Format: Documentation/filesystems/proc.rst (meminfo): one "Name:   value kB" per line; a few fields
(HugePages_Total, HugePages_Free, ...) are counts without the unit and are kept as numbers.
"""
from __future__ import annotations

from app.errors import ParseError


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
        try:
            number = int(parts[0])
        except ValueError:
            raise ParseError(what, f"{key.strip()}: {parts[0][:20]!r} is not a number", n) from None
        out[key.strip()] = number * 1024 if parts[1:2] == ["kB"] else number
    return out
