"""What the tests that move this machine's IRQs, threads and masks use to see them and to put them
back: a reading of every affinity straight from /proc and /sys (not through coremap, so it is an
independent oracle), and a restore that runs in `finally` blocks.

The restore puts back only what still holds the value the test set: another test (or another
helper's suite on the same machine) that pinned something meanwhile keeps its pin.

Two suites on one machine (two clones' `make test`, issue 19 item 6) share its IRQs, threads and CPU 1:
one suite's isolate of CPU 1 moved the other's pinned threads and broke its "back as found" checks.
`machine_lock()` is one flock on a fixed path (/run/lock/coremap-live-tests.lock, or /tmp's where
/run/lock is absent), the same for every clone and user; tests/conftest.py's `live_machine` fixture
holds it around a test that moves real IRQs, threads or masks, isolates a CPU, or counts on its own
threads' masks staying as it set them. The test restores what it changed before the fixture lets go.
"""
from __future__ import annotations

import fcntl
import os
import stat
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PF_NO_SETAFFINITY = 0x04000000
PROC = Path("/proc")
WORKQUEUE = Path("/sys/devices/virtual/workqueue/cpumask")
DEFAULT_IRQ = PROC / "irq" / "default_smp_affinity"


def cpulist(text: str) -> frozenset[int]:
    out = set()
    for piece in text.strip().split(","):
        if not piece:
            continue
        lo, _, hi = piece.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def cpumask(text: str) -> frozenset[int]:
    value = int(text.strip().replace(",", "") or "0", 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


@dataclass
class Affinities:
    """Every affinity of the machine at one moment."""
    irqs: dict[int, frozenset[int]] = field(default_factory=dict)             # requested
    effective: dict[int, frozenset[int]] = field(default_factory=dict)
    threads: dict[tuple[int, int], frozenset[int]] = field(default_factory=dict)   # (tid, starttime) -> mask
    pinnable: set[tuple[int, int]] = field(default_factory=set)              # not PF_NO_SETAFFINITY, not a zombie
    pid_of: dict[int, int] = field(default_factory=dict)
    workqueue: frozenset[int] | None = None
    default_irq: frozenset[int] | None = None

    def irqs_on(self, cpu: int) -> set[int]:
        return {n for n, m in self.irqs.items() if cpu in m}

    def threads_on(self, cpu: int, *, pinnable: bool = True) -> set[tuple[int, int]]:
        return {k for k, m in self.threads.items() if cpu in m and (k in self.pinnable or not pinnable)}


def read_affinities() -> Affinities:
    a = Affinities()
    for name in os.listdir(PROC / "irq"):
        if name.isdigit():
            try:
                a.irqs[int(name)] = cpulist((PROC / "irq" / name / "smp_affinity_list").read_text())
                a.effective[int(name)] = cpulist((PROC / "irq" / name / "effective_affinity_list").read_text())
            except FileNotFoundError:
                continue        # freed while reading
    for pid in os.listdir(PROC):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(PROC / pid / "task")
        except FileNotFoundError:
            continue            # exited while listing
        for tid in tids:
            try:
                stat = (PROC / pid / "task" / tid / "stat").read_bytes()
                mask = frozenset(os.sched_getaffinity(int(tid)))
            except (FileNotFoundError, ProcessLookupError):
                continue        # exited while listing
            rest = stat[stat.rfind(b")") + 2:].split()
            key = (int(tid), int(rest[19]))
            a.threads[key] = mask
            a.pid_of[int(tid)] = int(pid)
            if not int(rest[6]) & PF_NO_SETAFFINITY and rest[0] not in (b"Z", b"X"):
                a.pinnable.add(key)
    a.workqueue = cpumask(WORKQUEUE.read_text()) if WORKQUEUE.exists() else None
    a.default_irq = cpumask(DEFAULT_IRQ.read_text()) if DEFAULT_IRQ.exists() else None
    return a


def restore_quiet(service) -> list:
    """Undo whatever the journal says is still changed (AffinityService.restore_all), for `finally`."""
    from app.errors import CoremapError
    try:
        return service.restore_all()
    except CoremapError as e:    # a finally block must not hide the test's own failure
        print(f"restore_all failed: {e}")
        return []


def can_move_machine() -> str | None:
    """Why the live tests cannot move this machine's IRQs and threads, or None when they can."""
    if os.geteuid() != 0:
        return "moving IRQs and every thread needs root"
    if len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0):
        return "needs CPUs 0 and 1"
    for path, what in ((WORKQUEUE, "workqueue cpumask"), (DEFAULT_IRQ, "default IRQ affinity")):
        if path.exists() and 1 not in cpumask(path.read_text()):
            # A coremap window (or a tuned profile) keeps CPU 1 quiet: the live tests isolate it and
            # count what moved, which only means something from a CPU in use.
            return f"CPU 1 is quiet already (the {what} leaves it out): include it again to run the live tests"
    return None


