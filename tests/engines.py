"""The real metrics engines, from Debian's packages, started on 127.0.0.1 with their own ports and folders
for the tests of app/sources/, and stopped after them.

- `pcp_engines()`: two pmcd (`pmcd -f -i 127.0.0.1 -p PORT -s SOCKET`, each its own port, socket and logs:
  two "hosts" of one fleet) and one pmproxy (`-f -i 127.0.0.1 -p PORT -s SOCKET`, PMCD_PORT set). The
  package's postinst cannot start or set up anything without systemd, so /run/pcp is created and the
  PMNS built (`Rebuild -du` in /var/lib/pcp/pmns) first, as root, where they are missing.
- `prometheus_engines()`: prometheus-node-exporter on this machine (`--collector.interrupts
  --collector.cpu.info` and a textfile folder), a second one on a captured machine's /proc and /sys
  (`--path.procfs/--path.sysfs`: the 80-CPU worker1 from tests/fixtures, whose isolcpus this machine lacks),
  and prometheus scraping both every second into its own data folder. With `fixture_hostname`, the
  captured machine's exporter runs in a UTS namespace of its own whose host name is that (`unshare --uts`,
  root only) and with its uname collector, so node_uname_info names it as a real host's exporter does.

A test skips only when the package is not installed (and names it) or when this is not root and the
package's folders are not set up; everything else that fails is an error of the test.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PCP_BIN = Path("/usr/lib/pcp/bin")
PMNS = Path("/var/lib/pcp/pmns")
START_WAIT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, log: Path, what: str) -> None:
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {START_WAIT:g} s")


@dataclass
class Engines:
    folder: Path
    procs: list = field(default_factory=list)
    urls: dict = field(default_factory=dict)
    specs: list = field(default_factory=list)       # (name, argv, port, env) of each of procs

    def start(self, name: str, argv: list[str], port: int, env: dict | None = None) -> subprocess.Popen:
        self.specs.append((name, argv, port, env))
        self.procs.append(None)
        return self._run(len(self.procs) - 1)

    def _run(self, i: int) -> subprocess.Popen:
        name, argv, port, env = self.specs[i]
        log = self.folder / f"{name}.out"
        # Dies with the test process even when that is killed (a run cut short by `timeout`, a Ctrl+C'd
        # worker): twelve node exporters of killed runs were found listening hours later. The thread that
        # starts it lives as long as the stack (Started), as PR_SET_PDEATHSIG follows the thread.
        from app.remote.transport import die_with_parent
        proc = subprocess.Popen(argv, stdout=open(log, "ab"), stderr=subprocess.STDOUT, cwd=self.folder,
                                env=dict(os.environ, **(env or {})), start_new_session=True,
                                preexec_fn=die_with_parent)
        self.procs[i] = proc
        _wait_port(port, proc, log, name)
        return proc

    def restart(self, i: int) -> subprocess.Popen:
        """Start engine `i` again, as it was started, after a test stopped it: the stack is shared by
        every module of the run (tests/conftest.py), so a test that stops one puts it back."""
        if self.procs[i].poll() is None:
            return self.procs[i]
        return self._run(i)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        shutil.rmtree(self.folder, ignore_errors=True)


def _pcp_ready() -> None:
    if not (PCP_BIN / "pmcd").exists() or not (PCP_BIN / "pmproxy").exists():
        pytest.skip("PCP is not installed: apt-get install pcp (app/syslibs.py lists it for .ci/run)")
    if not Path("/run/pcp").is_dir() or not (PMNS / "root").exists():
        if os.geteuid() != 0:
            pytest.skip("PCP's /run/pcp or PMNS is missing and only root can set them up: run the tests as root")
        Path("/run/pcp").mkdir(mode=0o775, parents=True, exist_ok=True)
        if not (PMNS / "root").exists():
            subprocess.run(["./Rebuild", "-du"], cwd=PMNS, check=True, capture_output=True, timeout=120)


@contextlib.contextmanager
def pcp_engines():
    """Engines with urls {"pmproxy": URL, "hosts": [hostspec, hostspec]}."""
    _pcp_ready()
    e = Engines(Path(tempfile.mkdtemp(prefix="coremap-pcp-")))
    try:
        hosts = []
        for i in range(2):
            port = free_port()
            e.start(f"pmcd{i}", [str(PCP_BIN / "pmcd"), "-f", "-i", "127.0.0.1", "-p", str(port),
                                 "-s", str(e.folder / f"pmcd{i}.sock"), "-l", str(e.folder / f"pmcd{i}.log")], port)
            hosts.append(f"127.0.0.1:{port}")
        proxy = free_port()
        e.start("pmproxy", [str(PCP_BIN / "pmproxy"), "-f", "-A", "-i", "127.0.0.1", "-p", str(proxy),
                            "-s", str(e.folder / "pmproxy.sock"), "-l", str(e.folder / "pmproxy.log")], proxy,
                env={"PMCD_PORT": hosts[0].split(":")[1]})
        e.urls = {"pmproxy": f"http://127.0.0.1:{proxy}", "hosts": hosts}
        for h in hosts:
            _wait_percpu(e.urls["pmproxy"], h)
        yield e
    finally:
        e.stop()


PROM_CONFIG = """global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: [{targets}]
"""


@contextlib.contextmanager
def prometheus_engines(fixture_root: Path | None = None, *, textfile_dir: Path | None = None,
                       fixture_hostname: str | None = None):
    """Engines with urls {"prometheus": URL, "here": instance, "fixture": instance or None}."""
    for cmd, pkg in (("prometheus", "prometheus"), ("prometheus-node-exporter", "prometheus-node-exporter")):
        if shutil.which(cmd) is None:
            pytest.skip(f"{cmd} is not installed: apt-get install {pkg} (app/syslibs.py lists it for .ci/run)")
    e = Engines(Path(tempfile.mkdtemp(prefix="coremap-prom-")))
    try:
        textfile = textfile_dir or e.folder / "textfile"
        textfile.mkdir(exist_ok=True)
        here = free_port()
        e.start("node-here", ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{here}",
                              "--collector.interrupts", "--collector.cpu.info",
                              f"--collector.textfile.directory={textfile}"], here)
        targets = [f"127.0.0.1:{here}"]
        fixture = None
        if fixture_root is not None:
            fixture = free_port()
            argv = ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{fixture}",
                    f"--path.procfs={fixture_root / 'proc'}", f"--path.sysfs={fixture_root / 'sys'}",
                    "--collector.disable-defaults", "--collector.interrupts", "--collector.cpu", "--collector.cpu.info"]
            if fixture_hostname is not None:
                if os.geteuid() != 0 or shutil.which("unshare") is None:
                    pytest.skip("naming the captured machine's exporter host needs unshare --uts, as root")
                argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', fixture_hostname, *argv,
                        "--collector.uname"]
            e.start("node-fixture", argv, fixture)
            targets.append(f"127.0.0.1:{fixture}")
        (e.folder / "prometheus.yml").write_text(PROM_CONFIG.format(targets=", ".join(f"'{t}'" for t in targets)))
        port = free_port()
        e.start("prometheus", ["prometheus", f"--config.file={e.folder / 'prometheus.yml'}",
                               f"--storage.tsdb.path={e.folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                port)
        e.urls = {"prometheus": f"http://127.0.0.1:{port}", "here": targets[0],
                  "fixture": targets[1] if fixture is not None else None}
        wait_scrapes(e.urls["prometheus"], len(targets))
        yield e
    finally:
        e.stop()


class Started:
    """A context manager of engines entered on a thread of its own, so that its start overlaps the tests
    that run before the first one that needs it (Prometheus takes its targets only at its scrape manager's
    first reload, 5 s after it starts: the stack was 8 s of a module's set-up). `get()` waits for it and
    raises what its start raised (a skip included); `stop()` leaves the context."""

    def __init__(self, engines: Callable[[], contextlib.AbstractContextManager]):
        self._ready, self._release = threading.Event(), threading.Event()
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(engines,), name="coremap-engines", daemon=True)
        self._thread.start()

    def _run(self, engines) -> None:
        try:
            with engines() as value:
                self._value = value
                self._ready.set()
                self._release.wait()
        except BaseException as e:      # noqa: BLE001 - pytest's skip is one: handed to get()'s caller
            self._error = e
        finally:
            self._ready.set()

    def get(self):
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._value

    def stop(self) -> None:
        self._release.set()
        self._thread.join(60)


def _wait_percpu(pmproxy: str, host: str) -> None:
    """Until pmproxy fetches `host`'s per-CPU counters with their instances: a listening port is not a
    pmcd whose PMDAs answer (a fleet read on a busy machine once found no CPU of a host, issue 31)."""
    import json
    url = f"{pmproxy}/pmapi/fetch?hostspec={host}&names=kernel.percpu.cpu.user"
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(url, timeout=2) as r:
                if any(v.get("instances") for v in json.load(r).get("values", ())):
                    return
        time.sleep(0.2)
    raise RuntimeError(f"pmproxy {pmproxy} did not fetch {host}'s per-CPU counters within {START_WAIT:g} s")


def wait_scrapes(url: str, n: int, scrapes: int = 3) -> None:
    """Until every target was scraped `scrapes` times with success in the last few seconds (irate needs
    two samples; a target started again after a test stopped it counts only its new scrapes)."""
    import json
    q = urllib.request.quote(f"sum_over_time(up[{scrapes + 2}s]) >= {scrapes}")
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(f"{url}/api/v1/query?query={q}", timeout=2) as r:
                if len(json.load(r)["data"]["result"]) >= n:
                    return
        time.sleep(0.3)
    raise RuntimeError(f"prometheus at {url} did not scrape its {n} targets {scrapes} times within {START_WAIT:g} s")
