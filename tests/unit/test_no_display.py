"""Without a reachable display the window says so in one line and exits 2, before Qt starts (Qt's xcb
plugin aborted with "xcb-cursor0 … is needed" though the library was installed: issue 23). The
display servers here are sockets the test listens on: an abstract X11 socket, a TCP X display, a
Wayland socket file."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from app.cli.desktop import display_problem, xcb_libraries_problem

WAYS = "run coremap in a desktop session (or over ssh -X), take a picture with --screenshot OUT.png, or use a command"


@pytest.fixture
def x11_abstract():
    """A display number whose abstract socket @/tmp/.X11-unix/XN accepts connections (as Xorg's and
    Xvfb's do), chosen high so no real server uses it."""
    for n in range(4700, 4800):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(f"\0/tmp/.X11-unix/X{n}")
        except OSError:
            s.close()
            continue
        s.listen(4)
        yield n
        s.close()
        return
    pytest.skip("no free abstract X11 socket number in 4700-4799")


def test_no_display_variable_is_one_sentence():
    assert display_problem({}) == f"no display is reachable: neither $DISPLAY nor $WAYLAND_DISPLAY is set; {WAYS} (coremap --help)"
    assert display_problem({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "wayland-0"}).startswith(
        "no display is reachable: QT_QPA_PLATFORM is xcb but $DISPLAY is not set; ")


def test_platforms_that_need_no_display_are_left_to_qt():
    for platform in ("offscreen", "minimal", "vnc:size=800x600", "eglfs", "linuxfb"):
        assert display_problem({"QT_QPA_PLATFORM": platform}) is None


def test_an_x_server_that_answers_and_one_that_does_not(x11_abstract):
    assert display_problem({"DISPLAY": f":{x11_abstract}"}) is None
    assert display_problem({"DISPLAY": f"unix:{x11_abstract}.0"}) is None
    gone = x11_abstract + 1000
    assert display_problem({"DISPLAY": f":{gone}"}) == (
        f"no display is reachable: $DISPLAY is :{gone} but no X server listens on /tmp/.X11-unix/X{gone}; {WAYS} (coremap --help)")
    assert "that is not a display name" in display_problem({"DISPLAY": "nonsense"})


def test_a_tcp_display_like_ssh_x_forwarding():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        if port < 6000:
            pytest.skip(f"the kernel gave port {port}, below X's 6000")
        assert display_problem({"DISPLAY": f"127.0.0.1:{port - 6000}.0"}) is None
    assert "no X server answers there" in display_problem({"DISPLAY": f"127.0.0.1:{port - 6000}"})


def test_wayland_socket_in_the_runtime_folder(tmp_path):
    env = {"WAYLAND_DISPLAY": "wayland-7", "XDG_RUNTIME_DIR": str(tmp_path)}
    assert display_problem(env).startswith(f"no display is reachable: $WAYLAND_DISPLAY is wayland-7 but no "
                                           f"compositor answers on {tmp_path}/wayland-7")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "wayland-7"))
        s.listen(1)
        assert display_problem(env) is None
        # Either display answering is enough: Qt tries Wayland, then xcb.
        assert display_problem({**env, "DISPLAY": ":4999"}) is None
    assert "$XDG_RUNTIME_DIR, where its socket lives, is not set" in display_problem({"WAYLAND_DISPLAY": "wayland-7"})


def test_the_window_without_a_display_is_one_line_and_status_2_without_qt(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    code = ("import sys; from app.cli.main import main; rc = main([]); "
            "assert 'PySide6' not in sys.modules, 'Qt was loaded'; sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [f"coremap: no display is reachable: neither $DISPLAY nor $WAYLAND_DISPLAY is set; "
                                     f"{WAYS} (coremap --help)"]


def test_missing_xcb_libraries_are_named_with_the_line_that_installs_them(monkeypatch):
    """Qt's own message names xcb-cursor0 whatever library its xcb plugin lacks; coremap names the ones
    missing here (app/syslibs.py's map, read against ldconfig's list)."""
    from app import syslibs
    everything = set(syslibs.OFFSCREEN_LIBS) | set(syslibs.XCB_LIBS)
    monkeypatch.setattr(syslibs, "_ldconfig_sonames", lambda: everything - {"libxcb-icccm.so.4", "libxcb-keysyms.so.1"})
    problem = xcb_libraries_problem({"DISPLAY": ":0"})
    assert problem == ("the window's X11 (xcb) platform needs system libraries that are missing: libxcb-icccm4 "
                       "libxcb-keysyms1; install them with `sudo apt-get install -y libxcb-icccm4 libxcb-keysyms1` "
                       "(or run `make run`, which does)")
    # Not asked where the window will not use xcb.
    for env in ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, {"QT_QPA_PLATFORM": "offscreen"}, {}):
        assert xcb_libraries_problem(env) is None
    monkeypatch.setattr(syslibs, "_ldconfig_sonames", lambda: everything)
    assert xcb_libraries_problem({"DISPLAY": ":0"}) is None
