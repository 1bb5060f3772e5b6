"""Reads stay inside the capture and are bounded (issue 10): a member that links out is read as missing
with a note, devices and FIFOs are never read, oversize files are refused; both with openat2 and with
the O_NOFOLLOW walk used where the kernel has no openat2."""
from __future__ import annotations

import os
import tarfile
from functools import partial

import pytest

from app.errors import SysRootReadError
from app.sysroot import SysRoot, confined
from tests.hostile.conftest import SECRET, replace_with_link, run_cli, run_main
from tests.processes import zombie


@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    if request.param == "walk":
        monkeypatch.setattr(confined, "_openat2_works", False)
    return request.param


def test_a_link_out_is_missing_with_a_note(capture, secret, resolver):
    replace_with_link(capture / "proc" / "cmdline", str(secret))                        # absolute
    core = capture / "sys/devices/system/cpu/cpu0/topology/core_id"
    # as an attacker writes it: enough ".." from the link's folder to reach "/", then the target
    rel = "/".join([".."] * len(core.parent.relative_to("/").parts)) + str(secret)
    replace_with_link(core, rel)                                                        # relative, climbs out
    root = SysRoot(capture)
    assert root.read_optional(root.proc("cmdline")) is None
    assert root.read_optional(root.cpu_dir("cpu0", "topology", "core_id")) is None
    assert not root.exists(root.proc("cmdline"))
    assert any("proc/cmdline leads outside the capture" in n for n in root.notes)
    assert any("core_id leads outside the capture" in n for n in root.notes)


def test_links_inside_the_capture_still_resolve(capture, resolver):
    (capture / "proc" / "alias").symlink_to("cmdline")
    (capture / "proc" / "up").symlink_to("../proc/./cmdline")
    root = SysRoot(capture)
    want = (capture / "proc" / "cmdline").read_text()
    assert root.read(root.proc("alias")) == want and root.read(root.proc("up")) == want
    assert root.notes == []


def test_devices_fifos_and_sockets_are_never_read(capture, resolver):
    replace_with_link(capture / "proc" / "meminfo", "/dev/zero")
    (capture / "proc" / "softirqs").unlink()
    os.mkfifo(capture / "proc" / "softirqs")
    replace_with_link(capture / "proc" / "cpuinfo", "/dev/urandom")
    root = SysRoot(capture)
    for name in ("meminfo", "softirqs", "cpuinfo"):
        assert root.read_optional(root.proc(name)) is None
    assert any("softirqs is not a regular file" in n for n in root.notes)


def test_an_oversize_file_is_refused_not_read(capture):
    with open(capture / "proc" / "interrupts", "r+b") as f:
        f.truncate(300 << 20)                    # sparse: 300 MiB of nothing on disk
    root = SysRoot(capture)
    with pytest.raises(SysRootReadError, match="more than the 256 MiB"):
        root.read(root.proc("interrupts"))


def test_cli_outputs_never_hold_the_target(capture, secret, tmp_path, capsys):
    replace_with_link(capture / "proc" / "cmdline", str(secret))
    replace_with_link(capture / "proc" / "meminfo", "/dev/zero")
    os.unlink(capture / "proc" / "softirqs")
    os.mkfifo(capture / "proc" / "softirqs")
    r = run_cli("topology", "--json", "--root", capture, timeout=60)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout and SECRET not in r.stderr
    assert "coremap: note: proc/cmdline leads outside the capture" in r.stderr
    # The files the report and the snapshot write are checked: made in this process (run_main, which raises
    # past its timeout if a read blocked), as topology's output above came from a child.
    out = tmp_path / "report.html"
    r = run_main(capsys, "report", "--root", capture, "--out", out, timeout=120)
    assert r.returncode == 0, r.stderr
    assert SECRET not in out.read_text()
    tarball = tmp_path / "again.tar.gz"
    r = run_main(capsys, "snapshot", tarball, "--root", capture, timeout=60)
    assert r.returncode == 0, r.stderr
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            if m.isfile():
                assert SECRET.encode() not in tf.extractfile(m).read(), m.name
            assert not (m.issym() and str(secret) in m.linkname), m.name


