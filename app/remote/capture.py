"""A `coremap snapshot` of a host, taken by its agent and brought here: for `coremap --host H snapshot
OUT.tar.gz` (written here), for reports, screenshots and saved sessions of a remote window (opened
here as a capture, so they say which host they are of), and for `coremap fleet`.

The tarball comes from another machine, so it is checked before anything is written or extracted:
at most MAX_TARBALL bytes as sent, at most MAX_MEMBERS members holding MAX_EXTRACTED bytes in all
(counted while reading, so a gzip bomb stops at the limit instead of filling the disk), one top
folder, only folders, files and relative links. Extraction then uses tarfile's "data" filter, and the
capture is read through SysRoot (links that leave it are missing, never followed; app/sysroot.py).
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import posixpath
import shutil
import tarfile
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

from app.errors import CoremapError
from app.remote.client import AgentClient
from app.store.session import Session
from app.sysroot import SysRoot

MiB = 1 << 20
MAX_TARBALL = 256 * MiB
MAX_EXTRACTED = 1024 * MiB
MAX_MEMBERS = 500_000
MAX_META = 1 * MiB
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


@dataclass(frozen=True)
class Tarball:
    """What a snapshot tarball holds: its top folder, its files and links, its meta.json."""
    top: str
    files: int
    links: int
    meta: dict


def check_tarball(data: bytes, host: str) -> Tarball:
    """What a snapshot tarball from `host` holds, when it is one coremap may extract (see the module
    docstring); CaptureError otherwise."""
    top, total, n, files, links, meta = None, 0, 0, 0, 0, {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
            for m in tf:
                n += 1
                total += max(0, m.size)
                if n > MAX_MEMBERS or total > MAX_EXTRACTED:
                    raise CaptureError(f"{host} sent a snapshot that unpacks to more than {MAX_MEMBERS:,} files "
                                       f"or {MAX_EXTRACTED // MiB} MiB; not a coremap snapshot")
                name = m.name
                parts = name.split("/")
                if name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir() or m.issym()):
                    raise CaptureError(f"{host} sent a snapshot holding {name[:60]!r}, which no coremap snapshot "
                                       "holds (an absolute path, '..', or a device)")
                if m.issym() and (m.linkname.startswith("/") or not posixpath.normpath(
                        posixpath.join(posixpath.dirname(name), m.linkname)).startswith(parts[0] + "/")):
                    raise CaptureError(f"{host} sent a snapshot whose link {name[:60]!r} leaves it")
                if top is None:
                    top = parts[0]
                elif parts[0] != top:
                    raise CaptureError(f"{host} sent a snapshot with more than one top folder")
                files += m.isfile()
                links += m.issym()
                if m.isfile() and parts[1:] == [".coremap", "meta.json"] and m.size <= MAX_META:
                    meta = _meta(tf.extractfile(m).read())
    except (tarfile.TarError, EOFError, OSError, ValueError) as e:
        raise CaptureError(f"{host} sent a snapshot that is not a gzip'ed tar ({str(e)[:80]})") from None
    if top is None or top in ("", ".", ".."):
        raise CaptureError(f"{host} sent an empty snapshot")
    return Tarball(top, files, links, meta)


def _meta(raw: bytes) -> dict:
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return meta if isinstance(meta, dict) else {}


class RemoteCapture:
    """A host's snapshot extracted into a temporary folder (removed by close(), or when this object
    is garbage collected); `root` is the SysRoot to read it through, `host` who it is of."""

    def __init__(self, data: bytes, host: str):
        top = check_tarball(data, host).top
        self.host = host
        self.folder = Path(tempfile.mkdtemp(prefix="coremap-remote-capture-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.folder), True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
            tf.extractall(self.folder, filter="data")
        self.root = SysRoot(self.folder / top)

    @classmethod
    def take(cls, client: AgentClient, *, interval: float = 1.0, second: bool = True,
             root: str | None = None) -> "RemoteCapture":
        data, _ = fetch_snapshot(client, interval=interval, second=second, root=root)
        return cls(data, str(client.host))

    def close(self) -> None:
        self._cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def capture_session(client: AgentClient, *, interval: float = 0.5) -> Session:
    """A Session (app/store/session.py) holding a snapshot the host takes now, as the window saves and
    reports a live machine; its folder goes when the session is closed."""
    cap = RemoteCapture.take(client, interval=interval)
    meta = cap.root.snapshot_meta() or {}
    host = meta.get("host") if isinstance(meta.get("host"), str) else None
    # The bound close holds the capture, so its folder lives as long as the session does.
    return Session(machine_dir=cap.root.root, host=host or client.hello.get("host") or str(client.host),
                   _cleanup=cap.close)
