"""AgentClient: the workstation's end of one connection to an agent (one ssh session, multiplexed over
the host's one ssh connection).

`AgentClient.connect(host)` starts ssh with the bootstrap (ship.py, bootstrap.py), sends the agent
when the server asks for it, and waits for the agent's hello: its protocol and coremap version must
be this one's, or the connection is refused with one line naming both. Then requests go out with
ids and are answered on a reader thread, so the sampler's ticks, a pin from the UI thread and a
probe's stream share the connection: `call(op, **params)` waits for the result, `start(op,
on_event=...)` returns a Pending that streams.

Everything from the agent is untrusted (it runs on another machine, as another user): lines are
bounded (protocol.MAX_LINE), messages checked (protocol.check_message), error sentences made
printable and cut, and values decoded through codec.py. When the connection ends, every request
under way fails with one LinkError saying why (transport.py), and `alive` turns False.
"""
from __future__ import annotations

import itertools
import queue
import subprocess
import sys
import threading
import time
import uuid

import app
from app.errors import CoremapError, excerpt
from app.format import printable
from app.remote import protocol
from app.remote.hosts import HostSpec
from app.remote.ship import agent_mode, agent_zip, boot_line, remote_command, remote_python
from app.remote.transport import CONNECT_TIMEOUT, Disconnected, LinkError, SshProcess, SshTransport

HANDSHAKE_S = 60.0          # after ssh's own connect timeout: shipping the agent, Python starting there
FIRST_LINE_S = 5.0          # after ssh's connect timeout: the login shell and Python there say anything;
                            # with ssh's 10 s, a silent server is said within 15 s (issue 32: it took 30)
MAX_BOOT_LINES = 16         # the bootstrap says two or three things before the hello
CALL_TIMEOUT = 15.0         # a call without its own time (pins, probes and quiet have theirs): issue 32's 15 s
SILENCE_S = 60.0            # a wait with no end asks the agent whether it still answers after this long
MAX_MESSAGE = 1000          # characters of an error sentence from the agent that are shown
_EOF = object()


class VersionMismatch(LinkError):
    """The agent on the server is another version of coremap."""


class AgentError(CoremapError):
    """The agent answered a request with an error (its sentence, prefixed with the host)."""


class Pending:
    """One request under way: `wait()` for its result; `on_event(dict)` runs on the reader thread
    for each event of a stream, `on_done(pending)` there once it has ended (its `wait(0)` then answers
    at once); `cancel()` asks the agent to end it."""

    def __init__(self, client: "AgentClient", rid: int, op: str, on_event=None, on_done=None):
        self.client, self.id, self.op, self.on_event, self.on_done = client, rid, op, on_event, on_done
        self._done = threading.Event()
        self._value = None
        self._error: CoremapError | None = None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _finish(self, value=None, error: CoremapError | None = None) -> None:
        if not self._done.is_set():
            self._value, self._error = value, error
            self._done.set()
            if self.on_done is not None:
                try:
                    self.on_done(self)
                except CoremapError as e:       # a bad answer: said once, the reader thread goes on
                    print(f"coremap: {self.client.host}: {e}", file=sys.stderr)

    def wait(self, timeout: float | None = None, *, give_up: bool = True):
        """The result; AgentError or LinkError when it failed. After `timeout` seconds without an
        answer: with `give_up`, the connection is given up (a link that holds a reply that long is
        not one to go on with) and Disconnected raised; without, TimeoutError and nothing changes.
        With no timeout (a command or a probe that takes as long as it takes), the agent is still
        asked, after every SILENCE_S without a line from it, whether it answers at all (a request it
        answers at once); one that does not within CALL_TIMEOUT is given up."""
        if timeout is None:
            while not self._done.wait(min(SILENCE_S, 5.0)):
                if self.client.silent_for() >= SILENCE_S:
                    self.client.check_alive(f"`{self.op}`")
        elif not self._done.wait(timeout):
            if not give_up:
                raise TimeoutError(f"{self.client.host}: no answer to `{self.op}` within {timeout:g} s")
            self.client.close(Disconnected(f"{self.client.host}: no answer to `{self.op}` within "
                                           f"{timeout:g} s; the connection was given up"))
            self._done.wait(1.0)
        if self._error is not None:
            raise self._error
        return self._value

    def cancel(self) -> None:
        if not self._done.is_set() and self.client.alive:
            self.client.send("cancel", target=self.id)


