"""A fleet: many hosts captured over ssh in parallel, and what sets one apart from the others.

`capture_fleet(hosts)` reaches each host (`capture_host`) through its agent (client.py) on a pool of `parallel` threads
(so 50 hosts are never 50 ssh handshakes at once), each within its own `timeout`: connect, two ticks
half a second apart (so the grid shows rates), the machine's facts as the report words them
(app/store/report.py machine_facts: model, shape, NUMA nodes, kernel, isolcpus, nohz_full, irqbalance)
and the busiest IRQ; with `probe`, a measurement the caller runs on the host too (the CLI's jitter on
a chosen CPU: probes live above this layer). A host that cannot be reached, or does not finish in
time, is a row that says why — it never holds up the others for longer than its timeout. The window's
fleet streams the same captures round after round (app/sources/stream.py ssh_rounds).

`odd_cells(rows)` finds the machine that is not like the others: in each compared column, the value
most hosts share is the norm, and any other value stands out (with no norm — a tie — every value
does); a jitter figure stands out at more than twice the median of the others.
"""
from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.errors import CoremapError
from app.format import format_cpus, format_ns, format_rate
from app.remote.client import AgentClient
from app.remote.codec import StateReceiver
from app.remote.hosts import PARALLEL, TIMEOUT, HostSpec
from app.remote.transport import LinkError
from app.sampling.machine_state import MachineState

RATE_WAIT = 0.5
FACTS = ("Model", "Shape", "Core kinds", "NUMA nodes", "Kernel", "isolcpus", "nohz_full", "irqbalance")
COMPARED = ("Model", "Shape", "Core kinds", "NUMA nodes", "Kernel", "isolcpus", "nohz_full", "irqbalance")
JITTER_ODD = 2.0            # a host's jitter p99 past this multiple of the others' median stands out


@dataclass(frozen=True)
class FleetRow:
    """One host: its facts, its busiest IRQ, its state (for the grid), or why it could not be read."""
    host: str
    name: str = ""
    facts: tuple[tuple[str, str], ...] = ()
    top_irq: str = ""
    state: MachineState | None = None
    probe: dict | None = None       # what `probe` returned: {"cpu", "p99_ns", "max_ns"} or {"error"}
    error: str = ""
    seconds: float = 0.0
    seen: float = 0.0               # time.time() of its last answer (a streaming fleet, app/sources/stream.py)
    quiet: tuple[int, ...] = ()     # CPUs coremap made quiet there, where the source says (app/sources/export.py)
    stale: str = ""                 # why this row is not current: "no answer since 12:04:05 (40 s ago)"
    note: str = ""                  # one line on how it was read: its topology completed from a capture, or why not

    @property
    def ok(self) -> bool:
        return not self.error

    def fact(self, label: str) -> str:
        return next((text for lab, text in self.facts if lab == label), "")


def capture_fleet(hosts: Sequence[HostSpec], *, parallel: int = PARALLEL, timeout: float = TIMEOUT,
                  probe: Callable[[AgentClient], dict] | None = None, on_row: Callable[[FleetRow], None] | None = None,
                  connect: Callable[..., AgentClient] | None = None) -> list[FleetRow]:
    """One row per host, in the order given."""
    rows: list[FleetRow | None] = [None] * len(hosts)
    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="coremap-fleet") as pool:
        futures = [pool.submit(capture_host, h, timeout, probe, connect) for h in hosts]
        for i, f in enumerate(futures):
            rows[i] = f.result()
            if on_row is not None:
                on_row(rows[i])
    return [r for r in rows if r is not None]


