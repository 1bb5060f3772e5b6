"""Hostile inputs: captures unpacked with plain `tar xf` that hold links out and devices, output paths
that are not files, journals with forged lines. Each test asserts one clear line, the exit status, and
that nothing outside its temporary folder changed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.machines import copy_machine

REPO = Path(__file__).resolve().parents[2]
SECRET = "coremap-hostile-secret-7f3a"


def run_cli(*args, timeout=60, env=None):
    """`python -m app ARGS` in a child (so a hang is a timeout, not a stuck suite)."""
    e = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=e)


def write_secret(folder: Path) -> Path:
    """A file outside every capture whose text must never appear in any output."""
    p = folder / "outside" / "secret"
    p.parent.mkdir()
    p.write_text(SECRET + "\n")
    return p


def copy_capture(dest: Path) -> Path:
    """A copy of a real 12-CPU capture with interrupts (openshift-nto sno), ours to spoil."""
    copy_machine("sno", dest)
    return dest


def run_main(capsys, *args, timeout=30):
    """`coremap ARGS` in this process (app.cli.main.main), as run_cli gives it: exit status, stdout,
    stderr. For the many cases of a refusal whose first case runs as a child (run_cli covers the process
    path), so each of the others saves a Python start and coremap's imports (issue 31). A run past
    `timeout` raises TimeoutError (SIGALRM, which coremap does not use) rather than hang the suite; the
    SIGTERM and SIGHUP handlers main() sets are put back."""
    import signal

    from app.cli.main import main

    def late(_signum, _frame):
        raise TimeoutError(f"coremap {' '.join(map(str, args))[:200]}: still running after {timeout} s")
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)}
    capsys.readouterr()
    signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:         # argparse's refusals, as in a child
        rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), rc, out.out, out.err)


@pytest.fixture
def secret(tmp_path):
    return write_secret(tmp_path)


@pytest.fixture
def capture(tmp_path):
    return copy_capture(tmp_path / "capture")


def tree_state(root: Path) -> dict:
    """What a test that only reads `root` leaves as it was: each entry's kind, mode, size, mtime and
    inode, and where each link points (links are not followed, FIFOs not opened)."""
    state = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            state[p] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino,
                        os.readlink(p) if os.path.islink(p) else None)
    return state


def read_only(root: Path):
    """Yield `root`, built once for a module's tests that only read it, and fail the test that changed
    it: the next test would find another tree than it asks for (each test built its own copy before,
    0.3-1.3 s of copying the capture each, issue 31)."""
    before = tree_state(root)
    yield root
    after = tree_state(root)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], f"a test that only reads its capture changed it: {changed[:10]}"


def replace_with_link(member: Path, target: str) -> None:
    member.unlink()
    member.symlink_to(target)


# A name as a hostile machine writes it: an ANSI colour, a window-title escape with BEL, a right-to-left
# override, a bidi isolate and a newline that would forge a line of its own.
EVIL = "ev\x1b[31mRED\x1b]0;pwned\x07\u202egnp.exe\u2066<b>x</b>\nFAKE"


def add_processes(capture: Path, names=(EVIL, "sshd"), first_pid: int = 1) -> list[int]:
    """proc/PID/{stat,comm,cmdline,status} and task/TID/stat for one process per name: the tree the
    thread readers need, which the machine captures of tests/fixtures do not hold."""
    pids = []
    for i, name in enumerate(names):
        pid = first_pid + i
        task = capture / "proc" / str(pid) / "task" / str(pid)
        task.mkdir(parents=True, exist_ok=True)
        stat = f"{pid} ({name}) S 0 " + " ".join(["0"] * 48) + "\n"
        for folder in (task, task.parent.parent):
            (folder / "stat").write_text(stat)
            (folder / "comm").write_text(name + "\n")
            (folder / "status").write_text(f"Name:\t{name}\nTgid:\t{pid}\nPid:\t{pid}\nThreads:\t1\n"
                                           "Cpus_allowed_list:\t0-11\n")
        (task.parent.parent / "cmdline").write_text(f"/usr/bin/{name}\0--flag\0")
        pids.append(pid)
    return pids


@pytest.fixture(scope="module")
def _names_capture(tmp_path_factory):
    return plant_names(copy_capture(tmp_path_factory.mktemp("names") / "capture"))


@pytest.fixture
def hostile_names(_names_capture):
    """The module's capture with hostile names (plant_names), for tests that only read it."""
    yield from read_only(_names_capture)


def plant_names(capture: Path) -> Path:
    """The capture with EVIL as a process and thread name, its host name (meta.json and
    proc/sys/kernel/hostname), an IRQ's action and the CPU model."""
    add_processes(capture)
    meta = capture / ".coremap"
    meta.mkdir(exist_ok=True)
    (meta / "meta.json").write_text(json.dumps({"format": 1, "host": EVIL, "time": "2024-01-01T00:00:00",
                                                "interval": None}))
    (capture / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (capture / "proc/sys/kernel/hostname").write_text(EVIL.replace("\n", " ") + "\n")
    irqs = capture / "proc" / "interrupts"
    irqs.write_text(irqs.read_text().replace("i8042", "i8042" + EVIL.replace("\n", " "), 1))
    info = capture / "proc" / "cpuinfo"
    info.write_text(info.read_text().replace("model name\t: ", "model name\t: " + EVIL.replace("\n", " ")))
    return capture


@pytest.fixture(scope="module")
def _tree_capture(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tree")
    return plant_tree(copy_capture(folder / "capture"), write_secret(folder))


@pytest.fixture
def hostile_tree(_tree_capture):
    """The module's capture with a hostile process tree (plant_tree), for tests that only read it."""
    yield from read_only(_tree_capture)


def plant_tree(capture: Path, secret: Path) -> Path:
    """The capture with a process tree built to leave it, hang a reader or fill its memory (issue 24,
    "Process lists in captures"): a cmdline and a comm linked to a secret outside (absolute, and by
    climbing with '..'), a thread's stat linked out, a task/ folder linked into the live /proc, a
    cmdline that is a FIFO, one linked to /dev/zero, a 2 GB sparse one, a status linked to /dev/zero."""
    add_processes(capture, names=[f"p{i}" for i in range(1, 10)])
    proc = capture / "proc"
    replace_with_link(proc / "1" / "cmdline", str(secret))
    replace_with_link(proc / "1" / "comm", str(secret))
    replace_with_link(proc / "2" / "task" / "2" / "stat", str(secret))
    shutil.rmtree(proc / "3" / "task")
    (proc / "3" / "task").symlink_to("/proc/self/task")
    (proc / "4" / "cmdline").unlink()
    os.mkfifo(proc / "4" / "cmdline")
    replace_with_link(proc / "5" / "cmdline", "/dev/zero")
    with open(proc / "6" / "cmdline", "r+b") as f:
        f.truncate(2 << 30)
    replace_with_link(proc / "7" / "task" / "7" / "status", "/dev/zero")
    (proc / "7" / "task" / "7" / "sched").symlink_to("/dev/zero")
    # A process whose leader's task entry is gone: its name is read from comm, here a link that climbs
    # out of the capture with '..'.
    os.rename(proc / "8" / "task" / "8", proc / "8" / "task" / "80")
    depth = len((proc / "8").relative_to("/").parts)
    replace_with_link(proc / "8" / "comm", "/".join([".."] * depth) + str(secret))
    (proc / "9" / "task" / "9" / "stat").unlink()
    (proc / "9" / "task" / "9" / "stat").symlink_to(proc / "1" / "task" / "1" / "stat")   # absolute, into the capture
    return capture
