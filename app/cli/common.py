"""What every subcommand shares: its parser with the `--root` option, the machine it names (a Host:
this one, a capture, a saved session's), an --out file checked before any work, headless Qt, the one
spelling of a CPU option and the one writer of --json.

Choices made where issue 23 was silent:
- CPUs are `-c/--cpus LIST` on every command that takes them (taskset's -c). The spellings they
  replaced (`--cpu`, `plan --quiet`, `fleet --jitter-cpu`) are kept as hidden option strings of the
  same option, so a script keeps working; each prints one note on stderr naming -c/--cpus, and help,
  the man page and completion offer only the new spelling.
- Every --json document is an object whose first key is `schema_version` (SCHEMA_VERSION below says
  what its number means); what was a bare list (threads, journal, fleet, several probe CPUs) is that
  list under a key naming its items.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from pathlib import Path

from app.errors import CoremapError, excerpt
from app.format import format_size, printable_lines
from app.parse.number import NumberError, bounded, parse_int  # bounded: every command imports it from here
from app.parse.size import SizeError, parse_size
from app.sysroot import SysRoot

# What a pid and a thread id can be: PID_MAX_LIMIT on 64-bit (include/linux/threads.h).
PID_MAX = 1 << 22

ROOT_HELP = "a captured machine (a folder holding sys/ and proc/) instead of this one"


def add_root_argument(p: argparse.ArgumentParser, help: str = ROOT_HELP, *, group=None) -> None:
    """`--root DIR` on a subcommand. SUPPRESS as default: `coremap --root X CMD` keeps the value the
    top-level parser set."""
    (group or p).add_argument("--root", metavar="DIR", default=argparse.SUPPRESS, help=help)


def add_command(subparsers, name: str, help: str, description: str, *,
                root: str | None = ROOT_HELP) -> argparse.ArgumentParser:
    """Subcommand `name`'s parser, with `--root DIR` as its first option (`root`: that option's help;
    None: no --root)."""
    p = subparsers.add_parser(name, help=help, description=description)
    if root is not None:
        add_root_argument(p, root)
    return p


class OptionError(CoremapError):
    """Options that cannot be used as given (an --out of the wrong kind) or together."""


# The roots of the machines commands opened, so main() can print what each refused to read (links
# out of a capture, devices where files belong) once the command is done.
_opened: list[SysRoot] = []


@contextlib.contextmanager
def opened_host(args):
    """The machine the arguments name (this one, --root, --session: app/sources/live.py open_host, the
    one door), closed after the block; what its files refuse to read is printed after the command."""
    # Imported here, not at the top: building the parser (every `coremap` run) opens no machine.
    from app.sources.live import open_host
    with open_host(args) as host:
        if host.root is not None:
            _opened.append(host.root)
        yield host


def output_file(args, suffixes: tuple[str, ...], kinds: str) -> Path:
    """--out, checked as output_path checks a file to write."""
    return output_path(args.out, "--out", suffixes, kinds)


def output_path(path: str, option: str, suffixes: tuple[str, ...], kinds: str) -> Path:
    """`option`'s file as a Path, refused (OptionError) unless it ends in one of `suffixes` (any case;
    `kinds` names them for people) and may be written (app.atomic.check_output_path), before any work."""
    out = Path(path)
    if out.suffix.lower() not in suffixes:
        raise OptionError(f"{option} {out}: name a {kinds} file")
    # Imported here, not at the top: app.atomic brings tempfile and shutil (issue 12: start-up time).
    from app.atomic import check_output_path
    check_output_path(out, option)
    return out


def take_notes() -> list[str]:
    """What the roots opened so far refused to read, once each; forgets them."""
    notes = list(dict.fromkeys(n for r in _opened for n in r.notes))
    _opened.clear()
    return notes


def ensure_headless_qt() -> None:
    """Offscreen Qt when there is no display (must run before the first Qt import)."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


