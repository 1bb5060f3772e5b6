"""The one JSON decoder: every JSON text coremap reads (a session's members, stored results, a
snapshot's meta.json, the agent's messages, a drop from another application, a source's answer) goes
through load_json, which bounds what a hostile text can cost before the decoder sees it:
- its length (`limit`, the caller's budget for that kind of text);
- its nesting (MAX_DEPTH, counted on its brackets; Python's recursion limit stays as a backstop);
- the memory its value would take (an estimate from its separators, containers and strings: 64 MiB
  of `[{},{},...]` decodes to 1.6 GB of dicts).
NaN and Infinity are taken unless `constants=False` (then a number too large for a float, 1e999, is
refused as well: JSON has no spelling of infinity). Every refusal is one JsonInputError that names
what the text came from.

What a text must hold is said once, as a typed definition (a msgspec Struct, or a type built of them,
with its bounds as msgspec.Meta: lengths, ranges, finite numbers, CPU ids below 65,536), and checked
by one mechanism: decode_json (a text) and convert (a value already decoded), msgspec's, strict. Both
refuse with the same JsonInputError and the same message form, naming the field:
"<what>: placements[0].series[1]: expected float, got str".
"""
from __future__ import annotations

import json
import re
from typing import Annotated, TypeVar

try:
    import msgspec
    from msgspec import Meta
except ImportError:
    # The agent shipped to a server (app/remote/ship.py) runs on the standard library alone: it reads its
    # requests with load_json and decodes no typed definition, so there the bounds below are only the
    # annotations of the dataclasses it sends.
    msgspec = None

    def Meta(**bounds):
        return bounds

from app.errors import CoremapError

MiB = 1 << 20
MAX_DEPTH = 64              # the deepest JSON coremap writes is 6; a hundred levels is no document of ours
# Bytes a decoded JSON value may take per byte of its text when the caller names no other bound:
# real documents (numbers, names, short lists) take 3-9; the hostile ones 25-40.
MEMORY_PER_BYTE = 12


class JsonInputError(CoremapError, ValueError):
    """A JSON text that is too large, too deep or not JSON, or a value out of its typed definition;
    str() names what it came from (and the field, for a value out of its definition)."""


T = TypeVar("T")

# The bounds most definitions share. A float bound excludes NaN and the infinities (msgspec compares,
# and NaN compares false); JSON itself spells neither, but 1e999 decodes to inf without a bound.
MAX_FLOAT = 1.7e308
Finite = Annotated[float, Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)]
NonNegative = Annotated[float, Meta(ge=0, le=MAX_FLOAT)]
Count = Annotated[int, Meta(ge=0, le=(1 << 63) - 1)]
CpuId = Annotated[int, Meta(ge=0, lt=1 << 16)]


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def load_json(data: bytes | str, *, what: str, limit: int, memory: int | None = None,
              depth: int = MAX_DEPTH, constants: bool = True):
    """The value of a JSON text; JsonInputError naming `what` when it is longer than `limit` bytes,
    nests deeper than `depth`, would take more than `memory` bytes decoded (default MEMORY_PER_BYTE x
    its length, at least 1 MiB) or is not JSON. `constants`: whether NaN and Infinity are taken."""
    raw = _bounded(data, what=what, limit=limit, memory=memory, depth=depth)
    try:
        text = raw.decode("utf-8")
        return json.loads(text) if constants else json.loads(text, parse_constant=_no_constants,
                                                             parse_float=_finite)
    except RecursionError:
        raise JsonInputError(f"{what}: JSON nested deeper than {depth} levels; not a document coremap "
                             "reads") from None
    except ValueError as e:       # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise JsonInputError(f"{what}: not JSON ({str(e)[:80]})") from None


