"""Nothing that only looks like a JVM is ever signalled or attached to (issue 24).

Attaching to a JVM whose listener is not up starts with SIGQUIT, which ends a process that does not
handle it: a `sleep` with a planted hsperfdata file, and a `sleep` with libjvm preloaded, were killed
that way. Each forgery below is tried through every way in: `coremap pin --java`, `coremap threads
--name`, the window's sampler (its JavaNameReader) and the guard's `java_thread_ids`. Each asserts the
process is alive, and that it was never attached: a listening socket waits where its attach socket
would be (/tmp/.java_pid<PID>, its user's, mode 600, which coremap would connect to) and no
connection ever arrives; no attach trigger (.attach_pid<PID>) is ever created.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.machine.java import JavaThreadError, java_thread_ids, verify_jvm
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.hostile.conftest import REPO, run_cli
from tests.jvms import ATTACHABLE, HANDLER, MarketData, needs_jdk, perfdata_bytes, wait_until

NOBODY = 65534
# The tests' interpreter may live in root's home, which user nobody cannot reach; the system's can run
# the CLI's stdlib-only commands as nobody.
SYSTEM_PYTHON = "/usr/bin/python3"
as_root = pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                             reason=f"needs root (to run processes as user nobody) and {SYSTEM_PYTHON}")
# A Python thread that names itself as a Java thread would be cut: "market-data-fee" to the kernel.
NAMED_THREAD = ("import ctypes, threading, time\n"
                "def run():\n"
                "    ctypes.CDLL(None).prctl(15, b'market-data-feed-handler-0', 0, 0, 0)\n"
                "    time.sleep(120)\n"
                "threading.Thread(target=run, daemon=True).start()\n"
                "time.sleep(120)\n")


def _user_name(uid: int) -> str:
    import pwd
    return pwd.getpwuid(uid).pw_name


@pytest.fixture
def place():
    """A folder under /tmp that user nobody can reach (pytest's tmp_path lies in root's 0700 folder)."""
    p = Path(tempfile.mkdtemp(prefix="coremap-forger-"))
    p.chmod(0o755)
    yield p
    shutil.rmtree(p, ignore_errors=True)


@contextmanager
def _forger(argv: list[str], tmp_path: Path, *, uid: int | None = None, env: dict | None = None,
            plant: bool = True):
    """A process run from a link called `java` (so its comm, like a JVM's, is "java"), as `uid`, in a
    folder of its own, with a perf-data file planted for it by its own user when `plant`, and a trap
    socket where its attach socket would be. Yields (process, trap)."""
    uid = os.geteuid() if uid is None else uid
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "java").symlink_to(argv[0])
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for p in (tmp_path, tmp_path / "jdk", bin_dir, cwd):
        p.chmod(0o755)
    os.chown(cwd, uid, -1)
    proc = subprocess.Popen([str(bin_dir / "java"), *argv[1:]], cwd=cwd, user=uid if uid != os.geteuid() else None,
                            env=dict(os.environ, **(env or {})))
    wait_until(lambda: Path(f"/proc/{proc.pid}/comm").read_text().strip() == "java", what="the exec")
    folder = Path(f"/tmp/hsperfdata_{_user_name(uid)}")
    made_folder = not folder.exists()
    planted = folder / str(proc.pid)
    trap_path = Path(f"/tmp/.java_pid{proc.pid}")
    trap = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if plant:
            if made_folder:
                folder.mkdir(mode=0o700)
                os.chown(folder, uid, -1)
            planted.write_bytes(perfdata_bytes(ATTACHABLE))
            planted.chmod(0o600)
            os.chown(planted, uid, -1)
        trap_path.unlink(missing_ok=True)
        trap.bind(str(trap_path))
        trap.listen(8)
        os.chown(trap_path, uid, -1)
        trap_path.chmod(0o600)
        yield proc, trap
    finally:
        trap.close()
        trap_path.unlink(missing_ok=True)
        planted.unlink(missing_ok=True)
        if plant and made_folder:
            shutil.rmtree(folder, ignore_errors=True)
        proc.kill()
        proc.wait()


def _never_attached(proc, trap, cwd: Path) -> None:
    assert proc.poll() is None, "the process was signalled"
    trap.setblocking(False)
    with pytest.raises(BlockingIOError):
        trap.accept()                       # nobody connected to what would be its attach socket
    assert not Path(f"/tmp/.attach_pid{proc.pid}").exists() and not (cwd / f".attach_pid{proc.pid}").exists()


def _every_way_in(proc) -> None:
    """The CLI's pin --java and threads --name, the sampler's name reader, the guard's lookup."""
    r = run_cli("pin", "--java", HANDLER, "--pid", proc.pid, "--cpus", "0", timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and f"process {proc.pid} (java) is not a Java VM" in lines[0], r.stderr
    r = run_cli("threads", "--pid", proc.pid, "--name", HANDLER, "--json", timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    root = SysRoot("/")
    sampler = Sampler(root)
    sampler.tick()
    wait_until(lambda: not sampler._java.busy, what="the name reader's end")
    state = sampler.tick()
    assert proc.pid not in state.thread_names.names and proc.pid not in state.thread_names.unavailable
    with pytest.raises(JavaThreadError, match="is not a Java VM coremap may attach to"):
        java_thread_ids(proc.pid, HANDLER, root)
    assert not verify_jvm(proc.pid, root).verified


def test_a_python_process_is_not_attached_to(place):
    with _forger([sys.executable, "-c", NAMED_THREAD], place, plant=os.geteuid() == 0) as (proc, trap):
        _every_way_in(proc)
        _never_attached(proc, trap, place / "cwd")


@as_root
@pytest.mark.parametrize("argv", [["/bin/sleep", "120"], [SYSTEM_PYTHON, "-c", NAMED_THREAD]],
                         ids=["sleep", "python-with-a-cut-thread-name"])
def test_a_process_of_nobody_with_planted_perf_data_is_never_attached(place, argv):
    with _forger(argv, place, uid=NOBODY) as (proc, trap):
        assert Path(f"/tmp/hsperfdata_nobody/{proc.pid}").stat().st_uid == NOBODY
        _every_way_in(proc)
        _never_attached(proc, trap, place / "cwd")


@needs_jdk
def test_a_sleep_with_libjvm_preloaded_is_never_attached(place):
    libjvm = Path(os.path.realpath(shutil.which("java"))).parents[1] / "lib" / "server" / "libjvm.so"
    with _forger(["/bin/sleep", "120"], place, env={"LD_PRELOAD": str(libjvm)},
                 plant=os.geteuid() == 0) as (proc, trap):
        # what fooled the old check; the loader maps it a moment after the exec (a busy machine read the
        # maps before it, issue 31's flaky tests)
        wait_until(lambda: "/libjvm.so" in Path(f"/proc/{proc.pid}/maps").read_text(), what="libjvm mapped")
        _every_way_in(proc)
        _never_attached(proc, trap, place / "cwd")


@as_root
@needs_jdk
def test_a_jvms_perf_data_must_be_its_own_users(tmp_path):
    """A real JVM of nobody without perf data (-XX:-UsePerfData): a file planted for it by another
    user, or one others may write, does not make it verified; its own user's file does."""
    started = time.time()
    m = MarketData("-XX:-UsePerfData", user=NOBODY)
    folder = Path("/tmp/hsperfdata_nobody")
    made = not folder.exists()
    planted = folder / str(m.pid)
    root = SysRoot("/")
    try:
        assert "it has no perf data" in verify_jvm(m.pid, root).reason
        if made:
            folder.mkdir(mode=0o700)
            os.chown(folder, NOBODY, -1)
        planted.write_bytes(perfdata_bytes(ATTACHABLE))
        planted.chmod(0o600)                                   # root's file in nobody's folder
        assert "is not a file of its user nobody" in verify_jvm(m.pid, root).reason
        os.chown(planted, NOBODY, -1)
        planted.chmod(0o666)                                   # nobody's, but anyone may write it
        assert "is not a file of its user nobody that only it may write" in verify_jvm(m.pid, root).reason
        # its listener was never started (a socket of that name older than it is another process's,
        # which had its pid before: pids are reused)
        listener = Path(f"/tmp/.java_pid{m.pid}")
        assert not listener.exists() or listener.lstat().st_mtime < started
        planted.chmod(0o600)
        assert verify_jvm(m.pid, root).verified               # a real JVM with its own user's file
        assert m.alive()
    finally:
        planted.unlink(missing_ok=True)
        if made:
            shutil.rmtree(folder, ignore_errors=True)
        m.stop()


# `coremap ARGS` with an audit hook that notes every step of an attach to the process $TARGET_PID: a
# trigger file (.attach_pid<PID>) opened, a signal sent to it, a connection to its /tmp/.java_pid<PID>.
# Written to stderr at exit, after what coremap said.
ATTACH_AUDITED = r"""
import json, os, sys
target, tried = int(os.environ["TARGET_PID"]), []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)) and ".attach_pid" in os.fsdecode(args[0]) \
            or event == "os.kill" and args[0] == target \
            or event == "socket.connect" and ".java_pid" in str(args[1]):
        tried.append(f"{event} {args!r}"[:300])
sys.addaudithook(hook)
import atexit
atexit.register(lambda: sys.stderr.write("ATTACH-TRIES " + json.dumps(tried) + "\n"))
from app.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@as_root
@needs_jdk
def test_another_users_jvm_says_why_when_coremap_is_not_root():
    m = MarketData()
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen", TARGET_PID=str(m.pid))
        r = subprocess.run([SYSTEM_PYTHON, "-c", ATTACH_AUDITED, "threads", "--pid", str(m.pid), "--json"], cwd="/",
                           user=NOBODY, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        [row] = [t for t in json.loads(r.stdout)["threads"] if t["tid"] == m.tid(HANDLER)]
        assert row["name"] == "market-data-fee" and "permission denied" in row["name_unread"]
        # Never attached: coremap made no step of an attach. (Whether /tmp/.java_pid<PID> exists says less:
        # this JVM is root's, and a root coremap of another suite on the machine, listing every thread
        # name, may attach to it meanwhile; one did, and failed this test.)
        [tries] = [json.loads(line.split(" ", 1)[1]) for line in r.stderr.splitlines()
                   if line.startswith("ATTACH-TRIES ")]
        assert tries == [] and m.alive()
    finally:
        m.stop()
