"""The wheel a user installs (`pip wheel .`, what `pipx install .` builds) carries the data files the
window and `coremap --install-desktop` need: the icons, the .desktop entry, the AppStream metainfo and
the polkit policy; and the manual page and shell completion scripts, where man and the shells look under
the install's prefix."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.machines import cached

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "app", "widgets", "probes", "resources", "man", "completions")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    # Built from a copy: an in-tree build leaves build/ and *.egg-info in the checkout. No build
    # isolation: the test venv has setuptools, and a fresh isolated env would fetch it from PyPI.
    # Kept in the fixture cache for the sources' content and the builder (tests/machines.py cached): the
    # build, its C extension included, took 6-17 s of every run (issue 31).
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "screenshots"))
        else:
            shutil.copy2(p, src / name)
    whl = next(cached(f"wheel-{_content_key(src)}", lambda out: _build(src, out)).glob("coremap-*.whl"))
    with zipfile.ZipFile(whl) as z:
        yield z


def _content_key(src: Path) -> str:
    """What the wheel is made of: every source file's path and bytes, this Python and setuptools."""
    import setuptools
    h = hashlib.sha256(f"{sys.version} {setuptools.__version__}".encode())
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _build(src: Path, out: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    (_whl,) = out.glob("coremap-*.whl")


def test_wheel_holds_the_desktop_entry_icons_metainfo_and_polkit_policy(wheel):
    names = set(wheel.namelist())
    app_id = "io.github.coremap.Coremap"
    for f in (f"{app_id}.desktop", f"{app_id}.svg", f"{app_id}-48.png", f"{app_id}-128.png", f"{app_id}-256.png",
              f"{app_id}.metainfo.xml", "org.coremap.helper.policy"):
        assert f"app/resources/{f}" in names
        assert wheel.read(f"app/resources/{f}") == (REPO / "resources" / f).read_bytes()
    assert "app/resources/__init__.py" in names


def test_wheel_installs_the_manual_page_and_completion_scripts(wheel):
    """data-files: a venv or pipx install puts them under its prefix's share/ (tests/unit/test_cli_docs.py
    keeps the committed copies current with the parser)."""
    data = next(n for n in wheel.namelist() if n.endswith(".data/data/share/man/man1/coremap.1")).split("share/")[0]
    for installed, source in (("share/man/man1/coremap.1", "man/coremap.1"),
                              ("share/bash-completion/completions/coremap", "completions/coremap"),
                              ("share/zsh/site-functions/_coremap", "completions/_coremap")):
        assert wheel.read(data + installed) == (REPO / source).read_bytes()


def test_wheel_leaves_the_readme_screenshots_out(wheel):
    # The only pictures are the icon's PNGs (above); none of resources/screenshots.
    assert sorted(n for n in wheel.namelist() if n.endswith(".png")) == \
        sorted(f"app/resources/io.github.coremap.Coremap-{s}.png" for s in (48, 128, 256))


def test_wheel_has_both_commands_and_the_probes_extension(wheel):
    entry = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    text = wheel.read(entry).decode()
    assert "coremap = app.cli.main:main" in text and "coremap-helper = app.pinning.helper:main" in text
    assert any(n.startswith("probes/_native.") and n.endswith(".so") for n in wheel.namelist())


def test_wheel_holds_every_module_of_the_source_tree(wheel):
    """The packages are found by setup.py (and resources/ mapped to app.resources): a folder it missed
    would be missing from every install."""
    names = set(wheel.namelist())
    missing = sorted(str(p.relative_to(REPO)) for top in ("app", "widgets", "probes")
                     for p in (REPO / top).rglob("*.py")
                     if "__pycache__" not in p.parts and str(p.relative_to(REPO)) not in names)
    assert missing == []
