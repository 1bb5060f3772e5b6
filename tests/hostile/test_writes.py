"""Writes where they do not belong (issue 32): every file coremap writes goes through app/atomic.py, which
never writes under /dev, /proc or /sys however the folder is reached, never follows a link at the target,
and keeps a replaced file's mode and owner; a name that starts with "-" reaches a child program as a
file, never as an option; a window path without a display is one line, not an abort."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from app.atomic import AtomicWriteError, check_output_path, write_atomic
from app.inputs import child_operand
from tests.hostile.conftest import REPO, run_cli

NOBODY = 65534


@pytest.mark.parametrize("where", ["/dev/shm/coremap-x.png", "/proc/self/coremap-x", "/sys/kernel/coremap-x"])
def test_nothing_under_dev_proc_or_sys_is_written(where):
    with pytest.raises(AtomicWriteError, match="where coremap never writes"):
        check_output_path(where, "--out")
    assert not os.path.lexists(where)


def test_a_folder_linked_into_dev_is_refused_too(tmp_path):
    (tmp_path / "shm").symlink_to("/dev/shm")
    name = f"coremap-test-{os.getpid()}"
    try:
        with pytest.raises(AtomicWriteError, match=r"is in /dev, where coremap never writes"):
            write_atomic(tmp_path / "shm" / name, b"x")
        assert not os.path.lexists(f"/dev/shm/{name}")
    finally:
        if os.path.lexists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")           # what a regression wrote there


def test_a_link_at_the_target_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = tmp_path / "out.prom"
    link.symlink_to(victim)
    with pytest.raises(AtomicWriteError, match="is a symlink, not a regular file"):
        write_atomic(link, b"x")
    assert victim.read_text() == "keep me" and link.is_symlink()


def test_a_replaced_file_keeps_its_mode(tmp_path):
    p = tmp_path / "x.prom"
    p.write_text("old")
    p.chmod(0o640)
    write_atomic(p, b"new", mode=0o644)       # the mode a NEW file gets
    assert p.read_text() == "new" and (os.stat(p).st_mode & 0o777) == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's file, replaced as root")
def test_export_textfile_as_root_keeps_another_users_file_theirs(tmp_path):
    target = tmp_path / "x.prom"
    target.write_text("# theirs\n")
    os.chown(target, NOBODY, NOBODY)
    target.chmod(0o640)
    p = run_cli("export", "--textfile", target, timeout=60, env={"COREMAP_STATE_DIR": str(tmp_path / "state")})
    assert p.returncode == 0, p.stderr
    st = os.stat(target)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (NOBODY, NOBODY, 0o640)
    assert "coremap_" in target.read_text()


def test_a_name_that_starts_with_a_dash_is_a_file_to_a_child():
    assert child_operand("-Dall") == "./-Dall"
    assert child_operand("--help") == "./--help"
    assert child_operand("/var/log/pcp/a") == "/var/log/pcp/a" and child_operand("a-b") == "a-b"


def test_pcp_archive_dash_dall_reaches_pmdumplog_as_a_file_not_its_debug_option(tmp_path):
    if not os.path.exists("/usr/bin/pmdumplog"):
        pytest.skip("PCP is not installed")
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    before = set(os.listdir(tmp_path))
    p = subprocess.run([sys.executable, "-m", "app", "--pcp-archive=-Dall", "--at", "end", "--screenshot",
                        str(tmp_path / "x.png")], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    # pmdumplog was asked to open the file ./-Dall (none here), not given -D all (debug everything)
    assert len(lines) == 1 and "-Dall: pmdumplog failed" in lines[0], p.stderr[:400]
    assert 'Cannot open archive "./-Dall"' in lines[0], lines[0]
    assert "Procedure call traceback" not in p.stderr and "Usage:" not in p.stderr
    assert set(os.listdir(tmp_path)) == before


@pytest.fixture
def session_file(tmp_path):
    """A real session of a captured machine with two ticks of history: what `--session F --at T` replays."""
    from app.store.session import history_tick, save_session, session_from_root
    from app.sysroot import SysRoot
    from tests.machines import extract
    path = tmp_path / "history.coremap"
    save_session(path, session_from_root(SysRoot(extract("sno")), history=[
        history_tick(0.0, {0: {"busy": 0.5, "irq": 100.0}}), history_tick(1.0, {0: {"busy": 0.4, "irq": 90.0}})]))
    return path


def test_a_session_replay_without_a_display_is_one_line_not_an_abort(session_file):
    p = run_cli("--session", session_file, "--at", "end", timeout=60,
                env={"QT_QPA_PLATFORM": "", "DISPLAY": "", "WAYLAND_DISPLAY": ""})
    assert p.returncode == 2 and p.stderr.startswith("coremap: no display is reachable"), (p.returncode, p.stderr[-400:])
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["--pcp-archive", "{s}", "--at", "end"],
                                  ["--prometheus", "http://127.0.0.1:1", "--host", "a"],
                                  ["fleet", "--prometheus", "http://127.0.0.1:1"], ["fleet", "node1"]])
def test_every_window_path_without_a_display_is_one_line_and_exit_2(tmp_path, argv):
    env = {"QT_QPA_PLATFORM": "", "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    p = run_cli(*[a.replace("{s}", str(tmp_path / "none")) for a in argv], timeout=60, env=env)
    assert p.returncode == 2 and p.stderr.startswith("coremap: no display is reachable"), p.stderr[-400:]
    assert len(p.stderr.strip().splitlines()) == 1


# Qt's own writers write where they are told, through links and into devices: a picture saved by
# QImage/QPixmap.save(path), a PDF by QPrinter/QPdfWriter to a file name, settings by QSettings.
_QT_WRITERS = re.compile(r"\.save\(\s*str\(|grab\(\)\.save\(|setOutputFileName\(|QPdfWriter\(\s*str|QSettings\(")
_QT_ALLOWED = {("widgets/settings.py", "QSettings("): "QSettings works on a private copy in its own 0700 "
                                                      "folder; the one writer puts it in place"}


def test_no_file_is_written_by_qt_itself():
    bad = []
    for path in sorted((REPO / "widgets").rglob("*.py")) + sorted((REPO / "app").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = _QT_WRITERS.search(line.split("#", 1)[0])
            if m and (rel, m.group(0)) not in _QT_ALLOWED:
                bad.append(f"{rel}:{n}: {line.strip()}")
    assert bad == [], "write these through app/atomic.py (bytes from widgets/export.py):\n" + "\n".join(bad)


def test_saving_a_session_of_a_folder_tree_1500_deep_is_one_line(tmp_path):
    from app.errors import CoremapError
    from app.store.session import save_session, session_from_root
    from app.sysroot import SysRoot
    from tests.machines import copy_machine
    capture = tmp_path / "capture"
    copy_machine("sno", capture)
    deep = capture / "sys" / "x"
    deep.mkdir()
    os.chdir(deep)
    try:
        for _ in range(1500):           # relative steps: the whole path is past PATH_MAX
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(REPO)
    try:
        with pytest.raises(CoremapError) as e:
            save_session(tmp_path / "s.coremap", session_from_root(SysRoot(capture)))
        assert "nest more than 64 deep" in str(e.value) and "\n" not in str(e.value)
        assert not (tmp_path / "s.coremap").exists()
    finally:
        _remove_chain(deep, 1500)


def _remove_chain(top, depth: int) -> None:
    """Remove top/d/d/.../d bottom-up without recursion (rmtree, recursive, stops at ~1,000 levels)."""
    os.chdir(top)
    try:
        for _ in range(depth):
            os.chdir("d")
        for _ in range(depth):
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(REPO)
