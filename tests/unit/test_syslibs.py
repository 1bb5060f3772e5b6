"""app/syslibs.py: it names every library the installed PySide6 loads that a minimal Debian lacks,
and `make run` installs them as root but only prints the one install line as a user."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from app import syslibs


def _qt_dir() -> Path | None:
    spec = importlib.util.find_spec("PySide6")       # found, not imported: tests/unit stay Qt-free
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "Qt"


@pytest.mark.parametrize("purpose", ["test", "run"])
def test_every_library_pyside6_needs_is_named(purpose):
    qt = _qt_dir()
    if qt is None:
        pytest.skip("PySide6 is not installed (make test installs it)")
    bundled = set(os.listdir(qt / "lib"))
    named = set(syslibs.OFFSCREEN_LIBS) | (set(syslibs.XCB_LIBS) if purpose == "run" else set())
    unnamed = {}
    for rel in syslibs.QT_FILES[purpose]:
        for soname in syslibs.elf_needed(str(qt / rel)):
            if soname not in bundled and soname not in named and soname not in syslibs.BASE_SYSTEM:
                unnamed.setdefault(soname, rel)
    assert unnamed == {}, "add these sonames and their Debian packages to app/syslibs.py"


def test_the_xcb_plugin_libraries_are_read_from_the_plugin_itself():
    qt = _qt_dir()
    if qt is None:
        pytest.skip("PySide6 is not installed (make test installs it)")
    needed = syslibs.elf_needed(str(qt / "plugins/platforms/libqxcb.so"))
    assert "libxcb-cursor.so.0" in needed and "libxcb-icccm.so.4" in needed
    assert syslibs.XCB_LIBS["libxcb-cursor.so.0"] == "libxcb-cursor0"


def test_elf_needed_refuses_what_is_not_elf(tmp_path):
    p = tmp_path / "x.so"
    p.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        syslibs.elf_needed(str(p))


@pytest.fixture
def apt(monkeypatch):
    """Records the commands main() runs instead of running apt-get."""
    calls = []

    class Done:
        returncode = 0

    monkeypatch.setattr(syslibs, "missing", lambda purpose: ["libxcb-cursor0", "libxcb-icccm4"])
    monkeypatch.setattr(syslibs.shutil, "which", lambda cmd: f"/usr/bin/{cmd}")
    monkeypatch.setattr(syslibs.subprocess, "run", lambda argv, **kw: calls.append((argv, kw.get("env", {}))) or Done())
    return calls


def test_as_a_user_make_run_prints_the_one_install_line_and_stops(apt, monkeypatch, capsys):
    monkeypatch.setattr(syslibs.os, "geteuid", lambda: 1000)
    assert syslibs.main(["syslibs.py", "run", "--install"]) == 1
    err = capsys.readouterr().err
    assert [l.strip() for l in err.splitlines() if "apt-get" in l] == \
        ["sudo apt-get install -y libxcb-cursor0 libxcb-icccm4"]
    assert apt == []


def test_as_root_make_run_installs_what_is_missing(apt, monkeypatch):
    monkeypatch.setattr(syslibs.os, "geteuid", lambda: 0)
    assert syslibs.main(["syslibs.py", "run", "--install"]) == 0
    assert [argv for argv, _ in apt] == [["apt-get", "update", "-qq"],
                                         ["apt-get", "install", "-y", "-qq", "libxcb-cursor0", "libxcb-icccm4"]]
    assert all(env["DEBIAN_FRONTEND"] == "noninteractive" for _, env in apt)


def test_as_root_without_install_flag_nothing_is_installed(apt, monkeypatch):
    monkeypatch.setattr(syslibs.os, "geteuid", lambda: 0)
    assert syslibs.main(["syslibs.py", "run"]) == 1
    assert apt == []


def test_ci_installs_the_desktop_validators(monkeypatch, tmp_path):
    """`.ci/run` installs what `syslibs.py tools --names` lists: the .desktop and AppStream validators
    tests/unit/test_desktop.py runs are among them when missing, and not once they are on PATH."""
    monkeypatch.setattr(syslibs, "_SBIN", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert {"desktop-file-utils", "appstream"} <= set(syslibs.missing_tools())
    for cmd in ("desktop-file-validate", "appstreamcli"):
        (tmp_path / cmd).write_text("#!/bin/sh\n")
        (tmp_path / cmd).chmod(0o755)
    assert not {"desktop-file-utils", "appstream"} & set(syslibs.missing_tools())