class AgentClient:
    """One agent connection. `hello` is the agent's first message (host, user, versions, ...)."""

    def __init__(self, host: HostSpec, proc: SshProcess, hello: dict, reader: "_Reader"):
        self.host = host
        self.proc = proc
        self.hello = hello
        self._reader = reader
        self._ids = itertools.count(1)
        self._pending: dict[int, Pending] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._failure: LinkError | None = None
        reader.dispatch = self._on_message
        reader.ended = self._on_end
        reader.go.set()

    # -- connecting ---------------------------------------------------------------------------------
    @classmethod
    def connect(cls, host: HostSpec, *, connect_timeout: float = CONNECT_TIMEOUT, mode: str | None = None,
                transport: SshTransport | None = None, handshake_timeout: float | None = None) -> "AgentClient":
        """A connected client, or a LinkError naming the host and what to do (one line). The whole of it
        takes at most `handshake_timeout` seconds (default: ssh's connect timeout + HANDSHAKE_S)."""
        transport = transport or SshTransport(host, connect_timeout=connect_timeout)
        mode = mode or agent_mode()
        data, digest = agent_zip()
        proc = transport.start(remote_command())
        reader = _Reader(proc, str(host))
        limit = handshake_timeout if handshake_timeout is not None else transport.connect_timeout + HANDSHAKE_S
        deadline = time.monotonic() + limit
        try:
            _write(proc, boot_line(mode, digest))
            hello = _handshake(host, proc, reader, data, deadline, limit,
                               min(limit, transport.connect_timeout + FIRST_LINE_S))
        except BaseException:
            reader.abandon()
            proc.kill()
            raise
        return cls(host, proc, hello, reader)

    # -- requests -----------------------------------------------------------------------------------
    def silent_for(self) -> float:
        """Seconds since the agent last sent a line."""
        return time.monotonic() - self._reader.last_read

    def check_alive(self, waiting_for: str) -> None:
        """Ask the agent something it answers at once (a cancel of no request, answered by its reading
        thread whatever else it runs); give the connection up when it does not answer within
        CALL_TIMEOUT: an agent that says hello and then only keeps the line open would otherwise hold
        `waiting_for` for ever."""
        if self._failure is not None:
            return
        try:
            self.start("cancel", target=0).wait(CALL_TIMEOUT, give_up=False)
        except TimeoutError:
            self.close(Disconnected(f"{self.host}: the agent stopped answering (nothing for {SILENCE_S:g} s while "
                                    f"{waiting_for} ran, and no answer to a question it answers at once); "
                                    "the connection was given up"))
        except CoremapError:
            pass        # an error answer is an answer; a link gone is reported by the wait itself

    @property
    def alive(self) -> bool:
        return self._failure is None

    @property
    def bytes_read(self) -> int:
        """Bytes the agent sent on this connection so far."""
        return self._reader.bytes_read

    @property
    def failure(self) -> LinkError | None:
        """Why the connection ended (None while it is up)."""
        return self._failure

    def start(self, op: str, *, on_event=None, on_done=None, **params) -> Pending:
        if self._failure is not None:
            raise self._failure
        p = Pending(self, next(self._ids), op, on_event, on_done)
        with self._lock:
            self._pending[p.id] = p
        try:
            self._send_line(protocol.request(p.id, op, **params))
        except LinkError:
            with self._lock:
                self._pending.pop(p.id, None)
            raise
        return p

    def call(self, op: str, *, timeout: float = CALL_TIMEOUT, **params):
        return self.start(op, **params).wait(timeout)

    def send(self, op: str, **params) -> None:
        """A request whose answer nobody waits for (cancel)."""
        try:
            self._send_line(protocol.request(next(self._ids), op, **params))
        except LinkError:
            pass        # the connection is gone: what was to be cancelled ended with it

    def _send_line(self, line: bytes) -> None:
        with self._write_lock:
            try:
                _write(self.proc, line)
            except LinkError as e:
                self.close(e)
                raise self._failure from None

    def close(self, why: LinkError | None = None) -> None:
        """End the connection (the agent sees its stdin end and stops what it runs)."""
        with self._lock:
            if self._failure is None:
                self._failure = why or Disconnected(f"{self.host}: the connection was closed")
        try:
            self.proc.stdin.close()
        except OSError:
            pass        # already broken: ssh is gone
        try:
            self.proc.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            pass        # the agent is slow to see its stdin end: kill() below ends it
        self.proc.kill()
        self._fail_all()

    # -- the reader thread --------------------------------------------------------------------------
    def _on_message(self, msg: dict) -> None:
        kind = msg["type"]
        with self._lock:
            p = self._pending.get(msg["id"]) if kind in ("event", "result", "error") else None
            if p is not None and kind != "event":
                self._pending.pop(p.id, None)
        if p is None:
            return          # an answer to a cancel, or to a request already given up
        if kind == "event":
            if p.on_event is not None:
                p.on_event(msg["event"])
        elif kind == "result":
            p._finish(msg.get("result"))
        else:
            p._finish(error=AgentError(f"{self.host}: {_sentence(msg['message'])}"))

    def _on_end(self, error: LinkError | None) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = error or self.proc.failure(established=True)
        self._fail_all()

    def _fail_all(self) -> None:
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for p in pending:
            p._finish(error=self._failure)


