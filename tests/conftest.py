"""Shared test setup: fixture machines (tests/machines.py), the offscreen Qt platform, and the
machine-wide lock of the tests that move this machine's IRQs and threads (`live_machine`)."""
import os

# GUI tests render offscreen; set before any Qt import (CI has no display).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Never let a test touch the user's real state (pin journal, autosave).
os.environ.setdefault("COREMAP_REPORTS_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"coremap-test-reports-{os.getpid()}"))
os.environ.setdefault("COREMAP_STATE_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"coremap-test-state-{os.getpid()}"))
# Nor the user's settings and data (issue 31: the SIGHUP/SIGTERM window tests rewrote
# ~/.config/coremap/settings.ini): every XDG folder coremap reads or writes points into this run's own.
_XDG = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"coremap-test-xdg-{os.getpid()}")
for _name in ("CONFIG", "STATE", "DATA", "CACHE"):
    os.environ[f"XDG_{_name}_HOME"] = os.path.join(_XDG, _name.lower())
# `coremap probe` looks 1 s at what else is busy on its CPUs before it starts (app/cli/probe.py): the
# suite's probe runs, which do not check that line, spent ~40 s of the serial live set on it (issue 31).
# tests/unit/test_intruders.py, which checks the line, takes the product's look back.
os.environ["COREMAP_BUSY_LOOK_S"] = "0"


import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

TRACEFS = "/sys/kernel/tracing"


@pytest.fixture(scope="session")
def tracefs():
    """A mounted tracefs for the tests that trace for real. A freshly booted machine may not have it
    mounted (systemd mounts it on first access on some distributions, not on all): as root the
    fixture mounts it and unmounts it at the end, so the machine is left as found. Several test
    sessions at once (worktrees on one machine) share the mount: each holds a shared lock while it
    runs, and only the last one out unmounts. Skips only where mounting is impossible."""
    import fcntl
    from probes.trace import unavailable_reason
    lock = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "coremap-tests-tracefs.lock"), "a")
    fcntl.flock(lock, fcntl.LOCK_SH)
    mounted_here = False
    if unavailable_reason() is not None and os.geteuid() == 0 and os.path.isdir(TRACEFS) \
            and not os.path.ismount(TRACEFS):
        r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True, text=True)
        mounted_here = r.returncode == 0
    why = unavailable_reason()
    try:
        if why is not None:
            pytest.skip(f"live tracing unavailable: {why}")
        yield TRACEFS
    finally:
        if mounted_here:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)      # nobody else is tracing
                subprocess.run(["umount", TRACEFS], capture_output=True)
            except BlockingIOError:
                pass    # another session still traces: the last one out unmounts
        lock.close()


def pytest_terminal_summary(terminalreporter):
    """Say so when this run could use one CPU only: a suite started while another had CPU 1 quiet
    inherits a mask without it (an isolate moves every thread, and a process forked meanwhile keeps the
    narrow mask after the restore); the tests that need two CPUs then skipped rather than ran. The mask
    is the one read at collection, under the lock: read now, it may be another run's isolate at work."""
    allowed = _CPUS_AT_COLLECTION
    if allowed and len(allowed) < 2:
        path = Path("/sys/devices/system/cpu/online")
        online = path.read_text().strip() if path.exists() else "0-1"
        terminalreporter.write_line(
            f"coremap: this run could use CPU {allowed[0]} only (online: {online}), so the tests that need two "
            f"CPUs skipped; was it started while another run had CPU 1 quiet? `taskset -pc {online} $$` widens "
            "a shell")


def _live_run(config) -> bool:
    """Whether this run is the live set's (`make test`'s second run, `-m live`)."""
    return (config.getoption("markexpr", "") or "").strip() == "live"


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """The live run collects holding the live tests' lock too: test modules note this process's CPUs
    when imported (CPUS = sched_getaffinity(0)) and decide their skips from them, and during another
    suite's isolate of CPU 1 they would find CPU 0 alone. Any other run collects without it (issue 31:
    `pytest tests/unit/test_cpulist.py` waited while another suite held it)."""
    if not _live_run(session.config):
        _CPUS_AT_COLLECTION[:] = sorted(os.sched_getaffinity(0))
        yield
        return
    from tests.live import machine_lock
    with machine_lock():
        _CPUS_AT_COLLECTION[:] = sorted(os.sched_getaffinity(0))
        yield


