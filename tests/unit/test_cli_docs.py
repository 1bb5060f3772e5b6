"""The manual page and the completion scripts are generated from the parser (app/cli/manpage.py,
completion.py) and the committed copies the wheel installs (man/, completions/) are what the parser
gives now, as tests/gui/test_desktop_icons.py holds the PNGs to the SVG: an option added without
`make man` fails here. The bash script is run in bash, the zsh one in zsh (where installed), as a user
presses Tab."""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from app.cli.completion import completion_script
from app.cli.main import build_parser
from app.cli.manpage import man_page
from app.cli.parser_tree import command_tree

REPO = Path(__file__).resolve().parents[2]
COMMITTED = {"man/coremap.1": lambda p: man_page(p), "completions/coremap": lambda p: completion_script(p, "bash"),
             "completions/_coremap": lambda p: completion_script(p, "zsh")}


@pytest.mark.parametrize("path", list(COMMITTED))
def test_the_committed_copy_is_what_the_parser_gives(path):
    assert (REPO / path).read_text() == COMMITTED[path](build_parser()), f"{path} is stale: run `make man`"


def test_a_new_option_makes_them_stale():
    """The comparison above can fail: an option added to a command shows in all three."""
    parser = build_parser()
    topology = next(a for a in parser._actions if a.dest == "command").choices["topology"]
    topology.add_argument("--brand-new", metavar="THING", help="an option the copies do not know")
    for path, make in COMMITTED.items():
        text = make(parser)
        assert text != (REPO / path).read_text() and ("brand\\-new" in text or "--brand-new" in text), path


def test_the_man_page_lists_what_help_lists_and_nothing_hidden():
    page = man_page(build_parser())
    tree = command_tree(build_parser())
    for c in tree.walk():
        if c.path:
            assert f'.SS "{c.name.replace("-", chr(92) + "-")}"' in page
        for a in c.options:
            for s in a.strings:
                assert f"\\fB{s.replace('-', chr(92) + '-')}\\fR" in page, (c.name, s)
    # hidden: the agent, and the old spellings as options (the prose may still name them, for old scripts)
    assert "coremap agent" not in page
    assert not re.search(r"^\.TP\n\\fB\\-\\-(cpu|quiet|jitter\\-cpu)\\fR", page, re.M)
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "ENVIRONMENT", "EXIT STATUS"):
        assert f".SH {section}\n" in page
    assert "COREMAP_STATE_DIR" in page and ".B 130" in page


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_the_man_page_renders_without_a_warning(tmp_path):
    (tmp_path / "coremap.1").write_text(man_page(build_parser()))
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", str(tmp_path / "coremap.1")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    text = re.sub(r".\x08", "", r.stdout)
    assert "coremap probe jitter" in text and "-c LIST, --cpus LIST" in text


@functools.cache
def _script(shell: str) -> str:
    """The completion script the parser gives, made once per shell for the completion tests below, which
    only run it: a parser and its script for each of the 13 was 0.6 s of CPU (issue 31)."""
    return completion_script(build_parser(), shell)


def _bash(script: Path, line: str) -> list[str]:
    """What bash offers for the command line `line` (completing its last word), the script loaded."""
    words = line.split(" ")
    program = (f"source {script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\nCOMP_CWORD={len(words) - 1}\n"
               "_coremap\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run(["bash", "--norc", "--noprofile"], input=program, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.split("\n") if w]


@pytest.mark.parametrize("line,offered,not_offered", [
    ("coremap probe ji", ["jitter"], []),
    ("coremap ", ["isolate", "include", "probe", "verify"], ["agent"]),
    ("coremap --root /tmp is", ["isolate"], []),
    ("coremap probe jitter --", ["--cpus", "--duty", "--hlog"], ["--cpu", "--pairs", "--work"]),
    ("coremap probe jitter --policy ", ["fifo", "other"], []),
    ("coremap plan --quiet 1 --o", ["--out"], []),               # an old spelling's value is stepped over
    ("coremap pin -c 1 --", ["--tid", "--cpus"], ["--cpu"]),
    ("coremap probe counters -c 1 -- bas", ["bash"], []),        # the command a probe runs
    ("coremap snapshot /et", ["/etc"], []),
])
def test_bash_completes_as_help_reads(tmp_path, line, offered, not_offered):
    script = tmp_path / "coremap"
    script.write_text(_script("bash"))
    got = _bash(script, line)
    assert all(w in got for w in offered) and not any(w in got for w in not_offered), got


def _zsh_complete(fpath: Path, line: str, completed: str) -> str:
    """The line zsh shows after Tab on `line`, in an interactive zsh under zpty, the completion
    autoloaded from `fpath` as an installed one is: read until it shows `completed` (escapes and
    carriage returns taken out, as below), or for 20 s at most, when the caller's check fails on
    what it showed. A fixed 2 s wait after Tab was 8 s of the suite (issue 31)."""
    driver = fpath / "drive.zsh"
    driver.write_text(r'''
zmodload zsh/zpty
setopt extendedglob
zpty z zsh -f -i
zpty -w z "PS1='> '; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D; bindkey '^I' complete-word; print READY"
out=""; while [[ $out != *READY*'> '* ]]; do zpty -r -t z chunk && out+=$chunk || sleep 0.1; done
zpty -n -w z "$2"$'\t'
out=""; end=$(( SECONDS + 20 ))
while (( SECONDS < end )); do
  zpty -r -t z chunk && out+=$chunk || sleep 0.05
  shown=${out//$'\e'\[[0-9;?]#[a-zA-Z]/}; shown=${shown//[$'\r\b']/}
  [[ $shown == *"$3"* ]] && break
done
zpty -w z $'\C-u'"print DONE"
while [[ $out != *DONE* ]]; do zpty -r -t z chunk && out+=$chunk || sleep 0.1; done
print -r -- "$out"
zpty -d z
''')
    r = subprocess.run(["zsh", "-f", str(driver), str(fpath), line, completed], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]|[\r\b]", "", r.stdout)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
@pytest.mark.parametrize("line,completed", [("coremap probe ji", "coremap probe jitter"),
                                             ("coremap probe jitter --cp", "coremap probe jitter --cpus"),
                                             ("coremap probe jitter --policy f", "coremap probe jitter --policy fifo"),
                                             ("coremap iso", "coremap isolate")])
def test_zsh_completes_as_help_reads(tmp_path, line, completed):
    (tmp_path / "_coremap").write_text(_script("zsh"))
    r = subprocess.run(["zsh", "-n", str(tmp_path / "_coremap")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    shown = _zsh_complete(tmp_path, line, completed)
    assert completed in shown, shown
