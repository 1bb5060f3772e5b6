"""Java threads by their full names (issue 20), from JVMs verified first (issue 24).

A real JVM (tests/unit/java/MarketData.java, via tests/jvms.py) runs "market-data-feed-handler-0" and
"-1", both "market-data-fee" to the kernel; each thread reads its own tid from /proc/thread-self, the
oracle. Nothing here moves anything on the machine but the one pin test, which holds the live lock.
"""
import json
import os
import pwd
import socket
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli.main import main
from app.errors import ParseError
from app.machine.java import (JavaThreadError, find_java_thread, java_thread_ids, java_threads,
                              parse_thread_dump, read_java_names, verify_jvm)
from app.machine.jvm_attach import MAX_LINE, _lines
from app.machine.thread_names import ThreadNames, comm_of, is_cut
from app.parse.jvm import attach_enabled, parse_perfdata, parse_process_ids
from app.sysroot import SysRoot
from tests.jvms import COMM, HANDLER, OTHER_HANDLER, MarketData, needs_jdk, perfdata_bytes

CPUS = tuple(sorted(os.sched_getaffinity(0)))
ROOT = SysRoot("/")


@pytest.fixture(scope="module")
def jvm():
    m = MarketData()
    yield m
    m.stop()


def _sleeper(*argv: str, **kw) -> subprocess.Popen:
    p = subprocess.Popen(list(argv) or ["/bin/sleep", "60"], **kw)
    name = Path(argv[0] if argv else "/bin/sleep").name[:15]
    # Between fork and exec the child's comm is still "python": wait for the exec.
    deadline = time.monotonic() + 5
    while open(f"/proc/{p.pid}/comm").read().strip() != name and time.monotonic() < deadline:
        time.sleep(0.005)
    return p


# -- parsers -------------------------------------------------------------------------------------
def test_parse_thread_dump_hex_and_decimal_nids():
    text = ('"main" #1 prio=5 os_prio=0 cpu=30.1ms elapsed=1.8s tid=0x00007f05 nid=0x30e4 waiting on condition\n'
            '   java.lang.Thread.State: WAITING\n'
            '"say \\"hi\\" now" #13 daemon prio=5 os_prio=0 tid=0x1 nid=12517 runnable\n'
            '"VM Thread" os_prio=0 cpu=1.1ms elapsed=1.8s tid=0x00007f05 nid=0x30ea runnable\n')
    assert parse_thread_dump(text) == {"main": 0x30E4, 'say \\"hi\\" now': 12517, "VM Thread": 0x30EA}


@pytest.mark.parametrize("order", ["<", ">"])
def test_perfdata_of_either_byte_order(order):
    data = perfdata_bytes({"sun.rt.jvmCapabilities": "0100", "java.threads.live": 13}, order)
    perf = parse_perfdata(data)
    assert perf == {"sun.rt.jvmCapabilities": "0100", "java.threads.live": 13}
    assert attach_enabled(perf) is False and attach_enabled({}) is None


@needs_jdk
def test_a_real_jvms_perfdata(jvm):
    user = pwd.getpwuid(os.geteuid()).pw_name
    perf = parse_perfdata(Path(f"/tmp/hsperfdata_{user}/{jvm.pid}").read_bytes())
    assert attach_enabled(perf) is True and perf["sun.rt.javaCommand"] == "MarketData"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 399), st.binary(max_size=8))
def test_perfdata_parser_refuses_or_parses_any_bytes(junk, at, spliced):
    data = bytearray(perfdata_bytes({"a": "x", "b": 7}) + junk)
    data[at:at + len(spliced)] = spliced
    try:
        assert isinstance(parse_perfdata(bytes(data)), dict)
    except ParseError:
        pass


def test_status_ids():
    ids = parse_process_ids("Name:\tjava\nUid:\t1000\t1001\t1001\t1001\nGid:\t5\t6\t6\t6\n"
                            "NSpid:\t42\t1\nSigCgt:\t0000000101005ccd\n")
    assert (ids.euid, ids.egid, ids.nspids) == (1001, 6, (42, 1)) and ids.caught & 4
    with pytest.raises(ParseError):
        parse_process_ids("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nSigCgt:\t0x1_0\n")


def test_cut_names_and_their_comm():
    assert comm_of(HANDLER) == COMM and is_cut(COMM) and not is_cut("sleep")
    # A cut through a two-byte character is read as U+FFFD, as coremap reads comm.
    name = "ééééééé" + "é-feed"                    # 7 x 2 bytes, then a cut through the 8th
    assert comm_of(name) == "ééééééé\ufffd" and is_cut(comm_of(name))
    names = ThreadNames({7: {70: HANDLER}})
    assert names.full_name(7, 70, COMM) == HANDLER
    assert names.full_name(7, 70, "market-data-xyz") is None      # renamed since it was read: not shown
    assert names.full_name(8, 70, COMM) is None                    # only the JVM's own threads


def test_a_reply_is_bounded_and_overlong_lines_are_skipped():
    a, b = socket.socketpair()
    with a, b:
        b.sendall(b"0\n" + b"x" * (MAX_LINE + 10) + b"\nkept\n")
        b.shutdown(socket.SHUT_WR)
        assert list(_lines(a, time.monotonic() + 5)) == ["0", "kept"]


