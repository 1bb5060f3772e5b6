"""coremap-helper's one tracing request (app/pinning/helper.py): start, read and stop the tracefs
instance a jitter run's gap attribution needs, on the probe's CPUs, for a user who is not root.

  trace  action, cpus, buffer_kb
         action "start": record the fixed events of app/machine/tracefs.py (interrupts, softirqs, NMIs,
                 x86 system vectors, task switches) on `cpus` with the mono clock, into this helper's
                 own instance, `buffer_kb` per CPU
         action "read":  stop recording and hand back each CPU's trace text and stats
         action "stop":  remove the instance

Nothing else: the request names no event, tracer, clock, file, path or instance (the instance is
`coremap-<helper pid>`, one at a time per helper); `read` and `stop` must name the very CPUs and
buffer size `start` was given; CPUs are checked like every CPU list of the helper (online, parsed by
app.parse.cpulist), the size an integer in BUFFER_KB_MIN..BUFFER_KB_MAX (its definition, Trace). A helper that exits
leaves its instance to the next run's remove_stale (its pid is gone).
"""
from __future__ import annotations

from typing import Literal

from app.machine.tracefs import BUFFER_KB_MAX, BUFFER_KB_MIN, TraceInstance, TraceUnavailable, unavailable_reason
from app.pinning.helper_ops import CpuText, Refused, Request, cpus_field, ranged
from app.sysroot import SysRoot

ACTIONS = ("start", "read", "stop")
# The instance each helper (each root it serves: tests run several) has going, and what it was given.
_going: dict[SysRoot, tuple[TraceInstance, tuple[int, ...], int]] = {}


class Trace(Request, tag="trace"):
    action: Literal[ACTIONS]
    cpus: CpuText
    buffer_kb: ranged(BUFFER_KB_MIN, BUFFER_KB_MAX)


def trace(root: SysRoot, req: Trace) -> dict:
    action = req.action
    cpus = cpus_field(root, req.cpus)
    kb = req.buffer_kb
    going = _going.get(root)
    if action == "start":
        if going is not None:
            raise Refused(f"trace: a trace is going on CPUs {','.join(map(str, going[1]))}; stop it first")
        if not root.writable:
            raise Refused("trace: tracing runs on the live machine only")
        why = unavailable_reason(root)
        if why is not None:
            raise Refused(f"trace: {why}")
        try:
            instance = TraceInstance(root, cpus, kb)
        except TraceUnavailable as e:
            raise Refused(f"trace: {e}") from None
        _going[root] = (instance, cpus, kb)
        return {"ok": True, "instance": instance.name, "started_ns": instance.started_ns,
                "vectors": len(instance.vectors)}
    if going is None:
        raise Refused(f"trace: no trace is going; {action} follows a start")
    instance, started_cpus, started_kb = going
    if (cpus, kb) != (started_cpus, started_kb):
        raise Refused("trace: cpus and buffer_kb must be those the trace was started with")
    if action == "read":
        try:
            traces = instance.stop()
        except TraceUnavailable as e:
            raise Refused(f"trace: {e}") from None
        return {"ok": True, "started_ns": instance.started_ns,
                "traces": {str(cpu): {"text": text, "stats": stats} for cpu, (text, stats) in traces.items()}}
    del _going[root]
    instance.close()
    return {"ok": True}


OPS = {Trace: trace}
