"""What only coremap knows, as a text file for node_exporter's textfile collector, so it shows in the
dashboards a team already has (and in `coremap fleet --prometheus`, which reads it back).

The file is the Prometheus text exposition format that node_exporter's textfile collector parses, and also
valid OpenMetrics (gauges only, HELP and TYPE for each family, `# EOF` last, which the text format reads as
a comment). It is written atomically (app/atomic.py: a reader sees the old file or the new one), as the
collector's documentation asks. Metric names:

- `coremap_irq_affinity_info{irq, device, requested, effective}` 1: each numbered IRQ's requested mask
  (smp_affinity_list) and where the interrupt controller delivers it (effective_affinity_list), as CPU
  lists in labels ("" where the kernel does not say): one series per IRQ, however many CPUs.
- `coremap_cpu_quiet{cpu}` 1: each CPU coremap made quiet (an isolate in effect in the pin journal).
- `coremap_guard_pin_info{kind, target, label, cpus}` 1: each pin in effect, which the guard keeps.
- `coremap_jitter_gaps_per_second{cpu}`: gaps at least `coremap_jitter_gap_threshold_seconds{cpu}` long
  per second of sampled time, from the newest jitter result given for that CPU (`coremap probe jitter
  --json`).
- `coremap_export_timestamp_seconds`: when the file was written.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from app.atomic import write_atomic
from app.errors import CoremapError
from app.format import format_cpus
from app.inputs import read_input
from app.parse.cpulist import format_cpulist
from app.parse.json_text import JsonInputError, load_json
from app.store.result_host import OTHER, UNKNOWN, check_host
from app.store.results import results_in

MAX_RESULT_BYTES = 64 * 1024 ** 2


class ExportError(CoremapError):
    """An export that cannot be written, or a result file that cannot be read."""


@dataclass
class Exported:
    """What goes into the file; `notes` says what was left out and why."""
    irqs: list[tuple[str, str, tuple[int, ...] | None, tuple[int, ...] | None]] = field(default_factory=list)
    quiet: tuple[int, ...] = ()
    pins: list[tuple[str, str, str, tuple[int, ...]]] = field(default_factory=list)
    gaps: dict[int, tuple[float, float]] = field(default_factory=dict)    # cpu -> (gaps/s, threshold s)
    notes: list[str] = field(default_factory=list)


def _label(v: str) -> str:
    """A label value as the text format escapes it: backslash, double quote and line feed."""
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _cpus(cpus) -> str:
    return "" if cpus is None else format_cpulist(cpus)


def render(e: Exported, now: float | None = None) -> str:
    out: list[str] = []

    def family(name: str, help_: str, rows: list[tuple[dict, float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        for labels, v in rows:
            lab = ",".join(f'{k}="{_label(x)}"' for k, x in labels.items())
            # The shortest text that reads back as the same float: every digit of a timestamp, "1" for a flag.
            num = str(int(v)) if float(v).is_integer() and abs(v) < 2 ** 53 else repr(float(v))
            out.append(f"{name}{{{lab}}} {num}" if lab else f"{name} {num}")
    family("coremap_irq_affinity_info", "IRQ requested (smp_affinity_list) and effective CPUs, as CPU lists",
           [({"irq": irq, "device": dev, "requested": _cpus(req), "effective": _cpus(eff)}, 1)
            for irq, dev, req, eff in e.irqs])
    family("coremap_cpu_quiet", "CPUs coremap made quiet (an isolate in effect)", [({"cpu": str(c)}, 1) for c in e.quiet])
    family("coremap_guard_pin_info", "pins in effect, kept by coremap's guard",
           [({"kind": k, "target": t, "label": lab, "cpus": _cpus(c)}, 1) for k, t, lab, c in e.pins])
    family("coremap_jitter_gaps_per_second", "jitter probe gaps per second of sampled time",
           [({"cpu": str(c)}, g) for c, (g, _t) in sorted(e.gaps.items())])
    family("coremap_jitter_gap_threshold_seconds", "shortest gap the jitter figure counts",
           [({"cpu": str(c)}, t) for c, (_g, t) in sorted(e.gaps.items())])
    family("coremap_export_timestamp_seconds", "when coremap wrote this file",
           [({}, round(time.time() if now is None else now, 3))])
    out.append("# EOF")
    return "\n".join(out) + "\n"


def gather(root, *, journal=None, results: list[str] = (), any_host: bool = False, check_result=None) -> Exported:
    """What `root` (a SysRoot) and the pin journal say, and the jitter results given, each as
    `check_result` keeps it (probes/results.py check_result: probes/ sits above this module): ExportError
    for one measured on another machine, unless `any_host` (app/store/result_host.py: a series carries
    no machine's name, and would be scraped as this one's)."""
    from app.machine.interrupts import read_irqs
    e = Exported()
    table = read_irqs(root)
    for irq, info in sorted(table.info.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 1 << 30):
        dev = info.device.description if info.device is not None else (table.row(irq).name if table.row(irq) else "")
        e.irqs.append((irq, dev[:200], info.requested, info.effective))
    if journal is not None:
        from app.pinning.ledger import ledger_of
        ledger = ledger_of(journal.entries(), journal.quiet_events(), str(root.root.resolve()))
        e.quiet = tuple(sorted(ledger.quiet_cpus))
        for entry in ledger.pinned.values():
            target = f"{entry.kind} {entry.target_id}" + (f" ({entry.netdev})" if entry.netdev else "")
            e.pins.append((entry.kind, target, entry.label[:120], tuple(entry.after or entry.requested)))
    if results:
        from app.machine.identity import read_identity
        machine = read_identity(root)
        for path in results:
            _add_result(e, path, machine, any_host, check_result)
    return e


def _add_result(e: Exported, path: str, machine, any_host: bool, check_result) -> None:
    data = read_input(path, what="jitter result", limit=MAX_RESULT_BYTES,
                      hint="give the file `coremap probe jitter --json` wrote")
    try:
        obj = load_json(data, what=path, limit=MAX_RESULT_BYTES)
    except JsonInputError as e:
        raise ExportError(f"{e}; give the file `coremap probe jitter --json` wrote") from None
    for i, raw in enumerate(results_in(obj)):
        # A "gaps" out of its definition (the per-length table of older versions, a 400-digit count that
        # overflowed count / secs: issue 32) is left out by the check, with the rest of the result.
        r, _notes = check_result(raw, f"{path} result {i + 1}")
        if r is None or r.get("probe") != "jitter" or not isinstance(r.get("cpu"), int):
            e.notes.append(f"{path}: result {i + 1} is not a jitter run on one CPU; left out")
            continue
        gaps, secs = r.get("gaps"), r.get("sampled_seconds")
        if gaps is None or not secs:
            e.notes.append(f"{path}: result {i + 1} (CPU {r['cpu']}) has no gap count and sampled time; left out")
            continue
        host = check_host(r, machine)
        if host.kind == OTHER and not any_host:
            raise ExportError(host.refusal(f"--jitter {path}", "export it on that machine"))
        if host.kind in (OTHER, UNKNOWN):
            what = f"{path} result {i + 1} (CPU {r['cpu']})"
            e.notes.append(f"{host.note(what)}; included")
        e.gaps[r["cpu"]] = (gaps["count"] / secs, gaps["from_ns"] / 1e9)


def write(path: str | Path, e: Exported) -> str:
    """Write the file atomically; the text written."""
    p = Path(path)
    if p.suffix != ".prom":
        raise ExportError(f"--textfile {path}: name a .prom file; node_exporter's textfile collector reads only those")
    text = render(e)
    write_atomic(p, text.encode("utf-8"), mode=0o644)
    return text


def summary(e: Exported) -> str:
    parts = [f"{len(e.irqs)} IRQs", f"quiet CPUs {format_cpus(e.quiet)}" if e.quiet else "no quiet CPUs",
             f"{len(e.pins)} pins", f"jitter on {format_cpus(e.gaps)}" if e.gaps else "no jitter result"]
    return ", ".join(parts)
