"""The system `ssh`, started the way coremap needs it, and its failures as one line each.

The user's ssh client does the connecting, so ~/.ssh/config (aliases, ProxyJump, User, Port,
IdentityFile), their agent and known_hosts work as they set them up. coremap adds:

- BatchMode=yes: ssh never prompts. A password or passphrase that would be asked for, or a host key
  that would need accepting, fails at once with a line that says so; no prompt ever blocks the
  window (and there is no terminal to type into anyway).
- One connection per host, multiplexed: ControlMaster=auto with its socket in a private folder
  (0700, ours; see control_dir) and ControlPersist, so the window, a probe and a `coremap --host`
  command in a terminal share one TCP connection and one login. The socket is named for the host as
  written and everything `ssh -G` resolves for it (address, port, user, keys, known_hosts files,
  ProxyJump...), never for host, port and user alone as ssh's %C is: two aliases of one server each
  log in and check the host key themselves, and one never rides the other's connection. A user whose
  ssh config already names a ControlPath keeps theirs.
- ConnectTimeout, and ServerAliveInterval/CountMax, so a dead link is noticed within ~15 s even when
  no data flows.
- `-T` (no terminal) and `--` before the destination (a host is never an option).

`COREMAP_SSH_COMMAND` replaces `ssh` itself (split like a shell would; e.g. "ssh -F ~/lab/config"),
as GIT_SSH_COMMAND does for git.

The ssh process dies with coremap (PR_SET_PDEATHSIG, as probes/runner.py does for probes): note that
the signal follows the thread that started it, so start it from a thread that lives as long as the
connection (the CLI's main thread, the window's sampler thread).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shlex
import signal
import stat
import subprocess
import threading
from pathlib import Path

from app.errors import CoremapError
from app.format import printable
from app.remote.hosts import HostSpec

SSH_COMMAND_ENV = "COREMAP_SSH_COMMAND"
CONNECT_TIMEOUT = 10            # seconds for TCP and the ssh handshake
ALIVE_INTERVAL = 5              # seconds between keepalives when nothing flows
ALIVE_COUNT = 3                 # missed keepalives before ssh gives the link up
CONTROL_PERSIST = 60            # seconds the shared connection outlives its last user
STDERR_KEPT = 64 * 1024         # bytes of ssh's stderr kept to explain a failure
_PR_SET_PDEATHSIG = 1


class LinkError(CoremapError):
    """The connection to a host failed or ended; str() names the host and what to do."""


class HostKeyUnknown(LinkError):
    """The host's key is not in known_hosts (or differs from it)."""


class LoginRefused(LinkError):
    """The server refused the login (no key it accepts; batch mode never asks for a password)."""


class HostRefused(LinkError):
    """Nothing listens on the port (TCP connection refused)."""


class HostUnreachable(LinkError):
    """No route, no such name, or no answer within the timeout."""


class Disconnected(LinkError):
    """An established connection ended."""


def ssh_command() -> list[str]:
    """`ssh`, or $COREMAP_SSH_COMMAND split into words."""
    text = os.environ.get(SSH_COMMAND_ENV, "").strip()
    if not text:
        return ["ssh"]
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise LinkError(f"{SSH_COMMAND_ENV}={text[:60]!r} cannot be split into words ({e}); "
                        "write it as a shell would, e.g. \"ssh -F ~/lab/config\"") from None
    return words or ["ssh"]


def control_dir() -> Path:
    """A folder for the multiplexing sockets that only this user can enter: $XDG_RUNTIME_DIR/coremap
    when XDG_RUNTIME_DIR is this user's own 0700 folder (systemd makes it so), else ~/.cache/coremap/ssh;
    never the shared temporary folder. Each folder coremap makes on the way is created 0700 and, like
    the one it ends in, refused if it is a link, someone else's, or open to others."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and _private(Path(runtime)):
        parts = [Path(runtime) / "coremap"]
    else:
        cache = Path.home() / ".cache"
        parts = [cache, cache / "coremap", cache / "coremap" / "ssh"]
    for folder in parts:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError as e:
            raise LinkError(f"{folder}: cannot create the folder for ssh's shared connections ({e.strerror}); "
                            "set XDG_RUNTIME_DIR to a folder of yours") from None
    base = parts[-1]
    if not all(_private(p) for p in parts[-2:]):
        raise LinkError(f"{base}: not a private folder of this user (a link, someone else's, or open to "
                        "others); remove it, or set XDG_RUNTIME_DIR to a folder of yours")
    return base


def _private(folder: Path) -> bool:
    """Whether `folder` is a folder (not a link to one) that this user owns and nobody else may enter."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


