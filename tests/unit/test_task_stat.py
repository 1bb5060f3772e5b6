"""parse_task_stat / parse_status / parse_sched on real lines (prometheus/procfs fixtures, this machine)."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from app.errors import ParseError
from app.parse.task_stat import (PF_KTHREAD, PF_NO_SETAFFINITY, parse_sched, parse_status, sched_counts,
                                 parse_task_stat, policy_name, sched_label)
from tests.machines import INTERRUPTS_DIR, procfs_composite

TASK_DIR = INTERRUPTS_DIR / "prometheus-procfs" / "proc-27079-task"


def _composite_stat_files() -> list[Path]:
    proc = procfs_composite() / "proc"
    files = [p for p in proc.glob("*/stat") if p.parent.name.isdigit()]
    files += list(proc.glob("*/task/*/stat"))
    return sorted(files)


def test_every_task_file_parses_with_known_values():
    files = sorted(TASK_DIR.glob("*.stat"))
    assert len(files) == 5
    by_tid = {}
    for f in files:
        s = parse_task_stat(f.read_text(), what=str(f))
        assert s.tid == int(f.stem)
        assert s.comm == "pthread_load"
        by_tid[s.tid] = s
    # Values read off the lines by hand: field 39 (processor), 14 (utime), 3 (state), 9 (flags).
    assert {t: s.processor for t, s in by_tid.items()} == {27079: 2, 27080: 0, 27081: 5, 27082: 1, 27083: 4}
    assert by_tid[27080].utime == 34136 and by_tid[27080].stime == 3 and by_tid[27080].state == "R"
    assert by_tid[27081].flags == 1077936192
    assert by_tid[27079].num_threads == 5 and by_tid[27079].starttime == 4289574
    assert by_tid[27079].priority == 20 and by_tid[27079].nice == 0
    assert not any(s.kthread for s in by_tid.values())


def test_every_composite_stat_parses():
    files = _composite_stat_files()
    assert len(files) >= 9, files
    for f in files:
        s = parse_task_stat(f.read_bytes(), what=str(f))
        assert s.tid > 0 and s.comm
    proc = procfs_composite() / "proc"
    # The composite's kernel thread with LONG_MIN/LONG_MAX fields and its weird comm line.
    ata = parse_task_stat((proc / "26232" / "stat").read_text())
    assert (ata.tid, ata.comm, ata.ppid, ata.nice) == (33, "ata_sff", 2, -20)
    assert ata.kthread   # flags 69238880 has PF_KTHREAD (0x200000)
    weird = parse_task_stat((proc / "584" / "stat").read_text())
    assert weird.comm == "(a b ) ( c d) "
    assert (weird.state, weird.ppid, weird.processor) == ("R", 28378, 5)


@pytest.mark.parametrize("comm", ["(a) b)", "a b", ")", "((", "x) R 1 2", "tab\there", "new\nline", ""])
def test_comm_with_spaces_and_parens(comm):
    line = Path(TASK_DIR / "27080.stat").read_text()
    rest = line[line.rfind(")") + 1:]
    s = parse_task_stat(f"27080 ({comm}){rest}")
    assert s.comm == comm
    assert s.processor == 0 and s.utime == 34136 and s.state == "R"


def test_flags():
    line = Path(TASK_DIR / "27080.stat").read_text().split()
    line[8] = str(PF_KTHREAD | PF_NO_SETAFFINITY)
    s = parse_task_stat(" ".join(line))
    assert s.kthread and s.no_setaffinity


@pytest.mark.parametrize("bad", ["", "27080", "27080 (x) R 1 2 3", "x (y) " + "1 " * 50,
                                 "1 (y) R " + "z " * 50])
def test_bad_lines_raise_parse_error(bad):
    with pytest.raises(ParseError):
        parse_task_stat(bad)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_never_crashes_except_parse_error(text):
    try:
        parse_task_stat(text)
    except ParseError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
       st.lists(st.integers(min_value=-2**63, max_value=2**64), min_size=49, max_size=49))
def test_well_formed_lines_round_trip(comm, nums):
    line = f"42 ({comm}) S " + " ".join(map(str, nums))
    s = parse_task_stat(line)
    assert s.comm == comm and s.state == "S"
    assert s.ppid == nums[0] and s.flags == nums[5] and s.processor == nums[35] and s.policy == nums[37]


@pytest.mark.usefixtures("live_machine")
def test_live_own_thread():
    tid = threading.get_native_id()
    text = Path(f"/proc/{os.getpid()}/task/{tid}/stat").read_text()
    s = parse_task_stat(text)
    assert s.tid == tid
    assert s.processor in os.sched_getaffinity(0)
    assert s.state == "R"


def test_policy_names_are_chrts():
    assert [policy_name(p) for p in (0, 1, 2, 3, 5, 6)] == ["other", "fifo", "rr", "batch", "idle", "deadline"]
    assert policy_name(4) == "policy 4"         # SCHED_ISO: reserved, no kernel sets it
    assert sched_label(1, 80) == "fifo 80" and sched_label(2, 1) == "rr 1"
    assert sched_label(0, 0) == "other" and sched_label(6, 0) == "deadline"


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root (CAP_SYS_NICE)")
@pytest.mark.usefixtures("live_machine")
def test_live_fifo_thread_reads_its_policy_and_priority():
    """Fields 40 and 41 of a real SCHED_FIFO 80 task, as the kernel wrote them (sched_setscheduler on a
    child of this test only; it is killed at the end)."""
    import subprocess
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.sched_setscheduler(child.pid, os.SCHED_FIFO, os.sched_param(80))
        s = parse_task_stat(Path(f"/proc/{child.pid}/task/{child.pid}/stat").read_bytes())
        assert (s.policy, s.rt_priority, s.sched_label) == (os.SCHED_FIFO, 80, "fifo 80")
        os.sched_setscheduler(child.pid, os.SCHED_BATCH, os.sched_param(0))
        s = parse_task_stat(Path(f"/proc/{child.pid}/task/{child.pid}/stat").read_bytes())
        assert (s.policy_name, s.rt_priority, s.sched_label) == ("batch", 0, "batch")
    finally:
        child.kill()
        child.wait()


@pytest.mark.usefixtures("live_machine")
def test_parse_status_fixture_and_live():
    proc = procfs_composite() / "proc"
    st_ = parse_status((proc / "26231" / "status").read_text())
    assert st_["Name"] == "prometheus" and st_["Tgid"] == 26231
    assert st_["Cpus_allowed_list"] == tuple(range(8))
    assert st_["voluntary_ctxt_switches"] == 4742839 and st_["nonvoluntary_ctxt_switches"] == 1727500
    live = parse_status(Path("/proc/self/status").read_text())
    assert live["Pid"] == os.getpid()
    assert set(live["Cpus_allowed_list"]) == os.sched_getaffinity(0)
    with pytest.raises(ParseError):
        parse_status("voluntary_ctxt_switches:\tlots\n")
    with pytest.raises(ParseError):
        parse_status("Cpus_allowed_list:\t0-x\n")


def test_parse_sched():
    text = ("head (6393, #threads: 1)\n" + "-" * 67 + "\n"
            "se.exec_start                                :        309990.109785\n"
            "se.nr_migrations                             :                    7\n"
            "current_node=0, numa_group_id=0\n")
    d = parse_sched(text)
    assert d == {"se.exec_start": 309990.109785, "se.nr_migrations": 7}
    live = Path("/proc/self/sched")
    if live.exists():   # CONFIG_SCHED_DEBUG kernels only
        assert isinstance(parse_sched(live.read_text())["se.nr_migrations"], int)


def test_sched_counts_agree_with_status_and_parse_sched():
    """The live detail read takes switches from sched, not status: the two files must agree. Sleeping
    threads (init's, kthreadd's) do not switch between the two reads."""
    text = ("head (6393, #threads: 1)\n" + "-" * 67 + "\n"
            "se.nr_migrations                             :                    7\n"
            "se.statistics.wait_max                       :                 0.12\n"
            "nr_switches                                  :                   12\n"
            "nr_voluntary_switches                        :                   10\n"
            "nr_involuntary_switches                      :                    2\n")
    assert sched_counts(text) == (7, 10, 2)
    assert sched_counts("x (1, #threads: 1)\n---\nse.nr_migrations : 3\n") == (3, None, None)
    checked = 0
    for pid in (1, 2):
        task = Path(f"/proc/{pid}/task/{pid}")
        if not (task / "sched").exists():
            continue            # CONFIG_SCHED_DEBUG kernels only
        for _ in range(5):      # a thread that switched between the reads: read again
            status = parse_status((task / "status").read_text())
            sched = (task / "sched").read_text()
            status2 = parse_status((task / "status").read_text())
            if status == status2:
                break
        mig, vol, invol = sched_counts(sched)
        assert mig == parse_sched(sched)["se.nr_migrations"]
        assert (vol, invol) == (status["voluntary_ctxt_switches"], status["nonvoluntary_ctxt_switches"])
        checked += 1
    if Path("/proc/self/sched").exists():
        assert checked > 0
