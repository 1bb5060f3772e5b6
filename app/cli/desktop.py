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
import socket
import stat
import sys
from collections.abc import Mapping
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


# -- is there a display? ------------------------------------------------------------------------------
# Qt platforms that draw without a display server (offscreen, framebuffers, VNC): nothing to check.
_HEADLESS_PLATFORMS = ("offscreen", "minimal", "minimalegl", "eglfs", "linuxfb", "vnc", "vkkhrdisplay")
_NO_DISPLAY_WAYS = ("run coremap in a desktop session (or over ssh -X), take a picture with "
                    "--screenshot OUT.png, or use a command (coremap --help)")


def display_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Why the window cannot open here, as one sentence; None when a display answers (or the Qt
    platform chosen needs none). Asked before Qt starts: without a display Qt's xcb plugin aborts
    the process with "xcb-cursor0 or libxcb-cursor0 is needed to load the Qt xcb platform plugin …
    reinstalling the application may fix this", even where that library is installed."""
    env = os.environ if env is None else env
    platform = env.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    if platform in _HEADLESS_PLATFORMS:
        return None
    display, wayland = env.get("DISPLAY", ""), env.get("WAYLAND_DISPLAY", "")
    wanted = [(name, value) for name, value in (("WAYLAND_DISPLAY", wayland), ("DISPLAY", display)) if value
              and (not platform or platform.startswith("wayland" if name == "WAYLAND_DISPLAY" else "xcb"))]
    if not wanted:
        needs = {"xcb": "$DISPLAY", "wayland": "$WAYLAND_DISPLAY"}.get(platform.removesuffix("-egl"))
        why = (f"QT_QPA_PLATFORM is {platform} but {needs} is not set" if needs else
               "neither $DISPLAY nor $WAYLAND_DISPLAY is set")
        return f"no display is reachable: {why}; {_NO_DISPLAY_WAYS}"
    why = []
    for name, value in wanted:
        problem = _wayland_problem(value, env) if name == "WAYLAND_DISPLAY" else _x11_problem(value)
        if problem is None:
            return None
        why.append(f"${name} is {value} but {problem}")
    return f"no display is reachable: {'; '.join(why)}; {_NO_DISPLAY_WAYS}"


def require_display(args=None) -> None:
    """The one check before any path opens a window (the window, --session/--at, --pcp/--prometheus --host,
    the fleet): without a display Qt aborts the process (SIGABRT, issue 32: `--session F --at T`), so
    here it is one line ("no display is reachable: ...") and exit status 2. A --screenshot renders
    offscreen and needs none."""
    if args is not None and getattr(args, "screenshot", None):
        return
    problem = display_problem() or xcb_libraries_problem()
    if problem is not None:
        raise CoremapError(problem)


def xcb_libraries_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Which system libraries Qt's xcb plugin needs and lacks (app/syslibs.py reads the installed
    PySide6's own), as one sentence with the line that installs them; None when none is missing or
    the window will not use xcb (a Wayland session, an offscreen platform). Without them Qt says
    only that "xcb-cursor0 or libxcb-cursor0 is needed", whichever library is in fact missing."""
    env = os.environ if env is None else env
    platform = env.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    if platform not in ("", "xcb") or (not platform and env.get("WAYLAND_DISPLAY")) or not env.get("DISPLAY"):
        return None
    from app.syslibs import missing
    pkgs = [p for p in missing("run") if p not in ("gcc", "python3-dev", "python3-venv")]   # build-only
    if not pkgs:
        return None
    return (f"the window's X11 (xcb) platform needs system libraries that are missing: {' '.join(pkgs)}; "
            f"install them with `sudo apt-get install -y {' '.join(pkgs)}` (or run `make run`, which does)")


def _x11_problem(display: str) -> str | None:
    """None when an X server accepts a connection for `display` ("[host]:N[.screen]"), else why not.
    A local display is the socket /tmp/.X11-unix/XN (or Linux's abstract one of that name); a remote
    one, ssh -X's localhost:10 among them, is TCP port 6000 + N (X Window System Protocol, "Connection
    Setup"; Xlib's XOpenDisplay)."""
    host, sep, rest = display.rpartition(":")
    number = rest.split(".", 1)[0]
    if not sep or not number.isdigit():
        return "that is not a display name ([HOST]:NUMBER)"
    host = host.removeprefix("unix/")
    try:
        if host in ("", "unix"):
            path = f"/tmp/.X11-unix/X{number}"
            for address in (path, "\0" + path):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(1.0)
                    try:
                        s.connect(address)
                        return None
                    except (FileNotFoundError, ConnectionRefusedError):
                        continue
            return f"no X server listens on {path}"
        with socket.create_connection((host, 6000 + int(number)), timeout=2.0):
            return None
    except OSError as e:
        return f"no X server answers there ({e.strerror or e})"


def _wayland_problem(name: str, env: Mapping[str, str]) -> str | None:
    """None when the compositor's socket (absolute, or in $XDG_RUNTIME_DIR: the Wayland protocol's
    wl_display_connect) accepts a connection, else why not."""
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if not os.path.isabs(name) and not runtime:
        return "$XDG_RUNTIME_DIR, where its socket lives, is not set"
    path = name if os.path.isabs(name) else os.path.join(runtime, name)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(path)
        except OSError as e:
            return f"no compositor answers on {path} ({e.strerror or e})"
    return None
