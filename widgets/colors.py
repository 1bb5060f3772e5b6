"""What colours the grid: the metrics a CPU cell can show, their values from a MachineState, and the
perceptual colour scale (viridis, from pyqtgraph's colormap data) with a log mapping for rates. The idle
metrics (the share of time deeper than the shallowest sleep, or in one cpuidle state) and the
frequency come from state.power (app/sampling/cpu_power.py).

The value functions read only the MachineState (never /proc); with `state.rates is None` (a snapshot
with one capture) they fall back to totals since boot and say so, so a count is never shown as a rate.
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtGui import QColor

from app.errors import CoremapError
from app.format import UNKNOWN, format_compact, format_percent

# Softirq kinds in kernel order (include/linux/interrupt.h, softirq_to_name[] in kernel/softirq.c).
SOFTIRQ_KINDS = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED",
                 "HRTIMER", "RCU")


class UnknownMetric(CoremapError):
    """--color-by named no metric this window knows."""


@dataclass(frozen=True)
class Metric:
    key: str            # "irq", "softirq", "softirq:NET_RX", "irqtime", "busy", "residency", "idle", "idle:C6", "ghz"
    label: str          # what the legend says
    unit: str           # "/s", "%" or "GHz"
    log: bool           # rates span decades: a log scale keeps a quiet CPU distinguishable from 0
    softirq_kind: str | None = None
    idle_state: str | None = None       # idle:NAME: the share of time in that cpuidle state

    @property
    def base(self) -> str:
        return self.key.split(":", 1)[0]


METRIC_BASES = (
    ("irq", "Hard IRQs"),
    ("softirq", "Softirqs"),
    ("irqtime", "IRQ + softirq time"),
    ("busy", "Busy"),
    ("residency", "Residency of selection"),
    ("idle", "Idle states"),
    ("ghz", "Frequency"),
)
DEEP_IDLE_LABEL = "Deep idle (time in states deeper than the shallowest sleep)"


def parse_metric(text: str | None) -> Metric:
    """'irq', 'softirq', 'softirq:NET_RX', 'irqtime', 'busy', 'residency', 'idle', 'idle:C6', 'ghz' -> Metric."""
    text = (text or "irq").strip()
    base, _, kind = text.partition(":")
    base = base.lower()
    if base == "irq" and not kind:
        return Metric("irq", "Hard IRQs", "/s", True)
    if base == "softirq":
        if not kind or kind.upper() == "ALL":
            return Metric("softirq", "Softirqs (all kinds)", "/s", True)
        kind = kind.upper()
        if kind not in SOFTIRQ_KINDS:
            raise UnknownMetric(f"--color-by {text!r}: unknown softirq kind {kind!r}; "
                                f"choose one of {', '.join(SOFTIRQ_KINDS)}")
        return Metric(f"softirq:{kind}", f"{kind} softirqs", "/s", True, kind)
    if base == "irqtime" and not kind:
        return Metric("irqtime", "IRQ + softirq time", "%", False)
    if base == "busy" and not kind:
        return Metric("busy", "Busy", "%", False)
    if base == "residency" and not kind:
        return Metric("residency", "Residency of the selected threads", "%", False)
    if base == "idle":
        if not kind:
            return Metric("idle", DEEP_IDLE_LABEL, "%", False)
        # a state's name is the driver's (POLL, C1, C1E, C6, ...): checked against the machine's later
        if not kind.replace("-", "").replace("_", "").isalnum() or len(kind) > 16:
            raise UnknownMetric(f"--color-by {text!r}: {kind!r} is not an idle state's name (C1, C6, POLL, ...)")
        return Metric(f"idle:{kind}", f"Time in idle state {kind}", "%", False, idle_state=kind)
    if base in ("ghz", "frequency", "mhz") and not kind:
        return Metric("ghz", "Frequency", "GHz", False)
    raise UnknownMetric(f"--color-by {text!r}: unknown metric; choose irq, softirq[:KIND], "
                        "irqtime, busy, residency, idle[:STATE] or ghz")


# -- values ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricValues:
    values: dict            # cpu -> float; a CPU absent from it has no figure (offline, not sampled)
    totals: bool            # True: counts/shares since boot from one capture, not rates
    unit: str               # unit of the values as shown ("/s", "%", "" for counts)
    label: str
    empty_reason: str = ""  # why there are no values at all (e.g. "select a thread")


def metric_values(state, metric: Metric) -> MetricValues:
    """Per-CPU figures of `metric` from one MachineState."""
    if metric.base == "residency":
        return _residency_values(state, metric)
    if metric.base in ("idle", "ghz"):
        return _power_values(state, metric)
    rates = state.rates
    if rates is not None:
        out = {}
        for cpu, r in rates.per_cpu.items():
            v = _rate_of(r, metric)
            if v is not None:
                out[cpu] = float(v)
        reason = "" if out else "no counters for this metric in this capture"
        return MetricValues(out, False, metric.unit, metric.label, reason)
    return _total_values(state, metric)


def _rate_of(r, metric: Metric):
    b = metric.base
    if b == "irq":
        return r.irq_per_s
    if b == "softirq":
        if metric.softirq_kind:
            return (r.softirq_per_s or {}).get(metric.softirq_kind)
        return r.softirq_total_per_s
    if b == "irqtime":
        return r.irq_softirq_pct
    if b == "busy":
        return r.busy_pct
    return None


def _total_values(state, metric: Metric) -> MetricValues:
    """Totals since boot from one capture (app.sampling.rates.totals): counts for interrupts, shares of time
    for the /proc/stat metrics."""
    from app.sampling.rates import totals
    s = state.sample
    b = metric.base
    label = f"{metric.label} since boot"
    missing = {"irq": (s.interrupts, "/proc/interrupts"), "softirq": (s.softirqs, "/proc/softirqs")}.get(
        b, (s.stat, "/proc/stat"))
    if missing[0] is None:
        return MetricValues({}, True, "%" if metric.unit == "%" else "", label,
                            f"no {missing[1]} in this capture")
    t = totals(s)
    out = {}
    for cpu, ct in t.per_cpu.items():
        if b == "irq":
            v = ct.irqs
        elif b == "softirq":
            v = ct.softirqs.get(metric.softirq_kind) if metric.softirq_kind else ct.softirq_total
        elif b == "irqtime":
            v = ct.irq_softirq_pct
        else:
            v = ct.busy_pct
        if v is not None:
            out[cpu] = float(v)
    return MetricValues(out, True, "%" if metric.unit == "%" else "", label)


def _residency_values(state, metric: Metric) -> MetricValues:
    """Share of the tracked threads' CPU time on each CPU (state.residency: key -> {cpu: share})."""
    res = state.residency or {}
    if not res:
        return MetricValues({}, False, "%", metric.label, "select a thread or process to see where it runs")
    out: dict[int, float] = {}
    for shares in res.values():
        for cpu, share in shares.items():
            out[cpu] = out.get(cpu, 0.0) + share
    n = len(res)
    return MetricValues({cpu: 100.0 * v / n for cpu, v in out.items()}, False, "%", metric.label)


