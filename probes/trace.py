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
thread, not the probe the user chose. Needs root (tracefs is root-only) and a kernel with these
events; otherwise `TraceUnavailable` says what is missing and the run goes on unattributed.

Text output prints `mono` timestamps in microseconds (kernel/trace/trace_output.c,
trace_print_time), so gap and event edges are compared with TOLERANCE_NS of slack.
"""
from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass, field

from app.errors import CoremapError
from app.sysroot import SysRoot

INSTANCE_PREFIX = "coremap-"
TOLERANCE_NS = 2_000
EVENTS = ("irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit",
          "nmi/nmi_handler", "sched/sched_switch")
HARDWARE = "hardware / hypervisor"
# per-CPU buffer: what one busy CPU writes in a second with room to spare (an idle CPU writes
# ~15 KB/s of these events, a CPU taking a NIC's interrupts a few MB/s), capped so a long run
# cannot take a large share of memory; if it still wraps, early gaps are reported "not traced"
BUFFER_KB_PER_S = 1024
BUFFER_KB_MIN, BUFFER_KB_MAX = 2048, 65536


class TraceUnavailable(CoremapError):
    """Tracing cannot run here (not root, tracefs not mounted, events missing)."""


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
    running: tuple[int, int, str] | None = None      # (since, pid, name) of a task that is not the probe
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
                out.append(Span(running[0], ev.ts_ns, "task", running[2]))
                running = None
            nxt = int(kv.get("next_pid", "-1"))
            if nxt != probe_pid and nxt != 0:
                comm = re.search(r"next_comm=(.*?) next_pid=", ev.body)
                running = (ev.ts_ns, nxt, f"{comm[1] if comm else '?'}/{nxt}")
    for since, kind, name in open_.values():
        out.append(Span(since, None, kind, name))
    if running is not None:
        out.append(Span(running[0], None, "task", running[2]))
    out.sort(key=lambda s: s.start_ns)
    return out


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
def unavailable_reason(root: SysRoot | None = None) -> str | None:
    """Why attribution cannot run here, or None when it can (a cheap check for the UI)."""
    root = root or SysRoot("/")
    t = root.tracefs()
    if t.is_dir() and not os.access(t, os.R_OK | os.X_OK):
        # tracefs is mode 700 (Documentation/trace/ftrace.rst): a user cannot look inside at all
        return f"attributing gaps needs root: {t} is readable by root only"
    if not (t / "events").exists():
        return ("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing) "
                "or this kernel has no tracing; gaps cannot be attributed")
    if not os.access(t / "instances", os.W_OK):
        return f"attributing gaps needs root: {t} is writable by root only"
    missing = [e for e in EVENTS if not (t / "events" / e).exists()]
    if missing:
        return f"this kernel has no trace events {', '.join(missing)}; gaps cannot be attributed"
    return None


def remove_stale(root: SysRoot | None = None) -> list[str]:
    """Remove coremap instances whose probe process is gone (killed before it could clean up), so
    an abandoned instance does not go on tracing a CPU. Returns the names removed."""
    root = root or SysRoot("/")
    gone = []
    for name in root.listdir(root.tracefs("instances")):
        if not name.startswith(INSTANCE_PREFIX):
            continue
        pid = name[len(INSTANCE_PREFIX):]
        if pid.isdigit() and not root.proc(pid).exists():
            try:
                os.rmdir(root.tracefs("instances", name))
                gone.append(name)
            except OSError as e:
                # EBUSY: a reader still holds its trace_pipe open; ENOENT: another coremap removed it
                if e.errno not in (errno.EBUSY, errno.ENOENT):
                    raise
    return gone


class TraceSession:
    """A private tracefs instance recording EVENTS on one CPU. Use as a context manager:

        with TraceSession(cpu, seconds) as ts:
            ...measure...
            text, stats = ts.stop()
    """

    def __init__(self, cpu: int, seconds: float, root: SysRoot | None = None):
        self.root = root or SysRoot("/")
        why = unavailable_reason(self.root)
        if why:
            raise TraceUnavailable(why)
        remove_stale(self.root)
        self.cpu = cpu
        self.name = f"{INSTANCE_PREFIX}{os.getpid()}"
        self.dir = self.root.tracefs("instances", self.name)
        self.started_ns: int | None = None
        self.vectors: list[str] = []
        try:
            os.mkdir(self.dir)
        except FileExistsError:
            pass   # this very process made it before (a second run in one process): reuse it
        except OSError as e:
            raise TraceUnavailable(f"cannot create the trace instance {self.dir}: {os.strerror(e.errno)}") from None
        try:
            self._setup(seconds)
        except OSError as e:
            self.close()
            raise TraceUnavailable(f"cannot set up tracing in {self.dir}: {e}") from None

    def _write(self, rel: str, value: str) -> None:
        fd = os.open(self.dir / rel, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def _setup(self, seconds: float) -> None:
        from app.parse.cpulist import format_cpumask
        self._write("tracing_on", "0")
        self._write("trace_clock", "mono")
        # every CPU's buffer small, then the probed CPU's sized for the run
        self._write("buffer_size_kb", "64")
        kb = int(min(BUFFER_KB_MAX, max(BUFFER_KB_MIN, seconds * BUFFER_KB_PER_S)))
        self._write(f"per_cpu/cpu{self.cpu}/buffer_size_kb", str(kb))
        self._write("tracing_cpumask", format_cpumask([self.cpu]))
        events = list(EVENTS)
        vec_dir = self.dir / "events" / "irq_vectors"
        if vec_dir.exists():
            self.vectors = sorted(n for n in self.root.listdir(vec_dir)
                                  if n.endswith(("_entry", "_exit")))
            events += [f"irq_vectors/{n}" for n in self.vectors]
        for e in events:
            self._write(f"events/{e}/enable", "1")
        self._write("trace", "")          # O_TRUNC of `trace` clears the buffer
        self.started_ns = time.monotonic_ns()
        self._write("tracing_on", "1")

    def stop(self) -> tuple[str, dict]:
        """Stop recording; return (trace text of the probed CPU, its stats as a dict)."""
        self._write("tracing_on", "0")
        text = self.root.read(self.dir / "per_cpu" / f"cpu{self.cpu}" / "trace")
        stats = parse_stats(self.root.read(self.dir / "per_cpu" / f"cpu{self.cpu}" / "stats"))
        return text, stats

    def close(self) -> None:
        try:
            self._write("tracing_on", "0")
        except OSError:
            pass   # the instance never got that far; rmdir below still removes what exists
        try:
            os.rmdir(self.dir)
        except FileNotFoundError:
            pass   # already gone (remove_stale of another coremap, or close() called twice)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def parse_stats(text: str) -> dict:
    """per_cpu/cpuN/stats: "entries: 1505", "overrun: 0", "oldest event ts:  8683.178894", ..."""
    out: dict = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if not sep:
            continue
        k, v = k.strip().replace(" ", "_"), v.strip()
        if re.fullmatch(r"\d+\.\d{6}", v):
            s, us = v.split(".")
            out[k + "_ns"] = int(s) * 1_000_000_000 + int(us) * 1_000
        elif v.isdigit():
            out[k] = int(v)
    return out


DETAIL_GAPS = 64


def attribute_run(text: str, stats: dict, gaps_abs, *, probe_pid: int, started_ns: int,
                  t0_ns: int = 0, detail: int = DETAIL_GAPS) -> dict:
    """The `attribution` line of a jitter run: the `detail` longest gaps attributed one by one
    (times relative to t0_ns, like top_gaps), and every gap given summed up by cause."""
    events = parse_trace(text)
    sp = spans(events, probe_pid)
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
