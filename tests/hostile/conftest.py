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

from tests.machines import extract

REPO = Path(__file__).resolve().parents[2]
SECRET = "coremap-hostile-secret-7f3a"


def run_cli(*args, timeout=60, env=None):
    """`python -m app ARGS` in a child (so a hang is a timeout, not a stuck suite)."""
    e = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=e)


@pytest.fixture
def secret(tmp_path):
    """A file outside every capture whose text must never appear in any output."""
    p = tmp_path / "outside" / "secret"
    p.parent.mkdir()
    p.write_text(SECRET + "\n")
    return p


@pytest.fixture
def capture(tmp_path):
    """A copy of a real 12-CPU capture with interrupts (openshift-nto sno), ours to spoil."""
    dest = tmp_path / "capture"
    shutil.copytree(extract("sno"), dest, symlinks=True)
    return dest


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


@pytest.fixture
def hostile_names(capture):
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


@pytest.fixture
def hostile_tree(capture, secret):
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