def _power_values(state, metric: Metric) -> MetricValues:
    """Idle shares or the frequency of each CPU (state.power: app/sampling/cpu_power.py). The deep idle
    legend names the kernel's isolated and nohz_full CPUs that sleep deep: a latency-critical CPU pays
    its deep state's exit latency on every interrupt, and should not."""
    power = getattr(state, "power", None)
    if metric.base == "ghz":
        if power is None or not power.mhz:
            return MetricValues({}, False, "GHz", metric.label, power.mhz_why if power is not None else
                                "no frequency read here")
        return MetricValues({c: v / 1000.0 for c, v in power.mhz.items()}, False, "GHz",
                            f"{metric.label} ({power.mhz_source})")
    if power is None or not power.idle:
        return MetricValues({}, False, "%", metric.label, power.idle_why if power is not None else
                            "no idle states read here")
    if metric.idle_state:
        out = {c: 100.0 * dict(i.shares)[metric.idle_state] for c, i in power.idle.items()
               if metric.idle_state in dict(i.shares)}
        return MetricValues(out, False, "%", metric.label, "" if out else
                            f"no CPU here has idle state {metric.idle_state}; it has {', '.join(power.state_names())}")
    out = {c: 100.0 * i.deep_share for c, i in power.idle.items() if i.deep_share is not None}
    quiet = set(state.topology.isolated) | set(state.topology.nohz_full)
    deep = power.deep_sleepers(quiet)
    label = metric.label
    if deep:
        worst = max(deep, key=lambda cd: cd[1])
        label += (f"; {len(deep)} quiet CPU{'s' if len(deep) != 1 else ''} asleep deep half the time or more "
                  f"(CPU {worst[0]}: {format_percent(100 * worst[1])})")
    return MetricValues(out, False, "%", label)


# -- scale ---------------------------------------------------------------------------------------
_LUT_SIZE = 64          # 64 steps: finer than the eye separates on a small cell, and few brushes


