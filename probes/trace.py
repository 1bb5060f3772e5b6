"""Gap attribution: what ran on the probed CPU during each of the jitter probe's largest gaps.

While a jitter run samples, a private tracefs instance (`instances/coremap-<pid>`, so the global
trace buffer and whatever else uses it stay untouched; Documentation/trace/ftrace.rst "Instances")
records, on the probed CPU only (`tracing_cpumask`), with the `mono` trace clock (CLOCK_MONOTONIC,
the clock the probe's gap timestamps are in):

  irq:irq_handler_entry/exit      a device interrupt and its handler (IRQ number and name)
  irq:softirq_entry/exit          a softirq (TIMER, NET_RX, SCHED, RCU, ...)
  irq_vectors:*_entry/*_exit      x86 system vectors that never pass irq_handler_*: local timer,
                                  rescheduling and function-call IPIs, irq_work, thermal, ...
  nmi:nmi_handler                 an NMI handler, with its own duration (delta_ns)
  sched:sched_switch              another task (kworker, ksoftirqd, a migration thread) ran

After the run the buffer is read once, entry/exit pairs become spans, and each gap gets the spans
that overlap it. A gap with no event is "hardware / hypervisor": an SMI, a VM exit, a stolen
vCPU, or anything else the kernel cannot see. The share of a gap no event covers is reported as
`unexplained_ns` for the same reason.

This is the method of rtla/osnoise (kernel/trace/trace_osnoise.c) done from user space around
coremap's own loop; the osnoise tracer is not used because it measures with its own kernel
thread, not the probe the user chose. Needs root (tracefs is root-only): a user who is not gets it
through coremap-helper's one tracing request (start, read, stop on the probe's CPU: app/pinning/
trace_op.py), which asks for authorisation; without either, or without these events,
`TraceUnavailable` says what is missing and the run goes on unattributed.

Text output prints `mono` timestamps in microseconds (kernel/trace/trace_output.c,
trace_print_time), so gap and event edges are compared with TOLERANCE_NS of slack.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field

from app.errors import CoremapError
from app.machine import tracefs
from app.machine.thread_names import is_cut
from app.sysroot import SysRoot

TOLERANCE_NS = 2_000
NAME_CHARS = 256            # of a task's full name in the record (named_spans)
HARDWARE = "hardware / hypervisor"


@dataclass(frozen=True)
class Event:
    ts_ns: int
    pid: int
    event: str
    body: str


@dataclass(frozen=True)
class Span:
    start_ns: int
    end_ns: int | None      # None: the matching exit was never seen (lost, or after the stop)
    kind: str               # irq, softirq, vector, nmi, task
    name: str
    tid: int | None = None  # a task span's thread, and its comm as the trace has it
    comm: str = ""


@dataclass
class GapCause:
    t_ns: int               # gap start, CLOCK_MONOTONIC
    gap_ns: int
    causes: list[dict] = field(default_factory=list)   # {"kind", "name", "ns", "from_ns"} longest first
    unexplained_ns: int = 0
    traced: bool = True

    def as_dict(self, t0_ns: int = 0) -> dict:
        return {"t_ns": self.t_ns - t0_ns, "gap_ns": self.gap_ns, "causes": self.causes,
                "unexplained_ns": self.unexplained_ns, "traced": self.traced,
                "verdict": verdict(self)}


def verdict(g: GapCause) -> str:
    """One line a user reads: what held the loop off."""
    if not g.traced:
        return "not traced (the trace buffer had wrapped)"
    if not g.causes:
        return HARDWARE
    parts = [c["name"] for c in g.causes[:3]]
    more = f" +{len(g.causes) - 3}" if len(g.causes) > 3 else ""
    text = ", ".join(parts) + more
    if g.unexplained_ns > g.gap_ns // 2:
        text += f"; {HARDWARE} for the rest"
    return text


# -- parsing ---------------------------------------------------------------------------------------
# "          <idle>-0       [001] d.h1.  8683.178894: local_timer_entry: vector=236"
# The task name may hold spaces and dashes; the pid is the digits before " [CPU]".
_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
                   r"(?:\S{4,5}\s+)?(?P<secs>\d+)\.(?P<usecs>\d{6}):\s+(?P<event>\w+):\s?(?P<body>.*)$")
_KV = re.compile(r"(\w+)=(\S+)")


def parse_trace(text: str) -> list[Event]:
    """Events of a tracefs `trace` file (the text format with a nanosecond clock printed as
    seconds.microseconds). Comment lines and lines of other shapes are skipped."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        ts = int(m["secs"]) * 1_000_000_000 + int(m["usecs"]) * 1_000
        out.append(Event(ts, int(m["pid"]), m["event"], m["body"]))
    return out


