"""The agent: coremap's protocol (protocol.py) served on the ssh session's stdin and stdout, by the same
Qt-free code local use runs.

- `open`     a Sampler on the server's own machine (or a --root there), an AffinityService with the
             server's own pin journal (the SSH user's state folder there), so a crash of the
             workstation or of the link leaves that journal able to restore, as a local crash does.
             The client names its journal session, so pins made before a reconnect are not
             "left behind by another run".
- `tick`     one Sampler.tick(): its MachineState as a delta (codec.py). The client asks for each
             tick (the window's SamplerThread keeps time, as it does locally); what to follow, to
             forget and how often ride along with the request.
- `preflight`, `pin`, `undo`, `redo`, `restore`, `journal`, `quiet_preview`, `quiet_apply`,
  `quiet_set`
             app/remote/pin_ops.py: the server's AffinityService and LocalQuiet; `privileged` pins go
             through the helper started with `sudo -n` on the server (never a password prompt: there
             is no terminal to ask on).
- `facts`    the machine's summary as a report words it (for `coremap fleet`).
- `snapshot` `coremap snapshot`'s capture, sent back in chunks.
- `cancel`   ends another request (a probe, a run) of this connection.
Ops that start programs (probe runs, `coremap` commands) are given as `ops` by the process around
the agent (server.py), which `coremap agent` runs.

The machine's requests (open, tick, pins, journal, facts) are answered one after another in the order
they came, on one thread; the streams (probe runs, CLI runs, snapshots: STREAMS) each on a thread of
their own (at most MAX_REQUESTS at once), so a probe streaming its lines does not hold up the ticks.
The agent ends at the end of its stdin (the connection closed): it cancels the streams, which takes
the children it started with it, answers what was already asked, and exits.
"""
from __future__ import annotations

import base64
import getpass
import os
import platform
import queue
import re
import shutil
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import app
from app.pinning.service import AffinityService
from app.errors import CoremapError
from app.pinning.helper import HelperClient
from app.pinning.journal import Journal
from app.remote import protocol
from app.remote.codec import StateSender
from app.remote.pin_ops import PinOps, journal_stamp
from app.sampling.sampler import Sampler
from app.store.folders import journal_path
from app.sysroot import SysRoot

MAX_REQUESTS = 32
MAX_QUEUED = 256            # machine requests waiting their turn
STREAMS = ("probe", "run", "snapshot")
DRAIN_S = 10.0              # at the end of stdin, how long what was asked may still take
SNAPSHOT_CHUNK = 1 << 20
_SESSION = re.compile(r"[0-9a-f]{12}")


class Request:
    """One request being answered: its op and parameters, a way to stream events back, and whether
    the client cancelled it (`cancelled` is set; `on_cancel` callbacks run at once)."""

    def __init__(self, agent: "Agent", rid: int, op: str, params: dict):
        self.agent, self.id, self.op, self.params = agent, rid, op, params
        self.cancelled = threading.Event()
        self._on_cancel: list[Callable[[], None]] = []

    def event(self, value: dict) -> None:
        self.agent.send(protocol.event(self.id, value))

    def on_cancel(self, fn: Callable[[], None]) -> None:
        self._on_cancel.append(fn)
        if self.cancelled.is_set():
            fn()

    def cancel(self) -> None:
        self.cancelled.set()
        for fn in list(self._on_cancel):
            fn()

    def param(self, name: str, kind, default=None):
        """A parameter of the expected type (bool is not int), else CoremapError naming it."""
        v = self.params.get(name, default)
        if v is default or (type(v) is kind) or (kind is float and type(v) is int):
            return v
        raise CoremapError(f"{self.op}: {name} must be {kind.__name__}")


class _Machine:
    """What `open` made: the sampler, its state sender, the pin service."""

    def __init__(self, root: SysRoot, interval: float, session: str | None, host: str):
        self.sampler = Sampler(root, interval=interval)
        self.sender = StateSender()
        self.root = root
        self.root_key = str(root.root.resolve())
        self.session = session
        self.host = host
        self.lock = threading.Lock()        # one tick or pin at a time on this machine
        self._service: AffinityService | None = None
        self._helper: HelperClient | None = None

    @property
    def service(self) -> AffinityService:
        """The pin service, with the journal opened at the first pin op (as the window does), so a
        server whose state folder cannot be written still samples; the pin says why it cannot."""
        if self._service is None:
            journal = Journal(journal_path())
            if self.session:
                journal.session_id = self.session
            self._service = AffinityService(self.root, journal)
        return self._service

    def privileged(self) -> AffinityService:
        if self._helper is None:
            self._helper = HelperClient(sudo_command(), refused=(
                f"on {self.host}, `sudo -n` would not start coremap's helper (sudo wants a password there, "
                "and coremap never asks for one over ssh); allow it with a NOPASSWD sudoers rule for "
                "coremap-helper, or connect as root"))
        return self.service.with_writer(self._helper)

    def close(self) -> None:
        if self._helper is not None:
            self._helper.close()


