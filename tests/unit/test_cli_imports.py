"""Every `coremap` run builds the parser of every subcommand; building it must not import what only
some commands use (issue 12: the JSON outputs' whole-process time). Each command imports its
machinery when it runs. A subcommand module that imports the journal, the sampler or the ssh agent
at its top (as app/cli/agent.py, fleet.py and report.py once did) costs every other command ~50 ms."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What running one command may import, never building the parser.
HEAVY = ("app.affinity", "app.journal", "app.sampler", "app.machine", "app.remote.agent", "app.remote.fleet",
         "app.remote.client", "app.remote.codec", "app.results", "app.report", "app.session", "msgspec",
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
        "app.cli.main.build_parser()", "app.cli.main.build_parser(); import app.journal"))
    assert "app.journal" in _imported_by_the_parser()
