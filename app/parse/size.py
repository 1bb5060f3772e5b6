"""Sizes a user types: "1G", "512M", "64k", "1.5GiB", "4096".

Binary units (K = 1024, as mmap, free -h and numactl count memory), upper or lower case, with an
optional "i" and "B" ("1GiB", "1GB" and "1g" are the same size); a bare number is bytes. Anything
else, nan, inf, negatives and sizes past 2**62 bytes are refused with one line that names the text
and gives the accepted form.
"""
from __future__ import annotations

import math
import re

from app.errors import CoremapError, excerpt

_UNITS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]?)(?:i?b)?\s*$", re.ASCII | re.IGNORECASE)
_MAX_SIZE = 1 << 62


class SizeError(CoremapError, ValueError):
    """A size that cannot be parsed."""


def parse_size(text: str, *, what: str = "size") -> int:
    """Bytes: a whole number (fractions of a unit round to the nearest byte)."""
    m = _SIZE.match(text) if len(text) <= 64 else None
    if m is None:
        raise SizeError(f"{what} {excerpt(text)}: give a size such as 4096, 64K, 512M or 1G "
                        "(K, M, G, T: powers of 1024)")
    value = float(m.group(1)) * (1 << _UNITS[m.group(2).lower()])
    if not math.isfinite(value) or value >= _MAX_SIZE:
        raise SizeError(f"{what} {excerpt(text)}: larger than any memory; give a size such as 1G")
    return int(round(value))