def decode_json(data: bytes | str, type_: type[T], *, what: str, limit: int, memory: int | None = None,
                depth: int = MAX_DEPTH) -> T:
    """The value of a JSON text checked against its typed definition `type_`: the text bounded as
    load_json bounds it (`limit`, `memory`, `depth`), then decoded by msgspec, strict (no string taken
    for a number, no NaN); JsonInputError naming `what` and the field when anything is out."""
    raw = _bounded(data, what=what, limit=limit, memory=memory, depth=depth)
    try:
        return msgspec.json.decode(raw, type=type_, strict=True)
    except msgspec.ValidationError as e:
        raise JsonInputError(f"{what}: {field_message(e)}") from None
    except (msgspec.DecodeError, RecursionError) as e:
        raise JsonInputError(f"{what}: not JSON ({str(e)[:80]})") from None


def convert(value, type_: type[T], *, what: str, strict: bool = True) -> T:
    """`value` (decoded already: a dict, a list, numbers) checked against its typed definition
    `type_`, as decode_json checks a text; JsonInputError naming `what` and the field."""
    try:
        return msgspec.convert(value, type_, strict=strict)
    except msgspec.ValidationError as e:
        raise JsonInputError(f"{what}: {field_message(e)}") from None


def field_message(error: msgspec.ValidationError) -> str:
    """msgspec's "Expected `float`, got `str` - at `$.placements[0]`" in the one form coremap's lines
    use: "placements[0]: expected float, got str"."""
    text = str(error)
    reason, _, where = text.partition(" - at `")
    if not _:
        where = ""
    key, _, where = where.rpartition("` in `")        # "`key` in `$.residency[...]`": a dict's key
    where = where.rstrip("`").removeprefix("$").lstrip(".") + (" key" if key else "")
    reason = reason.replace("`", "")
    reason = reason[:1].lower() + reason[1:]
    return f"{where}: {reason}" if where else reason


def _bounded(data: bytes | str, *, what: str, limit: int, memory: int | None, depth: int) -> bytes:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > limit:
        raise JsonInputError(f"{what}: {len(raw):,} bytes of JSON, more than the {_mib(limit)} it may hold")
    need = _memory_estimate(raw)
    if need > (memory if memory is not None else max(MEMORY_PER_BYTE * len(raw), MiB)):
        raise JsonInputError(f"{what}: JSON of {len(raw):,} bytes that would take about {_mib(need)} of "
                             "memory (millions of empty objects or lists); not a document coremap reads")
    if _deeper_than(raw, depth):
        raise JsonInputError(f"{what}: JSON nested deeper than {depth} levels; not a document coremap reads")
    return raw


def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    v = float(text)
    if v - v != 0:          # inf - inf is nan; a finite number minus itself is 0
        raise ValueError(f"{text[:20]} is not a finite number")
    return v


def _memory_estimate(raw: bytes) -> int:
    """Bytes a decoded value of `raw` takes at most, near enough: 64 a container (an empty dict is
    64, a list 56), 64 a string (two quotes each), 16 a separator (a pointer and, mostly, a number),
    plus the text. Counted in C (bytes.count), ~10 ms for 64 MiB."""
    containers = raw.count(b"[") + raw.count(b"{")
    return len(raw) + 64 * containers + 32 * raw.count(b'"') + 16 * raw.count(b",")


def _deeper_than(raw: bytes, depth: int) -> bool:
    """Whether the brackets of `raw` nest deeper than `depth`: every innermost pair is taken away
    `depth` times (bytes.replace, in C); whatever is left nests deeper. Brackets inside strings could
    make a text look deeper than it is, so a text that looks too deep is looked at again without its
    strings. (They can also hide depth; the decoder's own recursion limit then stops it.)"""
    def peel(b: bytes) -> bool:
        b = b.translate(None, _NOT_BRACKETS)
        for _ in range(depth):
            if not b:
                return False
            shorter = b.replace(b"[]", b"").replace(b"{}", b"")
            if shorter == b:
                return False        # not well nested: the decoder will say why
            b = shorter
        return bool(b)
    if raw.count(b"[") + raw.count(b"{") <= depth:
        return False
    return peel(raw) and peel(_STRING.sub(b"", raw))


def _mib(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n:,} bytes"
