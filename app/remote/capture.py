"""A `coremap snapshot` of a host, taken by its agent and brought here: for `coremap --host H snapshot
OUT.tar.gz` (written here), for reports, screenshots and saved sessions of a remote window (opened
here as a capture, so they say which host they are of), and for `coremap fleet`.

The tarball comes from another machine, so at most MAX_TARBALL bytes of it are taken as sent, and it
is read back the one way coremap reads a snapshot tarball (app/store/capture.py: every member checked
and counted before anything is written, then tarfile's "data" filter); the capture is then read
through SysRoot (links that leave it are missing, never followed; app/sysroot/).
"""
from __future__ import annotations

import base64
import binascii
import io
import shutil
import tempfile
import weakref
from pathlib import Path

from app.errors import CoremapError
from app.remote.client import AgentClient
from app.store.capture import MAX_TARBALL, SnapshotError, Tarball, extract_tarball
from app.store.capture import check_tarball as store_check
from app.store.session import Session
from app.sysroot import SysRoot

MiB = 1 << 20
SNAPSHOT_TIMEOUT = 300.0


class CaptureError(CoremapError):
    """A snapshot from a host that cannot be taken, or is not one to open."""


def fetch_snapshot(client: AgentClient, *, interval: float = 1.0, second: bool = True, root: str | None = None,
                   timeout: float = SNAPSHOT_TIMEOUT) -> tuple[bytes, Tarball]:
    """(the tarball's bytes, what it holds) of a snapshot the agent takes of its machine (or of the
    capture `root` there)."""
    chunks: list[bytes] = []
    size = [0]
    problem: list[str] = []

    def on_event(ev: dict) -> None:
        if problem:
            return
        try:
            data = base64.b64decode(ev.get("chunk", ""), validate=True)
        except (binascii.Error, TypeError, ValueError):
            problem.append("a chunk that is not base64")
            pending.cancel()
            return
        size[0] += len(data)
        if size[0] > MAX_TARBALL:
            problem.append(f"more than {MAX_TARBALL // MiB} MiB")
            pending.cancel()
            return
        chunks.append(data)

    pending = client.start("snapshot", interval=float(interval), second=bool(second), root=root, on_event=on_event)
    pending.wait(timeout)
    if problem:
        raise CaptureError(f"{client.host} sent a snapshot coremap does not take ({problem[0]})")
    data = b"".join(chunks)
    return data, check_tarball(data, str(client.host))


def check_tarball(data: bytes, host: str) -> Tarball:
    """What a snapshot tarball from `host` holds, when it is one coremap may extract (app/store/capture.py
    check_tarball); CaptureError otherwise."""
    try:
        return store_check(io.BytesIO(data), f"{host} sent a snapshot")
    except SnapshotError as e:
        raise CaptureError(str(e)) from None


def capture_session(client: AgentClient, *, interval: float = 0.5, second: bool = True,
                    root: str | None = None) -> Session:
    """A Session (app/store/session.py) holding a snapshot the host takes now, extracted into a private
    temporary folder that goes when the session is closed (or collected): what a remote window saves and
    reports, and what `coremap --host H report|screenshot` read."""
    data, _ = fetch_snapshot(client, interval=interval, second=second, root=root)
    folder = Path(tempfile.mkdtemp(prefix="coremap-remote-capture-"))
    try:
        top = SysRoot(extract_tarball(io.BytesIO(data), folder, f"{client.host} sent a snapshot"))
    except SnapshotError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise CaptureError(str(e)) from None
    meta = top.snapshot_meta() or {}
    host = meta.get("host") if isinstance(meta.get("host"), str) else None
    session = Session(machine_dir=top.root, host=host or client.hello.get("host") or str(client.host))
    session._cleanup = weakref.finalize(session, shutil.rmtree, str(folder), True)
    return session
