"""The shape a JSON value must have, and the one check of it: what a stored probe result (a session's,
`report --probe FILE`, a result file opened in the window) must hold before the text, the plots and
the report read it (issue 24: a result whose `placements` held strings stopped the report with a
traceback). A shape is data, written once per probe (app/store/result_shapes.py); `check` walks the
value beside it and stops at the first thing out of shape, naming where it is:
"placements[0].series[1]: expected a finite number, got 'a'".

- Num(lo, hi, integer): a finite number (bool is not one; a whole one below 2**63 in size), within
  [lo, hi];
- Text(limit): a string of at most `limit` characters;
- Flag(): true or false;
- ListOf(item, limit): a list of at most `limit` items, each of shape `item`;
- Obj(fields, required): an object; each field listed has its shape where present, the `required` ones
  must be present; fields not listed pass unread (what no front end reads, or a newer coremap's);
- MapOf(value, limit): an object of at most `limit` fields, every one of shape `value`;
- Tuple(a, b, ...): a list of exactly those shapes, in order;
- Where(shape, rule, why): of `shape`, and `rule(value)` holds (what one field says of another: a
  matrix with a row per CPU named);
- Either(a, b, ...): any one of them; nullable(s): s or null; NULL: only null; ANY: anything.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

MAX_ITEMS = 1 << 16          # rows, windows, CPUs: a real result holds thousands at most
MAX_TEXT = 4096


class ShapeError(ValueError):
    def __init__(self, where: str, why: str):
        super().__init__(f"{where}: {why}" if where else why)
        self.where, self.why = where, why


def _got(v) -> str:
    text = repr(v) if not isinstance(v, (dict, list)) else ("an object" if isinstance(v, dict) else "a list")
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class Num:
    lo: float | None = None
    hi: float | None = None
    integer: bool = False

    def check(self, v, where: str) -> None:
        # A JSON whole number may have 400 digits: isfinite() and float() overflow on it.
        if (type(v) not in (int, float) or (self.integer and type(v) is not int)
                or (type(v) is int and abs(v) >= 1 << 63) or (type(v) is float and not math.isfinite(v))):
            raise ShapeError(where, f"expected a finite {'whole ' if self.integer else ''}number, got {_got(v)}")
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            raise ShapeError(where, f"{v!r} is outside {self.lo if self.lo is not None else '-∞'}…"
                                    f"{self.hi if self.hi is not None else '∞'}")


@dataclass(frozen=True)
class Text:
    limit: int = MAX_TEXT

    def check(self, v, where: str) -> None:
        if type(v) is not str:
            raise ShapeError(where, f"expected text, got {_got(v)}")
        if len(v) > self.limit:
            raise ShapeError(where, f"text of {len(v):,} characters; at most {self.limit:,}")


@dataclass(frozen=True)
class Flag:
    def check(self, v, where: str) -> None:
        if type(v) is not bool:
            raise ShapeError(where, f"expected true or false, got {_got(v)}")


@dataclass(frozen=True)
class _Any:
    def check(self, v, where: str) -> None:
        pass


ANY = _Any()


@dataclass(frozen=True)
class ListOf:
    item: object
    limit: int = MAX_ITEMS

    def check(self, v, where: str) -> None:
        if type(v) is not list:
            raise ShapeError(where, f"expected a list, got {_got(v)}")
        if len(v) > self.limit:
            raise ShapeError(where, f"a list of {len(v):,} items; at most {self.limit:,}")
        for i, x in enumerate(v):
            self.item.check(x, f"{where}[{i}]")


@dataclass(frozen=True)
class MapOf:
    value: object
    limit: int = 1024

    def check(self, v, where: str) -> None:
        if type(v) is not dict:
            raise ShapeError(where, f"expected an object, got {_got(v)}")
        if len(v) > self.limit:
            raise ShapeError(where, f"an object of {len(v):,} fields; at most {self.limit:,}")
        for key, x in v.items():
            self.value.check(x, _join(where, str(key)[:40]))


@dataclass(frozen=True)
class Where:
    shape: object
    rule: object                # value -> bool, called only on a value of `shape`
    why: str

    def check(self, v, where: str) -> None:
        self.shape.check(v, where)
        if not self.rule(v):
            raise ShapeError(where, self.why)


@dataclass(frozen=True)
class Tuple:
    items: tuple

    def __init__(self, *items):
        object.__setattr__(self, "items", items)

    def check(self, v, where: str) -> None:
        if type(v) is not list or len(v) != len(self.items):
            raise ShapeError(where, f"expected a list of {len(self.items)}, got {_got(v)}")
        for i, (x, s) in enumerate(zip(v, self.items)):
            s.check(x, f"{where}[{i}]")


@dataclass(frozen=True)
class Obj:
    fields: dict = field(default_factory=dict)
    required: tuple = ()

    def check(self, v, where: str) -> None:
        if type(v) is not dict:
            raise ShapeError(where, f"expected an object, got {_got(v)}")
        for key in self.required:
            if key not in v:
                raise ShapeError(_join(where, key), "missing")
        for key, shape in self.fields.items():
            if key in v:
                shape.check(v[key], _join(where, key))


@dataclass(frozen=True)
class Either:
    options: tuple

    def __init__(self, *options):
        object.__setattr__(self, "options", options)

    def check(self, v, where: str) -> None:
        errors = []
        for s in self.options:
            try:
                s.check(v, where)
                return
            except ShapeError as e:
                errors.append(e)
        # The option that matched furthest names the place: "placements[0].series[0]: …", not
        # "placements[0]: … or …" of two placements alike but for one field.
        deepest = max(len(e.where) for e in errors)
        raise ShapeError(next(e.where for e in errors if len(e.where) == deepest),
                         " or ".join(dict.fromkeys(e.why for e in errors if len(e.where) == deepest)))


@dataclass(frozen=True)
class _Null:
    def check(self, v, where: str) -> None:
        if v is not None:
            raise ShapeError(where, f"expected null, got {_got(v)}")


NULL = _Null()


def nullable(shape) -> Either:
    return Either(shape, NULL)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def check(value, shape) -> None:
    """ShapeError naming the first place where `value` is not of `shape`."""
    shape.check(value, "")
