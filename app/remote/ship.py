"""What the client sends to start an agent: the remote command, the bootstrap line, and the agent
itself for a server without coremap (bootstrap.py says what the server does with them).

The shipped agent is a zip of coremap's own pure-Python modules (app/ and probes/, no widgets: the
server needs no Qt) and the probes' C source, built from the files this coremap runs from, the same
bytes every time (sorted, fixed dates), so its SHA-256 names one version of the agent and a server
that has it already is not sent it again. `COREMAP_REMOTE_AGENT` chooses: `auto` (the installed
coremap when the server has one, else ship), `ship` (always the shipped one), `installed` (never ship).
`COREMAP_REMOTE_PYTHON` names the server's Python (default `python3` on the login PATH).
"""
from __future__ import annotations

import base64
import functools
import hashlib
import io
import os
import re
import zipfile
import zlib
from pathlib import Path

import app
from app.errors import CoremapError
from app.remote import bootstrap

AGENT_ENV = "COREMAP_REMOTE_AGENT"
PYTHON_ENV = "COREMAP_REMOTE_PYTHON"
MODES = ("auto", "ship", "installed")
_PACKAGES = ("app", "probes")
_PYTHON = re.compile(r"[A-Za-z0-9_./+-]{1,200}")
_EPOCH = (1980, 1, 1, 0, 0, 0)


def agent_mode() -> str:
    mode = os.environ.get(AGENT_ENV, "auto").strip() or "auto"
    if mode not in MODES:
        raise CoremapError(f"{AGENT_ENV}={mode[:40]!r}: choose {', '.join(MODES)}")
    return mode


def remote_python() -> str:
    py = os.environ.get(PYTHON_ENV, "python3").strip() or "python3"
    if not _PYTHON.fullmatch(py):
        raise CoremapError(f"{PYTHON_ENV}={py[:60]!r}: give a program name or path such as /usr/bin/python3.11")
    return py


def remote_command() -> str:
    """What the login shell on the server runs: Python, reading its first line of code from stdin.
    Single quotes only, so sh, bash, zsh, fish and csh all pass it through as it is."""
    return f"{remote_python()} -c 'import sys;exec(sys.stdin.buffer.readline())'"


def boot_line(mode: str, digest: str) -> bytes:
    """bootstrap.py's source and the call of its main(), as one line of Python."""
    config = {"mode": mode, "version": app.__version__, "digest": digest}
    src = Path(bootstrap.__file__).read_text() + f"\nsys.exit(main({config!r}))\n"
    payload = base64.b64encode(zlib.compress(src.encode(), 9))
    return b"import base64,zlib;exec(zlib.decompress(base64.b64decode(b'" + payload + b"')))\n"


def _package_root() -> Path:
    return Path(app.__file__).resolve().parent.parent


def _shipped_files() -> list[Path]:
    root = _package_root()
    files = []
    for pkg in _PACKAGES:
        for p in (root / pkg).rglob("*"):
            if "__pycache__" in p.parts or not p.is_file():
                continue
            # the probes' C sources and their header: the agent builds probes._native there
            if p.suffix in (".py", ".json") or (pkg == "probes" and p.suffix in (".c", ".h")):
                files.append(p)
    return sorted(files)


@functools.lru_cache(maxsize=1)
def agent_zip() -> tuple[bytes, str]:
    """(the zip, its SHA-256 in hex), built once per process."""
    root = _package_root()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for p in _shipped_files():
            info = zipfile.ZipInfo(p.relative_to(root).as_posix(), date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, p.read_bytes())
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()
