"""CPU lists ("0-3,8,10-11") and CPU masks ("ff,00000000").

Formats: Documentation/admin-guide/cputopology.rst (the `_list` files print ranges, the mask files
print comma-separated 32-bit hex words, most significant first) and lib/bitmap.c
`bitmap_parselist`, which also accepts "a-b:used/group" ("0-15:2/4" = 0,1,4,5,8,9,12,13).
"""
from __future__ import annotations

import re

from app.errors import CpuListError

# Larger than any machine Linux supports today (CONFIG_NR_CPUS tops out at 8192): a bound that keeps
# "0-999999999" from allocating a billion ints.
MAX_CPU = 1 << 16

_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+)/(\d+))?)?$")


def parse_cpulist(text: str, *, what: str = "CPU list") -> tuple[int, ...]:
    """Sorted, de-duplicated CPU ids. Empty text and the kernel's "(null)" give ().

    Raises CpuListError naming the bad piece and the accepted form.
    """
    s = text.strip()
    if s in ("", "(null)"):
        return ()
    cpus: set[int] = set()
    for piece in s.split(","):
        piece = piece.strip()
        m = _RANGE.match(piece)
        if not m:
            raise CpuListError(
                f"{what} {text.strip()!r}: {piece!r} is not a CPU number or range; "
                "write CPUs like 2-5,8")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise CpuListError(f"{what} {text.strip()!r}: range {piece!r} runs backwards; write {hi}-{lo}")
        if hi >= MAX_CPU:
            raise CpuListError(f"{what} {text.strip()!r}: CPU {hi} is beyond any machine (limit {MAX_CPU - 1})")
        if m.group(3) is not None:
            used, group = int(m.group(3)), int(m.group(4))
            if group == 0 or used == 0 or used > group:
                raise CpuListError(
                    f"{what} {text.strip()!r}: in {piece!r} the stride needs 0 < used <= group size")
            cpus.update(c for c in range(lo, hi + 1) if (c - lo) % group < used)
        else:
            cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


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
    cpus = []
    bit_base = 0
    for word in reversed(words):
        word = word.strip()
        if not word or len(word) > 8 or any(c not in "0123456789abcdefABCDEF" for c in word):
            raise CpuListError(f"{what} {s!r}: {word!r} is not a 32-bit hex word")
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
