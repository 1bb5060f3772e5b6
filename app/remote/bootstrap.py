"""The first thing that runs on the server, before any of coremap is there: standard library only, and
sent as text (this file's source) over the connection, so it must import nothing of coremap.

ssh runs `python3 -c 'import sys;exec(sys.stdin.buffer.readline())'` in the user's login shell; the
client's first line on stdin is this source (compressed) and a call of `main(config)`. Then:

1. Python older than 3.10: one `boot` line saying so, and the end.
2. Unless the client asked to ship (config "mode"): the installed `coremap` on the login PATH, if
   any, is exec'd as `coremap agent`; its hello says its version (the client refuses one that is not
   its own, with one line naming both).
3. Otherwise the agent shipped by the client: `$XDG_CACHE_HOME/coremap-agent/VERSION-DIGEST/`
   (~/.cache/... by default) holds coremap's pure-Python modules and the probes' C source. When that
   folder is missing, a `boot` line asks for it, and the client sends its length and a zip of it on
   the same stdin; the zip's SHA-256 must be the digest the folder is named after. It is unpacked
   beside, then renamed into place (two connections racing keep one). The folder is the only thing
   coremap leaves on a server; older ones beyond the newest KEEP are removed, and the whole
   coremap-agent folder may be removed at any time (the next connection ships it again).
4. The agent runs in this process on the same stdin and stdout: `python -m app agent` by runpy
   (app/cli/agent.py), told by COREMAP_AGENT_SHIPPED that it runs from the shipped folder.

Every line this writes is JSON: {"type": "boot", ...}. Nothing else is read from stdin before the
agent, so nothing the client sends later is swallowed by a buffer here.
"""
import hashlib
import io
import json
import os
import platform
import re
import runpy
import shutil
import sys
import zipfile

KEEP = 3
SHIPPED_ENV = "COREMAP_AGENT_SHIPPED"     # tells `coremap agent` it runs from a shipped folder
_NAME = re.compile(r"^[0-9A-Za-z.+-]{1,40}-[0-9a-f]{16}$")
MAX_SHIPPED = 64 << 20


def say(**fields):
    sys.stdout.buffer.write((json.dumps(dict(type="boot", **fields)) + "\n").encode())
    sys.stdout.buffer.flush()


def cache_root():
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "coremap-agent")


def receive(folder, digest):
    """Ask the client for the shipped zip, check it, unpack it into `folder`."""
    say(need=True, cache=folder)
    head = sys.stdin.buffer.readline(32)
    if not head.strip().isdigit() or int(head) > MAX_SHIPPED:
        say(error="the client sent no agent to unpack")
        return False
    data = sys.stdin.buffer.read(int(head))
    if hashlib.sha256(data).hexdigest() != digest:
        say(error="the agent that arrived is not the one sent (its SHA-256 differs)")
        return False
    parent = os.path.dirname(folder)
    os.makedirs(parent, mode=0o700, exist_ok=True)
    tmp = f"{folder}.tmp-{os.getpid()}"
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for name in zf.namelist():
            if name.startswith("/") or ".." in name.split("/"):
                say(error=f"the agent holds a path outside its folder: {name[:60]!r}")
                return False
        zf.extractall(tmp)
    try:
        os.rename(tmp, folder)
    except OSError:
        # Another connection unpacked the same agent first: use theirs.
        shutil.rmtree(tmp, ignore_errors=True)
    prune(parent, folder)
    return True


def prune(parent, keep):
    """Remove shipped agents other than the newest KEEP (by modification time); never anything else."""
    try:
        names = [n for n in os.listdir(parent) if _NAME.match(n)]
    except OSError:
        return
    paths = sorted((os.path.join(parent, n) for n in names), key=os.path.getmtime, reverse=True)
    for p in paths[KEEP:]:
        if p != keep:
            shutil.rmtree(p, ignore_errors=True)


def main(config):
    if sys.version_info < (3, 10):
        say(error="python", python=platform.python_version(), executable=sys.executable)
        return 2
    mode = config.get("mode", "auto")
    if mode != "ship":
        exe = shutil.which("coremap")
        if exe:
            say(agent="installed", path=exe)
            os.execv(exe, [exe, "agent"])
        if mode == "installed":
            say(error="not-installed")
            return 2
    version, digest = config["version"], config["digest"]
    folder = os.path.join(cache_root(), f"{version}-{digest[:16]}")
    if not os.path.isfile(os.path.join(folder, "app", "cli", "agent.py")):
        if not receive(folder, digest):
            return 2
    else:
        os.utime(folder)            # recently used: kept by prune()
    say(agent="shipped", cache=folder)
    sys.path.insert(0, folder)
    # Children (probe runs, CLI runs) import from the same folder.
    os.environ["PYTHONPATH"] = folder + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    os.environ[SHIPPED_ENV] = folder
    # `python -m app agent`, in this process (stdin and stdout are the connection's).
    sys.argv = ["coremap", "agent"]
    runpy.run_module("app", run_name="__main__", alter_sys=True)
    return 0
