"""One way to check what comes in: what a text or a value must hold is said once, as a typed
definition (a msgspec Struct, or a type built of them, with its bounds as msgspec.Meta: lengths,
ranges, finite numbers, CPU ids below 65,536), and checked by one mechanism, msgspec's, strict:
decode_json (a text, bounded first as app/parse/json_text.py bounds every JSON text) and convert (a
value already decoded). Both refuse with the one JsonInputError in one message form, naming the field:
"<what>: placements[0].series[1]: expected float, got str".

Kept apart from json_text.py: that one is shipped to servers, whose Python may lack msgspec; only the
receiving side decodes typed.
"""
from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec
from msgspec import Meta

from app.parse.json_text import MAX_DEPTH, JsonInputError, bounded

T = TypeVar("T")

# The bounds most definitions share. A float bound excludes NaN and the infinities (msgspec compares,
# and NaN compares false); JSON itself spells neither, but 1e999 decodes to inf without a bound.
MAX_FLOAT = 1.7e308
Finite = Annotated[float, Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)]
NonNegative = Annotated[float, Meta(ge=0, le=MAX_FLOAT)]
Count = Annotated[int, Meta(ge=0, le=(1 << 63) - 1)]
CpuId = Annotated[int, Meta(ge=0, lt=1 << 16)]


def decode_json(data: bytes | str, type_: type[T], *, what: str, limit: int, memory: int | None = None,
                depth: int = MAX_DEPTH) -> T:
    """The value of a JSON text checked against its typed definition `type_`: the text bounded as
    load_json bounds it (`limit`, `memory`, `depth`), then decoded by msgspec, strict (no string taken
    for a number, no NaN); JsonInputError naming `what` and the field when anything is out."""
    raw = bounded(data, what=what, limit=limit, memory=memory, depth=depth)
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
    reason, _, where = text.rpartition(" - at `")
    if not reason:
        reason, where = text, ""
    where = where.rstrip("`").removeprefix("$").lstrip(".")
    reason = reason.replace("`", "")
    reason = reason[:1].lower() + reason[1:]
    return f"{where}: {reason}" if where else reason