class _Watch:
    """Ends a host's connection when its time is up, so no step of it blocks past the timeout."""

    def __init__(self, host: HostSpec, timeout: float):
        self.host, self.timeout = host, timeout
        self.deadline = time.monotonic() + timeout
        self.client: AgentClient | None = None
        self.expired = False
        self._timer = threading.Timer(timeout, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def _expire(self) -> None:
        self.expired = True
        if self.client is not None:
            self.client.close(LinkError(f"{self.host}: no answer within {self.timeout:g} s"))

    def done(self) -> None:
        self._timer.cancel()
        if self.client is not None:
            self.client.close()


def capture_host(host: HostSpec, timeout: float, probe=None, connect=None) -> FleetRow:
    """One host's row (the module docstring), within `timeout` seconds; `seen` is when it answered."""
    connect = connect or AgentClient.connect
    t0 = time.monotonic()
    watch = _Watch(host, timeout)
    try:
        client = connect(host, connect_timeout=min(timeout, 10.0), handshake_timeout=timeout)
        watch.client = client
        if watch.expired:
            raise LinkError(f"{host}: no answer within {timeout:g} s")
        client.call("open", interval=RATE_WAIT, timeout=watch.left())
        receiver = StateReceiver()
        receiver.apply(client.call("tick", timeout=watch.left()).get("state"))
        time.sleep(RATE_WAIT)
        state = receiver.apply(client.call("tick", timeout=watch.left()).get("state"))
        facts = _facts(client.call("facts", timeout=watch.left()))
        result = probe(client) if probe is not None else None
        if result is not None and watch.expired:
            # The watch ended the connection mid-probe: say that, not how the probe was stopped.
            result = {"cpu": result.get("cpu"), "error": f"{host}: no answer within {timeout:g} s"}
        name = client.hello.get("host") or ""
        return FleetRow(str(host), name, facts, top_irq(state), state, result, seconds=time.monotonic() - t0,
                        seen=time.time())
    except (CoremapError, AttributeError) as e:
        # AttributeError: a tick answer that is not an object (a broken agent), said as such below.
        why = str(e) if isinstance(e, CoremapError) else f"{host}: the agent answered something that is not a state"
        if watch.expired and "no answer within" not in why:
            why = f"{host}: no answer within {timeout:g} s ({why})"
        return FleetRow(str(host), error=why, seconds=time.monotonic() - t0)
    finally:
        watch.done()


def _facts(raw) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list):
        raise CoremapError("the agent sent its machine's facts in a form coremap does not know")
    out = []
    for pair in raw[:64]:
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair):
            out.append((pair[0][:40], pair[1][:400]))
    return tuple(out)


def top_irq(state: MachineState) -> str:
    """The busiest IRQ over the last interval: `24 (i40e eno1 TxRx-0) 12,345/s on 3`."""
    r = state.rates
    if r is None or not r.irqs:
        return ""
    q = max(r.irqs.values(), key=lambda x: x.total)
    if q.total <= 0:
        return ""
    info = state.irqs.info.get(q.irq) if state.irqs is not None else None
    name = info.device.description if info is not None and info.device is not None else ""
    if not name and state.sample.interrupts is not None:
        row = next((row for row in state.sample.interrupts.rows if row.irq == q.irq), None)
        name = row.description if row is not None else ""
    on = [c for c, v in zip(r.cpus, q.per_cpu) if v > 0]
    where = f" on {format_cpus(on)}" if on else ""
    return f"{q.irq}" + (f" ({name})" if name else "") + f" {format_rate(q.total)}{where}"


def jitter_text(probe: dict | None) -> str:
    """A host's jitter cell, leading with what jitter users read (probes/jitter/measure.py fleet_figures): the
    longest gap, gaps of 10 and 100 µs or more per second and the time lost in gaps. A row from an
    older coremap, which kept only the p99 and the max, shows those."""
    if not probe:
        return ""
    if probe.get("error"):
        return str(probe["error"])
    if "gaps_per_s" in probe:
        return f"CPU {probe.get('cpu')}: {format_rate(probe.get('gaps_per_s'))} gaps"
    text = f"CPU {probe.get('cpu')}: max {format_ns(probe.get('max_ns'))}"
    if probe.get("gaps10_per_s") is None:
        return text + f", p99 {format_ns(probe.get('p99_ns'))}"
    lost = probe.get("lost_share")
    return (text + f", gaps >= 10 µs {format_rate(probe['gaps10_per_s'])}, >= 100 µs "
            f"{format_rate(probe.get('gaps100_per_s'))}, time lost {f'{100 * lost:.3g}%' if lost is not None else '-'}")


