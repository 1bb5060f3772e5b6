"""A probe is found by one name (issue 29): its folder probes/<name>/ holds its record, its runner and its
C loop, and nothing else lists it. Oracles: the folders on disk, and a copy of probes/ with one more
folder, which must become a probe (in the catalog, the spec, the child and the built extension) with no
other file edited."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from probes.build import native_sources
from probes.catalog import NAMES, RECORDS
from tests.machines import cached

ROOT = Path(__file__).resolve().parents[2]


def test_the_probes_are_the_folders_of_probes_each_with_its_runner_and_loop():
    folders = sorted(p.parent.name for p in (ROOT / "probes").glob("*/__init__.py"))
    assert sorted(r.key for r in RECORDS.values()) == folders
    for r in RECORDS.values():
        assert r.measure.__name__ == f"probes.{r.key}.measure"
        assert r.measure.NAME == r.name


def test_the_menus_keep_their_order():
    # the order the form, the CLI's help and the tabs listed them in when the records were one table
    assert NAMES == ("jitter", "wakeup", "sweep", "c2c", "counters", "messaging", "first-touch", "scaling")
    assert len({r.order for r in RECORDS.values()}) == len(RECORDS)


def test_the_extension_is_built_from_the_module_and_each_probes_loop():
    found = [p.relative_to(ROOT).as_posix() for p in native_sources(ROOT)]
    assert sorted(found) == sorted(["probes/_native.c", *(p.relative_to(ROOT).as_posix()
                                                           for p in ROOT.glob("probes/*/_loop.c"))])
    assert {Path(f).parent.name for f in found} >= {"c2c", "jitter", "wakeup", "sweep", "messaging", "first_touch",
                                                     "scaling"}


NEW_RECORD = '''
from probes.record import ProbeRecord
RECORD = ProbeRecord("zeta-ping", "Zeta (a probe added as one folder)", order=5)
'''

NEW_RUNNER = '''
from probes import _native
from probes.common import ProbeArgumentParser, add_common_args, hello
NAME = "zeta-ping"
def build_parser():
    p = ProbeArgumentParser(prog="python -m probes zeta-ping")
    add_common_args(p)
    return p
def run(args, emit):
    emit(hello(NAME, None, {}))
    emit({"type": "result", "answer": _native.zeta_answer()})
    return 0
def summarize(lines):
    return {"probe": NAME, "answer": lines[-1]["answer"]}
def text_lines(r):
    return [f"  answer {r['answer']}"]
'''

NEW_LOOP = r'''
#include "../_loops.h"

static PyObject *py_zeta_answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }

LP_METHODS(zeta_ping, {"zeta_answer", py_zeta_answer, METH_NOARGS, "zeta_answer() -> 42"});
'''

BUILD = '''
from pathlib import Path
from app.remote import server
# built as a shipped agent builds it (probes_unavailable would find an editable install's instead)
print(repr(server._build(Path("probes/_native.c").resolve())))
'''

CHECK = '''
import json
from probes.catalog import NAMES
from probes.spec import ProbeSpec
from probes.text import format_result
print(json.dumps({"names": NAMES, "job": ProbeSpec("zeta-ping").jobs()[0].label,
                  "text": format_result({"probe": "zeta-ping", "answer": 7})}))
'''


def _build_key(src: Path) -> str:
    """What the far side's build makes the extension of: every C file and header under probes/, the
    builder (app/remote/server.py, probes/build.py), this Python, its headers and the compiler."""
    import sysconfig
    cc = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) or shutil.which("cc") or ""
    st = Path(cc).stat() if cc else None
    h = hashlib.sha256(f"{sys.version} {sysconfig.get_paths()['include']} {cc} {st and (st.st_size, st.st_mtime_ns)}"
                       .encode())
    for f in sorted([*(src / "probes").rglob("*.[ch]"), src / "app/remote/server.py", src / "probes/build.py"]):
        h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _build(src: Path, env: dict, out: Path) -> None:
    """The extension built in `src` by app/remote/server.py's build, which must say nothing went wrong,
    and kept in `out`."""
    r = subprocess.run([sys.executable, "-c", BUILD], cwd=src, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "None", r.stdout[-2000:]
    (so,) = (src / "probes").glob("_native*.so")
    shutil.copy2(so, out / so.name)


def test_a_new_folder_is_a_new_probe_with_nothing_else_edited(tmp_path):
    """A copy of app/ and probes/ (no built extension) with probes/zeta_ping/: the catalog lists it first
    (its order), the spec and the text use it, the far side's build (app/remote/server.py, the same
    files setup.py builds) compiles its loop into probes._native (once per version of what it is built
    of: _build_key), and `python -m probes zeta-ping` runs it."""
    for top in ("app", "probes"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    new = tmp_path / "probes" / "zeta_ping"
    new.mkdir()
    (new / "__init__.py").write_text(textwrap.dedent(NEW_RECORD))
    (new / "measure.py").write_text(textwrap.dedent(NEW_RUNNER))
    (new / "_loop.c").write_text(NEW_LOOP)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)}
    # The build (8 loops at -O2, 5-6 s of CPU) is kept in the fixture cache for what it is made of
    # (_build_key; tests/machines.py cached), as test_packaging.py keeps the wheel: the first run of a
    # version of the C files and the builder builds it here and checks the build; the next ones find it.
    built = cached(f"zeta-native-{_build_key(tmp_path)}", lambda out: _build(tmp_path, env, out))
    if not list((tmp_path / "probes").glob("_native*.so")):
        (so,) = built.glob("_native*.so")
        shutil.copy2(so, tmp_path / "probes" / so.name)
    r = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["names"] == ["zeta-ping", *NAMES]
    assert out["job"] == "zeta-ping unbound"
    assert out["text"] == "  answer 7"
    child = subprocess.run([sys.executable, "-m", "probes", "zeta-ping"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stdout + child.stderr
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    assert lines[-1] == {"type": "result", "answer": 42}
