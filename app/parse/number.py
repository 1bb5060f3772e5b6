"""The one way coremap reads a number from text: a command-line option, a field of a file a user or a
capture supplies, a value a dialog was given.

Python's int() and float() are generous in ways that hostile input uses: int("١") is 1 (any script's
digits), int("1_000") is 1000, float("nan"), float("inf") and float("1e999") are numbers, and leading
"+" and white space pass. Here a number is ASCII digits (a float may add one "." and an exponent),
finite, and inside the bounds its caller states; anything else is NumberError, one line that names
what was read (`--interval`, `proc/irq/24/node`) and the range that is accepted.

`bounded` wraps it as an argparse type (argparse adds "argument --interval:" to the message); the
probes' own parsers and `coremap`'s share it, so every option refuses the same things.
"""
from __future__ import annotations

import argparse
import math
import re

from app.errors import CoremapError, excerpt

_INT = re.compile(r"-?[0-9]{1,30}", re.ASCII)
_HEX = re.compile(r"(?:0[xX])?[0-9a-fA-F]{1,30}", re.ASCII)
_FLOAT = re.compile(r"-?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][-+]?[0-9]{1,4})?", re.ASCII)


class NumberError(CoremapError, ValueError):
    """Text that is not a number of the kind and range asked for; str() names what was read."""


def is_ascii_int(text: str) -> bool:
    """Whether `text` is ASCII digits, optionally after a "-" (and at most 30 of them): the check
    hot parsers make before int(), which alone would take "١", "1_0" and " +1 "."""
    return _INT.fullmatch(text) is not None


def is_ascii_hex(text: str) -> bool:
    """Whether `text` is ASCII hex digits, with or without 0x (at most 30 of them)."""
    return _HEX.fullmatch(text) is not None


def parse_int(text: str, *, what: str, lo: int | None = None, hi: int | None = None, base: int = 10,
              unit: str = "") -> int:
    """A whole number in [lo, hi] from `text` (base 10, or 16 with an optional 0x); NumberError
    naming `what` otherwise."""
    s = text.strip() if isinstance(text, str) else ""
    if not (_HEX if base == 16 else _INT).fullmatch(s):
        raise NumberError(f"{what} {excerpt(str(text))}: not a whole number{_range(lo, hi, unit)}")
    v = int(s, 16) if base == 16 else int(s)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise NumberError(f"{what} {excerpt(s)}: out of range{_range(lo, hi, unit)}")
    return v


def parse_float(text: str, *, what: str, lo: float | None = None, hi: float | None = None,
                unit: str = "") -> float:
    """A finite number in [lo, hi] from `text` (ASCII digits, one ".", an exponent); NumberError
    naming `what` otherwise (nan, inf, 1e999 included)."""
    s = text.strip() if isinstance(text, str) else ""
    if not _FLOAT.fullmatch(s):
        raise NumberError(f"{what} {excerpt(str(text))}: not a number{_range(lo, hi, unit)}")
    v = float(s)
    if not math.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise NumberError(f"{what} {excerpt(s)}: out of range{_range(lo, hi, unit)}")
    return v


def _shown(v) -> str:
    """A bound as the user types it: an integer in full (4194304, not 4.1943e+06), others by :g."""
    if isinstance(v, int) or (float(v).is_integer() and abs(v) < 1e15):
        return str(int(v))
    return f"{v:g}"


def _range(lo, hi, unit: str) -> str:
    u = f" {unit}" if unit else ""
    if lo is not None and hi is not None:
        return f"; give {_shown(lo)} to {_shown(hi)}{u}"
    if lo is not None:
        return f"; give {_shown(lo)}{u} or more"
    if hi is not None:
        return f"; give at most {_shown(hi)}{u}"
    return ""


def bounded(lo: float, hi: float, unit: str = "seconds", *, integer: bool = False, zero: bool = False):
    """An argparse type for a number in [lo, hi] (or 0 when `zero`): other scripts' digits, nan, inf,
    an empty text, negatives and values past the bound are refused with the accepted range, before any
    work is done. argparse names the option in the message ("argument --interval: ...")."""
    def parse(text: str):
        try:
            if integer:
                v = parse_int(text, what="", lo=0 if zero else int(lo), hi=int(hi), unit=unit)
            else:
                v = parse_float(text, what="", lo=0.0 if zero else lo, hi=hi, unit=unit)
        except NumberError as e:
            raise argparse.ArgumentTypeError(str(e).strip()) from None
        if zero and v != 0 and v < lo:
            raise argparse.ArgumentTypeError(f"{excerpt(text)}: out of range; give {_shown(lo)} to {_shown(hi)} {unit} "
                                             "(or 0 for none)")
        return v
    parse.__name__ = unit           # argparse names the type in some messages
    return parse
