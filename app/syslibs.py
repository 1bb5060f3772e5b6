"""Which system libraries Qt (and the build of the probes' C extension) needs, and which are missing.

Run as a plain script before any virtual environment exists (`python3 app/syslibs.py test`): stdlib only.
PySide6 wheels bundle Qt itself but not the X11/EGL/font libraries below; without them
`import PySide6.QtGui` fails with a bare "libEGL.so.1: cannot open shared object file".
"""
from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
import sys
import sysconfig

# soname -> Debian/Ubuntu package. "test" needs what the offscreen platform loads; "run" adds the
# xcb platform plugin's libraries (see Qt's "Qt for X11 Requirements" page).
OFFSCREEN_LIBS = {
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
}
XCB_LIBS = {
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-image.so.0": "libxcb-image0",
    "libX11-xcb.so.1": "libx11-xcb1",
}


# Peers the test suite measures coremap against, and tools its tests drive: command -> Debian package.
# `make test` does not need them (a test names the package when it skips); `.ci/run` installs them so
# that CI runs every cross-check (`python3 app/syslibs.py tools --names`).
TEST_TOOLS = {
    "cyclictest": "rt-tests",
    "oslat": "rt-tests",
    "pdftoppm": "poppler-utils",
    "javac": "default-jdk-headless",
    "jcmd": "default-jdk-headless",
    # issue 15: tests/remote starts its own sshd (never the system's) and reaches it with ssh
    "sshd": "openssh-server",
    "ssh": "openssh-client",
}
# sshd lives in sbin, which a user's PATH often lacks.
_SBIN = "/usr/sbin:/sbin"


def missing_tools() -> list[str]:
    """Debian packages of TEST_TOOLS whose command is not on PATH, each once."""
    path = os.environ.get("PATH", "") + os.pathsep + _SBIN
    return list(dict.fromkeys(pkg for cmd, pkg in TEST_TOOLS.items() if shutil.which(cmd, path=path) is None))


def _ldconfig_sonames() -> set[str]:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return set()
    return {line.split()[0] for line in out.splitlines()[1:] if line.strip()}


def missing(purpose: str) -> list[str]:
    """Debian package names missing for `purpose` ("test" or "run"), in a stable order."""
    wanted = dict(OFFSCREEN_LIBS)
    if purpose == "run":
        wanted.update(XCB_LIBS)
    have = _ldconfig_sonames()
    pkgs = []
    for soname, pkg in wanted.items():
        if soname in have:
            continue
        stem = soname.split(".so")[0].removeprefix("lib")
        if not have and ctypes.util.find_library(stem):
            continue
        pkgs.append(pkg)
    # Building probes._native needs a C compiler and Python.h.
    if not (shutil.which("cc") or shutil.which("gcc")):
        pkgs.append("gcc")
    include = sysconfig.get_paths().get("include", "")
    if not os.path.exists(os.path.join(include, "Python.h")):
        pkgs.append("python3-dev")
    try:
        import ensurepip  # noqa: F401  (Debian splits it into python3-venv)
        import venv  # noqa: F401
    except ImportError:
        pkgs.append("python3-venv")
    return pkgs


def main(argv: list[str]) -> int:
    purpose = argv[1] if len(argv) > 1 else "run"
    if purpose not in ("run", "test", "tools"):
        print("usage: python3 app/syslibs.py run|test|tools [--names]", file=sys.stderr)
        return 2
    pkgs = missing_tools() if purpose == "tools" else missing(purpose)
    if "--names" in argv:
        print(" ".join(pkgs))
        return 0
    if pkgs:
        print("coremap: Qt and the probes' build need system packages that are missing here:\n"
              f"    {' '.join(pkgs)}\n"
              f"Install them with:\n    sudo apt-get install -y {' '.join(pkgs)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
