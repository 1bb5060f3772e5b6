"""coremap-helper's one tracing request (app/pinning/trace_op.py): start, read and stop the tracing a
jitter run's gap attribution needs, on the probe's CPUs, and nothing else (issue 22).

Refusals: every request outside it, against a capture (which the helper would refuse to write to
anyway) and against the live machine, where a refused request must leave tracefs as it was (its
instances listed before and after). Accepted: on the live machine as root, in-process and through a
real helper process (HelperClient), the instance appears, records only the CPU asked for, reads
back, and is gone after stop; probes.trace.TraceSession through the helper attributes gaps.

Oracles: tracefs's own instances folder; the trace text's CPU column; probes/trace.py's parser."""
from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest

from app.machine.tracefs import BUFFER_KB_MAX, BUFFER_KB_MIN, INSTANCE_PREFIX
from app.pinning import trace_op
from app.pinning.helper import Helper, HelperClient
from app.sysroot import SysRoot
from probes import trace as T
from tests.machines import extract

CPU = sorted(os.sched_getaffinity(0))[-1]
needs_tracefs = pytest.mark.usefixtures("tracefs")


def _req(**changes):
    return {"op": "trace", "action": "start", "cpus": str(CPU), "buffer_kb": BUFFER_KB_MIN, **changes}


def _refused(helper: Helper, req) -> str:
    reply = helper.handle(json.dumps(req))
    assert reply["ok"] is False and "errno" not in reply, reply
    return reply["error"]


def _instances() -> list[str]:
    root = SysRoot("/")
    return sorted(n for n in root.listdir(root.tracefs("instances")))


# Requests outside the one request, each with the words its refusal says.
OUTSIDE = [
    (_req(action="open"), "request: action: invalid enum value 'open'"),
    (_req(action=1), "request: action: expected str, got int"),
    (_req(action="START"), "request: action: invalid enum value 'START'"),
    (_req(path="/sys/kernel/tracing/current_tracer"), "request: object contains unknown field path"),
    (_req(instance="mine"), "request: object contains unknown field instance"),
    (_req(events="sched/*"), "request: object contains unknown field events"),
    (_req(tracer="function"), "request: object contains unknown field tracer"),
    ({"op": "trace", "action": "start", "cpus": str(CPU)}, "request: object missing required field buffer_kb"),
    (_req(cpus=CPU), "request: cpus: expected str, got int"),
    (_req(cpus="../../instances"), "cpus"),
    (_req(cpus="0-70000"), ""),
    (_req(cpus="4095"), "4095"),
    (_req(cpus=""), "cpus is empty"),
    (_req(buffer_kb=True), "request: buffer_kb: expected int, got bool"),
    (_req(buffer_kb=4096.0), "request: buffer_kb: expected int, got float"),
    (_req(buffer_kb=BUFFER_KB_MIN - 1), f"request: buffer_kb: expected int >= {BUFFER_KB_MIN}"),
    (_req(buffer_kb=BUFFER_KB_MAX + 1), f"request: buffer_kb: expected int <= {BUFFER_KB_MAX}"),
    (_req(action="read"), "no trace is going; read follows a start"),
    (_req(action="stop"), "no trace is going; stop follows a start"),
]


@pytest.mark.parametrize("req, says", OUTSIDE, ids=[str(i) for i in range(len(OUTSIDE))])
def test_everything_outside_the_request_is_refused_on_a_capture(req, says):
    helper = Helper(SysRoot(extract("sno")))
    assert says in _refused(helper, req)


def test_a_capture_is_never_traced():
    helper = Helper(SysRoot(extract("sno")))
    assert "live machine only" in _refused(helper, _req(cpus="0"))


