"""A real OpenSSH server for the tests of issue 15, started here and gone at the end.

`Sshd(folder)` writes a host key, a user key and its authorized_keys, a client config and a
known_hosts into `folder`, and starts Debian's `sshd -D -f CONFIG` on 127.0.0.1 at two free ports,
logging in as the user running the tests. No system configuration is read or touched: the server
reads only its own config (-f), the client only its own (`ssh -F`, through COREMAP_SSH_COMMAND), and
the sessions get their own cache, state and runtime folders (SetEnv), so the server's pin journal and
the shipped agent stay in `folder`.

- port `installed`: the login PATH starts with this checkout's .venv/bin, so `coremap` is installed;
- port `clean`: PATH=/usr/bin:/bin and no PYTHONPATH, so the server has no coremap, and the client
  ships its agent (tests also name the system python3 with COREMAP_REMOTE_PYTHON).

As root, sshd insists on its privilege-separation folder /run/sshd. Where it is missing, sshd runs in a
private mount namespace (unshare -m) with a tmpfs on /run holding it: the machine's /run is not touched;
where no namespace can be made (a container without CAP_SYS_ADMIN), the empty folder is made and removed
at the end. As another user, sshd needs neither (it skips its chroot) and logs in only that user.

Client-side aliases (ssh -F): s1, s2, s3, node-a (installed), clean (clean), refused (a closed port),
stranger (a known_hosts without the server's key), wrongkey (a key the server does not accept),
silent (a port that accepts and never answers), blackhole (192.0.2.1, TEST-NET-1: no route, or no answer). stranger and wrongkey name the server "localhost": ssh
multiplexes by host, port and user, and under s1's name they would ride s1's shared connection, whose
key was checked and whose login was made already. twin is s1 exactly (127.0.0.1, its port, its user)
with a known_hosts that lacks the key: coremap names each shared connection for the alias and what
`ssh -G` resolves for it, so twin must make (and fail) its own login while s1's connection lives
(issue 24, ssh).
"""
from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from app.remote.transport import die_with_parent