# -- verification --------------------------------------------------------------------------------
@needs_jdk
def test_a_real_jvm_is_verified_and_others_are_not(jvm):
    assert verify_jvm(jvm.pid, ROOT).verified
    me = verify_jvm(os.getpid(), ROOT)
    assert not me.verified and "not a JDK's java" in me.reason
    sleeper = _sleeper()
    try:
        assert "/sleep, not a JDK's java" in verify_jvm(sleeper.pid, ROOT).reason
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_sleep_called_java_is_not_a_jvm(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").symlink_to("/bin/sleep")      # comm "java"; the kernel's exe is sleep
    p = _sleeper(str(tmp_path / "bin" / "java"), "60")
    try:
        check = verify_jvm(p.pid, ROOT)
        assert not check.verified and "not a JDK's java" in check.reason
        with pytest.raises(JavaThreadError, match="is not a Java VM coremap may attach to"):
            find_java_thread(p.pid, HANDLER)
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


# -- names -------------------------------------------------------------------------------------------
@needs_jdk
def test_each_full_name_maps_to_its_own_tid(jvm):
    for name in (HANDLER, OTHER_HANDLER):
        tid = find_java_thread(jvm.pid, name)
        assert tid == jvm.tid(name)
        assert Path(f"/proc/{jvm.pid}/task/{tid}/comm").read_text().strip() == COMM
    threads = java_threads(jvm.pid)
    assert threads[HANDLER] == jvm.tid(HANDLER) and threads["main"] != jvm.tid(HANDLER)
    assert java_thread_ids(jvm.pid, OTHER_HANDLER, ROOT) == {jvm.tid(OTHER_HANDLER)}
    got = read_java_names(jvm.pid, ROOT)
    assert not got.reason and got.names[jvm.tid(HANDLER)] == HANDLER
    assert got.names[jvm.tid(OTHER_HANDLER)] == OTHER_HANDLER
    assert "main" not in got.names.values()         # names that fit in comm need no reading


@needs_jdk
def test_unknown_name_lists_close_ones(jvm):
    with pytest.raises(JavaThreadError, match="close names: .*'market-data-feed-handler-0'"):
        find_java_thread(jvm.pid, "market-data-feed-handler")


@needs_jdk
def test_threads_name_finds_the_full_name(jvm, capsys):
    assert main(["threads", "--pid", str(jvm.pid), "--name", HANDLER]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["PID", "TID", "NAME"]
    assert [l.split()[:4] for l in lines[1:]] == [[str(jvm.pid), str(jvm.tid(HANDLER)), HANDLER, f"({COMM})"]]
    assert main(["threads", "--name", OTHER_HANDLER, "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out)["threads"] if r["pid"] == jvm.pid]
    assert [(r["tid"], r["name"], r["comm"]) for r in rows] == [(jvm.tid(OTHER_HANDLER), OTHER_HANDLER, COMM)]


@needs_jdk
def test_a_jvm_without_attach_says_why_and_lives(tmp_path, capsys):
    m = MarketData("-XX:+DisableAttachMechanism")
    try:
        got = read_java_names(m.pid, ROOT)
        assert got.reason == "it was started with -XX:+DisableAttachMechanism" and not got.names
        assert main(["threads", "--pid", str(m.pid), "--name", HANDLER]) == 1
        err = capsys.readouterr().err
        assert f"the full Java names of JVM {m.pid} cannot be read: it was started with -XX:+DisableAttachMechanism" in err
        # Nothing was sent to it: a SIGQUIT would have made it print a thread dump on its stdout.
        assert m.alive() and not Path(f"/tmp/.attach_pid{m.pid}").exists()
        time.sleep(0.2)
        os.set_blocking(m.proc.stdout.fileno(), False)
        with pytest.raises(BlockingIOError):
            os.read(m.proc.stdout.fileno(), 4096)
    finally:
        m.stop()


@needs_jdk
@pytest.mark.usefixtures("live_machine")
def test_pin_java_thread_from_the_cli(jvm, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path))
    if len(CPUS) < 2:
        pytest.skip("needs 2 CPUs to see the pin")
    tid = jvm.tid(HANDLER)
    before = os.sched_getaffinity(tid)
    assert main(["pin", "--java", HANDLER, "--pid", str(jvm.pid), "--cpus", str(CPUS[0])]) == 0
    assert os.sched_getaffinity(tid) == {CPUS[0]}
    assert os.sched_getaffinity(jvm.tid(OTHER_HANDLER)) == before     # its comm twin stays
    from app.parse.cpulist import format_cpulist
    assert capsys.readouterr().out == f"thread {tid} ({HANDLER}): {format_cpulist(before)} -> {CPUS[0]} ok\n"
    assert main(["undo"]) == 0
    assert os.sched_getaffinity(tid) == before


def test_a_long_name_in_a_process_that_is_not_a_jvm_says_so():
    sleeper = _sleeper()
    try:
        with pytest.raises(JavaThreadError, match=r"\(sleep\) is not a Java VM coremap may attach to: its "
                                                  r"executable is /usr/bin/sleep, not a JDK's java"):
            find_java_thread(sleeper.pid, "a-thread-name-longer-than-15")
        # A name of up to 15 bytes is its comm: found without asking anything.
        assert find_java_thread(sleeper.pid, "sleep", ROOT) == sleeper.pid
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_missing_process():
    with pytest.raises(JavaThreadError, match="process 4194304 does not exist"):
        find_java_thread(4194304, HANDLER)
