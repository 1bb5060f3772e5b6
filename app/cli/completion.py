"""Shell completion for bash and zsh, written from the parser (parser_tree.py), so every command, probe
and option `--help` lists completes, and nothing else: `coremap --completion bash|zsh` prints a script;
`make man` writes completions/coremap (bash) and completions/_coremap (zsh), which
the wheel installs where bash-completion and zsh look (share/bash-completion/completions,
share/zsh/site-functions). tests/unit/test_cli_docs.py fails while those copies differ from what the
parser gives, and runs the bash one.

What a value completes to is told from the option (parser_tree.Argument.value_kind): its choices,
files, folders, host names, after a probe's `--` a command; a CPU list or a number completes to
nothing. Old spellings (`--cpu`, `plan --quiet`) are never offered, but a value after one is still
stepped over, so the words after it complete as they should.
"""
from __future__ import annotations

import argparse

from app.cli.parser_tree import Argument, Command, command_tree

HEADER = ("completion for coremap, generated from its parser by `coremap --completion {shell}` "
          "(`make man` writes the copy installed with coremap); do not edit")


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    top = command_tree(parser)
    if shell == "bash":
        return bash_script(top)
    if shell == "zsh":
        return zsh_script(top)
    raise ValueError(f"no completion for the shell {shell!r}; choose bash or zsh")


# -- bash --------------------------------------------------------------------------------------------
def _case(name: str, doc: str, arms: list[tuple[list[str], str]]) -> list[str]:
    """A bash function that is one `case "$1"`, each arm's patterns quoted."""
    out = [f"{name}() {{  # {doc}", '    case "$1" in']
    for patterns, body in arms:
        out.append(f"        {'|'.join(_bash_word(p) for p in patterns)}) {body};;")
    return out + ["    esac", "}"]


