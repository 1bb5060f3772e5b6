"""What every subcommand shares: the `--root` option, the SysRoot it names, and headless Qt."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from app.format import format_size
from app.parse.size import SizeError, parse_size
from app.sysroot import SysRoot

ROOT_HELP = "a captured machine (a folder holding sys/ and proc/) instead of this one"


def add_root_argument(p: argparse.ArgumentParser, help: str = ROOT_HELP, *, group=None) -> None:
    """`--root DIR` on a subcommand. SUPPRESS as default: `coremap --root X CMD` keeps the value the
    top-level parser set."""
    (group or p).add_argument("--root", metavar="DIR", default=argparse.SUPPRESS, help=help)


def root_arg(args) -> str | None:
    """The --root given at the top level or on the subcommand, else None (this machine)."""
    return getattr(args, "root", None)


# Every SysRoot a command opened, so main() can print what each refused to read (links out of a
# capture, devices where files belong) once the command is done.
_opened: list[SysRoot] = []


def root_of(args) -> SysRoot:
    """The SysRoot a command works on: --root, else this machine."""
    root = SysRoot(root_arg(args) or "/")
    _opened.append(root)
    return root


def take_notes() -> list[str]:
    """What the roots opened so far refused to read, once each; forgets them."""
    notes = list(dict.fromkeys(n for r in _opened for n in r.notes))
    _opened.clear()
    return notes


def ensure_headless_qt() -> None:
    """Offscreen Qt when there is no display (must run before the first Qt import)."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line ("coremap irqs: argument --interval: ...; see --help"),
    like every other error of coremap, instead of a usage block and the message."""

    def error(self, message: str):
        sub = self.prog.removeprefix("coremap").strip()
        self.exit(2, f"coremap: {sub + ': ' if sub else ''}{message}; see `{self.prog} --help`\n")


def bounded(lo: float, hi: float, unit: str = "seconds", *, integer: bool = False, zero: bool = False):
    """An argparse type for a number in [lo, hi] (or 0 when `zero`): nan, inf, negatives and values
    past the bound are refused with the accepted range, before any work is done."""
    def parse(text: str):
        try:
            v = int(text, 10) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a {'whole ' if integer else ''}number") from None
        if not math.isfinite(v) or not (lo <= v <= hi or (zero and v == 0)):
            what = f"{lo:g} to {hi:g} {unit}" + (" (or 0 for none)" if zero else "")
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: give {what}")
        return v
    parse.__name__ = unit           # argparse names the type in some messages
    return parse


def bounded_size(lo: int, hi: int):
    """An argparse type for a size such as 64M or 1G (app/parse/size.py) in [lo, hi] bytes."""
    def parse(text: str) -> int:
        try:
            v = parse_size(text, what="")
        except SizeError as e:
            raise argparse.ArgumentTypeError(str(e).strip()) from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: give {format_size(lo)} to {format_size(hi)}")
        return v
    parse.__name__ = "size"
    return parse


def add_json_arguments(p: argparse.ArgumentParser, help: str = "machine-readable output (one JSON document)") -> None:
    """`--json` and `--pretty` (indented, for people; --json alone is compact, for programs)."""
    p.add_argument("--json", action="store_true", help=help)
    p.add_argument("--pretty", action="store_true", help="with --json: indented for reading")


def write_json(obj, args=None, *, out=None) -> None:
    """One JSON document on stdout. Compact by default: json.dumps without indent runs the standard
    library's C encoder in one call (json.dump streams through the pure-Python encoder, ~5x slower on
    a 1,152-CPU interrupts table); --pretty indents. Values are plain JSON (nan/inf are refused)."""
    pretty = bool(getattr(args, "pretty", False))
    kw = dict(indent=1 if pretty else None, separators=None if pretty else (",", ":"), allow_nan=False, default=str)
    try:
        text = json.dumps(obj, **kw)
    except ValueError:
        # A nan or inf somewhere (a rate over a zero interval): JSON has no spelling for it, so it
        # becomes null rather than the invalid NaN the encoder would otherwise write.
        text = json.dumps(_finite(obj), **kw)
    (out or sys.stdout).write(text + "\n")


def _finite(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v
