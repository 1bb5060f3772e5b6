"""`coremap --install-desktop`: put coremap in the user's desktop menu.

Writes the .desktop entry to $XDG_DATA_HOME/applications and the icon to
$XDG_DATA_HOME/icons/hicolor/scalable/apps ($XDG_DATA_HOME defaults to ~/.local/share; the XDG Base
Directory and Desktop Menu specifications), for the user who runs it: never into /usr, even as
root. The entry's Exec= names this installation's `coremap` by its absolute path, so the menu
starts the same coremap even where ~/.local/bin (pipx's folder) is not on the desktop session's
PATH. A target that exists and is not a regular file (a symlink, a folder, a FIFO) is refused, not
replaced; a regular file is replaced atomically (app.atomic).
"""
from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

from app.atomic import atomic_writer
from app.errors import CoremapError
from app.resources import DESKTOP_ENTRY, ICON, POLKIT_POLICY, resource_path


class DesktopInstallError(CoremapError):
    """The menu entry or icon could not be written where the desktop looks for them."""


def data_home() -> Path:
    """$XDG_DATA_HOME when set to an absolute path (the spec says to ignore a relative one), else
    ~/.local/share."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    return Path.home() / ".local" / "share"


def coremap_command() -> str:
    """The absolute path of the `coremap` being run, for Exec=; plain "coremap" (looked up on PATH
    by the desktop) when it cannot be told, e.g. under `python -m app`."""
    here = Path(sys.argv[0])
    if here.name == "coremap" and here.is_file():
        return os.path.abspath(here)
    found = shutil.which("coremap")
    return os.path.abspath(found) if found else "coremap"


def desktop_entry_text(exec_path: str) -> str:
    """resources/coremap.desktop with Exec= pointing at `exec_path` (quoted when it holds a space:
    the Desktop Entry spec's Exec quoting)."""
    command = f'"{exec_path}"' if any(c in exec_path for c in ' \t"\\`$') else exec_path
    lines = resource_path(DESKTOP_ENTRY).read_text().splitlines()
    return "\n".join(f"Exec={command}" if line.startswith("Exec=") else line for line in lines) + "\n"


def _check_target(target: Path) -> None:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise DesktopInstallError(f"{target} exists and is not a regular file; move it away and run "
                                  "coremap --install-desktop again")


def _write(target: Path, data: bytes) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DesktopInstallError(f"{target.parent}: cannot create the folder ({os.strerror(e.errno or 0)}); "
                                  "check its permissions or set XDG_DATA_HOME") from None
    with atomic_writer(target, mode=0o644) as f:
        f.write(data)


def install_desktop(home: Path | None = None, exec_path: str | None = None) -> list[Path]:
    """Write the menu entry and the icon under `home` (default: data_home()); the paths written.
    Both targets are checked before either is written, so a refusal leaves nothing half done."""
    home = home or data_home()
    files = {home / "applications" / DESKTOP_ENTRY: desktop_entry_text(exec_path or coremap_command()).encode(),
             home / "icons" / "hicolor" / "scalable" / "apps" / ICON: resource_path(ICON).read_bytes()}
    for target in files:
        _check_target(target)
    for target, data in files.items():
        _write(target, data)
    return list(files)


def run(args) -> int:
    for path in install_desktop():
        print(f"wrote {path}")
    print(f"coremap-helper's polkit policy is {resource_path(POLKIT_POLICY)}; an administrator installs it "
          "in /usr/share/polkit-1/actions/ to let pins go through pkexec")
    return 0