class TerminalText:
    """sys.stdout or sys.stderr as every command writes to it: each write goes through
    app.format.printable_lines, so a name from a capture, a session or another machine that a printer
    forgot to pass through printable() still cannot move the cursor, clear the screen, forge a line
    or reverse the text after it (issue 24, class 3). Printers call printable() themselves as well:
    column widths are counted on the escaped text. One exception: a write that starts with a carriage
    return (a progress line redrawing itself, `coremap fleet`) keeps that one."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        if text[:1] == "\r":
            return self._stream.write("\r" + printable_lines(text[1:]))
        return self._stream.write(printable_lines(text))

    def __getattr__(self, name):
        # flush, fileno, isatty, buffer (write_json's bytes, JSON-escaped already), encoding...
        return getattr(self._stream, name)


@contextlib.contextmanager
def terminal_text():
    """sys.stdout and sys.stderr as TerminalText for the block; as they were after it."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalText(sys.stdout), TerminalText(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class _NewSpellingsOnly:
    """Help that lists an option by its current spellings only: the old ones an option still accepts
    (CpusAction.old) are left out, as they are of the man page and completion."""

    def _format_action_invocation(self, action):
        old = getattr(action, "old", ())
        if old:
            import copy         # here: only help needs it
            action = copy.copy(action)
            action.option_strings = [s for s in action.option_strings if s not in old]
        return super()._format_action_invocation(action)


class HelpFormatter(_NewSpellingsOnly, argparse.HelpFormatter):
    pass


class RawHelpFormatter(_NewSpellingsOnly, argparse.RawDescriptionHelpFormatter):
    pass