def _kv(body: str) -> dict[str, str]:
    return dict(_KV.findall(body))


def _softirq_name(body: str) -> str:
    m = re.search(r"action=(\w+)", body)
    return f"softirq {m[1]}" if m else f"softirq {_kv(body).get('vec', '?')}"


def spans(events: list[Event], probe_pid: int | None = None) -> list[Span]:
    """Pair entries with exits into spans. Interrupts nest (a softirq runs on the way out of an
    interrupt, an NMI can land anywhere), so each kind/key keeps its own open entry. A task span
    runs from a sched_switch to it until the switch away; the probe's own time is not a span."""
    out: list[Span] = []
    open_: dict[tuple, tuple[int, str, str]] = {}
    running: tuple[int, int, str] | None = None      # (since, pid, comm) of a task that is not the probe
    for ev in events:
        e = ev.event
        if e == "irq_handler_entry":
            kv = _kv(ev.body)
            name = re.search(r"name=(.*)$", ev.body)
            open_[("irq", kv.get("irq"))] = (ev.ts_ns, "irq", f"IRQ {kv.get('irq', '?')} "
                                                             f"{name[1].strip() if name else ''}".strip())
        elif e == "irq_handler_exit":
            _close(out, open_, ("irq", _kv(ev.body).get("irq")), ev.ts_ns)
        elif e == "softirq_entry":
            open_[("softirq", _kv(ev.body).get("vec"))] = (ev.ts_ns, "softirq", _softirq_name(ev.body))
        elif e == "softirq_exit":
            _close(out, open_, ("softirq", _kv(ev.body).get("vec")), ev.ts_ns)
        elif e.endswith("_entry"):
            # irq_vectors: local_timer_entry, reschedule_entry, call_function_single_entry, ...
            base = e[: -len("_entry")]
            key = ("vector", base)
            if key in open_:
                # an entry with no exit (the exit was not recorded): keep it as a point event
                since, kind, name = open_.pop(key)
                out.append(Span(since, None, kind, name))
            open_[key] = (ev.ts_ns, "vector", base.replace("_", " "))
        elif e.endswith("_exit"):
            _close(out, open_, ("vector", e[: -len("_exit")]), ev.ts_ns)
        elif e == "nmi_handler":
            kv = _kv(ev.body)
            delta = int(kv.get("delta_ns", "0") or 0)
            handler = kv.get("handler", "?").split("+", 1)[0]
            out.append(Span(ev.ts_ns - delta, ev.ts_ns, "nmi", f"NMI {handler}"))
        elif e == "sched_switch":
            kv = _kv(ev.body)
            if running is not None:
                out.append(_task_span(running, ev.ts_ns))
                running = None
            nxt = int(kv.get("next_pid", "-1"))
            if nxt != probe_pid and nxt != 0:
                comm = re.search(r"next_comm=(.*?) next_pid=", ev.body)
                running = (ev.ts_ns, nxt, comm[1] if comm else "?")
    for since, kind, name in open_.values():
        out.append(Span(since, None, kind, name))
    if running is not None:
        out.append(_task_span(running, None))
    out.sort(key=lambda s: s.start_ns)
    return out


def _task_span(running: tuple[int, int, str], end_ns: int | None, name: str | None = None) -> Span:
    """A task's span, named "comm/tid" (or "name/tid" by its full name)."""
    since, tid, comm = running
    return Span(since, end_ns, "task", f"{name or comm}/{tid}", tid, comm)


def named_spans(all_spans: list[Span], names) -> list[Span]:
    """`all_spans` with each task named as coremap names a thread everywhere: `names` ([(tid, comm)]
    -> {tid: name}, app/machine/java.py names_by_tid) gives a Java thread whose comm the kernel cut its
    full name ("market-data-feed-handler-0/28206", not "market-data-fee/28206"), so the record and every
    report made from it carry it. Asked once, for the tasks whose comm may be cut."""
    tasks = {(s.tid, s.comm) for s in all_spans if s.kind == "task" and is_cut(s.comm)}
    # At most as much of a name as the journal keeps of a label: a stored result's texts are bounded
    # (probes/result.py), and a gap's verdict joins three names.
    full = {tid: name[:NAME_CHARS] for tid, name in (names(sorted(tasks)) if tasks else {}).items()}
    return [_task_span((s.start_ns, s.tid, s.comm), s.end_ns, full.get(s.tid)) if s.tid in full else s
            for s in all_spans]


def _close(out, open_, key, ts):
    got = open_.pop(key, None)
    if got is not None:
        out.append(Span(got[0], ts, got[1], got[2]))


