"""The one rule: only widgets/ imports Qt. Import every module of app/ and probes/ with PySide6,
shiboken6 and pyqtgraph blocked; any import of them fails the test."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = r"""
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph'):
            raise ImportError('Qt imported outside widgets/: ' + name)
        return None
sys.meta_path.insert(0, Block())
import app, probes
bad = []
for pkg in (app, probes):
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):
        if info.name.endswith('__main__'):
            continue
        importlib.import_module(info.name)
import app.cli.main
app.cli.main.build_parser()
print('ok')
"""


def test_app_and_probes_import_without_qt():
    r = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")


def test_block_catches_a_qt_import(tmp_path):
    # The check itself can fail: a module that imports PySide6 is caught.
    code = CHECK.replace("import app, probes", "import PySide6")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode != 0 and "Qt imported outside widgets/" in r.stderr


def test_benchmarks_reach_qt_through_widgets_only():
    """The benchmarks drive the window but import Qt only through widgets/ (widgets/harness.py)."""
    import ast
    bad = []
    for path in sorted((ROOT / "tests" / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("PySide6", "shiboken6", "pyqtgraph")]
    assert bad == []
