"""coremap's parser as plain data, for what is generated from it: the manual page (manpage.py) and the
shell completion scripts (completion.py). One reading of argparse's internals, here, for both.

What people are offered is what `--help` offers: an option whose help is argparse.SUPPRESS, a command
registered without help (`agent`, app/cli/common.py hidden_commands) and the old spellings an option
still accepts (CpusAction.old: `--cpu`, `plan --quiet`, `fleet --jitter-cpu`) are left out. The old
spellings are kept apart in `old`, so a completion can still step over their values.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from app.cli.common import hidden_commands, subcommands

# What a value is, told from its metavar where argparse knows no more: a completion offers files,
# folders or host names for it, nothing for the rest (a CPU list, a number).
FILE_WORDS = ("FILE", "PATH", "ARCHIVE", "OUT", ".")
HOST_WORDS = ("HOST", "SERVER")


@dataclass(frozen=True)
class Argument:
    """One option or positional of a command."""
    strings: tuple[str, ...]          # ("-c", "--cpus"); () for a positional
    old: tuple[str, ...]              # spellings still accepted, never offered
    metavar: str                      # "" for a flag
    choices: tuple[str, ...]
    help: str                         # with argparse's %(default)s and the like filled in
    repeatable: bool                  # action="append"
    many: bool                        # a positional of several words (nargs * or +)

    @property
    def takes_value(self) -> bool:
        return bool(self.metavar)

    @property
    def value_kind(self) -> str:
        """"choice", "dir", "file", "host", "command" (the words after `--`) or "" (anything)."""
        m = self.metavar.upper()
        if self.choices:
            return "choice"
        if m.startswith("--"):
            return "command"
        if "DIR" in m:
            return "dir"
        if any(w in m for w in FILE_WORDS):
            return "file"
        if any(w in m for w in HOST_WORDS):
            return "host"
        return ""


@dataclass(frozen=True)
class Command:
    """A command (the top level's path is ()), its help line in its parent's list, its own text and
    arguments, and the commands under it."""
    path: tuple[str, ...]
    summary: str
    usage: str
    description: str
    epilog: str
    options: tuple[Argument, ...]
    positionals: tuple[Argument, ...]
    commands: tuple[Command, ...]

    @property
    def name(self) -> str:
        return " ".join(("coremap", *self.path))

    def walk(self):
        """This command, then every command under it, depth first."""
        yield self
        for c in self.commands:
            yield from c.walk()


def command_tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = (), summary: str = "") -> Command:
    """The command `parser` is, with every visible command under it."""
    options, positionals = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        (options if action.option_strings else positionals).append(_argument(parser, action))
    children = []
    sub = subcommands(parser)
    if sub is not None:
        hidden = set(hidden_commands(parser))
        expand = parser._get_formatter()._expand_help          # "busy %%" is "busy %", as in --help
        helps = {a.dest: expand(a) for a in sub._choices_actions if a.help}
        for name, child in sub.choices.items():
            if name not in hidden:
                children.append(command_tree(child, (*path, name), helps.get(name) or ""))
    epilog = parser.epilog() if callable(parser.epilog) else parser.epilog
    return Command(path, summary, _usage(parser), parser.description or "", epilog or "", tuple(options),
                   tuple(positionals), tuple(children))


def _argument(parser: argparse.ArgumentParser, action: argparse.Action) -> Argument:
    old = tuple(getattr(action, "old", ()))
    strings = tuple(s for s in action.option_strings if s not in old)
    if action.option_strings and action.nargs == 0:
        metavar = ""
    elif isinstance(action.metavar, str):
        metavar = action.metavar
    elif action.choices is not None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        metavar = action.dest.upper() if action.option_strings else action.dest
    helper = parser._get_formatter()
    return Argument(strings, old, metavar, tuple(map(str, action.choices or ())),
                    helper._expand_help(action) if action.help else "",
                    isinstance(action, argparse._AppendAction), action.nargs in ("*", "+", argparse.REMAINDER))


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line as --help gives it, on one line whatever the terminal's width (so what is
    generated from it is the same everywhere)."""
    formatter = parser.formatter_class(prog=parser.prog, width=100_000)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return " ".join(formatter.format_help().split())