def pytest_collection_modifyitems(config, items):
    """Every test that holds the machine lock through `live_machine` is `live` (pyproject's marker)."""
    for item in items:
        if "live_machine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.live)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before any fixture of `item` runs (a module fixture that takes the lock included): whether it may
    take the machine lock (tests/live.py machine_lock refuses a test without the `live` marker)."""
    from tests import live
    live.CURRENT_TEST_IS_LIVE = item.get_closest_marker("live") is not None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    from tests import live
    live.CURRENT_TEST_IS_LIVE = None


_CPUS_AT_COLLECTION: list[int] = []


@pytest.fixture
def live_machine():
    """Hold the machine-wide lock of the live tests (tests/live.py: machine_lock) for the whole test:
    another suite on this machine (a second clone's `make test`) neither isolates CPU 1 nor moves an
    IRQ or a thread while this test does, or while it counts on its own threads' masks. Ask for it
    before any fixture that restores (it is set up first and torn down last, so the restore runs while
    it is held). Yields the lock's path."""
    from tests.live import lock_path, machine_lock
    with machine_lock():
        yield lock_path()


# -- nothing of the user's is touched (issue 31) --------------------------------------------------------
# The user's own coremap folders and the device files a broken writer once replaced (/dev/zero became a
# regular file holding settings, issue 32): read before the run and after it; a difference fails the run.
_USER_FOLDERS = [Path.home() / ".config" / "coremap", Path.home() / ".local" / "state" / "coremap",
                 Path.home() / ".local" / "share" / "coremap"]
_DEVICES = [Path("/dev") / n for n in ("null", "zero", "full", "random", "urandom", "tty")]
_UNTOUCHED: dict = {}


def untouched_fingerprint(folders=None, devices=None) -> dict:
    """What a test run must leave as it found: every file under the user's coremap folders (size,
    mtime, mode) and the kind of each standard device file."""
    import stat as _stat
    seen = {}
    for folder in _USER_FOLDERS if folders is None else folders:
        if folder.is_dir():
            for dirpath, _dirs, files in os.walk(folder):
                for name in files:
                    p = os.path.join(dirpath, name)
                    try:
                        st = os.lstat(p)
                    except FileNotFoundError:
                        continue        # removed while walking: the comparison says so
                    seen[p] = (st.st_size, st.st_mtime_ns, st.st_mode)
    for dev in _DEVICES if devices is None else devices:
        try:
            mode = os.lstat(dev).st_mode
        except FileNotFoundError:
            continue                    # a container without it
        seen[str(dev)] = ("char device" if _stat.S_ISCHR(mode) else _stat.filemode(mode),)
    return seen


def pytest_sessionstart(session):
    _UNTOUCHED["before"] = untouched_fingerprint()
    from tests.rewrite_once import rewrite_test_modules
    rewrite_test_modules(session.config)        # before xdist starts its workers (its hook runs last)


def pytest_sessionfinish(session, exitstatus):
    while _PROMETHEUS:
        _PROMETHEUS.pop().stop()        # started at collection, and no test of this process asked for it
    before = _UNTOUCHED.get("before")
    if before is None or getattr(session.config, "workerinput", None) is not None:
        return                          # an xdist worker: the controller checks once for the run
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    after = untouched_fingerprint()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if changed:
        if reporter is not None:
            reporter.write_line("coremap: the run changed files outside its temporary folders: "
                                + ", ".join(changed[:10]), red=True)
        session.exitstatus = 1
    if os.environ.get("CI") == "true" and reporter is not None:
        bad = [(r.nodeid, skip_reason(r)) for r in reporter.stats.get("skipped", ()) if not ci_may_skip(skip_reason(r))]
        for nodeid, why in bad[:20]:
            reporter.write_line(f"coremap: skipped on CI, which installs what the tests need: {nodeid}: {why}",
                                red=True)
        if bad:
            session.exitstatus = 1


# -- the real engines, started once per run (issue 31: four modules started their own) ------------------
_PROMETHEUS: list = []


def _prometheus_engines():
    import contextlib
    import shutil as _shutil
    from tests.engines import prometheus_engines
    from tests.machines import extract
    named = os.geteuid() == 0 and _shutil.which("unshare") is not None

    @contextlib.contextmanager
    def engines():
        with prometheus_engines(extract("sno"), fixture_hostname="sno" if named else None) as e:
            e.named = named
            yield e
    return engines


def pytest_collection_finish(session):
    """A process that will run a test of the Prometheus stack starts it now, beside the tests before that
    one (tests/engines.py Started); an xdist worker collects every test but runs only some modules, so it
    may start one it never uses (three idle processes)."""
    if session.config.option.collectonly:
        return
    if any("prometheus_stack" in getattr(item, "fixturenames", ()) for item in session.items):
        from tests.engines import Started
        _PROMETHEUS.append(Started(_prometheus_engines()))


@pytest.fixture(scope="session")
def prometheus_stack():
    """One prometheus-node-exporter on this machine, one on the captured "sno" (named "sno" in a UTS
    namespace of its own where this is root and unshare exists: `stack.named`), and Prometheus scraping
    both (tests/engines.py): shared by every module that reads from Prometheus. A module that writes into
    the textfile folder takes its own file name there."""
    from tests.engines import Started
    started = _PROMETHEUS.pop() if _PROMETHEUS else Started(_prometheus_engines())
    try:
        yield started.get()
    finally:
        started.stop()


@pytest.fixture(scope="session")
def pcp_stack():
    """Two pmcd and one pmproxy (tests/engines.py), shared by every module that reads from PCP."""
    from tests.engines import pcp_engines
    with pcp_engines() as e:
        yield e


# -- a skip on CI is a failure, unless a Debian machine truly cannot meet it (issue 31) ------------------
# What a new Debian machine may lack whatever .ci/run installs: root, a second CPU, a cgroup layout, a
# kernel feature, another user's rights. Every other skip (a tool not installed, a module not built)
# fails a CI run (CI=true), so a missing install step is seen rather than skipped past. README lists these.
CI_MAY_SKIP = ("root", "CPU", "cgroup", "huge pages", "unshare", "tmpfs", "another user", "below X's 6000",
               "DisableAttachMechanism", "PF_NO_SETAFFINITY")


def ci_may_skip(reason: str) -> bool:
    """Whether a skip for `reason` is one a new Debian machine truly cannot avoid (CI_MAY_SKIP)."""
    return any(word in reason for word in CI_MAY_SKIP)


def skip_reason(report) -> str:
    longrepr = getattr(report, "longrepr", None)
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
