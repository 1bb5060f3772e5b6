"""Moments of the past: a Timeline's `times` and its `state_at(t)`, the MachineState the window draws as of t.

- SessionTimeline: a saved session's history (history.jsonl, app/store/session.py history_tick: per CPU
  busy, hard IRQs/s, softirqs/s, IRQ time; the busiest IRQs per CPU) on the session's own machine snapshot
  (its topology, IRQ names and affinity). A moment is the newest tick at or before t.
- PrometheusTimeline: one host of a Prometheus between two times, each moment an instant query set at that
  time (Prometheus' irate there), every `step` seconds.
- PcpArchiveTimeline: a pmlogger archive, read with PCP's own `pminfo -a ARCHIVE -O @TIME` (pmproxy's REST
  API reads live hosts only): each moment is the counters at t and one archive interval before, and the
  rates between them (app.sampling.rates, resets included).

None of these hold threads, so the residency of threads is not replayed (the window says so by showing
none). `parse_at(text, timeline)` reads --at: seconds from the start ("90"), from the end ("-30"), "end",
or a wall-clock ISO 8601 time for the engines ("2026-11-25T13:40:00").
"""
from __future__ import annotations

import bisect
import datetime as _dt
import re
import shutil
import subprocess
from dataclasses import replace

from app.errors import CoremapError, excerpt
from app.inputs import child_operand
from app.parse.number import is_ascii_int
from app.sampling.machine_state import MachineState
from app.sampling.rates import CpuRates, IrqRate, Rates, rates
from app.sources.host import MAX_CPUS, CpuFacts, HostCounters, HostFacts, sample_of, topology_of

PMINFO_TIMEOUT = 15.0
MAX_TIME = 253402300799.0   # 9999-12-31T23:59:59Z
PMINFO_MAX_BYTES = 64 * 1024 ** 2


class ReplayError(CoremapError):
    """A moment that cannot be had: outside the history, or a history that cannot be read."""


class Timeline:
    times: list[float]
    wall: bool = False              # times are wall-clock epoch seconds (else seconds since the start)
    label: str = ""
    session = None                  # the Session a SessionTimeline reads (closed with the replay's host)

    def state_at(self, t: float, generation: int = 1) -> MachineState:
        raise NotImplementedError

    def nearest(self, t: float) -> float:
        """The moment shown for t: the newest time at or before it (the first, before the start)."""
        i = bisect.bisect_right(self.times, t) - 1
        return self.times[max(0, i)]

    def describe(self, t: float) -> str:
        if self.wall:
            return _dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")
        return f"{t:.1f} s"


def parse_at(text: str, tl: Timeline, option: str = "--at") -> float:
    """--at (or `option`, read the same way: `coremap report --since`) as a time of `tl` (module docstring)."""
    s = text.strip()
    start, end = tl.times[0], tl.times[-1]
    if s == "end":
        return end
    if re.fullmatch(r"[+-]?[0-9]{1,9}(\.[0-9]{1,6})?", s):
        v = float(s)
        return end + v if s.startswith("-") else start + v
    try:
        when = _dt.datetime.fromisoformat(s)
    except ValueError:
        raise ReplayError(f"{option} {excerpt(s)}: give seconds from the start (90), from the end (-30), end, or a "
                          "time such as 2026-11-25T13:40:00") from None
    if not tl.wall:
        raise ReplayError(f"{option} {excerpt(s)}: this history counts seconds from its start; give seconds "
                          f"(0 to {end - start:g})")
    # Years 1970-9999 after the time zone is applied: 0001-01-01T00:00+01:00 and 9999-12-31T23:59-12:00
    # left datetime's range and stopped coremap with a traceback (issue 32).
    try:
        t = when.timestamp()
        _dt.datetime.fromtimestamp(t)       # as describe() will show it
    except (OverflowError, ValueError, OSError):
        t = -1.0
    if not 0 <= t <= MAX_TIME:
        raise ReplayError(f"{option} {excerpt(s)}: out of range; give a time from 1970 to 9999")
    return t


def _cpu_rates(cpu: int, m: dict) -> CpuRates:
    irq_pct = m.get("irqtime")
    return CpuRates(cpu, float(m.get("irq", 0.0)), {}, float(m.get("softirq", 0.0)), busy_pct=m.get("busy"),
                    irq_softirq_pct=irq_pct)


class SessionTimeline(Timeline):
    """A saved session's history on its machine snapshot (module docstring)."""

    def __init__(self, session):
        from app.sampling.sampler import Sampler
        ticks = sorted(session.history, key=lambda k: k["t"])
        if not ticks:
            raise ReplayError(f"{session.source or 'this session'}: holds no history to replay; save a session from "
                              "a window that sampled for a while")
        self.ticks = ticks
        self.times = [float(k["t"]) for k in ticks]
        self.base = Sampler(session.root).tick()
        self.label = str(session.source or "session")

    def state_at(self, t: float, generation: int = 1) -> MachineState:
        i = max(0, bisect.bisect_right(self.times, t) - 1)
        tick = self.ticks[i]
        cpus = tuple(self.base.topology.online)
        per_cpu = {c: _cpu_rates(c, tick.get("cpu", {}).get(str(c), {})) for c in cpus}
        irqs = {irq: IrqRate(irq, tuple(float(per.get(str(c), 0.0)) for c in cpus),
                             float(sum(per.values())))
                for irq, per in tick.get("irq", {}).items()}
        r = Rates(1.0, cpus, per_cpu, irqs, {})
        note = f"replay of {self.label} at {self.describe(self.times[i])} (tick {i + 1} of {len(self.ticks)}); " \
               "threads and their residency are not in a session's history"
        return replace(self.base, generation=generation, rates=r, live=False, notes=(note,) + self.base.notes,
                       residency={}, trails={})


