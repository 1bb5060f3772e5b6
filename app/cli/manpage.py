"""The manual page, coremap(1), written from the parser (parser_tree.py) and the tables of
app/cli/reference.py, so it says what `--help` says and cannot fall behind it: `coremap --man` prints
it; `make man` writes man/coremap.1, which the wheel installs as share/man/man1/coremap.1
(tests/unit/test_cli_docs.py fails while that copy differs from what the parser gives).

roff as man(7) reads it, plain enough for groff and mandoc: every "-" is written \\- (an ASCII
hyphen-minus, so an option copied from the page works), characters beyond ASCII as \\[uXXXX], `code`
in bold, and a paragraph whose lines are indented (the usage blocks of a docstring) unfilled. No date:
the page is the same wherever and whenever it is made, as the committed copy must be.
"""
from __future__ import annotations

import argparse
import itertools
import re

import app
from app.cli.parser_tree import Argument, Command, command_tree
from app.cli.reference import ENVIRONMENT, EXIT_STATUS

SEE_ALSO = (("taskset", 1), ("chrt", 1), ("lscpu", 1), ("lstopo", 1), ("irqbalance", 1), ("tuna", 8),
            ("cyclictest", 8))


def man_page(parser: argparse.ArgumentParser) -> str:
    """coremap(1) in roff."""
    top = command_tree(parser)
    # .nh .ad l: no hyphenation, ragged right; an option or path split at a line's end reads wrong.
    out = [f'.TH COREMAP 1 "" "coremap {app.__version__}" "User Commands"', ".nh", ".ad l",
           ".SH NAME", "coremap \\- " + _text(_first_sentence(top.description)),
           ".SH SYNOPSIS", ".B coremap", "[\\fIOPTIONS\\fR]", ".br", ".B coremap",
           "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGUMENTS\\fR]",
           ".SH DESCRIPTION", *_paragraphs(top.description),
           ".SH OPTIONS", *_arguments(top)]
    out += [".SH COMMANDS", ".PP", "Each command's own help: \\fBcoremap\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR."]
    for command in top.walk():
        if command.path:
            out += _command(command)
    out += [".SH ENVIRONMENT"] + [line for name, text in ENVIRONMENT for line in (".TP", f".B {_text(name)}", _text(text))]
    out += [".SH EXIT STATUS"] + [line for code, text in EXIT_STATUS for line in (".TP", f".B {_text(code)}", _text(text))]
    out += [".SH SEE ALSO", ",\n".join(f".BR {name} ({section})" for name, section in SEE_ALSO)]
    return "\n".join(out) + "\n"


def _command(c: Command) -> list[str]:
    out = [f'.SS "{_text(c.name)}"', ".PP", f"\\fB{_text(c.usage)}\\fR"]
    # Its description, which says more than its line in the list (and what it does in the window).
    out += _paragraphs(c.description or c.summary[:1].upper() + c.summary[1:])
    out += _arguments(c)
    if c.epilog:
        out += _paragraphs(c.epilog)
    return out


def _arguments(c: Command) -> list[str]:
    out = []
    for a in (*c.positionals, *c.options):
        out += [".TP", _invocation(a), _text(a.help) if a.help else ".\\&"]
    if c.commands and len(c.path) > 0:
        out += [".PP", "Its commands, each below:"] + [
            line for sub in c.commands for line in (".TP", f"\\fB{_text(sub.path[-1])}\\fR", _text(sub.summary))]
    return out


def _invocation(a: Argument) -> str:
    """`-c LIST, --cpus LIST` set in bold and italics."""
    value = f" \\fI{_text(a.metavar)}\\fR" if a.takes_value else ""
    if not a.strings:
        return f"\\fI{_text(a.metavar)}\\fR"
    return ", ".join(f"\\fB{_text(s)}\\fR{value}" for s in a.strings)


def _paragraphs(text: str) -> list[str]:
    """Paragraphs (blank-line separated) of a description: its lines filled, or as written where they
    are indented (a usage block)."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip("\n")):
        out.append(".PP")
        for indented, lines in itertools.groupby(para.split("\n"), key=lambda line: line.startswith("  ")):
            lines = list(lines)
            if indented:
                out += [".nf", *(_text(line) for line in lines), ".fi"]
            else:
                out.append(_text(" ".join(line.strip() for line in lines)))
    return out


def _first_sentence(text: str) -> str:
    first = " ".join(text.split()).split(". ")[0].rstrip(".")
    return first[:1].lower() + first[1:]


def _text(s: str) -> str:
    """`s` as roff text: its escapes, then `code` in bold."""
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\e")
        elif ch == "-":
            out.append("\\-")
        elif ord(ch) > 126 or (ord(ch) < 32 and ch != "\t"):
            out.append(f"\\[u{ord(ch):04X}]")
        else:
            out.append(ch)
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", "".join(out))
    # A line that starts with . or ' would be read as a request.
    return "\\&" + text if text[:1] in (".", "'") else text