_FORMATTERS = {argparse.HelpFormatter: HelpFormatter, argparse.RawDescriptionHelpFormatter: RawHelpFormatter}


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line ("coremap irqs: argument --interval: ...; see --help"),
    like every other error of coremap, instead of a usage block and the message. Its subcommands'
    parsers are OneLineParsers too (argparse makes them of the parent's class)."""

    def __init__(self, *args, **kwargs):
        given = kwargs.get("formatter_class", argparse.HelpFormatter)
        kwargs["formatter_class"] = _FORMATTERS.get(given, given)
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:
        # An epilog may be given as a function, for help that is costly to write (app/cli/reference.py).
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()

    def error(self, message: str):
        sub = self.prog.removeprefix("coremap").strip()
        for name in hidden_commands(self):
            # "invalid choice: 'x' (choose from ...)" lists every command; a hidden one is not offered
            message = message.replace(f"{name!r}, ", "").replace(f", {name!r})", ")")
        for a in self._actions:
            # argparse names an option by all its strings ("-c/--cpus/--cpu/--quiet"): the current ones only
            if getattr(a, "old", ()):
                message = message.replace("/".join(a.option_strings),
                                          "/".join(s for s in a.option_strings if s not in a.old))
        self.exit(2, f"coremap: {sub + ': ' if sub else ''}{message}; see `{self.prog} --help`\n")


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The parser's subcommands (its add_subparsers action), None when it has none."""
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def hidden_commands(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommands registered without help (`agent`: started by --host, not typed by people):
    argparse leaves them out of the help's list; the man page, completion and errors do too."""
    sub = subcommands(parser)
    if sub is None:
        return []
    shown = {a.dest for a in sub._choices_actions}
    return [name for name in sub.choices if name not in shown]


# -- the CPUs of a command ---------------------------------------------------------------------------
CPUS_FLAGS = ("-c", "--cpus")
_noted: set[str] = set()


class CpusAction(argparse.Action):
    """Stores -c/--cpus LIST; given as one of its `old` spellings, it also prints one note on stderr
    (once per spelling and run) naming the new one."""

    def __init__(self, option_strings, dest, old=(), **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.old = tuple(old)

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string in self.old and option_string not in _noted:
            _noted.add(option_string)
            where = parser.prog.removeprefix("coremap").strip()
            print(f"coremap: note: {where + ' ' if where else ''}{option_string} is now -c/--cpus (as in taskset); "
                  f"{option_string} still works", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_cpus_argument(p: argparse.ArgumentParser, help: str, *, required: bool = False, old: tuple[str, ...] = (),
                      metavar: str = "LIST", type=None) -> argparse.Action:
    """`-c/--cpus LIST` (dest `cpus`), the one spelling of the CPUs a command takes. `--cpu` and the
    spellings in `old` are accepted too, as hidden strings of the same option (a `--cpu` was taken
    as an abbreviation of --cpus before; argparse would go on taking it so, silently)."""
    return p.add_argument(*CPUS_FLAGS, *dict.fromkeys(("--cpu", *old)), dest="cpus", action=CpusAction,
                          old=tuple(dict.fromkeys(("--cpu", *old))), required=required, metavar=metavar,
                          type=type, help=help)


def whole(lo: int, hi: int, unit: str = ""):
    """An argparse type for a whole number in [lo, hi] (a pid, a thread, an IRQ): `bounded` with
    integer=True, spelt shorter."""
    return bounded(lo, hi, unit, integer=True)


def pixel_size(text: str) -> str:
    """An argparse type for a picture's size, WIDTHxHEIGHT in pixels (320-10000 by 240-10000), given
    back in the one spelling the window reads ("1600x1000"); an empty or foreign-digit size is refused."""
    w, sep, h = text.strip().replace("×", "x").replace("X", "x").partition("x")
    try:
        if not sep:
            raise NumberError("")
        width = parse_int(w, what="width", lo=320, hi=10000, unit="pixels")
        height = parse_int(h, what="height", lo=240, hi=10000, unit="pixels")
    except NumberError as e:
        detail = f" ({e})" if str(e) else ""
        raise argparse.ArgumentTypeError(f"{excerpt(text)}: expected WIDTHxHEIGHT in pixels, e.g. 1600x1000"
                                         f"{detail}") from None
    return f"{width}x{height}"


def bounded_size(lo: int, hi: int):
    """An argparse type for a size such as 64M or 1G (app/parse/size.py) in [lo, hi] bytes."""
    def parse(text: str) -> int:
        try:
            v = parse_size(text, what="")
        except SizeError as e:
            raise argparse.ArgumentTypeError(str(e).strip()) from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{excerpt(text)}: give {format_size(lo)} to {format_size(hi)}")
        return v
    parse.__name__ = "size"
    return parse


def add_json_arguments(p: argparse.ArgumentParser, help: str = "machine-readable output (one JSON document)") -> None:
    """`--json` and `--pretty` (indented, for people; --json alone is compact, for programs)."""
    p.add_argument("--json", action="store_true", help=help)
    p.add_argument("--pretty", action="store_true", help="with --json: indented for reading")


# The version of the shape of every --json document coremap writes, which is its first key,
# `schema_version`. One number for all commands. It is raised when a field is removed or renamed,
# changes its type or meaning, or a document changes shape; a field added does not raise it, so a
# reader checks the number and ignores fields it does not know.
#   1  the documents before the key existed (read its absence as 1): threads, journal, fleet and a probe
#      on several CPUs were bare lists, and fleet gave every figure as text.
#   2  (issue 23) every document an object: such a list is under a key naming its items (threads,
#      entries, hosts, results); fleet's figures are numbers, its CPU lists lists of numbers.
SCHEMA_VERSION = 2


def json_document(obj, items: str | None = None) -> dict:
    """`obj` as a --json document: a dict with `schema_version` put first, or a list under the key
    `items` beside it."""
    if isinstance(obj, (list, tuple)):
        if not items:
            raise TypeError("a list written as JSON needs the key it goes under")
        return {"schema_version": SCHEMA_VERSION, items: obj}
    if not isinstance(obj, dict):
        raise TypeError(f"a JSON document is an object, not {type(obj).__name__}")
    return {"schema_version": SCHEMA_VERSION, **obj}


def write_json(obj, args=None, *, out=None, items: str | None = None) -> None:
    """`obj` as one JSON document (json_document: `schema_version` first, a list under `items`) on
    stdout, UTF-8 (RFC 8259), through msgspec: 13x the standard library's C encoder on a 1,152-CPU
    interrupts table (13 ms against 164 ms, measured), and it writes frozen dataclasses as objects of
    their fields, so callers need not build dicts or call dataclasses.asdict (50x slower on 20,000
    journal entries). nan and inf become null, which JSON can spell; what msgspec does not know (a
    Path) is written as its text. --pretty indents, for people. Every --json of every command is
    written here."""
    obj = json_document(obj, items)
    # Imported here, not at the top: every command imports this module, and only --json needs msgspec
    # (with typing_extensions, uuid and decimal it is ~7 ms of start-up; issue 12).
    try:
        import msgspec
    except ImportError:
        # The agent shipped to a server has only the standard library (app/remote/ship.py): the same
        # document through json, slower.
        _write_bytes(_stdlib_json(obj, getattr(args, "pretty", False)) + b"\n", out or sys.stdout)
        return
    data = msgspec.json.encode(obj, enc_hook=str)
    if getattr(args, "pretty", False):
        data = msgspec.json.format(data, indent=1)
    _write_bytes(data + b"\n", out or sys.stdout)


def _stdlib_json(obj, pretty: bool) -> bytes:
    import dataclasses
    import json

    def plain(v):
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v
    return json.dumps(plain(obj), indent=1 if pretty else None, separators=None if pretty else (",", ":"),
                      ensure_ascii=False, default=str).encode()


def _write_bytes(data: bytes, out) -> None:
    """UTF-8 bytes to a text stream's buffer (after what it holds), or as text where it has none."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(data.decode())
        return
    out.flush()
    buffer.write(data)
    buffer.flush()