class SshTransport:
    """How to reach one host: the ssh argv for a remote command, and what a failure of it means."""

    def __init__(self, host: HostSpec, *, connect_timeout: float = CONNECT_TIMEOUT,
                 command: list[str] | None = None):
        self.host = host
        self.connect_timeout = max(1, int(round(connect_timeout)))
        self.command = list(command) if command is not None else ssh_command()
        self._multiplex: list[str] | None = None
        self._config: str | None = None

    def argv(self, remote_command: str) -> list[str]:
        """The full argv that runs `remote_command` (one string, for the login shell) on the host."""
        return [*self.command, "-T",
                "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={self.connect_timeout}",
                "-o", f"ServerAliveInterval={ALIVE_INTERVAL}",
                "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
                *self.multiplex_options(),
                *self.host.ssh_args(), remote_command]

    def multiplex_options(self) -> list[str]:
        """ControlMaster/ControlPath/ControlPersist in our private folder, unless the user's config
        names its own ControlPath for this host (then theirs is used as they set it up)."""
        if self._multiplex is None:
            self._multiplex = [] if self._user_control_path() else [
                "-o", "ControlMaster=auto",
                "-o", f"ControlPath={control_dir()}/{self.control_key()}",
                "-o", f"ControlPersist={CONTROL_PERSIST}"]
        return self._multiplex

    def control_key(self) -> str:
        """The shared connection's name: a hash of the host as written and of everything `ssh -G`
        resolves for it, so only an identical destination and configuration shares a connection."""
        text = f"{self.host}\n{' '.join(self.command)}\n{self._resolved()}"
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]

    def _resolved(self) -> str:
        """`ssh -G`'s output for this host (the config as it applies to it; no connection is made);
        "" when ssh cannot say (the real connection will say what is wrong)."""
        if self._config is None:
            try:
                self._config = subprocess.run([*self.command, "-G", *self.host.ssh_args()], capture_output=True,
                                              text=True, timeout=10, stdin=subprocess.DEVNULL).stdout
            except (OSError, subprocess.TimeoutExpired):
                self._config = ""
        return self._config

    def _user_control_path(self) -> bool:
        """Whether the config as it applies to this host names a ControlPath."""
        for line in self._resolved().splitlines():
            key, _, value = line.partition(" ")
            if key == "controlpath":
                return value.strip() not in ("", "none")
        return False

    def start(self, remote_command: str) -> "SshProcess":
        argv = self.argv(remote_command)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, preexec_fn=die_with_parent)
        except FileNotFoundError:
            raise LinkError(f"{argv[0]}: no such program; install the OpenSSH client "
                            "(Debian/Ubuntu: openssh-client) or set COREMAP_SSH_COMMAND") from None
        except OSError as e:
            raise LinkError(f"cannot start {argv[0]} ({e.strerror})") from None
        return SshProcess(proc, self)

    # -- what a failure means ---------------------------------------------------------------------
    def failure(self, returncode: int | None, stderr: str, *, established: bool) -> LinkError:
        """One line for an ssh that ended: what ssh said (exit 255 is ssh's own failure), else what
        the remote command said."""
        h = str(self.host)
        lines = [printable(l.strip()) for l in stderr.splitlines() if l.strip()]
        said = " ".join(lines)
        for pattern, cls, text in _SSH_FAILURES:
            m = re.search(pattern, said, re.IGNORECASE)
            if m:
                detail = m.group("detail") if "detail" in m.groupdict() else ""
                port = f"port {self.host.port}" if self.host.port else "its ssh port"
                return cls(text.format(host=h, timeout=self.connect_timeout, detail=detail or "", port=port,
                                       ssh=self.host.command_text(), copy_id=self.host.command_text("ssh-copy-id")))
        last = lines[-1] if lines else ""
        if established:
            return Disconnected(f"{h}: the connection ended" + (f" ({last})" if last else ""))
        if returncode == 255:
            return LinkError(f"{h}: ssh failed" + (f": {last}" if last else " (exit status 255)"))
        return LinkError(f"{h}: the remote command ended with status {returncode}" + (f": {last}" if last else ""))


