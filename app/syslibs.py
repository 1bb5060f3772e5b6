"""Which system libraries Qt (and the build of the probes' C extension) needs, and which are missing.

Run as a plain script before any virtual environment exists (`python3 app/syslibs.py test`): stdlib only.
PySide6 wheels bundle Qt itself (and ICU) but not the X11/EGL/font libraries below; without them
`import PySide6.QtGui` fails with a bare "libEGL.so.1: cannot open shared object file", and the
window fails with 'Could not load the Qt platform plugin "xcb"'.

`make run` and `make test` call `python3 app/syslibs.py run|test --install`: as root the missing
Debian packages are installed (apt-get update, apt-get install -y, as .ci/run does); as a user the
one `sudo apt-get install` line is printed and make stops.
"""
from __future__ import annotations

import ctypes.util
import os
import shutil
import struct
import subprocess
import sys
import sysconfig

# soname -> Debian/Ubuntu package: the DT_NEEDED entries (`objdump -p`, `ldd`) of PySide6 6.11's
# libraries that no package of a minimal Debian system provides. "test" is what QtCore, QtGui,
# QtWidgets, QtDBus, QtSvg and the offscreen platform plugin load; "run" adds the xcb platform plugin
# (plugins/platforms/libqxcb.so and lib/libQt6XcbQpa.so.6) and its GLX/EGL integrations
# (plugins/xcbglintegrations). Packages from `dpkg -S` on Debian 12. test_syslibs.py reads the
# installed PySide6's libraries and fails when one needs a soname named nowhere here.
OFFSCREEN_LIBS = {
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libX11.so.6": "libx11-6",
}
XCB_LIBS = {
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-glx.so.0": "libxcb-glx0",
}
# Sonames every Debian system has (libc6, libstdc++6, libgcc-s1, zlib1g and libzstd1 are required
# by dpkg and apt themselves): never missing, so not checked.
BASE_SYSTEM = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libstdc++.so.6",
               "libgcc_s.so.1", "libz.so.1", "libzstd.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}

# PySide6's files whose DT_NEEDED entries the maps above cover, relative to PySide6/Qt.
QT_FILES = {
    "test": ("lib/libQt6Core.so.6", "lib/libQt6Gui.so.6", "lib/libQt6Widgets.so.6", "lib/libQt6DBus.so.6",
             "lib/libQt6Svg.so.6", "plugins/platforms/libqoffscreen.so"),
    "run": ("plugins/platforms/libqxcb.so", "lib/libQt6XcbQpa.so.6",
            "plugins/xcbglintegrations/libqxcb-glx-integration.so",
            "plugins/xcbglintegrations/libqxcb-egl-integration.so"),
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
    # issue 23: the .desktop entry and the AppStream metainfo pass the freedesktop validators
    "desktop-file-validate": "desktop-file-utils",
    "appstreamcli": "appstream",
    # issue 21: the fleet's sources read from the real engines (tests/engines.py starts them)
    "pminfo": "pcp",
    "prometheus": "prometheus",
    "prometheus-node-exporter": "prometheus-node-exporter",
    # issue 20: an isolate tells a running irqbalance to leave the quiet CPUs alone (the test runs its own)
    "irqbalance": "irqbalance",
    # issue 31: the manual page is rendered (groff) and the zsh completion is run in zsh (test_cli_docs)
    "groff": "groff",
    "zsh": "zsh",
    # issue 31: make test runs the suite under it, so the journals' fsyncs do not wait on the disk
    "eatmydata": "eatmydata",
}
# sshd lives in sbin, which a user's PATH often lacks.
_SBIN = "/usr/sbin:/sbin"


def missing_tools() -> list[str]:
    """Debian packages of TEST_TOOLS whose command is not on PATH, each once."""
    path = os.environ.get("PATH", "") + os.pathsep + _SBIN
    return list(dict.fromkeys(pkg for cmd, pkg in TEST_TOOLS.items() if shutil.which(cmd, path=path) is None))


def elf_needed(path: str) -> list[str]:
    """The DT_NEEDED sonames of a 64-bit little-endian ELF file (what `objdump -p` lists as NEEDED),
    read without binutils: the SHT_DYNAMIC section's entries, names from the string table it links to
    (the ELF-64 Object File Format, "Sections" and "Dynamic Table")."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if sh_type != 6:          # SHT_DYNAMIC
            continue
        strtab = sections[link][4]
        for i in range(0, size, entsize or 16):
            tag, val = struct.unpack_from("<qQ", data, offset + i)
            if tag == 0:          # DT_NULL ends the table
                break
            if tag == 1:          # DT_NEEDED
                end = data.index(b"\0", strtab + val)
                out.append(data[strtab + val:end].decode())
    return out


def _ldconfig_sonames() -> set[str]:
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return set()
    return {line.split()[0] for line in out.splitlines()[1:] if line.strip()}


def missing(purpose: str) -> list[str]:
    """Debian package names missing for `purpose` ("test" or "run"), each once, in a stable order."""
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
    return list(dict.fromkeys(pkgs))


def install(pkgs: list[str]) -> int:
    """apt-get update, then apt-get install -y the packages (as root, as .ci/run does); 0 on success."""
    # SYSTEMD_OFFLINE=1: without systemd as PID 1 (a container, CI), pcp's postinst runs `systemctl
    # daemon-reload`, which fails and leaves the package half-configured (every later apt-get fails too);
    # offline, systemctl does the enabling it can and skips the rest.
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", SYSTEMD_OFFLINE="1")
    print(f"coremap: installing the system packages Qt and the probes' build need: {' '.join(pkgs)}",
          file=sys.stderr)
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *pkgs]):
        rc = subprocess.run(argv, env=env).returncode
        if rc != 0:
            print(f"coremap: `{' '.join(argv)}` failed with status {rc}", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str]) -> int:
    purpose = argv[1] if len(argv) > 1 else "run"
    if purpose not in ("run", "test", "tools"):
        print("usage: python3 app/syslibs.py run|test|tools [--names] [--install]", file=sys.stderr)
        return 2
    pkgs = missing_tools() if purpose == "tools" else missing(purpose)
    if "--names" in argv:
        print(" ".join(pkgs))
        return 0
    if not pkgs:
        return 0
    if "--install" in argv and os.geteuid() == 0 and shutil.which("apt-get"):
        return install(pkgs)
    print("coremap: Qt and the probes' build need system packages that are missing here:\n"
          f"    {' '.join(pkgs)}\n"
          f"Install them with:\n    sudo apt-get install -y {' '.join(pkgs)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