SSHD = shutil.which("sshd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
REPO = Path(__file__).resolve().parents[2]
INSTALLED_ALIASES = ("s1", "s2", "s3", "node-a")


def unavailable() -> str | None:
    if SSHD is None:
        return "sshd is not installed (Debian: apt-get install openssh-server; .ci/run installs it)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "the OpenSSH client is not installed (Debian: openssh-client)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "coremap-test", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return path.with_suffix(".pub").read_text().strip()


class Sshd:
    def __init__(self, folder: Path):
        self.folder = folder
        self.user = getpass.getuser()
        f = folder
        for d in ("run", "cache-installed", "cache-clean", "state", "client-run"):
            (f / d).mkdir(mode=0o700, exist_ok=True)
        # The one test tree the agent may write IRQ masks into (a copy a test makes there), as the
        # tests' own writable_test_tree says for this process (app/sysroot/confined.py).
        self.writable_tree = f / "writable-tree"
        host_pub = _keygen(f / "host_ed25519")
        user_pub = _keygen(f / "user_ed25519")
        _keygen(f / "other_ed25519")
        (f / "authorized_keys").write_text(user_pub + "\n")
        self.port, self.clean_port, self.closed_port = free_port(), free_port(), free_port()
        # A port that accepts TCP and then never says a word: a hung machine, or a firewall's tarpit.
        self._silent = socket.socket()
        self._silent.bind(("127.0.0.1", 0))
        self._silent.listen(64)
        self.silent_port = self._silent.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._hold, name="silent-port", daemon=True).start()
        key = " ".join(host_pub.split()[:2])
        known = "".join(f"[{h}]:{p} {key}\n" for p in (self.port, self.clean_port) for h in ("127.0.0.1", "localhost"))
        (f / "known_hosts").write_text(known)
        (f / "empty_known_hosts").write_text("")
        venv_bin = Path(sys.executable).parent
        (f / "sshd_config").write_text(f"""\
Port {self.port}
Port {self.clean_port}
ListenAddress 127.0.0.1
HostKey {f}/host_ed25519
AuthorizedKeysFile {f}/authorized_keys
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowUsers {self.user}
MaxSessions 200
MaxStartups 200:30:400
LogLevel ERROR
SetEnv PATH={venv_bin}:/usr/bin:/bin XDG_CACHE_HOME={f}/cache-installed COREMAP_STATE_DIR={f}/state XDG_RUNTIME_DIR={f}/run COREMAP_WRITABLE_TEST_ROOTS={self.writable_tree}
Match LocalPort {self.clean_port}
    SetEnv PATH=/usr/bin:/bin XDG_CACHE_HOME={f}/cache-clean COREMAP_STATE_DIR={f}/state XDG_RUNTIME_DIR={f}/run
""")
        common = (f"    HostName 127.0.0.1\n    User {self.user}\n    IdentitiesOnly yes\n"
                  f"    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    LogLevel ERROR\n")
        (f / "ssh_config").write_text(f"""\
Host {' '.join(INSTALLED_ALIASES)}
    Port {self.port}
    IdentityFile {f}/user_ed25519
    UserKnownHostsFile {f}/known_hosts
{common}
Host clean
    Port {self.clean_port}
    IdentityFile {f}/user_ed25519
    UserKnownHostsFile {f}/known_hosts
{common}
Host refused
    Port {self.closed_port}
    IdentityFile {f}/user_ed25519
    UserKnownHostsFile {f}/known_hosts
{common}
Host twin
    Port {self.port}
    IdentityFile {f}/user_ed25519
    UserKnownHostsFile {f}/empty_known_hosts
{common}
Host stranger
    Port {self.port}
    IdentityFile {f}/user_ed25519
    UserKnownHostsFile {f}/empty_known_hosts
{common.replace("127.0.0.1", "localhost")}    AddressFamily inet
Host wrongkey
    Port {self.port}
    IdentityFile {f}/other_ed25519
    UserKnownHostsFile {f}/known_hosts
{common.replace("127.0.0.1", "localhost")}    AddressFamily inet
Host silent
    Port {self.silent_port}
    IdentityFile {f}/user_ed25519
    UserKnownHostsFile {f}/known_hosts
{common}
Host blackhole
    HostName 192.0.2.1
    User {self.user}
    IdentityFile {f}/user_ed25519
    UserKnownHostsFile {f}/known_hosts
    StrictHostKeyChecking yes
""")
        self.proc: subprocess.Popen | None = None

    def _hold(self) -> None:
        while True:
            try:
                conn, _ = self._silent.accept()
            except OSError:
                return          # closed by stop()
            self._held.append(conn)

    @property
    def env(self) -> dict[str, str]:
        """What a coremap client needs to use this server (and only it)."""
        return {"COREMAP_SSH_COMMAND": f"ssh -F {self.folder}/ssh_config",
                "XDG_RUNTIME_DIR": str(self.folder / "client-run")}

    def start(self) -> "Sshd":
        cmd = [SSHD, "-D", "-e", "-f", str(self.folder / "sshd_config")]
        self.made_run_sshd = False
        if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
            if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0:
                cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       "mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 755 /run/sshd && exec \"$@\"", "sh", *cmd]
            else:
                # No mount namespace here (a container without CAP_SYS_ADMIN): the empty folder sshd's
                # own service would have made, removed again in stop().
                os.mkdir("/run/sshd", 0o755)
                self.made_run_sshd = True
        self.log = open(self.folder / "sshd.log", "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True, preexec_fn=die_with_parent)  # not outliving a killed run
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.folder / 'sshd.log').read_text()[-500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    with socket.create_connection(("127.0.0.1", self.clean_port), timeout=0.2):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not listen within 10 s")

    def connections(self) -> list[int]:
        """The per-connection sshd processes (children of the listener)."""
        if self.proc is None:
            return []
        return [pid for pid in _pids() if _ppid(pid) == self.proc.pid]

    def drop_connections(self) -> list[int]:
        """Kill every established connection (the server side of the TCP link), as a cut link would."""
        pids = self.connections()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass        # ended by itself meanwhile
        return pids

    def stop(self) -> None:
        self._silent.close()
        for conn in self._held:
            conn.close()
        if self.proc is None:
            return
        conns = self.connections()
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        for pid in conns:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()
        self.proc = None
        if self.made_run_sshd:
            os.rmdir("/run/sshd")


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None         # exited while we looked
    return int(stat[stat.rindex(")") + 2:].split()[1])


def sshd_fixture(tmp_path_factory):
    """The session's one server (a pytest fixture body: see tests/remote/conftest.py)."""
    import pytest
    why = unavailable()
    if why is not None:
        pytest.skip(why)
    import tempfile
    # A short folder: ssh's ControlPath is a unix socket path (at most 107 bytes) under it.
    folder = Path(tempfile.mkdtemp(prefix="cm-sshd-"))
    server = Sshd(folder).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