def attribute(gaps, all_spans: list[Span], *, traced_from_ns: int | None = None,
              tolerance_ns: int = TOLERANCE_NS) -> list[GapCause]:
    """For each gap (start_ns, length_ns) in CLOCK_MONOTONIC ns: the spans overlapping it (each
    clipped to the gap), longest first, and how much of the gap no span covers. Gaps come back
    in time order.

    One sweep over gaps and spans, both sorted by start: a span that ended before one gap began
    ended before every later gap began too, so it leaves the active list for good."""
    ordered = sorted(all_spans, key=lambda s: s.start_ns)
    i, active, out = 0, [], []
    for start, length in sorted((int(a), int(b)) for a, b in gaps):
        end = start + length
        if traced_from_ns is not None and start < traced_from_ns:
            out.append(GapCause(start, length, traced=False))
            continue
        while i < len(ordered) and ordered[i].start_ns <= end + tolerance_ns:
            active.append(ordered[i])
            i += 1
        active = [s for s in active if (s.start_ns if s.end_ns is None else s.end_ns) >= start - tolerance_ns]
        by_name: dict[tuple[str, str], list[int]] = {}
        covered: list[tuple[int, int]] = []
        for s in active:
            if s.start_ns > end + tolerance_ns:
                continue
            s_end = s.start_ns if s.end_ns is None else s.end_ns
            lo, hi = max(s.start_ns, start), min(s_end, end)
            acc = by_name.setdefault((s.kind, s.name), [0, s.start_ns - start])
            acc[0] += max(0, hi - lo)
            acc[1] = min(acc[1], s.start_ns - start)
            if hi > lo:
                covered.append((lo, hi))
        # ns: time inside the gap; from_ns: where the cause's first span began, from the gap's start
        causes = sorted(({"kind": k, "name": n, "ns": ns, "from_ns": at} for (k, n), (ns, at) in by_name.items()),
                        key=lambda c: -c["ns"])
        out.append(GapCause(start, length, causes, max(0, length - _union(covered))))
    return out


def _union(intervals) -> int:
    total, cur_lo, cur_hi = 0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


def summarize_causes(attributed: list[dict]) -> list[dict]:
    """Over all attributed gaps: for each cause, in how many gaps it ran and for how long in total;
    gaps with no event count under HARDWARE."""
    rows: dict[str, dict] = {}
    for g in attributed:
        if not g.get("traced", True):
            continue
        if not g["causes"]:
            r = rows.setdefault(HARDWARE, {"cause": HARDWARE, "gaps": 0, "ns": 0})
            r["gaps"] += 1
            r["ns"] += g["gap_ns"]
            continue
        for c in g["causes"]:
            r = rows.setdefault(c["name"], {"cause": c["name"], "gaps": 0, "ns": 0})
            r["gaps"] += 1
            r["ns"] += c["ns"]
    return sorted(rows.values(), key=lambda r: (-r["gaps"], -r["ns"]))


# -- the tracefs instance ------------------------------------------------------------------------------
# Started, read and removed by app/machine/tracefs.py, which coremap-helper shares (issue 22: a user
# who is not root gets attribution through the helper's one tracing request, app/pinning/trace_op.py).
INSTANCE_PREFIX = tracefs.INSTANCE_PREFIX
EVENTS = tracefs.EVENTS
TraceUnavailable = tracefs.TraceUnavailable
parse_stats = tracefs.parse_stats


def unavailable_reason(root: SysRoot | None = None) -> str | None:
    """Why this process cannot trace by itself, or None when it can (a cheap check for the UI)."""
    return tracefs.unavailable_reason(root or SysRoot("/"))


def remove_stale(root: SysRoot | None = None) -> list[str]:
    """Remove coremap instances whose process is gone (killed before it could clean up)."""
    return tracefs.remove_stale(root or SysRoot("/"))


def helper_sentence(root: SysRoot | None = None) -> str | None:
    """Where this process may not trace but coremap-helper may for it (not root, tracefs root-only,
    pkexec or sudo there to start the helper): what attributing gaps will do; else None."""
    why = unavailable_reason(root)
    if why is None or os.geteuid() == 0 or "needs root" not in why:
        return None
    from app.pinning.helper import default_command
    if shutil.which(default_command()[0]) is None:
        return None
    return ("tracing needs root: coremap-helper starts it on the probed CPU and reads it back "
            "(it asks for authorisation once a session)")


def attribution_unavailable(root: SysRoot | None = None) -> str | None:
    """Why gaps cannot be attributed at all here (by this process or through the helper), or None."""
    why = unavailable_reason(root)
    return None if why is None or helper_sentence(root) is not None else why


