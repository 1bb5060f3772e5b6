"""`coremap --install-desktop` in a temporary HOME: what it writes, where, and what it refuses; the
.desktop entry and the AppStream metainfo pass the freedesktop validators (issue 23)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import xml.etree.ElementTree as ET

import pytest

from app.cli.desktop import (DesktopInstallError, desktop_entry_text, helper_command, install_desktop,
                             polkit_policy_text)
from app.cli.main import main
from app.resources import APP_ID, DESKTOP_ENTRY, ICON, METAINFO, png_icon_name, resource_path

EXEC_PATH_KEY = "org.freedesktop.policykit.exec.path"
WRITTEN = [f".local/share/applications/{APP_ID}.desktop",
           f".local/share/icons/hicolor/scalable/apps/{APP_ID}.svg",
           f".local/share/icons/hicolor/48x48/apps/{APP_ID}.png",
           f".local/share/icons/hicolor/128x128/apps/{APP_ID}.png",
           f".local/share/icons/hicolor/256x256/apps/{APP_ID}.png",
           f".local/share/metainfo/{APP_ID}.metainfo.xml",
           ".local/share/coremap/org.coremap.helper.policy"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return h


def _entry(home):
    return home / f".local/share/applications/{APP_ID}.desktop"


def _icon(home):
    return home / f".local/share/icons/hicolor/scalable/apps/{APP_ID}.svg"


def _exec_path(policy_text: str) -> str:
    root = ET.fromstring(policy_text)
    return root.find(f"action/annotate[@key='{EXEC_PATH_KEY}']").text


def test_writes_the_entry_icons_metainfo_and_policy_and_says_so(home, capsys):
    assert main(["--install-desktop"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:len(WRITTEN)] == [f"wrote {home / w}" for w in WRITTEN]
    assert _icon(home).read_bytes() == resource_path(ICON).read_bytes()
    for size in (48, 128, 256):
        png = (home / f".local/share/icons/hicolor/{size}x{size}/apps/{APP_ID}.png").read_bytes()
        assert png == resource_path(png_icon_name(size)).read_bytes()
        # PNG IHDR: the width and height words (RFC 2083 section 4.1.1) say the folder's size.
        assert int.from_bytes(png[16:20], "big") == int.from_bytes(png[20:24], "big") == size
    text = _entry(home).read_text()
    lines = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert lines["Type"] == "Application" and lines["Icon"] == APP_ID and lines["Name"] == "coremap"
    assert os.path.isabs(lines["Exec"].strip('"')) or lines["Exec"] == "coremap"
    assert stat.S_IMODE(_entry(home).stat().st_mode) == 0o644
    # The policy names the helper installed beside this coremap, and the line that installs it is printed.
    policy = home / ".local/share/coremap/org.coremap.helper.policy"
    assert _exec_path(policy.read_text()) == helper_command()
    assert out[-1] == f"    sudo install -m 644 {policy} /usr/share/polkit-1/actions/org.coremap.helper.policy"
    # Nothing but those files (and their folders) was created.
    made = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert made == sorted(WRITTEN)


def test_the_policy_names_the_helper_beside_coremap(tmp_path):
    bin_dir = tmp_path / "a b&c" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "coremap").write_text("#!/bin/sh\n")
    (bin_dir / "coremap-helper").write_text("#!/bin/sh\n")
    helper = helper_command(str(bin_dir / "coremap"))
    assert helper == str(bin_dir / "coremap-helper")
    text = polkit_policy_text(helper)
    assert _exec_path(text) == helper                   # XML-escaped in the file, the same path read back
    assert "&amp;" in text and text.count(EXEC_PATH_KEY) == 1
    # The rest of the policy is the shipped one.
    shipped = resource_path("org.coremap.helper.policy").read_text()
    assert text.replace(_exec_line(text), "") == shipped.replace(_exec_line(shipped), "")


def _exec_line(text: str) -> str:
    return next(line for line in text.splitlines() if EXEC_PATH_KEY in line)


def test_desktop_file_validate_passes_the_entry_clean(tmp_path):
    if shutil.which("desktop-file-validate") is None:
        pytest.skip("desktop-file-validate (desktop-file-utils) is not installed")
    for text in (resource_path(DESKTOP_ENTRY).read_text(), desktop_entry_text("/home/a b/.local/bin/coremap")):
        path = tmp_path / DESKTOP_ENTRY
        path.write_text(text)
        r = subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True, timeout=60)
        # Clean: no error, no warning and no hint (it printed a hint for two main categories before).
        assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stdout + r.stderr


def test_appstream_metainfo_validates_and_names_the_entry():
    if shutil.which("appstreamcli") is None:
        pytest.skip("appstreamcli (appstream) is not installed")
    path = resource_path(METAINFO)
    r = subprocess.run(["appstreamcli", "validate", "--no-net", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not [line for line in r.stdout.splitlines() if line[:2] in ("E:", "W:")], r.stdout
    root = ET.parse(path).getroot()
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == DESKTOP_ENTRY


def test_exec_names_this_coremap_and_quotes_a_path_with_a_space():
    assert "\nExec=/opt/x/bin/coremap\n" in desktop_entry_text("/opt/x/bin/coremap")
    assert '\nExec="/home/a b/.local/bin/coremap"\n' in desktop_entry_text("/home/a b/.local/bin/coremap")
    assert desktop_entry_text("/x").count("Exec=") == 1


def test_xdg_data_home_is_honoured_and_a_relative_one_ignored(home, tmp_path, monkeypatch):
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    written = install_desktop(exec_path="/x/coremap")
    assert written == [xdg / w.removeprefix(".local/share/") for w in WRITTEN]
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
