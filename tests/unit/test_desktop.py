"""`coremap --install-desktop` in a temporary HOME: what it writes, where, and what it refuses."""
from __future__ import annotations

import os
import stat

import pytest

from app.cli.desktop import DesktopInstallError, desktop_entry_text, install_desktop
from app.cli.main import main
from app.resources import ICON, resource_path


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return h


def _entry(home):
    return home / ".local/share/applications/coremap.desktop"


def _icon(home):
    return home / ".local/share/icons/hicolor/scalable/apps/coremap.svg"


def test_writes_the_entry_and_the_icon_and_says_so(home, capsys):
    assert main(["--install-desktop"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"wrote {_entry(home)}", f"wrote {_icon(home)}"]
    assert _icon(home).read_bytes() == resource_path(ICON).read_bytes()
    text = _entry(home).read_text()
    lines = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert lines["Type"] == "Application" and lines["Icon"] == "coremap" and lines["Name"] == "coremap"
    assert os.path.isabs(lines["Exec"].strip('"')) or lines["Exec"] == "coremap"
    assert stat.S_IMODE(_entry(home).stat().st_mode) == 0o644
    # Nothing but those two files (and their folders) was created.
    made = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert made == [".local/share/applications/coremap.desktop",
                    ".local/share/icons/hicolor/scalable/apps/coremap.svg"]


def test_exec_names_this_coremap_and_quotes_a_path_with_a_space():
    assert "\nExec=/opt/x/bin/coremap\n" in desktop_entry_text("/opt/x/bin/coremap")
    assert '\nExec="/home/a b/.local/bin/coremap"\n' in desktop_entry_text("/home/a b/.local/bin/coremap")
    assert desktop_entry_text("/x").count("Exec=") == 1


def test_xdg_data_home_is_honoured_and_a_relative_one_ignored(home, tmp_path, monkeypatch):
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    written = install_desktop(exec_path="/x/coremap")
    assert written == [xdg / "applications/coremap.desktop", xdg / "icons/hicolor/scalable/apps/coremap.svg"]
    monkeypatch.setenv("XDG_DATA_HOME", "relative/share")
    assert install_desktop(exec_path="/x/coremap")[0] == _entry(home)


def test_an_existing_regular_file_is_replaced(home):
    _entry(home).parent.mkdir(parents=True)
    _entry(home).write_text("[Desktop Entry]\nExec=old\n")
    install_desktop(exec_path="/new/coremap")
    assert "Exec=/new/coremap" in _entry(home).read_text()


def test_a_symlink_is_refused_and_its_target_left_alone(home, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    _entry(home).parent.mkdir(parents=True)
    _entry(home).symlink_to(victim)
    assert main(["--install-desktop"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"coremap: {_entry(home)} exists and is not a regular file; move it away and run "
                   "coremap --install-desktop again"]
    assert victim.read_text() == "keep me\n"
    assert _entry(home).is_symlink()
    assert not _icon(home).exists()


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_folder_or_fifo_in_the_way_is_refused(home, kind):
    target = _icon(home)
    target.parent.mkdir(parents=True)
    if kind == "folder":
        target.mkdir()
    else:
        os.mkfifo(target)
    with pytest.raises(DesktopInstallError, match="is not a regular file"):
        install_desktop(exec_path="/x/coremap")
    assert target.is_dir() if kind == "folder" else stat.S_ISFIFO(target.stat().st_mode)
    assert not _entry(home).exists(), "the entry is not written when the icon cannot be"