# -- what matters first (the streaming fleet's sort orders) -------------------------------------------
def quiet_cpus(row: FleetRow) -> tuple[int, ...]:
    """The CPUs that should see no IRQs: coremap's quiet CPUs where known, else the kernel's isolated ones."""
    if row.quiet:
        return row.quiet
    return row.state.topology.isolated if row.state is not None else ()


def irq_on_quiet(row: FleetRow) -> float:
    """Hard and soft IRQs per second landing on the host's quiet or isolated CPUs."""
    r = row.state.rates if row.state is not None else None
    if r is None:
        return 0.0
    return sum(c.irq_per_s + c.softirq_total_per_s for cpu, c in r.per_cpu.items() if cpu in set(quiet_cpus(row)))


def busiest_cpu(row: FleetRow) -> float:
    """The IRQs per second (hard and soft) of the host's busiest CPU."""
    r = row.state.rates if row.state is not None else None
    if r is None or not r.per_cpu:
        return 0.0
    return max(c.irq_per_s + c.softirq_total_per_s for c in r.per_cpu.values())


def jitter_gaps(row: FleetRow) -> float:
    """Jitter gaps per second where a probe ran (or its p99 in ns over ssh), else 0."""
    p = row.probe or {}
    v = p.get("gaps_per_s", p.get("p99_ns"))
    return float(v) if isinstance(v, (int, float)) else 0.0


SORTS = {"quiet": ("IRQs on quiet CPUs", irq_on_quiet), "busiest": ("busiest CPU", busiest_cpu),
         "jitter": ("jitter gaps/s", jitter_gaps), "host": ("host name", None)}


def sort_rows(rows: Sequence[FleetRow], by: str) -> list[FleetRow]:
    """Hosts that answered, most telling first by `by` (a key of SORTS), then the ones that did not."""
    key = SORTS[by][1]
    if key is None:
        return sorted(rows, key=lambda r: r.host)
    return sorted(rows, key=lambda r: (not r.ok, -key(r) if r.ok else 0.0, r.host))


# -- what stands out -------------------------------------------------------------------------------------
def _key(label: str, text: str) -> str:
    """What is compared of a fact: irqbalance's pid differs on every host; whether it runs does not."""
    return text.split(" (pid", 1)[0] if label == "irqbalance" else text


def odd_cells(rows: Sequence[FleetRow]) -> dict[tuple[int, str], str]:
    """{(row index, column): why it stands out} over the reachable rows; columns are fact labels and
    "Jitter"."""
    ok = [(i, r) for i, r in enumerate(rows) if r.ok]
    out: dict[tuple[int, str], str] = {}
    if len(ok) < 2:
        return out
    for label in COMPARED:
        values = {i: _key(label, r.fact(label)) for i, r in ok}
        counts = Counter(values.values())
        if len(counts) < 2:
            continue
        (top, n), (_, m) = counts.most_common(2)
        norm = top if n > m else None
        for i, v in values.items():
            if v == norm:
                continue
            out[(i, label)] = (f"{counts[v]} of {len(ok)} hosts have this; {n} have {top!r}" if norm is not None
                               else f"no value is shared by most hosts ({len(counts)} differ among {len(ok)})")
    p99 = {i: r.probe.get("p99_ns") for i, r in ok if r.probe and isinstance(r.probe.get("p99_ns"), (int, float))}
    for i, v in p99.items():
        rest = [x for j, x in p99.items() if j != i]
        if rest and v > JITTER_ODD * statistics.median(rest):
            out[(i, "Jitter")] = f"p99 {format_ns(v)}: more than {JITTER_ODD:g}× the others' median " \
                                 f"{format_ns(statistics.median(rest))}"
    return out


# -- CSV and JSON ---------------------------------------------------------------------------------------
CSV_COLUMNS = ("host", "name", "status", "model", "shape", "core_kinds", "numa_nodes", "kernel", "isolcpus",
               "nohz_full", "irqbalance", "top_irq", "jitter", "irq_per_s", "softirq_per_s", "irq_time_pct",
               "busiest_cpu_per_s", "quiet_cpus", "irq_on_quiet_per_s", "stands_out", "seconds", "last_seen", "note")
# How CSV spells each figure (JSON gives it as a number, to 3 decimals); a figure not known is "" there, null here.
CSV_FIGURES = {"irq_per_s": ".1f", "softirq_per_s": ".1f", "irq_time_pct": ".2f", "busiest_cpu_per_s": ".1f",
               "irq_on_quiet_per_s": ".1f", "seconds": ".2f"}


