"""Writes go only where they should: an output path that exists and is not a regular file (a device,
a FIFO, a socket, a folder, a symlink) is refused with one line and left as it was; a name too long
for the filesystem is one line too (issue 10)."""
from __future__ import annotations

import os
import socket
import stat

import pytest

from tests.hostile.conftest import run_cli, run_main


def _kinds(tmp_path, suffix):
    """One output path of each kind, named with the suffix the command wants."""
    fifo = tmp_path / f"fifo{suffix}"
    os.mkfifo(fifo)
    sock_path = tmp_path / f"sock{suffix}"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    folder = tmp_path / f"folder{suffix}"
    folder.mkdir()
    target = tmp_path / "target.txt"
    target.write_text("keep me")
    link = tmp_path / f"link{suffix}"
    link.symlink_to(target)
    kinds = {"fifo": fifo, "socket": sock_path, "folder": folder, "symlink": link}
    if not suffix:
        kinds.update(device="/dev/null", full="/dev/full")
    return kinds, s


def _state(path):
    st = os.lstat(path)
    return (stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev)


@pytest.mark.parametrize("command, suffix", [
    (["snapshot", "{out}", "--no-second"], ""),
    (["report", "--out", "{out}"], ".html"),
    (["screenshot", "--out", "{out}"], ".png"),
    (["--screenshot", "{out}"], ".png"),
])
def test_non_regular_outputs_are_refused_and_untouched(capsys, tmp_path, command, suffix):
    outputs, sock = _kinds(tmp_path, suffix)
    try:
        for kind, out in outputs.items():
            before = _state(out)
            args = [a.replace("{out}", str(out)) for a in command]
            # The FIFO as a child; the other kinds, the same writer's refusal, in this process (run_main).
            r = run_cli(*args, timeout=60) if kind == "fifo" else run_main(capsys, *args, timeout=60)
            assert r.returncode == 2, (kind, r.stdout, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and "not a regular file" in lines[0], (kind, r.stderr)
            assert _state(out) == before, kind
        assert (tmp_path / "target.txt").read_text() == "keep me"
    finally:
        sock.close()


def test_named_like_a_report_but_a_device(tmp_path):
    dev = tmp_path / "report.pdf"
    os.symlink("/dev/null", dev)
    r = run_cli("report", "--out", dev, timeout=60)
    assert r.returncode == 2 and "is a symlink, not a regular file" in r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("command", [["snapshot", "{out}.tar.gz", "--no-second"], ["report", "--out", "{out}.html"],
                                     ["screenshot", "--out", "{out}.png"]])
def test_a_name_too_long_is_one_line(tmp_path, command):
    out = str(tmp_path / ("x" * 300))
    r = run_cli(*[a.replace("{out}", out) for a in command], timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "longer than the 255 a filesystem allows" in lines[0], r.stderr
    assert os.listdir(tmp_path) == []