class TraceSession:
    """The probed CPU recorded while a jitter run samples: by this process where it may trace, else
    through coremap-helper (HelperClient.trace). `started_ns` is when recording began (CLOCK_MONOTONIC,
    the clock of the probe's gap times); `stop()` gives (the CPU's trace text, its stats); `close()`
    removes the instance. TraceUnavailable says why it cannot trace. Use as a context manager too."""

    def __init__(self, cpu: int, seconds: float, root: SysRoot | None = None, helper=None):
        self.root = root or SysRoot("/")
        self.cpu = cpu
        self._kb = tracefs.buffer_kb(seconds)
        self._own: tracefs.TraceInstance | None = None
        self._helper = None
        why = unavailable_reason(self.root)
        if why is None:
            self._own = tracefs.TraceInstance(self.root, (cpu,), self._kb)
            self.started_ns = self._own.started_ns
            return
        if helper is None and helper_sentence(self.root) is None:
            raise TraceUnavailable(why)
        from app.pinning.helper import HelperClient
        self._helper = helper or HelperClient()
        self.started_ns = int(self._call("start")["started_ns"])

    def _call(self, action: str) -> dict:
        from app.pinning.refusals import PinWriteError
        try:
            return self._helper.trace(action, (self.cpu,), self._kb)
        except (CoremapError, PinWriteError, OSError) as e:
            # refused, not started (authorisation refused), or a kernel error the helper passed on
            raise TraceUnavailable(f"tracing through coremap-helper: {e}") from None

    def stop(self) -> tuple[str, dict]:
        """Stop recording; (trace text of the probed CPU, its stats as a dict)."""
        if self._own is not None:
            return self._own.stop()[self.cpu]
        got = self._call("read")["traces"][str(self.cpu)]
        return got["text"], got["stats"]

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
        elif self._helper is not None:
            try:
                self._call("stop")
            except TraceUnavailable:
                pass   # the helper is gone: its instance goes with the next run's remove_stale
            self._helper.close()
            self._helper = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def session_for(args, seconds: float) -> tuple[TraceSession | None, str | None]:
    """(the trace of the probe's CPU, or None; why not) for a probe child asked to `--attribute`: a
    jitter run's gaps or a wakeup run's late wakeups. Where it cannot trace (tracefs unmounted, not
    root and no helper) the run goes on without it, and the reason goes in its attribution line."""
    if not getattr(args, "attribute", False):
        return None, None
    if args.cpu_id is None or args.unbound:
        return None, "attributed on a pinned run only: the events of one CPU are recorded"
    try:
        return TraceSession(args.cpu_id, seconds), None
    except TraceUnavailable as e:
        return None, str(e)


def attribution_of(lines) -> dict | None:
    """A run's `attribution` line without its type, as the result object holds it (None: not asked)."""
    a = next((l for l in lines if l.get("type") == "attribution"), None)
    return None if a is None else {k: v for k, v in a.items() if k != "type"}


def thread_names(threads) -> dict[int, str]:
    """{tid: name} of the tasks that ran in the gaps, (tid, comm) each, named now, after the run: a Java
    thread by its full name, read from its JVM (app/machine/java.py; never while the loop measures)."""
    from app.errors import CoremapError
    from app.machine.java import names_by_tid
    from app.sysroot import SysRoot
    try:
        return names_by_tid(threads, SysRoot("/"))
    except (CoremapError, OSError):
        return {}       # a process that went away mid-read: its tasks keep the comm the trace holds


DETAIL_GAPS = 64


def attribute_run(text: str, stats: dict, gaps_abs, *, probe_pid: int, started_ns: int,
                  t0_ns: int = 0, detail: int = DETAIL_GAPS, names=None) -> dict:
    """The `attribution` line of a jitter run: the `detail` longest gaps attributed one by one
    (times relative to t0_ns, like top_gaps), and every gap given summed up by cause. `names` names
    the tasks that ran (named_spans); without it a task is named by the comm the trace holds."""
    events = parse_trace(text)
    sp = spans(events, probe_pid)
    if names is not None:
        sp = named_spans(sp, names)
    traced_from = started_ns
    if stats.get("overrun", 0):
        # the buffer wrapped: only what is newer than its oldest event is still there
        traced_from = max(started_ns, stats.get("oldest_event_ts_ns", started_ns))
    attributed = [g.as_dict(t0_ns) for g in attribute(gaps_abs, sp, traced_from_ns=traced_from)]
    longest = sorted(attributed, key=lambda g: -g["gap_ns"])[:detail]
    return {"type": "attribution", "available": True, "cpu_events": len(events),
            "overrun": stats.get("overrun", 0), "attributed_gaps": len(attributed),
            "untraced_gaps": sum(1 for g in attributed if not g["traced"]),
            "by_cause": summarize_causes(attributed), "gaps": longest}