def _sums(r: FleetRow) -> dict[str, float | None]:
    """The host's hard and soft IRQs per second over all CPUs and its mean share of time in IRQs."""
    rates = r.state.rates if r.state is not None else None
    if rates is None or not rates.per_cpu:
        return {"irq_per_s": None, "softirq_per_s": None, "irq_time_pct": None, "busiest_cpu_per_s": None,
                "irq_on_quiet_per_s": None}
    cs = rates.per_cpu.values()
    pct = [c.irq_softirq_pct for c in cs if c.irq_softirq_pct is not None]
    return {"irq_per_s": sum(c.irq_per_s for c in cs),
            "softirq_per_s": sum(c.softirq_total_per_s for c in cs) if any(c.softirq_per_s for c in cs) else None,
            "irq_time_pct": sum(pct) / len(pct) if pct else None,
            "busiest_cpu_per_s": busiest_cpu(r),
            "irq_on_quiet_per_s": irq_on_quiet(r) if quiet_cpus(r) else None}


def _records(rows: Sequence[FleetRow]) -> list[dict]:
    """One dict per host, in CSV_COLUMNS' order, each value of its own type: text, a figure (float, None
    when not known), the quiet CPUs (a list) and the columns in which it stands out from the others
    (a list)."""
    odd = odd_cells(rows)
    out = []
    for i, r in enumerate(rows):
        d = {"host": r.host, "name": r.name, "status": r.stale or ("ok" if r.ok else r.error),
             **{label.lower().replace(" ", "_"): r.fact(label) for label in FACTS},
             "top_irq": r.top_irq, "jitter": jitter_text(r.probe), **_sums(r),
             "quiet_cpus": list(quiet_cpus(r)) if r.ok else [],
             "stands_out": [col for (j, col) in odd if j == i], "seconds": r.seconds,
             "last_seen": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(r.seen)) if r.seen else None,
             "note": r.note}
        out.append({k: d[k] for k in CSV_COLUMNS})
    return out


def _csv_text(column: str, value) -> str:
    if value is None:
        return ""
    if column in CSV_FIGURES:
        return format(value, CSV_FIGURES[column])
    if column == "quiet_cpus":
        return format_cpus(value) if value else ""
    if column == "stands_out":
        return ";".join(value)
    return value


def csv_rows(rows: Sequence[FleetRow]) -> list[dict[str, str]]:
    """One dict of text per host for `coremap fleet --csv` (CSV_COLUMNS); `stands_out` names the columns
    in which it differs from the others, joined by ";"."""
    return [{k: _csv_text(k, v) for k, v in d.items()} for d in _records(rows)]


def json_rows(rows: Sequence[FleetRow]) -> list[dict]:
    """One object per host for `coremap fleet --json`: the CSV's columns, figures as numbers (3 decimals;
    null where not known), `quiet_cpus` and `stands_out` as lists, `jitter_figures` the probe's own
    numbers ({"cpu", "gaps_per_s", ...} or {"cpu", "error"}; null without one) beside the `jitter` text,
    and `per_cpu`: {CPU: {irq_per_s, softirq_per_s, irq_pct, softirq_pct}} (figures the source lacks are
    null)."""
    out = []
    for d, r in zip(_records(rows), rows):
        rates = r.state.rates if r.state is not None else None
        per = {}
        if rates is not None:
            for cpu, c in sorted(rates.per_cpu.items()):
                # A source without per-CPU softirq counts (node_exporter < 1.6) has none: null, not 0.
                soft = round(c.softirq_total_per_s, 3) if c.softirq_per_s else None
                per[str(cpu)] = {"irq_per_s": round(c.irq_per_s, 3), "softirq_per_s": soft,
                                 "irq_pct": _r(c.irq_pct), "softirq_pct": _r(c.softirq_pct)}
        figures = {k: _r(v) for k, v in d.items() if k in CSV_FIGURES}
        out.append({**d, **figures, "jitter_figures": dict(r.probe) if r.probe else None, "per_cpu": per})
    return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