class _Reader(threading.Thread):
    """Reads the agent's lines. Until the hello they go to `boot` (a queue the handshake reads); then,
    once `go` is set, to `dispatch`. At the end (EOF, a line too long, a broken message) `ended(error)`."""

    def __init__(self, proc: SshProcess, what: str):
        super().__init__(name=f"coremap-agent-{what}", daemon=True)
        self.proc, self.what = proc, what
        self.boot: queue.Queue = queue.Queue()
        self.go = threading.Event()
        self.dispatch = None
        self.ended = None
        self.bytes_read = 0             # what came over the connection (tests/benchmarks/bench_remote.py)
        self.last_read = time.monotonic()
        self.start()

    def abandon(self) -> None:
        """The handshake failed: whatever arrives now is dropped, and the thread ends with the pipe."""
        self.dispatch = lambda msg: None
        self.ended = lambda error: None
        self.go.set()

    def run(self) -> None:
        error = None
        booted = 0
        try:
            while True:
                raw = protocol.read_line(self.proc.stdout, protocol.MAX_LINE, self.what)
                if raw is None:
                    break
                self.bytes_read += len(raw) + 1
                self.last_read = time.monotonic()
                msg = protocol.check_message(protocol.loads(raw, self.what), self.what)
                if not self.go.is_set():
                    booted += 1
                    if booted > MAX_BOOT_LINES:
                        raise protocol.ProtocolError(f"{self.what} sent more than {MAX_BOOT_LINES} lines "
                                                     "before its hello")
                    self.boot.put(msg)
                    if msg["type"] == "hello":
                        self.go.wait()
                    continue
                self.dispatch(msg)
        except protocol.ProtocolError as e:
            error = Disconnected(f"{e}; the connection was closed")
        except (OSError, ValueError):
            error = None        # the pipe was closed under us (close()): the failure is already set
        if not self.go.is_set():
            self.boot.put((_EOF, error))
            return
        if error is not None:
            self.proc.kill()
        self.ended(error)