def _make_lut() -> tuple[QColor, ...]:
    """viridis in _LUT_SIZE steps, as pyqtgraph.colormap.get("viridis").getLookupTable(nPts=_LUT_SIZE)
    gives it, read from pyqtgraph's own colormap file without importing pyqtgraph: that import (it
    walks every Qt enum) is ~0.25 s and numpy with it, and the grid is the first frame (issue 12)."""
    stops = _colormap_stops("viridis")
    last = len(stops) - 1
    out = []
    for i in range(_LUT_SIZE):
        t = i / (_LUT_SIZE - 1) * last
        k = min(int(t), last - 1)
        f = t - k
        # Linear between the two stops, cut to a byte as pyqtgraph's BYTE mode does (np.interp, ubyte).
        out.append(QColor(*(int(a + (b - a) * f) for a, b in zip(stops[k], stops[k + 1]))))
    return tuple(out)


def _colormap_stops(name: str) -> list[tuple[int, int, int]]:
    """The colour stops of one of pyqtgraph's colormap files (colors/maps/NAME.csv: "r,g,b" floats in
    0-1 per line, ';' comments), rounded to bytes as pyqtgraph.colormap reads them."""
    spec = importlib.util.find_spec("pyqtgraph")          # finds the package without running it
    folder = Path(next(iter(spec.submodule_search_locations)))
    stops = []
    for line in (folder / "colors" / "maps" / f"{name}.csv").read_text().splitlines():
        values = line.split(";", 1)[0].split(",")
        if len(values) >= 3 and values[0].strip():
            stops.append(tuple(int(255 * float(v) + 0.5) for v in values[:3]))
    return stops


LUT: tuple[QColor, ...] = _make_lut()
OFFLINE_COLOR = QColor(150, 150, 150)
NO_DATA_COLOR = QColor(215, 215, 215)


def nice_ceiling(v: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above v (a scale maximum that reads well)."""
    if v <= 0:
        return 1.0
    e = math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        c = m * 10.0 ** e
        if c >= v * (1 - 1e-12):
            return c
    return 10.0 ** (e + 1)


@dataclass(frozen=True)
class ColorScale:
    vmin: float
    vmax: float
    log: bool

    def fraction(self, v: float) -> float:
        if self.vmax <= self.vmin:
            return 0.0
        if self.log:
            # log10(1 + v): 0 stays at the bottom of the scale, decades spread evenly above ~10.
            lo, hi = math.log10(1 + max(self.vmin, 0)), math.log10(1 + self.vmax)
            t = (math.log10(1 + max(v, 0)) - lo) / (hi - lo)
        else:
            t = (v - self.vmin) / (self.vmax - self.vmin)
        return 0.0 if t < 0 else 1.0 if t > 1 else t

    def index(self, v: float) -> int:
        return min(_LUT_SIZE - 1, int(self.fraction(v) * _LUT_SIZE))

    def color(self, v: float) -> QColor:
        return LUT[self.index(v)]


def scale_for(values: dict, metric: Metric, totals: bool, previous: ColorScale | None = None) -> ColorScale:
    """Percentages: fixed 0-100. Rates: 0 to a round maximum, log-mapped. Counts since boot (one
    capture): 0 to a round maximum too (log only when they span more than two decades): from their
    own minimum, worker1's CPUs at 71M and 79M were painted as far apart as idle and busy (issue 23).

    A rate maximum only moves when the data leaves its bracket (above it, or below a tenth of it),
    so colours do not shimmer from one tick to the next on a steady machine.
    """
    if metric.unit == "%":
        return ColorScale(0.0, 100.0, False)
    peak = max(values.values(), default=0.0)
    if metric.unit == "GHz":
        # from 0: a CPU at half the clock of its neighbours looks half as bright, on a scale that
        # moves only when the fastest leaves its bracket
        top = nice_ceiling(peak)
        if previous is not None and not previous.log and previous.vmax >= peak > previous.vmax / 2:
            top = previous.vmax
        return ColorScale(0.0, top, False)
    if totals:
        low = min(values.values(), default=0.0)
        return ColorScale(0.0, nice_ceiling(peak), peak > 100 * max(low, 1.0))
    top = nice_ceiling(peak)
    if previous is not None and previous.log and previous.vmin == 0 and previous.vmax >= peak > previous.vmax / 10:
        top = previous.vmax
    return ColorScale(0.0, top, True)


def text_color_for(index: int) -> QColor:
    """Black on the bright (yellow/green) end of viridis, white on the dark end."""
    return QColor(20, 20, 20) if index >= _LUT_SIZE * 0.55 else QColor(245, 245, 245)


def format_value(v: float | None, unit: str) -> str:
    """Short figure for a cell or legend: 0, 12, 1.2k, 35k, 1.2M, 47% (app.format's rules)."""
    if v is None:
        return UNKNOWN
    if unit == "GHz":
        return f"{v:.2f}"
    return format_percent(v) if unit == "%" else format_compact(v)