LOCK_NAME = "coremap-live-tests.lock"
LOCK_DIRS = (Path("/run/lock"), Path("/tmp"))     # fixed, not $TMPDIR: every suite must find the same file
LOCK_WAIT_S = 1800          # the other suite's live tests hold it a test at a time; a hung one fails ours


def lock_path() -> Path:
    return next((d for d in LOCK_DIRS if d.is_dir()), LOCK_DIRS[-1]) / LOCK_NAME


def _open_lock(path: Path) -> int:
    """The lock file, read-only (flock needs no write access, so a file root made serves a user too),
    never through a link (O_NOFOLLOW) and never a FIFO or device someone put there. Opened without
    O_CREAT first: in a sticky world-writable folder, fs.protected_regular refuses O_CREAT on a file
    another user owns even when it exists."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    while True:
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue        # another suite created it between our two opens: open theirs
        except OSError as e:
            raise RuntimeError(f"cannot open the live tests' lock {path} ({e.strerror}); remove it if it is "
                               "a link or not a plain file") from e
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise RuntimeError(f"the live tests' lock {path} is not a plain file; remove it")
        return fd


def _holders(path: Path) -> str:
    """Who holds the lock, from /proc/locks (for the message when waiting gives up)."""
    try:
        ino = os.stat(path).st_ino
        pids = [line.split()[4] for line in Path("/proc/locks").read_text().splitlines()
                if line.split()[5].endswith(f":{ino}") and line.split()[1] == "FLOCK"]
    except (OSError, IndexError):     # /proc/locks unreadable or a line of another form: name nobody
        return "another process"
    names = []
    for pid in dict.fromkeys(pids):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:     # exited since /proc/locks was read
            continue
        names.append(f"pid {pid} ({cmdline[:80].strip()})")
    return ", ".join(names) or "another process"


class _Holder:
    """This process's hold on the lock: nested holds (a module fixture and a test both live) share one
    flock, which a second open of the file would deadlock on."""
    guard = threading.Lock()
    fd: int | None = None
    depth = 0


# Set by tests/conftest.py around each test: False while a test without the `live` marker runs (it may
# not take the lock: `make test` runs it in parallel with others), None outside a test (benchmarks).
CURRENT_TEST_IS_LIVE: bool | None = None


class UnmarkedLiveTest(RuntimeError):
    """A test took the machine lock without the `live` marker."""


@contextmanager
def machine_lock(wait_s: float = LOCK_WAIT_S):
    """Hold the machine-wide live tests' lock (module docstring) for the `with` block."""
    if CURRENT_TEST_IS_LIVE is False:
        raise UnmarkedLiveTest("this test takes the machine lock but is not marked live: use the live_machine "
                               "fixture or @pytest.mark.live, so that make test runs it in the serial live set")
    with _Holder.guard:
        if _Holder.depth == 0:
            path = lock_path()
            fd = _open_lock(path)
            deadline = time.monotonic() + wait_s
            said = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        os.close(fd)
                        raise RuntimeError(f"the live tests' lock {path} was held by {_holders(path)} for "
                                           f"{wait_s:g} s; let that suite finish or end it") from None
                    if not said:
                        print(f"waiting for {path}, held by {_holders(path)}", file=sys.stderr)
                        said = True
                    time.sleep(0.1)
            _Holder.fd = fd
        _Holder.depth += 1
    try:
        yield
    finally:
        with _Holder.guard:
            _Holder.depth -= 1
            if _Holder.depth == 0:
                fcntl.flock(_Holder.fd, fcntl.LOCK_UN)
                os.close(_Holder.fd)
                _Holder.fd = None


