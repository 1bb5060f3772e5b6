"""The agent's process on the server: what `coremap agent` (app/cli/agent.py) runs, and the two ops that
start programs there.

- `serve()`  the process around the Agent (agent.py): it dies with sshd's session, keeps fd 1 for the
             protocol, works from coremap's own folder, and hands the Agent the ops below.
- `probe`    probes/runner.py's ProbeRun, the same child as a local probe, its lines streamed as they
             come (app/remote/probe_runs.py is the other end).
- `run`      a `coremap` command run on the server, its output streamed back, for `coremap --host H
             COMMAND` (app/cli/host.py). Started as `python -c` of the CLI's entry, so this layer
             imports no CLI.

When the agent was shipped (no coremap installed there), the probes' C loops are built on the
server at the first probe, with its C compiler and Python headers, into the shipped folder; without
a compiler the probe says so in one line and everything else works.
"""
from __future__ import annotations

import codecs
import fcntl
import importlib
import importlib.machinery
import os
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

from app.errors import CoremapError
from app.remote.agent import Agent, Request
from app.remote.transport import die_with_parent
from probes.build import native_sources
from probes.runner import ProbeRun
from probes.spec import PROBE_NAMES

_ROOT = str(Path(__file__).resolve().parents[2])      # the folder holding app/ and probes/
MAX_ARGS = 200
MAX_ARG = 4096
KILL_GRACE_S = 0.5


def serve(shipped: str | None = None) -> int:
    """Serve until stdin ends. `shipped`: the folder of a shipped agent (app/remote/bootstrap.py)."""
    die_with_parent(signal.SIGTERM)
    # SIGTERM (sshd's session went away) ends the agent through Python, so it cancels its children.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # The protocol owns fd 1; anything else that prints (a library, a warning) goes to stderr.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    facts = {"agent": "shipped" if shipped else "installed", "probes": probes_unavailable(build=False)}
    # Probe children run `python -m probes`, which puts the current folder first on sys.path: work from
    # the package's own folder, so a `probes/` folder in the login folder is never the one imported.
    # Commands (`run`) still start in the login folder, where the user's relative paths point.
    login = os.getcwd()
    os.chdir(_ROOT)
    agent = Agent(sys.stdin.buffer, out, ops={"probe": run_probe, "run": lambda req: run_command(req, login)},
                  facts=facts)
    return agent.serve()


# -- probes ----------------------------------------------------------------------------------------------
_build_lock = threading.Lock()


def native_built() -> bool:
    try:
        importlib.import_module("probes._native")
    except ImportError:
        return False
    return True


def probes_unavailable(*, build: bool) -> str | None:
    """None when the probes' C loops can run here (built, or buildable: a shipped agent builds them at
    its first probe); else why not, in one line. With `build`, they are built now if need be."""
    if native_built():
        return None
    src = Path(_ROOT) / "probes" / "_native.c"
    why = _cannot_build(src)
    if why is not None or not build:
        return why
    with _build_lock:
        return _build(src)


def _compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) or shutil.which("cc") or shutil.which("gcc")


def _cannot_build(src: Path) -> str | None:
    host = os.uname().nodename
    if not src.exists():
        return f"the probes' timing loops are not built on {host} (probes._native is missing); reinstall coremap there"
    if _compiler() is None:
        return (f"{host} has no C compiler, so the probes' timing loops cannot be built there; install gcc "
                "there (Debian/Ubuntu: apt-get install gcc python3-dev). Sampling and pins work without it")
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").exists():
        return (f"{host} has no Python headers ({include}/Python.h), so the probes' timing loops cannot be "
                "built there; install them (Debian/Ubuntu: python3-dev). Sampling and pins work without them")
    if not os.access(src.parent, os.W_OK):
        return f"the probes' timing loops are not built on {host}, and {src.parent} is not writable"
    return None