def _bash_word(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`") + '"'


def _context(c: Command) -> str:
    return " ".join(c.path)


def _bash_kind(a: Argument) -> str:
    kind = a.value_kind
    return f"choice {' '.join(a.choices)}" if kind == "choice" else kind or "none"


def bash_script(top: Command) -> str:
    commands = list(top.walk())
    lines = ["# bash " + HEADER.format(shell="bash"), ""]
    lines += _case("_coremap_commands", "the commands under a command", [
        ([_context(c)], f"echo {_bash_word(' '.join(s.path[-1] for s in c.commands))}") for c in commands if c.commands])
    lines += _case("_coremap_options", "a command's options, as --help spells them", [
        ([_context(c)], f"echo {_bash_word(' '.join(s for a in c.options for s in a.strings))}") for c in commands])
    lines += _case("_coremap_value_kind", '"COMMAND OPTION": what its value is; nothing for a flag', [
        ([f"{_context(c)} {s}" for s in (*a.strings, *a.old)], f"echo {_bash_word(_bash_kind(a))}")
        for c in commands for a in c.options if a.takes_value])
    lines += _case("_coremap_positional_kind", "what a command's positional words are", [
        ([_context(c)], f"echo {_bash_word(_bash_kind(c.positionals[0]))}") for c in commands if c.positionals])
    lines += BASH_BODY.splitlines()
    return "\n".join(lines) + "\n"


BASH_BODY = r'''
_coremap_complete_kind() {  # completes $cur as a value of this kind
    case "$1" in
        choice\ *) COMPREPLY=($(compgen -W "${1#choice }" -- "$cur"));;
        file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"));;
        dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"));;
        host) COMPREPLY=($(compgen -A hostname -- "$cur"));;
        command) COMPREPLY=($(compgen -c -- "$cur"));;
        *) COMPREPLY=();;
    esac
}

_coremap() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local ctx="" word kind i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        if [[ $word == -- ]]; then
            # after a probe's "--": the command it runs, then that command's arguments
            if ((i == COMP_CWORD - 1)); then _coremap_complete_kind command; else _coremap_complete_kind file; fi
            return
        elif [[ $word == -* ]]; then
            if [[ $word != *=* && -n "$(_coremap_value_kind "$ctx $word")" ]]; then ((i++)); fi
        elif [[ " $(_coremap_commands "$ctx") " == *" $word "* ]]; then
            ctx="${ctx:+$ctx }$word"
        fi
    done
    if [[ $prev == -* && $prev != *=* ]]; then
        kind="$(_coremap_value_kind "$ctx $prev")"
        if [[ -n $kind ]]; then _coremap_complete_kind "$kind"; return; fi
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_coremap_options "$ctx")" -- "$cur"))
        return
    fi
    local commands
    commands="$(_coremap_commands "$ctx")"
    if [[ -n $commands ]]; then
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        return
    fi
    _coremap_complete_kind "$(_coremap_positional_kind "$ctx")"
}

complete -F _coremap coremap'''


# -- zsh ---------------------------------------------------------------------------------------------
def _zsh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _describe(help: str) -> str:
    """A help line short enough for a completion menu: its first clause, brackets made parentheses
    (_arguments ends a description at "]")."""
    first = help.split("; ")[0].strip()
    if len(first) > 72:
        first = first[:69].rsplit(" ", 1)[0] + "..."
    return first.replace("[", "(").replace("]", ")")


def _zsh_action(a: Argument) -> str:
    kind = a.value_kind
    return {"choice": "(" + " ".join(a.choices) + ")", "dir": "_files -/", "file": "_files", "host": "_hosts",
            "command": "_normal"}.get(kind, "")


def _zsh_option(a: Argument) -> str:
    star = "*" if a.repeatable else ""
    value = f":{a.metavar.replace(':', chr(92) + ':')}:{_zsh_action(a)}" if a.takes_value else ""
    spec = f"[{_describe(a.help)}]{value}"
    if len(a.strings) == 1:
        return _zsh_quote(f"{star}{a.strings[0]}{spec}")
    exclusive = "(" + " ".join(a.strings) + ")"
    return _zsh_quote(exclusive + star) + "{" + ",".join(a.strings) + "}" + _zsh_quote(spec)


def _zsh_positional(a: Argument) -> str:
    if a.value_kind == "command":
        return _zsh_quote("*::command:_normal")
    message = a.metavar.replace(":", "\\:")
    return _zsh_quote(f"{'*' if a.many else ''}:{message}:{_zsh_action(a)}")


def _zsh_function(c: Command) -> list[str]:
    name = "_" + "_".join(("coremap", *c.path)).replace("-", "_")
    specs = [_zsh_option(a) for a in c.options]
    if not c.commands:
        specs += [_zsh_positional(a) for a in c.positionals]
        return [f"{name}() {{", "    _arguments -s -S \\", *(f"        {s} \\" for s in specs[:-1]),
                f"        {specs[-1]}", "}", ""]
    out = [f"{name}() {{", '    local curcontext="$curcontext" state line', "    typeset -A opt_args",
           "    _arguments -C -s \\", *(f"        {s} \\" for s in specs),
           "        '1:command:->command' \\", "        '*::argument:->argument'", "    case $state in",
           "        command)", "            local -a commands=("]
    out += [f"                {_zsh_quote(s.path[-1] + ':' + _describe(s.summary))}" for s in c.commands]
    out += ["            )", f"            _describe -t commands {_zsh_quote(c.name + ' command')} commands ;;",
            "        argument)", '            curcontext="${curcontext%:*:*}:' + "-".join(("coremap", *c.path)) +
            '-$line[1]:"', "            case $line[1] in"]
    out += [f"                {s.path[-1]}) {'_'.join(('_coremap', *s.path)).replace('-', '_')} ;;" for s in c.commands]
    return out + ["            esac ;;", "    esac", "}", ""]


def zsh_script(top: Command) -> str:
    lines = ["#compdef coremap", "# zsh " + HEADER.format(shell="zsh"), ""]
    for c in reversed(list(top.walk())):         # each function before the one that calls it
        lines += _zsh_function(c)
    # Autoloaded from fpath, the file is _coremap's body: run it. Sourced (`source <(coremap
    # --completion zsh)`), register it.
    lines += ['if [ "$funcstack[1]" = "_coremap" ]; then', '    _coremap "$@"', "else",
              "    compdef _coremap coremap", "fi"]
    return "\n".join(lines) + "\n"
