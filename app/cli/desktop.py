"""`coremap --install-desktop`: put coremap in the user's desktop menu.

Writes, under $XDG_DATA_HOME ($XDG_DATA_HOME defaults to ~/.local/share; the XDG Base Directory,
Desktop Menu and Icon Theme specifications), for the user who runs it, never into /usr, even as root:
- applications/io.github.coremap.Coremap.desktop, whose Exec= names this installation's `coremap` by
  its absolute path, so the menu starts the same coremap even where ~/.local/bin (pipx's folder) is
  not on the desktop session's PATH;
- the icon: icons/hicolor/scalable/apps/….svg and the PNGs at 48, 128 and 256 (hicolor/NxN/apps/);
- metainfo/io.github.coremap.Coremap.metainfo.xml (AppStream: what software centres show);
- coremap/org.coremap.helper.policy: coremap-helper's polkit action with exec.path set to the helper
  of this installation (beside this `coremap`), which pkexec matches against the program it is asked
  to run; only root can install it in /usr/share/polkit-1/actions/, so the one `sudo install` line
  that does is printed.
A target that exists and is not a regular file (a symlink, a folder, a FIFO) is refused, not
replaced; a regular file is replaced atomically (app.atomic).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import sys
from pathlib import Path

from app.atomic import atomic_writer
from app.errors import CoremapError
from app.resources import (APP_ID, DESKTOP_ENTRY, ICON, METAINFO, PNG_ICON_SIZES, POLKIT_POLICY,
                           png_icon_name, resource_path)


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


def helper_command(coremap: str | None = None) -> str:
    """The absolute path of the `coremap-helper` installed with `coremap` (console scripts land in one
    folder, whether /usr/bin, ~/.local/bin or a venv's bin), else the one on PATH, else the system
    path the policy named before (/usr/bin/coremap-helper)."""
    beside = Path(coremap or coremap_command()).parent / "coremap-helper"
    if beside.is_absolute() and beside.is_file():
        return str(beside)
    found = shutil.which("coremap-helper")
    return os.path.abspath(found) if found else "/usr/bin/coremap-helper"


_EXEC_PATH = re.compile(r'(<annotate key="org\.freedesktop\.policykit\.exec\.path">)[^<]*(</annotate>)')


def polkit_policy_text(helper_path: str) -> str:
    """resources/org.coremap.helper.policy with exec.path naming `helper_path` (XML-escaped)."""
    from xml.sax.saxutils import escape
    text = resource_path(POLKIT_POLICY).read_text()
    out, n = _EXEC_PATH.subn(lambda m: m.group(1) + escape(helper_path) + m.group(2), text)
    if n != 1:
        raise DesktopInstallError(f"{resource_path(POLKIT_POLICY)}: no exec.path annotation to set; "
                                  "reinstall coremap")
    return out


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
    exec_path = exec_path or coremap_command()
    icons = home / "icons" / "hicolor"
    files = {home / "applications" / DESKTOP_ENTRY: desktop_entry_text(exec_path).encode(),
             icons / "scalable" / "apps" / ICON: resource_path(ICON).read_bytes()}
    for size in PNG_ICON_SIZES:
        files[icons / f"{size}x{size}" / "apps" / f"{APP_ID}.png"] = resource_path(png_icon_name(size)).read_bytes()
    files[home / "metainfo" / METAINFO] = resource_path(METAINFO).read_bytes()
    files[policy_path(home)] = polkit_policy_text(helper_command(exec_path)).encode()
    for target in files:
        _check_target(target)
    for target, data in files.items():
        _write(target, data)
    return list(files)


def policy_path(home: Path | None = None) -> Path:
    """Where --install-desktop writes the polkit policy for this installation's helper."""
    return (home or data_home()) / "coremap" / POLKIT_POLICY


def run(args) -> int:
    for path in install_desktop():
        print(f"wrote {path}")
    policy = policy_path()
    print(f"To let pins go through pkexec, an administrator installs the polkit policy, which names "
          f"{helper_command()}:\n    sudo install -m 644 {shlex.quote(str(policy))} /usr/share/polkit-1/actions/{POLKIT_POLICY}")
    return 0