def _build(src: Path) -> str | None:
    """cc -O2 -fPIC -c of each C file, all at once, then cc -shared into the shipped folder (what
    setuptools does for probes._native). One cc per file shares the 8 files among the server's CPUs: one
    cc for them all took 6 s on 2 CPUs, which a first probe there waits for."""
    out = src.with_name("_native" + importlib.machinery.EXTENSION_SUFFIXES[0])
    with open(src.with_name(".build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # two connections to one server build once
        if out.exists():
            return None
        tmp = out.with_name(f".{out.name}.{os.getpid()}")
        cc, include = _compiler(), sysconfig.get_paths()["include"]
        # the files setup.py builds (probes/build.py): the module and each probe's loop
        sources = native_sources(src.parents[1])
        objects = [f"{tmp}.{i}.o" for i in range(len(sources))]
        compile_ = [[cc, "-O2", "-fPIC", "-pthread", f"-I{include}", "-c", str(c), "-o", o]
                    for c, o in zip(sources, objects)]
        try:
            for cmds in (compile_, [[cc, "-shared", "-pthread", *objects, "-o", str(tmp)]]):
                runs = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True) for cmd in cmds]
                done = [(cmd, p.communicate()[1], p.returncode) for cmd, p in zip(cmds, runs)]
                for cmd, err, rc in done:
                    if rc != 0:
                        tail = " ".join(err.strip().splitlines()[-2:])[:300]
                        return (f"building the probes' timing loops on {os.uname().nodename} failed "
                                f"({shlex.join(cmd[:1])} exit {rc}: {tail})")
        finally:
            for o in objects:
                Path(o).unlink(missing_ok=True)
        os.replace(tmp, out)
    importlib.invalidate_caches()
    return None


def run_probe(req: Request) -> dict:
    """The `probe` op: the probe's lines as events, then its exit status and last stderr lines."""
    name = req.param("probe", str)
    args = _strings(req.param("args", list, []), "args")
    if name not in PROBE_NAMES:
        raise CoremapError(f"no probe named {str(name)[:40]!r}; choose one of {', '.join(PROBE_NAMES)}")
    if not native_built():
        req.event({"line": {"type": "log", "text": f"building the probes' timing loops on {os.uname().nodename}"}})
    why = probes_unavailable(build=True)
    if why is not None:
        raise CoremapError(why)
    run = ProbeRun.start(name, args, on_line=lambda line: req.event({"line": line}))
    req.event({"pid": run.pid})
    req.on_cancel(run.cancel)
    rc = run.wait()
    return {"rc": rc, "stderr": run.stderr_lines[-20:]}


# -- coremap commands ------------------------------------------------------------------------------------
def run_command(req: Request, cwd: str) -> dict:
    """The `run` op: `python -m app ARGV` here, in `cwd` (the login folder), its stdout and stderr
    streamed back as they come."""
    argv = _strings(req.param("argv", list, []), "argv")
    env = dict(os.environ, PYTHONUNBUFFERED="1", QT_QPA_PLATFORM="offscreen")
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # -c rather than -m: coremap's folder goes before the login folder on sys.path (-m would put the
    # login folder first), yet the command runs in the login folder.
    boot = f"import sys; sys.path.insert(0, {_ROOT!r}); from app.cli.main import main; sys.exit(main())"
    proc = subprocess.Popen([sys.executable, "-c", boot, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True, cwd=cwd,
                            preexec_fn=die_with_parent)
    req.on_cancel(lambda: _stop(proc))
    readers = [threading.Thread(target=_relay, args=(req, proc.stdout, "out"), daemon=True),
               threading.Thread(target=_relay, args=(req, proc.stderr, "err"), daemon=True)]
    for t in readers:
        t.start()
    rc = proc.wait()
    for t in readers:
        t.join(5)
    return {"rc": rc}


def _relay(req: Request, pipe, key: str) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for chunk in iter(lambda: pipe.read1(65536), b""):
        text = decoder.decode(chunk)
        if text:
            req.event({key: text})
    tail = decoder.decode(b"", final=True)
    if tail:
        req.event({key: tail})
    pipe.close()


def _stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return          # the group emptied meanwhile
        try:
            proc.wait(KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            continue


def _strings(items: list, what: str) -> list[str]:
    if len(items) > MAX_ARGS or not all(isinstance(a, str) and len(a) <= MAX_ARG for a in items):
        raise CoremapError(f"{what}: at most {MAX_ARGS} strings of at most {MAX_ARG} characters")
    return items