def live_test(test):
    """A test that moves this machine's IRQs, threads or masks: skipped where it cannot
    (can_move_machine), run holding the `live_machine` lock (tests/conftest.py) where it can. The lock
    is set up before the test's own fixtures, so one that restores in its teardown does so holding it."""
    import pytest
    why = can_move_machine()
    test = pytest.mark.skipif(why is not None, reason=str(why))(test)
    return pytest.mark.usefixtures("live_machine")(test)


# -- the whole machine's placement, for "given back exactly as it was" (issue 28) ---------------------------
_KNOBS = [PROC / "sys" / "kernel" / "timer_migration", PROC / "sys" / "vm" / "stat_interval",
          PROC / "sys" / "kernel" / "watchdog_cpumask", DEFAULT_IRQ, WORKQUEUE,
          # tuned's knobs an isolate sets where asked (app/quiet/knobs.py, issue 30)
          PROC / "sys" / "kernel" / "hung_task_timeout_secs", PROC / "sys" / "kernel" / "numa_balancing",
          PROC / "sys" / "kernel" / "sched_rt_runtime_us", Path("/sys/kernel/mm/ksm/run"),
          Path("/sys/kernel/mm/transparent_hugepage/enabled")]
_CPUSET_ROOTS = [Path("/sys/fs/cgroup/cpuset"), Path("/sys/fs/cgroup")]


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError, PermissionError, OSError):
        return None


def machine_fingerprint() -> dict[str, object]:
    """Every IRQ's requested mask, every thread's mask and cpuset (by tid and start time), coremap's
    cpuset folders, the masks and knobs an isolate sets (the workqueues', RPS/XPS, PM QoS, the sysctls
    tuned's cpu-partitioning sets, and tuned's knobs the user may tick: app/quiet/knobs.py): read from /proc and /sys directly, never through coremap, so it is
    an independent oracle of "the machine is as it was". Zombies are left out (they run nothing). Compare
    two with `fingerprint_diff`, which leaves out threads that were born or exited between them."""
    a = read_affinities()
    fp: dict[str, object] = {f"irq {n}": m for n, m in a.irqs.items()}
    for (tid, start), mask in a.threads.items():
        pid = a.pid_of.get(tid, tid)
        task = PROC / str(pid) / "task" / str(tid)
        stat = _text(task / "stat") or ""
        if stat[stat.rfind(")") + 2:][:1] in ("Z", "X"):
            # exited, not yet reaped: it keeps the mask and the cpuset path it died with (a shield's, after
            # that cpuset is gone) and runs nothing to give back; left out like a thread that is gone
            # (another suite's ssh, seen in the shield after a give-back while two suites ran)
            continue
        fp[f"thread {tid}@{start} mask"] = mask
        cs = _text(task / "cpuset")
        if cs is not None:
            fp[f"thread {tid}@{start} cpuset"] = cs
    for top in _CPUSET_ROOTS:
        if top.is_dir():
            for d in sorted(top.glob("coremap*")):
                fp[f"cpuset folder {d}"] = _text(d / "cpuset.cpus")
    for knob in _KNOBS:
        fp[str(knob)] = _text(knob)
    for f in sorted(Path("/sys/devices/virtual/workqueue").glob("*/cpumask")):
        fp[str(f)] = _text(f)
    for f in sorted(Path("/sys/class/net").glob("*/queues/*/[rx]ps_cpus")):
        fp[str(f)] = _text(f)
    for f in sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/power/pm_qos_resume_latency_us")):
        fp[str(f)] = _text(f)
    for pattern in ("cpu[0-9]*/cpufreq/scaling_governor", "cpu[0-9]*/power/energy_perf_bias"):
        for f in sorted(Path("/sys/devices/system/cpu").glob(pattern)):
            fp[str(f)] = _text(f)
    return fp


def fingerprint_diff(before: dict, after: dict) -> list[str]:
    """What differs between two fingerprints, one line each; threads present in only one are left out
    (born or exited meanwhile: nothing to give back), and so are IRQs that came or went."""
    lines = []
    for key in sorted(set(before) | set(after)):
        if key.startswith(("thread ", "irq ")) and (key not in before or key not in after):
            continue
        if before.get(key) != after.get(key):
            lines.append(f"{key}: {before.get(key)!r} -> {after.get(key)!r}")
    return lines
