"""The layers (app.cli → widgets → probes → the model), the one rule (Qt only in widgets/) and no import
cycles, as import-linter checks them in `make test` (contracts in pyproject.toml). The check can fail:
a copy of the tree with one wrong import — inside a function, where a reviewer might miss it — breaks it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")
needs_linter = pytest.mark.skipif(not LINT.exists(), reason="import-linter is in the test extras (make test)")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    # PYTHONPATH first: the copy's packages, not the editable install's, are the ones analysed.
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([str(LINT), "--no-cache"], cwd=tree, capture_output=True, text=True, env=env,
                          timeout=120)


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "tree"
    dst.mkdir()
    for name in ("app", "widgets", "probes", "resources"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


@needs_linter
def test_the_tree_keeps_every_contract():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "BROKEN" not in r.stdout


@needs_linter
@pytest.mark.parametrize("module, line, contract", [
    ("app/sysroot.py", "def _later():\n    import widgets.colors  # noqa\n", "only the CLI does"),
    ("probes/jitter/__init__.py", "def _later():\n    from app.cli import common  # noqa\n", "Layers"),
    ("app/sampling/rates.py", "def _later():\n    import PySide6  # noqa\n", "only widgets imports Qt"),
    ("app/parse/cpulist.py", "def _later():\n    import app.format  # noqa\n", "No import cycle"),
])
def test_a_wrong_import_breaks_it(tmp_path, module, line, contract):
    tree = _copy(tmp_path)
    with open(tree / module, "a") as f:
        f.write("\n\n" + line)
    r = _lint(tree)
    assert r.returncode != 0, r.stdout[-2000:]
    assert contract in r.stdout and "BROKEN" in r.stdout
