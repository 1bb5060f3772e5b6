"""Gap attribution (probes/trace.py): the tracefs text parser on a captured trace, entry/exit
pairing, the overlap of gaps and spans, and, where this is root with tracefs, a live run that
must name the task we put on the probed CPU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.sysroot import SysRoot
from probes import trace as T
from probes.runner import run_to_end
from tests.machines import FIXTURES, extract, machine

TRACE = FIXTURES / "tracefs" / "kvm-6.18-cpu1.trace"
STATS = FIXTURES / "tracefs" / "kvm-6.18-cpu1.stats"
CPU = str(max(os.sched_getaffinity(0)))
# Live tests take the session's `tracefs` fixture (tests/conftest.py): it mounts tracefs where a new
# machine has it unmounted and unmounts it afterwards.
needs_tracefs = pytest.mark.usefixtures("tracefs")


def ev(ts_us, event, body, pid=100, comm="probe"):
    return f"{comm:>16}-{pid:<7} [001] d.h1. {ts_us // 1_000_000:>6}.{ts_us % 1_000_000:06d}: {event}: {body}"


def test_parses_every_event_line_of_a_captured_trace():
    text = TRACE.read_text()
    events = T.parse_trace(text)
    body_lines = [l for l in text.splitlines() if l and not l.startswith("#")]
    assert len(events) == len(body_lines)
    stats = T.parse_stats(STATS.read_text())
    assert stats["entries"] == len(events) and stats["overrun"] == 0
    assert events[0].ts_ns == stats["oldest_event_ts_ns"]
    assert [e.ts_ns for e in events] == sorted(e.ts_ns for e in events)
    kinds = {e.event for e in events}
    assert {"local_timer_entry", "sched_switch", "softirq_entry", "irq_handler_entry"} <= kinds
    # "rcu_preempt-15" and "migration/1-21": names with dashes and slashes keep their pid
    assert any(e.pid == 15 for e in events)


def test_captured_trace_pairs_into_spans_that_end_after_they_start():
    sp = T.spans(T.parse_trace(TRACE.read_text()))
    closed = [s for s in sp if s.end_ns is not None]
    assert closed and all(s.end_ns >= s.start_ns for s in closed)
    names = {s.name for s in sp}
    assert "local timer" in names and any(n.startswith("softirq ") for n in names)
    assert any(n.startswith("IRQ ") for n in names)
    # the spinning python child the capture was made with ran between switches
    assert any(s.kind == "task" and s.name.startswith("python/") for s in sp)


def test_pairs_nested_interrupts_and_keeps_unmatched_entries_as_points():
    text = "\n".join([
        ev(1_000_000, "local_timer_entry", "vector=236"),
        ev(1_000_004, "local_timer_exit", "vector=236"),
        ev(1_000_005, "softirq_entry", "vec=1 [action=TIMER]"),
        ev(1_000_007, "irq_handler_entry", "irq=24 name=virtio0-input.0"),
        ev(1_000_009, "irq_handler_exit", "irq=24 ret=handled"),
        ev(1_000_012, "softirq_exit", "vec=1 [action=TIMER]"),
        ev(1_000_020, "nmi_handler", "handler=perf_event_nmi_handler+0x0/0x40 delta_ns=3000 handled=1"),
        ev(1_000_030, "call_function_single_entry", "vector=251"),
    ])
    sp = {s.name: s for s in T.spans(T.parse_trace(text))}
    assert sp["local timer"].end_ns - sp["local timer"].start_ns == 4_000
    assert sp["softirq TIMER"].end_ns - sp["softirq TIMER"].start_ns == 7_000
    assert sp["IRQ 24 virtio0-input.0"].end_ns - sp["IRQ 24 virtio0-input.0"].start_ns == 2_000
    assert sp["NMI perf_event_nmi_handler"].start_ns == 1_000_017_000
    assert sp["call function single"].end_ns is None


def test_task_spans_run_from_switch_in_to_switch_out_and_skip_the_probe():
    sw = "prev_comm={} prev_pid={} prev_prio=120 prev_state=R ==> next_comm={} next_pid={} next_prio=120"
    text = "\n".join([
        ev(2_000_000, "sched_switch", sw.format("probe", 100, "kworker/1:1", 77)),
        ev(2_000_050, "sched_switch", sw.format("kworker/1:1", 77, "probe", 100), pid=77, comm="kworker/1:1"),
        ev(2_000_100, "sched_switch", sw.format("probe", 100, "swapper/1", 0)),
    ])
    sp = T.spans(T.parse_trace(text), probe_pid=100)
    assert [(s.kind, s.name, s.end_ns - s.start_ns) for s in sp] == [("task", "kworker/1:1/77", 50_000)]


def test_gap_gets_overlapping_spans_clipped_and_the_rest_is_hardware():
    spans = [T.Span(1_000, 3_000, "vector", "local timer"),
             T.Span(3_000, 5_000, "softirq", "softirq TIMER"),
             T.Span(50_000, 60_000, "task", "kworker/1:1/77")]
    g_irq, g_none, g_task = T.attribute([(0, 10_000), (20_000, 5_000), (55_000, 20_000)], spans,
                                        tolerance_ns=1_000)
    assert [c["name"] for c in g_irq.causes] == ["local timer", "softirq TIMER"]
    assert g_irq.unexplained_ns == 10_000 - 4_000
    assert g_none.causes == [] and T.verdict(g_none) == T.HARDWARE
    assert g_task.causes == [{"kind": "task", "name": "kworker/1:1/77", "ns": 5_000, "from_ns": -5_000}]
    assert [c["from_ns"] for c in g_irq.causes] == [1_000, 3_000]
    assert "hardware / hypervisor for the rest" in T.verdict(g_task)


def test_point_event_within_tolerance_counts_and_outside_does_not():
    spans = [T.Span(10_500, None, "vector", "reschedule")]
    near, far = T.attribute([(11_000, 1_000), (20_000, 1_000)], spans, tolerance_ns=1_000)
    assert [c["name"] for c in near.causes] == ["reschedule"]
    assert far.causes == []


def test_gaps_older_than_a_wrapped_buffer_are_not_traced():
    out = T.attribute([(0, 1_000), (10_000, 1_000)], [], traced_from_ns=5_000)
    assert [g.traced for g in out] == [False, True]
    assert T.verdict(out[0]).startswith("not traced")
    summary = T.summarize_causes([g.as_dict() for g in out])
    assert summary == [{"cause": T.HARDWARE, "gaps": 1, "ns": 1_000}]


def test_attribute_sweep_matches_a_brute_force_overlap():
    import random
    rnd = random.Random(7)
    spans = sorted((T.Span(s, s + rnd.randrange(0, 30_000), rnd.choice(["vector", "task"]), f"n{rnd.randrange(5)}")
                    for s in (rnd.randrange(0, 1_000_000) for _ in range(400))), key=lambda s: s.start_ns)
    gaps = [(rnd.randrange(0, 1_000_000), rnd.randrange(1_000, 50_000)) for _ in range(200)]
    got = T.attribute(gaps, spans, tolerance_ns=0)
    for g in got:
        want = {s.name for s in spans if s.start_ns <= g.t_ns + g.gap_ns and s.end_ns >= g.t_ns}
        assert {c["name"] for c in g.causes} == want


def test_a_capture_has_no_tracing():
    root = SysRoot(extract(machine("20s390-2g6s4c")))
    assert "tracefs is not mounted" in T.unavailable_reason(root)
    with pytest.raises(T.TraceUnavailable, match="tracefs is not mounted"):
        T.TraceSession(0, 1.0, root=root)


def test_unbound_run_says_why_it_is_not_attributed():
    rc, lines, _ = run_to_end("jitter", ["--unbound", "--seconds", "0.1", "--attribute"], timeout=20)
    assert rc == 0
    a = next(l for l in lines if l["type"] == "attribution")
    assert a["available"] is False and "pinned run only" in a["reason"]


@needs_tracefs
def test_stale_instance_of_a_dead_probe_is_removed():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    d = SysRoot("/").tracefs("instances", f"{T.INSTANCE_PREFIX}{p.pid}")
    os.mkdir(d)
    try:
        assert f"{T.INSTANCE_PREFIX}{p.pid}" in T.remove_stale()
        assert not d.exists()
    finally:
        if d.exists():
            os.rmdir(d)


@needs_tracefs
@pytest.mark.usefixtures("live_machine")
def test_live_jitter_run_names_the_task_we_ran_on_its_cpu():
    """A process named cm-intruder takes CPU time on the probed CPU in 3 ms slices; the probe's
    largest gaps must be attributed to it by name and pid, and the instance must be gone after."""
    intruder = subprocess.Popen(
        ["taskset", "-c", CPU, sys.executable, "-c",
         "import ctypes,time\n"
         "ctypes.CDLL(None).prctl(15, b'cm-intruder', 0, 0, 0)\n"
         "print('named', flush=True)\n"
         "end = time.monotonic() + 3\n"
         "while time.monotonic() < end:\n"
         "    t = time.monotonic()\n"
         "    while time.monotonic() - t < 0.003: pass\n"
         "    time.sleep(0.02)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert intruder.stdout.readline() == "named\n"        # named, and slicing from now on
        rc, lines, run = run_to_end("jitter", ["--cpu", CPU, "--seconds", "0.5", "--attribute"], timeout=30)
    finally:
        intruder.kill()
        intruder.wait()
        intruder.stdout.close()
    assert rc == 0, run.stderr_lines
    a = next(l for l in lines if l["type"] == "attribution")
    assert a["available"] and a["cpu_events"] > 0
    names = [row["cause"] for row in a["by_cause"]]
    assert f"cm-intruder/{intruder.pid}" in names, names
    assert all(not n.startswith(f"{T.INSTANCE_PREFIX}") for n in os.listdir(SysRoot("/").tracefs("instances")))
    # the longest gaps are the intruder's slices, not interrupts
    assert any(c["name"] == f"cm-intruder/{intruder.pid}" for g in a["gaps"][:5] for c in g["causes"])


@needs_tracefs
@pytest.mark.usefixtures("live_machine")
def test_cli_prints_what_ran(capsys):
    from app.cli.main import main
    assert main(["probe", "jitter", "--cpu", CPU, "--seconds", "0.3", "--attribute"]) == 0
    out = capsys.readouterr().out
    assert "what ran in the" in out and "the " in out


def _as_nobody(code: str) -> subprocess.CompletedProcess:
    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    # the check needs the standard library only: where this interpreter lives in a private home
    # (pyenv under /root), the system's python3 runs it as another user
    python = sys.executable if os.access(sys.executable, os.X_OK) and \
        not str(Path(sys.executable).resolve()).startswith("/root/") else "/usr/bin/python3"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=drop, cwd=str(Path(__file__).resolve().parents[2]),
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
@needs_tracefs
def test_a_user_is_told_tracing_needs_root_instead_of_a_crash():
    """tracefs is mode 700: as a user even stat() inside it fails. The check (which the probe panel
    runs when the window opens) must say so, not raise."""
    try:
        r = _as_nobody("from probes.trace import unavailable_reason; print(unavailable_reason())")
    except PermissionError as e:      # exec of an interpreter under a private home (pyenv in /root)
        pytest.skip(f"this interpreter is not executable by another user: {e}")
    if r.returncode != 0 and ("Permission denied" in r.stderr or "No module named" in r.stderr) \
            and "tracing" not in r.stderr:
        pytest.skip(f"this interpreter or checkout is not readable by another user: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr
    assert "needs root" in r.stdout
