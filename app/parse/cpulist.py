"""CPU lists ("0-3,8,10-11") and CPU masks ("ff,00000000").

Formats: Documentation/admin-guide/cputopology.rst (the `_list` files print ranges, the mask files
print comma-separated 32-bit hex words, most significant first) and lib/bitmap.c
`bitmap_parselist`, which also accepts "a-b:used/group" ("0-15:2/4" = 0,1,4,5,8,9,12,13).
"""
from __future__ import annotations

import re

from app.errors import CpuListError, excerpt

# Larger than any machine Linux supports today (CONFIG_NR_CPUS tops out at 8192): a bound that keeps
# "0-999999999" from allocating a billion ints.
MAX_CPU = 1 << 16

# ASCII digits only: Python's \d also matches '١' (Arabic-Indic one), which int() reads as 1.
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+)/([0-9]+))?)?", re.ASCII)
# A list of every CPU of the largest machine, one by one, is ~400 kB; longer is not a CPU list.
_MAX_LIST_TEXT = 1 << 20
# Strided pieces ("0-15:2/4") are expanded one by one; bound their total so a hostile list of many
# long strided pieces cannot take seconds.
_MAX_STRIDED = 4 * MAX_CPU


def parse_cpulist(text: str, *, what: str = "CPU list") -> tuple[int, ...]:
    """Sorted, de-duplicated CPU ids. Empty text and the kernel's "(null)" give ().

    Raises CpuListError naming the bad piece (a short, escaped excerpt, never the whole text) and the
    accepted form. Linear in the length of the text: plain ranges are merged before they are expanded.
    """
    s = text.strip()
    if s in ("", "(null)"):
        return ()
    if len(s) > _MAX_LIST_TEXT:
        raise CpuListError(f"{what} of {len(s):,} characters ({excerpt(s)}): longer than any machine's "
                           "CPU list; write CPUs like 2-5,8")
    ranges: list[tuple[int, int]] = []
    cpus: set[int] = set()
    strided = 0
    for piece in dict.fromkeys(p.strip() for p in s.split(",")):
        m = _RANGE.fullmatch(piece)
        if not m:
            raise CpuListError(f"{what} {excerpt(s)}: {excerpt(piece)} is not a CPU number or range; "
                               "write CPUs like 2-5,8")
        lo, hi, used, group = (_number(g, what, s) if g is not None else None for g in m.groups())
        hi = lo if hi is None else hi
        if hi < lo:
            raise CpuListError(f"{what} {excerpt(s)}: range {excerpt(piece)} runs backwards; write {hi}-{lo}")
        if used is None:
            ranges.append((lo, hi))
            continue
        if group == 0 or used == 0 or used > group:
            raise CpuListError(f"{what} {excerpt(s)}: in {excerpt(piece)} the stride needs 0 < used <= group size")
        strided += hi - lo + 1
        if strided > _MAX_STRIDED:
            raise CpuListError(f"{what} {excerpt(s)}: too many strided ranges; write CPUs like 2-5,8")
        cpus.update(c for c in range(lo, hi + 1) if (c - lo) % group < used)
    for lo, hi in _merged(ranges):
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def _number(digits: str, what: str, text: str) -> int:
    # int() of a very long digit string is slow (and refused past 4,300 digits): bound it first.
    if len(digits) > 6 or int(digits) >= MAX_CPU:
        raise CpuListError(f"{what} {excerpt(text)}: CPU {excerpt(digits, 12)} is beyond any machine "
                           f"(limit {MAX_CPU - 1})")
    return int(digits)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching ranges joined, so each CPU is expanded once."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def format_cpulist(cpus) -> str:
    """The kernel's own spelling: "0-3,8,10-11"; "" for no CPUs."""
    ids = sorted(set(cpus))
    out = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def parse_cpumask(text: str, *, what: str = "CPU mask") -> tuple[int, ...]:
    """CPU ids set in a mask such as "00000000,000000ff" (32-bit words, most significant first)."""
    s = text.strip()
    if not s:
        return ()
    words = s.split(",")
    if len(words) > MAX_CPU // 32:
        # As for lists: a mask wider than any machine would expand to millions of CPU ids.
        raise CpuListError(f"{what} {excerpt(s)}: {len(words):,} 32-bit words, wider than any machine "
                           f"(limit {MAX_CPU // 32:,} words, CPU {MAX_CPU - 1})")
    cpus = []
    bit_base = 0
    for word in reversed(words):
        word = word.strip()
        if not word or len(word) > 8 or any(c not in "0123456789abcdefABCDEF" for c in word):
            raise CpuListError(f"{what} {excerpt(s)}: {excerpt(word, 12)} is not a 32-bit hex word")
        value = int(word, 16)
        b = 0
        while value:
            if value & 1:
                cpus.append(bit_base + b)
            value >>= 1
            b += 1
        bit_base += 32
    return tuple(sorted(cpus))


def format_cpumask(cpus) -> str:
    """The mask spelling the kernel accepts in smp_affinity: comma-separated 32-bit hex words."""
    ids = set(cpus)
    if not ids:
        return "0"
    nwords = max(ids) // 32 + 1
    words = []
    for w in reversed(range(nwords)):
        v = 0
        for b in range(32):
            if w * 32 + b in ids:
                v |= 1 << b
        words.append(f"{v:08x}")
    return ",".join(words)