def _write(proc: SshProcess, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        proc.stdin.flush()
    except (BrokenPipeError, OSError, ValueError):
        raise proc.failure(established=True) from None


def _handshake(host: HostSpec, proc: SshProcess, reader: _Reader, agent: bytes, deadline: float,
               limit: float, first_limit: float) -> dict:
    """Boot lines until the hello; the shipped agent sent when asked; the hello checked. The first
    line is due within ssh's connect timeout and FIRST_LINE_S (a silent server says so within 15 s,
    not at the end of the whole handshake's time); the hello within the handshake's."""
    start = time.monotonic()
    first = min(deadline, start + first_limit)
    said = False
    while True:
        try:
            msg = reader.boot.get(timeout=max(0.0, (deadline if said else first) - time.monotonic()))
        except queue.Empty:
            if said:
                raise LinkError(f"{host}: no hello from coremap's agent within {limit:g} s (the server is "
                                "overloaded, or what answers is not coremap)") from None
            raise LinkError(f"{host}: no answer within {min(limit, first_limit):g} s (a firewall that drops "
                            "packets, a machine that is down, or an overloaded server)") from None
        said = True
        if isinstance(msg, tuple) and msg[0] is _EOF:
            raise msg[1] or _startup_failure(host, proc)
        if msg["type"] == "hello":
            return check_hello(host, msg)
        if msg["type"] != "boot":
            raise LinkError(f"{host}: the agent spoke before saying hello ({excerpt(msg['type'])})")
        if msg.get("error") is not None:
            raise _boot_error(host, msg)
        if msg.get("need") is True:
            _write(proc, b"%d\n" % len(agent) + agent)


def _startup_failure(host: HostSpec, proc: SshProcess) -> LinkError:
    err = proc.failure(established=False)
    if proc.proc.returncode == 127:
        return LinkError(f"{host}: no {remote_python()} on the login PATH there; coremap needs Python 3.10 "
                         "or newer on the server (install it, or set COREMAP_REMOTE_PYTHON to its path)")
    return err


def _boot_error(host: HostSpec, msg: dict) -> LinkError:
    what = msg.get("error")
    if what == "python":
        return LinkError(f"{host} runs Python {_sentence(msg.get('python'), 20)} ({_sentence(msg.get('executable'), 80)}); "
                         "coremap's agent needs Python 3.10 or newer there: install one and set "
                         "COREMAP_REMOTE_PYTHON to it")
    if what == "not-installed":
        return LinkError(f"{host} has no coremap on its login PATH, and COREMAP_REMOTE_AGENT=installed "
                         "forbids shipping one; install coremap there or unset COREMAP_REMOTE_AGENT")
    return LinkError(f"{host}: the agent could not start: {_sentence(what)}")


def check_hello(host: HostSpec, msg: dict) -> dict:
    """The agent's hello when its protocol and version are this coremap's; VersionMismatch naming
    both otherwise; LinkError for a hello that is not one."""
    theirs, proto = msg.get("coremap"), msg.get("protocol")
    if not isinstance(theirs, str) or type(proto) is not int:
        raise LinkError(f"{host}: what answered is not coremap's agent (its hello names no version)")
    if theirs != app.__version__ or proto != protocol.PROTOCOL:
        raise VersionMismatch(
            f"{host} runs coremap {_sentence(theirs, 40)} (protocol {proto}); this is coremap {app.__version__} "
            f"(protocol {protocol.PROTOCOL}): install coremap {app.__version__} there, or remove coremap from "
            "its login PATH so that this one ships its own agent")
    out = {"coremap": theirs, "protocol": proto}
    for key, limit in (("host", 255), ("user", 64), ("python", 40), ("kernel", 128), ("agent", 20),
                       ("probes", MAX_MESSAGE)):
        v = msg.get(key)
        out[key] = _sentence(v, limit) if isinstance(v, str) else None
    for key in ("pid", "uid"):
        v = msg.get(key)
        out[key] = v if type(v) is int and 0 <= v < 1 << 32 else None
    return out


def _sentence(text, limit: int = MAX_MESSAGE) -> str:
    """Text from the other side made safe for a terminal line and a status bar: printable, cut."""
    s = printable(str(text))
    return s if len(s) <= limit else s[:limit] + "…"


class Link:
    """One host's connection, held by its RemoteHost (app/remote/host.py) for everything that goes over
    it: the sampler's ticks, pins and quiet CPUs, probe runs, snapshots. `connect()` starts the agent
    and opens the machine there (`root`: a capture on the server; the journal `session` every agent this
    link opens writes under); `client` is None while the link is down; `close()` ends it for good (a
    call under way fails at once). `journal_stamp`: the server's journal as the last tick saw it."""

    def __init__(self, host: HostSpec, *, root: str | None = None, connect=None):
        self.host = host
        self.remote_root = root
        self.session = uuid.uuid4().hex[:12]
        self.root_key: str | None = None
        self.opened: dict = {}              # what `open` answered (host name there, live, source)
        self.journal_stamp: tuple | None = None
        self._connect = connect or AgentClient.connect
        self._client: AgentClient | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def client(self) -> AgentClient | None:
        c = self._client
        return c if c is not None and c.alive else None

    @property
    def closed(self) -> bool:
        return self._closed

    def connect(self, interval: float) -> AgentClient:
        """The connected client, connecting now when there is none (LinkError when it cannot be)."""
        c = self.client
        if c is not None:
            return c
        client = self._connect(self.host)
        try:
            opened = client.call("open", root=self.remote_root, interval=interval, session=self.session)
            if not isinstance(opened, dict) or not isinstance(opened.get("root_key"), str):
                raise Disconnected(f"{self.host}: the agent did not say what it opened")
        except CoremapError:
            client.close()
            raise
        with self._lock:
            if self._closed:
                client.close()
                raise Disconnected(f"{self.host}: the connection was closed")
            self._client = client
        self.opened = {k: opened.get(k) for k in ("host", "live", "source")}
        self.root_key = opened["root_key"]
        return client

    def lost(self) -> LinkError | None:
        """A client that died: dropped, and why it died; None when there was none."""
        with self._lock:
            c = self._client
            if c is None or c.alive:
                return None
            self._client = None
        why = c.failure or Disconnected(f"{self.host}: the connection ended")
        c.close(why)
        return why

    def drop(self, why: LinkError) -> None:
        """The link is down (`why`): the client is closed; the next `connect()` starts another."""
        with self._lock:
            c, self._client = self._client, None
        if c is not None:
            c.close(why)

    def close(self) -> None:
        """End the connection now, and never connect again. Safe from any thread."""
        with self._lock:
            self._closed = True
            c, self._client = self._client, None
        if c is not None:
            c.close()