@needs_tracefs
@pytest.mark.skipif(os.geteuid() != 0, reason="the helper runs as root")
@pytest.mark.usefixtures("live_machine")
def test_the_request_on_the_live_machine_and_what_it_refuses_there():
    root = SysRoot("/")
    helper = Helper(root)
    before = _instances()
    for req, says in OUTSIDE:
        assert says in _refused(helper, req)
        assert _instances() == before                     # a refused request leaves tracefs as it was
    stop = threading.Event()

    def busy():
        # switches and timer interrupts on the traced CPU while it records
        os.sched_setaffinity(0, {CPU})
        while not stop.is_set():
            time.sleep(0.001)
    started = helper.handle(json.dumps(_req()))
    th = threading.Thread(target=busy)
    try:
        assert started["ok"] and started["instance"] == f"{INSTANCE_PREFIX}{os.getpid()}", started
        assert started["instance"] in _instances()
        assert "a trace is going" in _refused(helper, _req())                      # one at a time
        assert "must be those the trace was started with" in _refused(helper, _req(action="read",
                                                                                   buffer_kb=BUFFER_KB_MIN + 1))
        other = [c for c in os.sched_getaffinity(0) if c != CPU]
        if other:
            assert "must be those" in _refused(helper, _req(action="read", cpus=str(other[0])))
        th.start()
        time.sleep(0.3)
        stop.set()
        th.join()
        got = helper.handle(json.dumps(_req(action="read")))
        assert got["ok"] and set(got["traces"]) == {str(CPU)}
        text = got["traces"][str(CPU)]["text"]
        events = T.parse_trace(text)
        assert events and got["traces"][str(CPU)]["stats"]["entries"] >= 1
        # recorded on the CPU asked for only (tracing_cpumask), with the events of the fixed list
        cpus = {int(line.split("[", 1)[1][:3]) for line in text.splitlines() if line and not line.startswith("#")}
        assert cpus == {CPU}
        assert {e.event for e in events} <= {"irq_handler_entry", "irq_handler_exit", "softirq_entry", "softirq_exit",
                                              "nmi_handler", "sched_switch"} | {e.event for e in events
                                                                                if e.event.endswith(("_entry", "_exit"))}
    finally:
        stop.set()
        if th.is_alive():
            th.join()
        done = helper.handle(json.dumps(_req(action="stop")))
    assert done == {"ok": True} and _instances() == before
    assert "no trace is going" in _refused(helper, _req(action="stop"))
    assert trace_op._going.get(root) is None


@needs_tracefs
@pytest.mark.skipif(os.geteuid() != 0, reason="the helper runs as root")
@pytest.mark.usefixtures("live_machine")
def test_a_jitter_run_attributed_through_a_helper_process():
    """What a user who is not root gets: TraceSession through HelperClient's own helper process (here
    started directly: this test is root, so no pkexec), the gaps of a busy loop attributed."""
    from probes import _native
    client = HelperClient([sys.executable, "-m", "app.pinning.helper"])
    before = _instances()
    saved = os.sched_getaffinity(0)
    try:
        session = T.TraceSession(CPU, 0.5, helper=client)
        assert any(n.startswith(INSTANCE_PREFIX) for n in set(_instances()) - set(before))
        os.sched_setaffinity(0, {CPU})
        t0 = time.monotonic_ns()
        r = _native.jitter_chunk(300_000_000, 1000, 0, 0, 16)
        os.sched_setaffinity(0, saved)
        text, stats = session.stop()
        a = T.attribute_run(text, stats, [(t, g) for t, g in r["top_gaps"]], probe_pid=os.getpid(),
                            started_ns=session.started_ns, t0_ns=t0)
        assert a["available"] and a["cpu_events"] == len(T.parse_trace(text)) > 0
        assert a["attributed_gaps"] == len(r["top_gaps"])
        session.close()
    finally:
        os.sched_setaffinity(0, saved)
        client.close()
    assert _instances() == before


def test_tracing_unavailable_through_a_helper_that_refuses():
    """A helper that answers but refuses (an older one: the op is unknown) is a TraceUnavailable that
    says so, never a crash; the run goes on unattributed."""
    class Older:
        def trace(self, action, cpus, buffer_kb):
            from app.pinning.refusals import PinWriteError
            raise PinWriteError("the helper refused: unknown op; allowed: hello, set_irq_affinity")

        def close(self):
            pass
    with pytest.raises(T.TraceUnavailable, match="through coremap-helper: the helper refused: unknown op"):
        T.TraceSession(CPU, 0.2, root=SysRoot(extract("sno")), helper=Older())
