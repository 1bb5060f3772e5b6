"""A machine named by what a user has in hand: `live` (this machine), a captured folder (an extracted
`coremap snapshot`, a fixture), a snapshot tarball, or a saved session. `coremap diff` and the window's
File → Compare with… open the machines they compare here, so both take the same things.

A tarball is checked member by member and extracted the one way a tarball is (app/store/capture.py:
check_tarball's bounds, tarfile's "data" filter) into a private temporary folder, removed when the
block ends. A tarball that is not coremap's own (a must-gather's sysinfo.tgz holds proc/ and sys/ at its
top) is taken too: then the extracted folder is the machine.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from app.errors import CoremapError
from app.inputs import open_input
from app.store.capture import MAX_TARBALL, SnapshotError, extract_tarball
from app.sysroot import SysRoot

LIVE = "live"
TARBALLS = (".tar.gz", ".tgz")
SESSIONS = (".coremap",)


class MachineOpenError(CoremapError):
    """A machine to compare that cannot be opened."""


def _hint() -> str:
    return (f"give `{LIVE}`, a folder holding sys/ and proc/, a snapshot tarball ({', '.join(TARBALLS)}) "
            f"or a session ({', '.join(SESSIONS)})")


@contextlib.contextmanager
def opened_machine(spec: str) -> Iterator[tuple[SysRoot, str]]:
    """(the machine's SysRoot, its name for people) for the block; MachineOpenError (one line naming
    `spec`) when it is none of the module docstring's kinds. What was extracted is removed after."""
    if spec == LIVE:
        yield SysRoot("/"), f"{socket.gethostname()} (this machine)"
        return
    path = Path(spec)
    try:
        st = os.stat(path)
    except OSError as e:
        raise MachineOpenError(f"{spec}: {os.strerror(e.errno or 0).lower()}; {_hint()}") from None
    if stat.S_ISDIR(st.st_mode):
        try:
            root = SysRoot(path)
        except CoremapError as e:
            raise MachineOpenError(f"{e}") from None
        yield root, _name(root, path.name)
        return
    name = path.name.lower()
    if not stat.S_ISREG(st.st_mode) or not name.endswith(TARBALLS + SESSIONS):
        raise MachineOpenError(f"{spec}: not a folder, a tarball or a session; {_hint()}")
    if name.endswith(SESSIONS):
        from app.store.session import open_session
        session = open_session(path)
        try:
            yield session.root, _name(session.root, session.host or path.name)
        finally:
            session.close()
        return
    tmp = Path(tempfile.mkdtemp(prefix="coremap-compare-"))
    try:
        yield _extracted(path, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _extracted(path: Path, tmp: Path) -> tuple[SysRoot, str]:
    with open_input(path, what="", limit=MAX_TARBALL, hint=_hint()) as f:
        try:
            top = extract_tarball(f, tmp, str(path), one_top=False)
        except SnapshotError as e:
            raise MachineOpenError(str(e)) from None
    for folder in (tmp, top):
        try:
            root = SysRoot(folder)
        except CoremapError:
            continue
        return root, _name(root, path.name.removesuffix(".tgz").removesuffix(".tar.gz"))
    raise MachineOpenError(f"{path}: holds no sys/ or proc/ at its top or one folder down; {_hint()}")


def _name(root: SysRoot, fallback: str) -> str:
    """The machine's host name (and when it was captured), from its snapshot's meta.json, else `fallback`."""
    try:
        meta = root.snapshot_meta() or {}
    except CoremapError:
        meta = {}
    host = meta.get("host") if isinstance(meta.get("host"), str) else None
    when = meta.get("time") if isinstance(meta.get("time"), str) else None
    return f"{host[:80]} ({when[:40]})" if host and when else (host or fallback)[:120]
