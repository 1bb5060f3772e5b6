"""Java threads by full name: a real JVM (tests/unit/java/MarketData.java, compiled here with Debian's
openjdk) runs a thread called "market-data-feed-handler", longer than the kernel's 15-byte comm; it
is found through jcmd/jstack's nid= and pinned from the CLI."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from app.cli.main import main
from app.machine.java import JavaThreadError, find_java_thread, java_threads, parse_thread_dump
from app.sysroot import SysRoot

SRC = Path(__file__).resolve().parent / "java" / "MarketData.java"
NAME = "market-data-feed-handler"
CPUS = tuple(sorted(os.sched_getaffinity(0)))

needs_jdk = pytest.mark.skipif(
    not (shutil.which("javac") and shutil.which("java") and (shutil.which("jcmd") or shutil.which("jstack"))),
    reason="needs a JDK: javac, java and jcmd or jstack (Debian: openjdk-17-jdk-headless)")


@pytest.fixture(scope="module")
def jvm(tmp_path_factory):
    out = tmp_path_factory.mktemp("java")
    subprocess.run(["javac", "-d", str(out), str(SRC)], check=True, capture_output=True, timeout=120)
    p = subprocess.Popen(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", str(out), "MarketData"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        yield p.pid
    finally:
        p.kill()
        p.wait()


def test_parse_thread_dump_hex_and_decimal_nids():
    text = ('"main" #1 prio=5 os_prio=0 cpu=30.1ms elapsed=1.8s tid=0x00007f05 nid=0x30e4 waiting on condition\n'
            '   java.lang.Thread.State: WAITING\n'
            '"say \\"hi\\" now" #13 daemon prio=5 os_prio=0 tid=0x1 nid=12517 runnable\n'
            '"VM Thread" os_prio=0 cpu=1.1ms elapsed=1.8s tid=0x00007f05 nid=0x30ea runnable\n')
    assert parse_thread_dump(text) == {"main": 0x30E4, 'say \\"hi\\" now': 12517, "VM Thread": 0x30EA}


@needs_jdk
def test_full_name_maps_to_its_tid(jvm):
    tid = find_java_thread(jvm, NAME)
    comm = Path(f"/proc/{jvm}/task/{tid}/comm").read_text().strip()
    assert comm == NAME[:15]                      # the kernel's truncated name: the same thread
    threads = java_threads(jvm)
    assert threads[NAME] == tid and threads["main"] != tid


@needs_jdk
def test_unknown_name_lists_close_ones(jvm):
    with pytest.raises(JavaThreadError, match="close names: 'market-data-feed-handler'"):
        find_java_thread(jvm, "market-data-feed")


@needs_jdk
@pytest.mark.usefixtures("live_machine")
def test_pin_java_thread_from_the_cli(jvm, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path))
    if len(CPUS) < 2:
        pytest.skip("needs 2 CPUs to see the pin")
    tid = find_java_thread(jvm, NAME)
    assert main(["pin", "--java", NAME, "--pid", str(jvm), "--cpus", str(CPUS[0])]) == 0
    assert os.sched_getaffinity(tid) == {CPUS[0]}
    from app.parse.cpulist import format_cpulist
    assert capsys.readouterr().out == f"thread {tid} ({NAME}): {format_cpulist(CPUS)} -> {CPUS[0]} ok\n"
    assert main(["undo"]) == 0
    assert os.sched_getaffinity(tid) == set(CPUS)


def test_without_a_thread_dump_a_long_name_asks_for_jdk_tools(monkeypatch):
    # The JDK tools are looked up on PATH; with an empty PATH there are none.
    monkeypatch.setenv("PATH", "")
    sleeper = subprocess.Popen(["/bin/sleep", "30"])
    # Between fork and exec the child's comm is still "python": wait for the exec.
    deadline = time.monotonic() + 5
    while open(f"/proc/{sleeper.pid}/comm").read().strip() != "sleep" and time.monotonic() < deadline:
        time.sleep(0.005)
    try:
        with pytest.raises(JavaThreadError, match="install a JDK's jcmd or jstack, or pass --tid"):
            find_java_thread(sleeper.pid, "a-thread-name-longer-than-15")
        # A name of up to 15 bytes is its comm: found without the tools.
        assert find_java_thread(sleeper.pid, "sleep", SysRoot("/")) == sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


def test_missing_process():
    with pytest.raises(JavaThreadError, match="process 4194304 does not exist"):
        find_java_thread(4194304, NAME)