def sudo_command() -> list[str]:
    """The helper as root without a prompt: the installed coremap-helper (what a sudoers rule names),
    else this Python running app.pinning.helper from where the agent's code is."""
    installed = shutil.which("coremap-helper")
    if installed:
        return ["sudo", "-n", os.path.abspath(installed)]
    here = str(Path(app.__file__).resolve().parent.parent)
    return ["sudo", "-n", sys.executable, "-I", "-c",
            f"import sys; sys.path.insert(0, {here!r}); from app.pinning.helper import main; sys.exit(main())"]


class Agent:
    """Serves requests from `reader` (binary, line by line) until its end, answering on `writer`."""

    def __init__(self, reader, writer, *, ops: dict[str, Callable[[Request], object]] | None = None,
                 facts: dict | None = None):
        self.reader, self.writer = reader, writer
        self._write_lock = threading.Lock()
        self._requests: dict[int, Request] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_REQUESTS)
        self._queue: queue.Queue = queue.Queue(MAX_QUEUED)
        self._serial = threading.Thread(target=self._serve_queue, name="agent-machine", daemon=True)
        self._streams: list[threading.Thread] = []
        self.machine: _Machine | None = None
        self.facts = dict(facts or {})
        self.ops: dict[str, Callable[[Request], object]] = {
            "open": self._open, "tick": self._tick, "facts": self._facts, "snapshot": self._snapshot,
            "cancel": self._cancel, **PinOps(self.machine_open).ops()}
        self.ops.update(ops or {})

    # -- the loop -----------------------------------------------------------------------------------
    def hello(self) -> dict:
        return {"type": "hello", "coremap": app.__version__, "protocol": protocol.PROTOCOL,
                "host": socket.gethostname(), "user": getpass.getuser(), "uid": os.getuid(),
                "python": platform.python_version(), "kernel": platform.release(), "pid": os.getpid(),
                **self.facts}

    def serve(self) -> int:
        self.send(protocol.dumps(self.hello()))
        self._serial.start()
        try:
            while True:
                try:
                    raw = protocol.read_line(self.reader, protocol.MAX_REQUEST, "the client")
                except protocol.LineTooLong as e:
                    print(f"coremap agent: {e}", file=sys.stderr)
                    return 2
                if raw is None:
                    return 0
                if raw.strip():
                    self._dispatch(raw)
        finally:
            self.close()

    def close(self) -> None:
        """The connection is gone: cancel the streams (probes and runs end with us), let the machine's
        requests already asked finish, close the helper."""
        with self._lock:
            pending = [r for r in self._requests.values() if r.op in STREAMS]
        for r in pending:
            r.cancel()
        self._queue.put(None)
        self._serial.join(DRAIN_S)
        for t in list(self._streams):
            t.join(DRAIN_S / 2)
        if self.machine is not None:
            self.machine.close()

    def _serve_queue(self) -> None:
        while True:
            req = self._queue.get()
            if req is None:
                return
            try:
                self._run(req)
            finally:
                with self._lock:
                    self._requests.pop(req.id, None)

    def send(self, line: bytes) -> None:
        with self._write_lock:
            try:
                self.writer.write(line)
                self.writer.flush()
            except (BrokenPipeError, ValueError):
                # The client went away (ValueError: the pipe is closed); serve() ends at stdin's end.
                pass

    def _dispatch(self, raw: bytes) -> None:
        try:
            msg = protocol.loads(raw, "the client")
        except protocol.ProtocolError as e:
            print(f"coremap agent: {e}", file=sys.stderr)
            return
        rid, op = msg.get("id"), msg.get("op")
        if type(rid) is not int or not 0 < rid < protocol.MAX_ID:
            print("coremap agent: a request without a valid id", file=sys.stderr)
            return
        if not isinstance(op, str) or op not in self.ops:
            self.send(protocol.error(rid, f"this agent (coremap {app.__version__}) has no op {str(op)[:40]!r}"))
            return
        req = Request(self, rid, op, {k: v for k, v in msg.items() if k not in ("id", "op")})
        if op == "cancel":          # answered at once, never queued behind what it cancels
            self._run(req)
            return
        if op not in STREAMS and op in self.ops:
            with self._lock:
                self._requests[rid] = req
            try:
                self._queue.put_nowait(req)
            except queue.Full:
                with self._lock:
                    self._requests.pop(rid, None)
                self.send(protocol.error(rid, f"the agent has {MAX_QUEUED} requests waiting; try again"))
            return
        if not self._slots.acquire(blocking=False):
            self.send(protocol.error(rid, f"the agent is busy with {MAX_REQUESTS} requests; try again"))
            return
        with self._lock:
            self._requests[rid] = req
        t = threading.Thread(target=self._run_slot, args=(req,), name=f"agent-{op}-{rid}", daemon=True)
        self._streams = [s for s in self._streams if s.is_alive()] + [t]
        t.start()

    def _run_slot(self, req: Request) -> None:
        try:
            self._run(req)
        finally:
            with self._lock:
                self._requests.pop(req.id, None)
            self._slots.release()

    def _run(self, req: Request) -> None:
        try:
            value = self.ops[req.op](req)
        except CoremapError as e:
            self.send(protocol.error(req.id, str(e)))
        except Exception as e:  # noqa: BLE001 - an agent bug must answer the request, not hang the client
            traceback.print_exc(file=sys.stderr)
            self.send(protocol.error(req.id, f"the agent failed on {req.op} ({type(e).__name__}: {e})"))
        else:
            self.send(protocol.result(req.id, value))

    # -- ops ----------------------------------------------------------------------------------------
    def machine_open(self) -> _Machine:
        """The machine `open` made (CoremapError when none is open yet)."""
        return self._machine()

    def _machine(self) -> _Machine:
        if self.machine is None:
            raise CoremapError("no machine is open on this connection; the client must send `open` first")
        return self.machine

    def _open(self, req: Request) -> dict:
        root = req.param("root", str)
        interval = req.param("interval", float, 1.0)
        session = req.param("session", str)
        if session is not None and not _SESSION.fullmatch(session):
            session = None
        old, self.machine = self.machine, _Machine(SysRoot(root or "/"), interval, session, socket.gethostname())
        if old is not None:
            old.close()
        m = self.machine
        return {"host": m.host, "root_key": m.root_key, "live": m.sampler.live, "source": m.sampler.source}

    def _tick(self, req: Request) -> dict:
        m = self._machine()
        interval = req.param("interval", float)
        track = req.param("track", list)
        forget = req.params.get("forget")
        with m.lock:
            s = m.sampler
            if interval is not None:
                s.set_interval(interval)
            if track is not None and len(track) == 2 and all(isinstance(x, list) for x in track):
                s.track([int(t) for t in track[0] if type(t) is int], [int(p) for p in track[1] if type(p) is int])
            if forget == "all":
                s.forget_threads(None)
            elif isinstance(forget, list):
                s.forget_threads([p for p in forget if type(p) is int])
            if req.params.get("refresh") is True:
                s.refresh_topology()
            state = s.tick()
            form = m.sender.form(state)
        return {"state": form, "journal": journal_stamp(journal_path(create=False))}

    def _facts(self, req: Request) -> list[list[str]]:
        """The machine's summary as a report words it (model, shape, NUMA, kernel, isolation,
        irqbalance), for `coremap fleet`."""
        # imported here: only a fleet asks for facts; every agent's start would pay for the report module
        from app.store.report import machine_facts
        m = self._machine()
        return [[label, text] for label, text in machine_facts(m.sampler.topology, m.sampler.root)]

    def _snapshot(self, req: Request) -> dict:
        """`coremap snapshot` of this machine into a temporary file, sent back in base64 chunks."""
        # imported here: only a snapshot request needs tarfile and the capture walk
        from app.store.capture import take_snapshot
        interval = req.param("interval", float, 1.0)
        second = req.param("second", bool, True)
        given = req.param("root", str)
        root = SysRoot(given) if given else self.machine.sampler.root if self.machine is not None else SysRoot("/")
        with tempfile.TemporaryDirectory(prefix="coremap-agent-snapshot-") as d:
            res = take_snapshot(Path(d) / "capture.tar.gz", root, interval=interval, second=second)
            size = 0
            with open(res.path, "rb") as f:
                for chunk in iter(lambda: f.read(SNAPSHOT_CHUNK), b""):
                    if req.cancelled.is_set():
                        raise CoremapError("snapshot cancelled")
                    size += len(chunk)
                    req.event({"chunk": base64.b64encode(chunk).decode("ascii")})
        return {"top": res.top, "size": size, "files": res.files, "links": res.links,
                "interval": res.interval, "skipped": len(res.skipped)}

    def _cancel(self, req: Request) -> bool:
        target = req.param("target", int)
        with self._lock:
            r = self._requests.get(target)
        if r is not None:
            r.cancel()
        return r is not None