class PrometheusTimeline(Timeline):
    wall = True

    def __init__(self, prom, instance: str, start: float, end: float, step: float = 15.0):
        if not end > start or step <= 0 or (end - start) / step > 10_000:
            raise ReplayError(f"a range of {end - start:g} s in steps of {step:g} s: give a later end or a longer step")
        self.prom, self.instance = prom, instance
        n = int((end - start) // step)
        self.times = [end - k * step for k in range(n, 0, -1)] + [end]     # the last moment is `end` itself
        self.label = f"prometheus {instance}"

    def nearest(self, t: float) -> float:
        """Any moment of the range: Prometheus answers at any time, the steps are the slider's only."""
        return min(max(t, self.times[0]), self.times[-1])

    def state_at(self, t: float, generation: int = 1) -> MachineState:
        t = self.nearest(t)
        state = self.prom.host_state(self.instance, generation, at=t)
        return replace(state, live=False, host="", notes=(f"{self.label} at {self.describe(t)}",) + state.notes)


class PcpArchiveTimeline(Timeline):
    """A pmlogger archive read with pminfo (module docstring)."""
    wall = True

    def __init__(self, archive: str, *, step: float | None = None):
        if shutil.which("pminfo") is None or shutil.which("pmdumplog") is None:
            raise ReplayError("reading a PCP archive needs PCP's pminfo and pmdumplog: apt-get install pcp")
        self.archive = archive
        label = _run(["pmdumplog", "-L", child_operand(archive)], archive)
        start, end, self.step = _archive_span(label, archive)
        self.step = step or self.step
        n = max(1, int((end - start) // self.step))
        self.times = [start + k * self.step for k in range(n + 1)]
        self.label = f"PCP archive {archive}"
        self._facts = None

    def _fetch(self, t: float, names) -> dict:
        # PCP's own time syntax (PCPIntro(1), "TIME WINDOW SPECIFICATION"): ctime's, with a fraction.
        when = _dt.datetime.fromtimestamp(t).strftime("@%a %b %d %H:%M:%S.%f %Y")
        return parse_pminfo(_run(["pminfo", "-a", child_operand(self.archive), "-O", when, "-f", *names],
                                 self.archive))

    def facts(self) -> HostFacts:
        """The host's facts, logged once at the archive's start (pmlogger's `log mandatory on once`)."""
        from app.sources.pcp import FACTS
        if self._facts is None:
            self._facts = facts_of(self._fetch(self.times[0], FACTS), self.archive)
        return self._facts

    def state_at(self, t: float, generation: int = 1) -> MachineState:
        from app.sources.pcp import COUNTERS
        t = max(self.times[0] + self.step, self.nearest(t))
        before = counters_of(self._fetch(t - self.step, COUNTERS), t - self.step)
        now = counters_of(self._fetch(t, COUNTERS), t)
        if not now.cpus:
            raise ReplayError(f"{self.archive} holds no kernel.percpu.cpu values at {self.describe(t)}; log "
                              "kernel.percpu.cpu, .interrupts and .softirqs with pmlogger")
        facts = self.facts()
        a, b = sample_of(before), sample_of(now)
        try:
            r = rates(a, b)
        except CoremapError as e:
            raise ReplayError(f"{self.archive} at {self.describe(t)}: {e}") from None
        topo = topology_of(HostFacts(facts.host, facts.hostname, facts.model, facts.kernel, facts.arch,
                                     tuple(next((c for c in facts.cpus if c.cpu == x), CpuFacts(x)) for x in now.cpus)))
        return MachineState(generation, topo, b, r, live=False, source=self.label,
                            notes=(f"{self.label} at {self.describe(t)}",) + tuple(r.resets[:3]))


PROMETHEUS_SPAN = 3600.0        # the slider over a Prometheus host: the hour up to --at
PROMETHEUS_STEP = 15.0


def timeline_of(args) -> Timeline:
    """The history the options name (--pcp-archive, --session, --prometheus with --host); a session's
    Timeline holds it open as `.session` (closed by its host)."""
    if getattr(args, "pcp_archive", None):
        return PcpArchiveTimeline(args.pcp_archive)
    if getattr(args, "session", None):
        from app.store.session import open_session
        session = open_session(args.session)        # its history and machine; its probe runs are not replayed
        try:
            tl = SessionTimeline(session)
        except CoremapError:
            session.close()
            raise
        tl.session = session
        return tl
    if getattr(args, "prometheus", None):
        if not getattr(args, "host", None):
            raise ReplayError("--prometheus --at: name the host to replay with --host INSTANCE")
        import time
        from app.sources.http import auth_for
        from app.sources.prometheus import Prometheus
        prom = Prometheus(args.prometheus, auth=auth_for(args.prometheus, getattr(args, "source_config", None)))
        prom.check()
        end = time.time()
        tl = PrometheusTimeline(prom, args.host, end - PROMETHEUS_SPAN, end, PROMETHEUS_STEP)
        at = parse_at(args.at, tl)
        if not tl.times[0] <= at <= tl.times[-1]:
            tl = PrometheusTimeline(prom, args.host, at - PROMETHEUS_SPAN, at, PROMETHEUS_STEP)
        return tl
    raise ReplayError("--at replays a history: give --session FILE, --pcp-archive ARCHIVE, or "
                      "--prometheus URL --host INSTANCE")


def _run(argv: list[str], what: str) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, timeout=PMINFO_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise ReplayError(f"{what}: {argv[0]} took over {PMINFO_TIMEOUT:g} s; is the archive on a slow disk?") from None
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ReplayError(f"{what}: {argv[0]} failed ({excerpt(err[-1] if err else str(p.returncode), 120)}); give "
                          "a pmlogger archive (its base name or its .meta file)")
    if len(p.stdout) > PMINFO_MAX_BYTES:
        raise ReplayError(f"{what}: {argv[0]} printed over {PMINFO_MAX_BYTES // 1024 ** 2} MiB; is this one host's archive?")
    return p.stdout.decode("utf-8", "replace")


def _archive_span(label: str, what: str) -> tuple[float, float, float]:
    """(start, end, interval) from `pmdumplog -L`: "commencing ...", "ending ...", and the delta of its log."""
    def when(key: str) -> float:
        m = re.search(rf"^\s*{key}\s+\w+\s+(\w+\s+\d+\s+[\d:.]+\s+\d{{4}})", label, re.M)
        if not m:
            raise ReplayError(f"{what}: pmdumplog -L names no {key} time; is it a pmlogger archive?")
        return _dt.datetime.strptime(m.group(1), "%b %d %H:%M:%S.%f %Y").timestamp()
    start, end = when("commencing"), when("ending")
    if not end > start:
        raise ReplayError(f"{what}: the archive spans no time (one record); log for a few seconds more")
    return start, end, 1.0


_INST = re.compile(r'^\s+inst \[\d+ or "([^"]{1,64})"\] value (.+)$')
_VALUE = re.compile(r"^\s+value (.+)$")


def parse_pminfo(text: str) -> dict[str, dict[str | None, str]]:
    """`pminfo -f` output: {metric: {instance name (None for a singular metric): value text}}."""
    out: dict[str, dict[str | None, str]] = {}
    metric = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            metric = line.strip()
            out.setdefault(metric, {})
            continue
        if metric is None:
            continue
        m = _INST.match(line)
        if m:
            out[metric][m.group(1)] = m.group(2).strip()
            continue
        m = _VALUE.match(line)
        if m:
            out[metric][None] = m.group(1).strip()
    return out


def counters_of(values: dict, t: float) -> HostCounters:
    from app.sources.host import Cleaner
    from app.sources.pcp import CPU_MODES, _CPU, _PAIR
    cl = Cleaner("archive")
    irqs: dict = {}
    soft: dict = {}
    for metric, into in (("kernel.percpu.interrupts", irqs), ("kernel.percpu.softirqs", soft)):
        for name, v in values.get(metric, {}).items():
            m = _PAIR.match(name or "")
            val = cl.value(v)
            cpu = cl.cpu(m.group(2)) if m else None
            if cpu is not None and val is not None:
                if into is irqs:
                    irqs.setdefault(m.group(1), ("", {}))[1][cpu] = val
                else:
                    soft.setdefault(m.group(1), {})[cpu] = val
    secs: dict = {}
    for mode, metric in CPU_MODES.items():
        for name, v in values.get(metric, {}).items():
            m = _CPU.match(name or "")
            val = cl.value(v)
            cpu = cl.cpu(m.group(1)) if m else None
            if cpu is not None and val is not None:
                secs.setdefault(cpu, {})[mode] = val / 1000.0
    return HostCounters(t, tuple(sorted(secs)), irqs, soft, secs)


def facts_of(values: dict, what: str) -> HostFacts:
    def one(metric):
        v = values.get(metric, {}).get(None)
        return v.strip('"')[:120] if v else None
    nodes = {}
    for name, v in values.get("hinv.map.cpu_node", {}).items():
        m = re.match(r"^cpu([0-9]{1,5})$", name or "")
        if m and is_ascii_int(v) and not v.startswith("-") and len(v) < 6 and int(m.group(1)) < MAX_CPUS:
            nodes[int(m.group(1))] = int(v)
    model = next(iter(values.get("hinv.cpu.model_name", {}).values()), None)
    return HostFacts(what, one("kernel.uname.nodename"), model.strip('"')[:120] if model else None,
                     one("kernel.uname.release"), one("kernel.uname.machine"),
                     tuple(CpuFacts(c, node=n) for c, n in sorted(nodes.items())))
