"""`coremap pin | undo | redo | restore | journal`: result lines and exit status (0 ok, 1 a target
failed, 2 bad input), on this machine's threads and on a copy of the sno capture's IRQs."""
import json
import os
import subprocess
import threading

import pytest

from app.cli.main import main
from app.parse.cpulist import format_cpulist
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree

CPUS = tuple(sorted(os.sched_getaffinity(0)))


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def sno(tmp_path):
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu"), leave_out=(CPU_CACHES,))
    return writable_test_tree(dst)


def _smp(root, n):
    return (root / "proc" / "irq" / str(n) / "smp_affinity_list").read_text().strip()


def test_irq_pin_undo_redo_restore_journal(sno, capsys):
    assert main(["pin", "--irq", "24", "--cpus", "0-1", "--root", str(sno)]) == 0
    assert capsys.readouterr().out == "IRQ 24: 1 -> 0-1 ok (effective 1)\n"
    assert _smp(sno, 24) == "0-1"
    # --root before the subcommand works too.
    assert main(["--root", str(sno), "pin", "--irq", "25", "--cpus", "2,5"]) == 0
    assert capsys.readouterr().out == "IRQ 25: 2 -> 2,5 ok (effective 2)\n"
    assert main(["undo", "--root", str(sno)]) == 0
    assert _smp(sno, 25) == "2"
    assert main(["redo", "--root", str(sno)]) == 0
    assert _smp(sno, 25) == "2,5"
    capsys.readouterr()
    assert main(["restore", "--root", str(sno)]) == 0
    assert (_smp(sno, 24), _smp(sno, 25)) == ("1", "2")
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["IRQ 25: 2,5 -> 2 ok (effective 2)", "IRQ 24: 0-1 -> 1 ok (effective 1)"]  # newest first
    assert main(["restore", "--root", str(sno)]) == 0
    assert capsys.readouterr().out.startswith("nothing to restore")
    assert main(["journal", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 2
    entries = doc["entries"]
    assert [(e["origin"], e["target_id"], e["state"]) for e in entries] == [
        ("cli", 24, "done"), ("cli", 25, "done"), ("undo:2", 25, "done"), ("redo:3", 25, "done"),
        ("restore", 25, "done"), ("restore", 24, "done")]
    assert main(["journal"]) == 0
    assert "IRQ 24" in capsys.readouterr().out


def test_bad_input_exits_2_and_writes_nothing(sno, capsys, tmp_path):
    before = _smp(sno, 24)
    assert main(["pin", "--irq", "24", "--cpus", "2-x", "--root", str(sno)]) == 2
    assert "'2-x' is not a CPU number or range" in capsys.readouterr().err
    assert main(["pin", "--irq", "999", "--cpus", "1", "--root", str(sno)]) == 2
    assert "IRQ 999 does not exist" in capsys.readouterr().err
    assert main(["pin", "--irq", "24", "--cpus", "1", "--root", str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["pin", "--java", "x", "--cpus", "1"]) == 2
    assert "--java NAME needs --pid" in capsys.readouterr().err
    assert main(["pin", "--tid", "1", "--irq", "24", "--cpus", "1", "--root", str(sno)]) == 2
    with pytest.raises(SystemExit) as e:
        main(["pin", "--irq", "\x1b[31m", "--cpus", "1"])       # not an IRQ number, list or name pattern
    assert e.value.code == 2
    assert _smp(sno, 24) == before
    assert main(["journal"]) == 0
    assert "is empty" in capsys.readouterr().out


def test_a_test_tree_never_says_moving(sno, capsys):
    # The copy's effective CPU 3 lies outside 5-6, but only the live kernel moves delivery: on a tree
    # of files the pin is "ok" and shows the effective list as it reads (issue 10).
    assert main(["pin", "--irq", "26", "--cpus", "5-6", "--root", str(sno)]) == 0
    assert capsys.readouterr().out == "IRQ 26: 8 -> 5-6 ok (effective 3)\n"
    assert _smp(sno, 26) == "5-6"


def test_offline_cpu_exits_1(sno, capsys):
    (sno / "sys/devices/system/cpu/online").write_text("0-10\n")
    (sno / "sys/devices/system/cpu/cpu11/online").write_text("0\n")
    assert main(["pin", "--irq", "24", "--cpus", "11", "--root", str(sno)]) == 1
    assert capsys.readouterr().out == ("IRQ 24: CPU 11 is offline; choose among "
                                       "the online CPUs 0-10\n")


def test_a_cpu_that_does_not_exist_exits_2_and_journals_nothing(sno, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    assert main(["pin", "--irq", "24", "--cpus", "999", "--root", str(sno)]) == 2
    assert capsys.readouterr().out == "IRQ 24: CPU 999 does not exist on this machine; it has CPUs 0-11\n"
    assert main(["pin", "--irq", "24", "--cpus", "0-65535", "--root", str(sno)]) == 2
    assert main(["journal", "--json"]) == 0
    assert capsys.readouterr().out.endswith('"entries":[]}\n')


def test_a_capture_cannot_be_pinned(tmp_path, capsys):
    src = extract("sno")           # not marked writable: a capture a user was handed
    for args in (["pin", "--irq", "24", "--cpus", "1"], ["undo"], ["redo"], ["restore"]):
        assert main([*args, "--root", str(src)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a capture cannot be pinned" in err


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs to see a pin")
@pytest.mark.usefixtures("live_machine")
def test_pin_own_thread_and_a_process(capsys):
    ev = threading.Event()
    th = threading.Thread(target=ev.wait)
    th.start()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        tid = th.native_id
        assert main(["pin", "--tid", str(tid), "--cpus", str(CPUS[-1])]) == 0
        comm = open(f"/proc/{tid}/comm").read().strip()
        assert capsys.readouterr().out == f"thread {tid} ({comm}): {format_cpulist(CPUS)} -> {CPUS[-1]} ok\n"
        assert os.sched_getaffinity(tid) == {CPUS[-1]}
        assert main(["pin", "--pid", str(sleeper.pid), "--cpus", str(CPUS[0])]) == 0
        assert capsys.readouterr().out == f"thread {sleeper.pid} (sleep): {format_cpulist(CPUS)} -> {CPUS[0]} ok\n"
        assert main(["undo"]) == 0 and os.sched_getaffinity(sleeper.pid) == set(CPUS)
        assert main(["restore"]) == 0 and os.sched_getaffinity(tid) == set(CPUS)
        assert main(["undo"]) == 0 and capsys.readouterr().out.endswith("nothing to undo\n")
        assert main(["pin", "--tid", "4194304", "--cpus", "0"]) == 2
    finally:
        ev.set()
        th.join()
        sleeper.kill()
        sleeper.wait()
