"""`coremap cpus [--root DIR] [--seconds S] [--json]`: each CPU over S seconds (default 1): hard and
soft interrupts per second, busy %, the share of time in each cpuidle state and in states deeper than
the shallowest sleep, and the current frequency (issue 22).

Quiet CPUs (made quiet by coremap, the journal says; isolated; nohz_full) are marked, and one that
sleeps deep half the time or more is named: a latency-critical CPU pays its deep state's exit latency
on every interrupt that wakes it, and should not sleep deep (hold /dev/cpu_dma_latency, as the wakeup
probe does, or limit its idle states). A capture gives its two captures' rates, or with one, its
frequency only.
"""
from __future__ import annotations

import sys
import time

from app.cli.common import add_command, bounded, opened_host, write_json
from app.format import format_compact, format_cpus, format_percent, format_rate

DEEP_NOTE = "sleeps deep: a latency-critical CPU should not (its wakeups pay the deep state's exit latency)"


def register(subparsers) -> None:
    p = add_command(subparsers, "cpus", "per CPU: IRQs, softirqs, busy %%, idle states, frequency",
                    "Per CPU over --seconds: hard and soft interrupts per second, busy %, the share of time "
                    "in each cpuidle state and in states deeper than the shallowest sleep, and the current "
                    "frequency (scaling_cur_freq, or APERF/MPERF where readable). Quiet CPUs that sleep deep "
                    "are named.")
    p.add_argument("--seconds", type=bounded(0.1, 3600), default=1.0, metavar="S",
                   help="how long to measure (default 1)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--pretty", action="store_true", help="with --json: indented for reading")
    p.set_defaults(func=run)


def run(args) -> int:
    with opened_host(args) as host:
        figures = measure(host, args.seconds)
    if args.json:
        write_json(figures, args, out=sys.stdout)
    else:
        sys.stdout.write(format_text(figures))
    return 0


def measure(host, seconds: float) -> dict:
    """What the command prints about `host` (app/host.py), as one JSON-able object."""
    # imported here: every `coremap` run builds the parser, and only this command samples
    from app.machine.sample import read_sample
    from app.machine.topology import read_topology
    from app.sampling.cpu_power import DEEP_SLEEP, PowerReader
    from app.sampling.rates import rates as compute_rates
    root = host.root
    topo = read_topology(root)
    quiet = quiet_kinds(root, topo, _coremap_quiet(host) if root.is_live else ())
    power_reader = PowerReader(root, topo.online, msr_cpus=[c for c in topo.online if c not in quiet])
    if root.is_live:
        power_reader.tick()
        first = read_sample(root, tasks=False)
        time.sleep(seconds)
        second = read_sample(root, tasks=False)
        rates = compute_rates(first, second, second.time - first.time)
        power = power_reader.tick(now_due=True)
        seconds = second.time - first.time
    else:
        state = host.sampler.tick()
        rates, power = state.rates, power_reader.tick()
        seconds = rates.seconds if rates is not None else 0.0
    names = list(dict.fromkeys(n for i in power.idle.values() for n, _ in i.shares))
    rows = []
    for cpu in topo.online:
        r = rates.per_cpu.get(cpu) if rates is not None else None
        idle = power.idle.get(cpu)
        rows.append({"cpu": cpu, "irq_per_s": r.irq_per_s if r else None,
                     "softirq_per_s": r.softirq_total_per_s if r else None, "busy_pct": r.busy_pct if r else None,
                     "mhz": power.mhz.get(cpu), "idle": dict(idle.shares) if idle else None,
                     "deep_share": idle.deep_share if idle else None, "quiet": quiet.get(cpu),
                     "sleeps_deep": bool(quiet.get(cpu)) and idle is not None and (idle.deep_share or 0) >= DEEP_SLEEP})
    return {"host": topo.hostname, "seconds": seconds, "rates": rates is not None, "idle_states": names,
            "mhz_source": power.mhz_source or None, "idle_why": power.idle_why or None,
            "mhz_why": power.mhz_why or None, "cpus": rows}


def quiet_kinds(root, topo, made_quiet=()) -> dict[int, str]:
    """{cpu: why it is quiet}: coremap made it quiet (`made_quiet`: the journal of this machine says), or
    the kernel keeps the scheduler off it (isolcpus with domain) or runs it nohz_full, named by every
    isolation flag that applies ("managed_irq, nohz_full"; Topology.isolation_of)."""
    from app.machine.topology import isolation_label     # measure's read_topology imported it already
    out = {}
    for c in topo.online:
        flags = topo.isolation_of(c)
        if "domain" in flags or "nohz_full" in flags:
            out[c] = isolation_label(flags)
    out.update({c: "coremap" for c in made_quiet})
    return out


def _coremap_quiet(host) -> tuple[int, ...]:
    from app.errors import CoremapError
    try:
        return host.open_pins(dry_run=True).ledger().quiet_cpus
    except (CoremapError, OSError):
        return ()       # no journal (nothing was ever pinned here), or not readable: nothing made quiet


def format_text(f: dict) -> str:
    names = f["idle_states"]
    head = f"{'CPU':>5}{'IRQ/s':>10}{'softirq/s':>11}{'busy':>7}{'MHz':>8}" + "".join(f"{n[:7]:>8}" for n in names)
    head += f"{'deep':>7}  quiet" if names else "  quiet"
    lines = [f"per CPU over {f['seconds']:.2f} s" if f["rates"] else "one capture: no rates", head]
    for r in f["cpus"]:
        idle = r["idle"] or {}
        line = (f"{r['cpu']:>5}{_rate(r['irq_per_s']):>10}{_rate(r['softirq_per_s']):>11}"
                f"{_pct(r['busy_pct']):>7}{_mhz(r['mhz']):>8}"
                + "".join(f"{_pct(100 * idle[n]) if n in idle else '-':>8}" for n in names)
                + (f"{_pct(100 * r['deep_share']) if r['deep_share'] is not None else '-':>7}" if names else "")
                + f"  {r['quiet'] or ''}")
        lines.append(line.rstrip() + ("  " + DEEP_NOTE if r["sleeps_deep"] else ""))
    if f["idle_why"]:
        lines.append(f"idle states: {f['idle_why']}")
    elif names:
        lines.append("deep: the time in states deeper than the shallowest sleep (POLL is a busy loop, not a sleep)")
    lines.append(f"frequency: {f['mhz_source']}" if f["mhz_source"] else f"frequency: {f['mhz_why']}")
    deep = [r["cpu"] for r in f["cpus"] if r["sleeps_deep"]]
    if deep:
        lines.append(f"quiet CPUs {format_cpus(deep)} sleep deep; where their wakeups matter, keep them out of deep "
                     "idle states (isolate --pm-qos), hold /dev/cpu_dma_latency (isolate --force-latency, held while "
                     "coremap guard runs) or limit their idle states (cpuidle stateN/disable)")
    return "\n".join(lines) + "\n"


def _rate(v) -> str:
    return "-" if v is None else format_rate(v).removesuffix("/s")


def _pct(v) -> str:
    return "-" if v is None else format_percent(v)


def _mhz(v) -> str:
    return "-" if v is None else format_compact(v) if v >= 10_000 else f"{v:,.0f}"