def test_cli_user_files_that_never_end_are_refused(tmp_path, capsys):
    # The first as a child (a read that never ends would be a timeout, not a stuck suite); the others in
    # this process (run_main, which raises past its timeout): the same refusal of the one input check.
    for run, args in ((run_cli, ["irqs", "--file", "/dev/zero"]),
                      (partial(run_main, capsys), ["report", "--out", tmp_path / "r.html", "--notes", "/dev/zero"]),
                      (partial(run_main, capsys), ["report", "--out", tmp_path / "r.html", "--probe", "/dev/urandom"])):
        r = run(*args, timeout=30)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "is a device or socket, not a file" in lines[0], r.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_fifo_input_with_no_writer_ends_at_once(tmp_path):
    fifo = tmp_path / "interrupts"
    os.mkfifo(fifo)
    # A writer that sends a real file and goes away, as `--file <(cat /proc/interrupts)` does.
    pid = os.fork()
    if pid == 0:
        try:
            with open(fifo, "w") as f:
                f.write(open("/proc/interrupts").read())
        finally:
            os._exit(0)
    r = run_cli("irqs", "--file", fifo, "--json", timeout=30)
    os.waitpid(pid, 0)
    assert r.returncode == 0, r.stderr
    assert '"irqs"' in r.stdout


def test_nothing_is_written_through_a_link_in_a_capture(capture, tmp_path):
    """Issue 10: `pin --root DIR --irq 30` with smp_affinity_list -> a sysctl rewrote that sysctl. A capture
    cannot be pinned at all; a test tree that may be written still never writes through a link out."""
    victim = tmp_path / "outside" / "printk_ratelimit"
    victim.parent.mkdir(exist_ok=True)
    victim.write_text("5\n")
    replace_with_link(capture / "proc" / "irq" / "30" / "smp_affinity_list", str(victim))
    r = run_cli("pin", "--irq", "30", "--cpus", "1", "--root", capture)
    assert r.returncode == 2 and "a capture cannot be pinned" in r.stderr
    assert r.stderr.count("\n") == 1
    assert victim.read_text() == "5\n"
    from app.sysroot import WRITABLE_TEST_ROOTS_ENV
    r = run_cli("pin", "--irq", "30", "--cpus", "1", "--root", capture,
                env={WRITABLE_TEST_ROOTS_ENV: str(capture), "COREMAP_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode in (1, 2), r.stdout          # refused: the mask cannot be read or written
    assert victim.read_text() == "5\n"


def test_a_zombie_thread_is_refused_like_an_exited_one(tmp_path):
    # A child that exits and is never reaped stays a zombie while its parent lives.
    with zombie() as (_, dead):
        r = run_cli("pin", "--tid", dead, "--cpus", "0", env={"COREMAP_STATE_DIR": str(tmp_path / "s")})
        assert r.returncode == 1
        assert "has exited (a zombie" in r.stdout, r.stdout


def test_a_process_that_exits_between_the_open_and_the_read_is_missing(monkeypatch):
    """procfs answers a read of an exited task's file with ESRCH once the task is reaped after the open.
    That task is gone, as one whose file is no longer there: read_optional gives None, and no command
    stops on it (an isolate stopped once on "/proc/PID/comm: No such process" of a process that ended
    while it listed them)."""
    import subprocess
    gone = subprocess.Popen(["sleep", "30"])
    read_bounded = confined._read_bounded

    def ends_first(fd, limit, path):
        gone.kill()
        gone.wait()                     # reaped: the open file now answers ESRCH
        return read_bounded(fd, limit, path)
    monkeypatch.setattr(confined, "_read_bounded", ends_first)
    root = SysRoot("/")
    try:
        assert root.read_optional(root.proc(gone.pid, "comm")) is None
    finally:
        gone.kill()
        gone.wait()