_SSH_FAILURES = [
    (r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed", HostKeyUnknown,
     "{host}: its host key has CHANGED since known_hosts recorded it (a reinstalled server, or someone in "
     "between); check the new key, then update ~/.ssh/known_hosts (ssh-keygen -R)"),
    (r"Host key verification failed|No \S+ host key is known", HostKeyUnknown,
     "{host}: its host key is not in known_hosts, and coremap never accepts one unseen; check it and accept "
     "it once with `{ssh}`, then try again"),
    (r"Permission denied \((?P<detail>[^)]*)\)|Permission denied", LoginRefused,
     "{host}: the login was refused (tried: {detail}); coremap never asks for a password (ssh batch mode): "
     "set up a key ({copy_id}) or load it into your ssh agent"),
    (r"Too many authentication failures", LoginRefused,
     "{host}: the login was refused (too many keys offered); name the right one with IdentityFile in "
     "~/.ssh/config"),
    (r"Connection refused", HostRefused,
     "{host}: the connection was refused on {port}: no ssh server listens there (check the port, or "
     "start sshd)"),
    (r"Could not resolve hostname|Name or service not known|Temporary failure in name resolution", HostUnreachable,
     "{host}: no such host name (DNS does not know it, and ~/.ssh/config has no Host entry for it)"),
    (r"(?P<detail>No route to host|Network is unreachable)", HostUnreachable,
     "{host}: unreachable ({detail}); check the address and the network"),
    (r"Connection timed out|Operation timed out|timed out", HostUnreachable,
     "{host}: no answer within {timeout} s (a firewall, or the machine is down)"),
]


class SshProcess:
    """A running ssh: its pipes, and its stderr read on a thread and kept (the last STDERR_KEPT bytes)."""

    def __init__(self, proc: subprocess.Popen, transport: SshTransport):
        self.proc = proc
        self.transport = transport
        self._err = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_stderr, name="coremap-ssh-stderr", daemon=True)
        self._reader.start()

    @property
    def stdin(self):
        return self.proc.stdin

    @property
    def stdout(self):
        return self.proc.stdout

    def _read_stderr(self) -> None:
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            with self._lock:
                self._err += chunk
                del self._err[:-STDERR_KEPT]

    def stderr_text(self, wait: float = 0.5) -> str:
        """What ssh (and the remote command) wrote on stderr, once it has ended or after `wait` s."""
        self._reader.join(wait)
        with self._lock:
            return self._err.decode("utf-8", "replace")

    def failure(self, *, established: bool, wait: float = 2.0) -> LinkError:
        try:
            rc = self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            rc = None
        return self.transport.failure(rc, self.stderr_text(), established=established)

    def kill(self) -> None:
        """End ssh now (SIGTERM to its session, then SIGKILL) and reap it. The shared master, if this
        ssh started one, stays for CONTROL_PERSIST seconds: it is not in this session."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break       # gone between the poll and the kill
            try:
                self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                continue
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass        # a broken pipe to a dead ssh: nothing left to flush
        self.proc.wait()


# Resolved before any fork: the child calls only this (no allocation, no import) between fork and exec.
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None       # not Linux: a closed stdin still ends an ssh and an agent, and cancel still stops runs


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """`sig` to this process when its parent dies (even by SIGKILL). In a child before exec (an ssh
    started by coremap, a command the agent runs), so none outlives what started it; in the agent, so
    it ends with sshd's session."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
