"""Real JVMs for the tests of Java thread names: tests/unit/java/MarketData.java (two threads called
"market-data-feed-handler-0" and "-1", both "market-data-fee" to the kernel), compiled once per
fixture cache into a folder every user may read, and started with any JVM options, as any user."""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from app.remote.transport import die_with_parent
from tests.machines import cached

SRC = Path(__file__).resolve().parent / "unit" / "java" / "MarketData.java"
HANDLER = "market-data-feed-handler-0"
OTHER_HANDLER = "market-data-feed-handler-1"
COMM = "market-data-fee"

needs_jdk = pytest.mark.skipif(
    not (shutil.which("javac") and shutil.which("java")),
    reason="needs a JDK's javac and java (Debian: default-jdk-headless, installed by .ci/run)")

def classes() -> Path:
    """The compiled MarketData, in a folder any user can read (a JVM run as nobody loads it too); kept
    in the fixture cache for the source's content and this javac (tests/machines.py cached): each
    pytest process compiled it anew, 3-25 s of a loaded machine's run (issue 31)."""
    javac = os.path.realpath(shutil.which("javac"))
    key = hashlib.sha256(SRC.read_bytes() + f"{javac} {os.stat(javac).st_mtime_ns}".encode()).hexdigest()[:16]
    return cached(f"java-{key}", _compile)


def _compile(out: Path) -> None:
    subprocess.run(["javac", "-d", str(out), str(SRC)], check=True, capture_output=True, timeout=120)
    for p in [out, *out.iterdir()]:
        p.chmod(0o755 if p.is_dir() else 0o644)


class MarketData:
    """One running MarketData JVM. `tids` maps each handler's full name to its tid as the thread itself
    read it from /proc/thread-self (no coremap code involved)."""

    def __init__(self, *options: str, user: int | None = None):
        java = os.path.realpath(shutil.which("java"))
        self.proc = subprocess.Popen([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", *options,
                                      "-cp", str(classes()), "MarketData"],
                                     stdout=subprocess.PIPE, text=True, cwd="/", user=user,
                                     preexec_fn=die_with_parent)     # not outliving a killed test run
        self.pid = self.proc.pid
        self.tids: dict[str, int] = {}
        while True:
            line = self.proc.stdout.readline().strip()
            if line == "ready":
                break
            name, _, tid = line.rpartition(" ")
            if not name.startswith("market-data-feed-handler-") or not tid.isdigit():
                self.stop()
                raise AssertionError(f"MarketData did not start: {line!r}")
            self.tids[name] = int(tid)
        assert set(self.tids) == {HANDLER, OTHER_HANDLER}

    def tid(self, name: str) -> int:
        return self.tids[name]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Kill it, and remove what a killed JVM leaves behind under its pid: its attach socket
        (/tmp/.java_pid<pid>, once something attached) and its perf data (/tmp/hsperfdata_<user>/<pid>).
        Left, they piled up in /tmp run after run, and a later process given the same pid (pid_max is
        32768 here) looked attached already (test_attach failed on a socket three hours old)."""
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        for leftover in [Path(f"/tmp/.java_pid{self.pid}"), *Path("/tmp").glob(f"hsperfdata_*/{self.pid}")]:
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass


def wait_until(predicate, timeout: float = 30.0, what: str = "the condition"):
    """Poll `predicate` until it returns something true; its value. Fails the test at `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.02)


def perfdata_bytes(entries: dict, order: str = "<") -> bytes:
    """A perf-data file laid out as HotSpot lays it out (perfMemory.hpp: a 32-byte prologue, then
    entries of 'B' strings and 'J' longs), for tests that parse one or plant one."""
    body = b""
    offset = 32
    for name, value in entries.items():
        n = name.encode() + b"\0"
        if isinstance(value, str):
            data, kind, vector = value.encode() + b"\0", ord("B"), len(value) + 1
        else:
            data, kind, vector = struct.pack(order + "q", value), ord("J"), 0
        length = 20 + len(n) + len(data)
        body += struct.pack(order + "iiibbbbi", length, 20, vector, kind, 0, 0, 0, 20 + len(n)) + n + data
        offset += length
    prologue = struct.pack(">I", 0xCAFEC0C0) + bytes([1 if order == "<" else 0, 2, 0, 1])
    prologue += struct.pack(order + "iiqii", offset, 0, 0, 32, len(entries))
    return prologue + body


# What a JVM with attach on writes about itself: what a forger would copy.
ATTACHABLE = {"sun.rt.jvmCapabilities": "1" + "0" * 63, "sun.rt.javaCommand": "MarketData"}
