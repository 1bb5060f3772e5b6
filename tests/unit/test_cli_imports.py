"""Every `coremap` run builds the parser of every subcommand; building it must not import what only
some commands use (issue 12: the JSON outputs' whole-process time). Each command imports its
machinery when it runs. A subcommand module that imports the journal, the sampler or the ssh agent
at its top (as app/cli/agent.py, fleet.py and report.py once did) costs every other command ~50 ms."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What running one command may import, never building the parser.
HEAVY = ("app.pinning.service", "app.pinning.journal", "app.sampling.sampler", "app.machine", "app.remote.agent", "app.remote.fleet",
         "app.remote.client", "app.remote.codec", "app.store.results", "app.store.report", "app.store.session", "msgspec",
         "psutil", "numpy", "hdrh")

CHECK = r"""
import sys
import app.cli.main
before = set(sys.modules)
app.cli.main.build_parser()
print("\n".join(sorted(set(sys.modules) - before)))
"""


def _imported_by_the_parser() -> list[str]:
    r = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_building_the_parser_imports_no_command_machinery():
    heavy = [m for m in _imported_by_the_parser() if m.split(".")[0] in HEAVY or
             any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []


def test_the_check_sees_a_heavy_import(monkeypatch):
    """The check can fail: the same script with a top-level import of the journal in the parser finds it."""
    monkeypatch.setattr(sys.modules[__name__], "CHECK", CHECK.replace(
        "app.cli.main.build_parser()", "app.cli.main.build_parser(); import app.pinning.journal"))
    assert "app.pinning.journal" in _imported_by_the_parser()


def test_the_command_table_is_what_the_modules_register():
    """COMMANDS (app/cli/main.py) names each subcommand's module; registering that module alone must
    give exactly the commands the table gives it, and every module with register() is in it."""
    import argparse
    import ast
    import importlib

    from app.cli.main import COMMAND_MODULES, COMMANDS
    registering = {path.stem for path in (ROOT / "app" / "cli").glob("*.py")
                   if any(isinstance(n, ast.FunctionDef) and n.name == "register"
                          for n in ast.parse(path.read_text()).body)}
    assert sorted(COMMAND_MODULES) == sorted(registering)
    for module in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"app.cli.{module}").register(sub)
        assert sorted(sub.choices) == sorted(c for c, m in COMMANDS.items() if m == module), module


@pytest.mark.parametrize("argv", [
    ["journal", "--json"], ["--root", "pin", "topology", "--json"], ["--root=/x", "irqs", "--json"],
    ["--ro", "/x", "threads"], ["--host", "h", "pin", "--irq", "3", "--cpus", "1"], ["--interval", "2"],
    ["isolate", "--cpus", "1", "--dry-run"], ["undo"], ["probe", "jitter", "--cpu", "1"], [],
    ["--size", "800x600", "--screenshot", "o.png", "--root", "/x"]])
def test_a_run_parses_as_the_whole_parser_would(argv):
    from app.cli.main import build_parser
    whole = vars(build_parser().parse_args(argv))
    own = vars(build_parser(argv).parse_args(argv))
    assert {k: v for k, v in own.items() if k != "func"} == {k: v for k, v in whole.items() if k != "func"}
    assert getattr(own.get("func"), "__qualname__", None) == getattr(whole.get("func"), "__qualname__", None)


@pytest.mark.parametrize("argv", [["nosuch"], ["--s", "x", "topology"], ["-h"], ["--", "topology"]])
def test_a_command_that_cannot_be_told_registers_them_all(argv):
    from app.cli.main import COMMANDS, _command_in, build_parser
    assert _command_in(argv, build_parser()) is None
    import argparse
    sub = next(a for a in build_parser(argv)._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(COMMANDS)
