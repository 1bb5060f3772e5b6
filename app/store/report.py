"""Reports: one self-contained HTML file that says what a machine looks like, where its interrupts
land, which pins were made and what the probes measured. No Qt here: pictures (the topology grid,
probe plots) are rendered by widgets/report_images.py and handed in as bytes.

The HTML has no external reference at all: CSS is inline, images are data: URIs, there is no
script. It must open from a mail attachment on a machine without network. Everything that comes
from the measured machine (device names, the kernel command line, host names, notes) is escaped,
since a device or host name is text anyone with root on that machine chose.

The same HTML is what widgets/export.render_pdf lays out with QTextDocument, which understands a
subset of HTML 4 and CSS 2 (tables, inline styles, img): so tables, not flexbox. The CSS asks a
browser's print not to cut rows or part headings from what follows; QTextDocument ignores that, and
widgets/pdf_pages.py does it for the PDF.
"""
from __future__ import annotations

import base64
import datetime as _dt
import time
from dataclasses import dataclass, field

import app
from app.format import (cpus_word, format_change, format_count, format_cpus, format_ns, format_rate,
                        format_ratio, format_share, format_value, plural)
from app.errors import CoremapError, SysRootReadError
from app.machine.identity import kernel_of_cmdline, read_identity
from app.store.report_pins import PinLine, format_when, pin_lines
from app.store.report_probes import attribution_html, probes_html
from app.store.report_probes import escape as _e
from app.store.report_probes import img_tag as _img
from app.store.report_probes import seconds_text as _secs
from app.store.result_host import check_host
from app.sysroot import SysRoot

TOP_IRQS = 15
# QTextDocument ignores CSS max-width, so a PDF report sizes its pictures itself: A4 (210 mm) less
# 2 x 12 mm margins at 96 dpi is 703 px (widgets/export.pdf_bytes lays pages out at 96 dpi), less
# the body margin and table cell padding QTextDocument adds.
PDF_IMAGE_WIDTH = 640


@dataclass(frozen=True)
class Image:
    data: bytes
    mime: str                      # "image/png" or "image/svg+xml"
    width: int | None = None       # intrinsic size in pixels, when known (for <img width>)
    height: int | None = None

    def data_uri(self) -> str:
        return f"data:{self.mime};base64," + base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True)
class IrqLine:
    irq: str
    device: str                    # device/queue, e.g. "i40e eno1 TxRx-3 (0000:31:00.0)"
    rate: float                    # interrupts/s, or the count since boot when ReportData.totals
    top_cpus: tuple[tuple[int, float], ...]   # (cpu, share of this IRQ's count), busiest first
    requested: tuple[int, ...] | None
    effective: tuple[int, ...] | None


@dataclass
class ProbeSection:
    """One probe run of a report, rendered as handed in: this model does not know the probes.
    widgets/report_images.py fills `plot`, `caption` (what the plot shows) and `text` from the
    probe's record (probes/catalog.py). A section with `text` (the probe's own summary, for a probe
    whose figures are not latency percentiles) shows its plot, its verdict and that text, and stays
    out of the comparison; one without shows its plot, its `figures`, its percentiles and what ran
    in its gaps."""
    result: dict                   # the probe's result object (probe, cpu, percentiles, ...)
    plot: Image | None = None
    text: str = ""
    caption: str = ""
    # What the run's users read first, in order: (heading, value beside other runs, value in its own
    # table): a jitter run's longest gap, gaps per second (and per CPU-hour), time lost; and what its
    # percentiles are of (app/store/report_probes.py).
    figures: tuple[tuple[str, str, str], ...] = ()
    percentiles_of: str = ""
    # where the run was measured, when not simply on the report's machine (app/store/result_host.py):
    # another machine's name, host unknown, or another kernel
    host_note: str = ""

    @property
    def title(self) -> str:
        r = self.result
        if r.get("title"):
            return str(r["title"])
        cpu = r.get("cpu")
        return f"{r.get('probe', 'probe')} on CPU {cpu}" if cpu is not None else str(r.get("probe", "probe"))


@dataclass
class VerifySection:
    """A before / after verification of quiet CPUs (probes/verify.py) and the plot of both sides."""
    result: dict
    plot: Image | None = None

    @property
    def title(self) -> str:
        return f"Before / after: quiet {cpus_word(self.result.get('cpus') or [])}"


@dataclass
class ReportData:
    host: str
    source: str                              # "live", a root folder, or a session file
    created: str
    facts: list[tuple[str, str]]             # (label, value) for the machine summary
    cpu_count: int
    totals: bool                             # True: IRQ figures are counts since boot, not rates
    rate_note: str                           # how the IRQ figures were obtained
    irqs: list[IrqLine] = field(default_factory=list)
    pins: list[PinLine] = field(default_factory=list)
    probes: list[ProbeSection] = field(default_factory=list)
    notes: str = ""
    topology_image: Image | None = None
    comparison_plots: list[Image] = field(default_factory=list)   # the runs of each kind of axes compared
    topology: object = None                  # app.machine.topology.Topology, for renderers
    irq_load: dict[int, float] = field(default_factory=dict)   # cpu -> device IRQs/s (or count)
    extra_images: list[tuple[str, Image]] = field(default_factory=list)   # session screenshots
    verifications: list[VerifySection] = field(default_factory=list)
    pins_scope: str = ""                     # which pins the report holds (app/store/report_pins.py)
    machine: object = None                   # app.machine.identity.HostIdentity: what its probe runs are checked against


# -- building ReportData ---------------------------------------------------------------------------

def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")




def machine_facts(topology, root: SysRoot, irqbalance: str | None = None) -> list[tuple[str, str]]:
    """The machine summary rows: model, shape, NUMA, kernel, command line, isolation, irqbalance
    (`irqbalance` when the caller knows better than `root`: a live machine's capture holds no
    processes, but the window that took it saw them)."""
    t = topology
    facts: list[tuple[str, str]] = []
    facts.append(("Model", t.model_name or "unknown"))
    pkgs = len(t.packages) or 1
    n_cores = len(t.cores)
    tpc = t.threads_per_core
    threads = "-".join(map(str, (tpc[0], tpc[-1]))) if len(tpc) > 1 else (str(tpc[0]) if tpc else "?")
    per = plural(n_cores // pkgs, "core") if n_cores % pkgs == 0 else f"{n_cores / pkgs:.1f} cores"
    thr = f"{threads} thread{'' if threads == '1' else 's'}"
    shape = f"{plural(pkgs, 'socket')} × {per} × {thr} = {plural(len(t.online), 'CPU')} online"
    if t.offline:
        shape += f" ({len(t.offline)} offline: {format_cpus(t.offline)})"
    facts.append(("Shape", shape))
    if t.hybrid:
        kinds: dict[str, int] = {}
        for c in t.cpus:
            if c.online and c.kind:
                kinds[c.kind] = kinds.get(c.kind, 0) + 1
        facts.append(("Core kinds", ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))))
    nodes = [n for n in t.nodes if n.cpus]
    facts.append(("NUMA nodes", "; ".join(f"node {n.id}: {cpus_word(n.cpus)}" for n in nodes)
                  if nodes else "none reported"))
    facts.append(("Kernel", t.kernel_release or _kernel_from_cmdline(t.cmdline) or "unknown"))
    facts.append(("Command line", t.cmdline or "unknown (not captured)"))
    # What isolcpus= names (the file's list where the command line was not read), and whether the
    # scheduler still balances onto them (Topology.isolated holds only what it leaves alone).
    named = t.isolcpus or t.isolated
    iso = format_cpus(named) if named else "none"
    if named and t.isolcpus_flags:
        iso += f" (flags: {', '.join(t.isolcpus_flags)})"
    if named and not t.isolated:
        iso += ", not isolated from the scheduler (no domain flag)"
    facts.append(("isolcpus", iso))
    facts.append(("nohz_full", format_cpus(t.nohz_full) if t.nohz_full else "none"))
    facts.append(("irqbalance", irqbalance or irqbalance_fact(root)))
    return facts


def _kernel_from_cmdline(cmdline: str | None) -> str | None:
    """A capture without proc/version or osrelease often still names its kernel image (read by
    app/machine/identity.py kernel_of_cmdline). Said so, since it is the image booted, read off a path."""
    release = kernel_of_cmdline(cmdline)
    return f"{release} (from BOOT_IMAGE on the command line)" if release else None


def irqbalance_fact(root: SysRoot) -> str:
    """Whether irqbalance runs on `root` (its pid, the CPUs and IRQs it is told to leave alone), or
    why that cannot be told."""
    from app.machine.irqbalance import read_irqbalance
    has_processes = root.is_live or any(n.isdigit() for n in root.listdir(root.proc()))
    if not has_processes:
        # A capture without proc/PID cannot say; "not running" would be a guess shown as a fact.
        return "unknown (the capture holds no process list)"
    try:
        st = read_irqbalance(root)
    except CoremapError as e:
        return f"unknown ({e})"
    if not st.running:
        return "not running"
    s = f"running (pid {st.pid})" if st.pid is not None else "running"
    if st.banned_cpus:
        s += f"; banned {cpus_word(st.banned_cpus)}"
    if st.banned_irqs:
        s += f"; banned IRQs {', '.join(map(str, st.banned_irqs))}"
    return s + ": it may move pinned IRQs back"


def _irq_figures(root: SysRoot, history: list[dict] | None, live_wait: float):
    """({irq: per-CPU dict}, totals?, note): rates from the session history, else from the
    snapshot's second capture, else (live) two reads `live_wait` apart, else counts since boot."""
    from app.machine.sample import read_sample, read_snapshot_pair
    from app.sampling.rates import rates, totals
    if history:
        acc: dict[str, dict[int, float]] = {}
        n = 0
        for tick in history:
            if "irq" not in tick and "cpu" not in tick:
                continue
            n += 1
            for irq, per in tick.get("irq", {}).items():
                d = acc.setdefault(str(irq), {})
                for c, v in per.items():
                    d[int(c)] = d.get(int(c), 0.0) + float(v)
        if n:
            return ({i: {c: v / n for c, v in per.items()} for i, per in acc.items()}, False,
                    f"mean rates over the {n} sampled ticks the session recorded")
    pair = read_snapshot_pair(root)
    if pair is None and root.is_live and live_wait > 0:
        first = read_sample(root, tasks=False)
        time.sleep(live_wait)
        pair = (first, read_sample(root, tasks=False))
    if pair is not None:
        first, second = pair
        secs = second.time - first.time
        if secs > 0 and first.interrupts is not None and second.interrupts is not None:
            r = rates(first, second, secs)
            return ({i: dict(zip(r.cpus, ir.per_cpu)) for i, ir in r.irqs.items() if ir.per_cpu}, False,
                    f"rates over {secs:.2f} s between two captures")
    try:
        sample = read_sample(root, tasks=False)
    except SysRootReadError as e:
        return {}, True, f"no interrupt counts ({e})"
    if sample.interrupts is None:
        return {}, True, "no interrupt counts: the capture holds no proc/interrupts"
    tot = totals(sample)
    return ({i: dict(zip(tot.cpus, it.per_cpu)) for i, it in tot.irqs.items() if it.per_cpu}, True,
            "one capture only: totals, not rates (interrupt counts since boot)")


def _irq_lines(root: SysRoot, figures: dict[str, dict[int, float]], top: int) -> tuple[list[IrqLine], dict[int, float]]:
    from app.machine.interrupts import read_irqs
    try:
        table = read_irqs(root)
    except SysRootReadError:
        table = None
    load: dict[int, float] = {}
    lines = []
    for irq, per in figures.items():
        if not irq.isdigit():
            continue          # LOC, NMI, IPIs: no device and no affinity to show or pin
        for c, v in per.items():
            load[c] = load.get(c, 0.0) + v
        total = sum(per.values())
        if total <= 0:
            continue
        ranked = sorted(((c, v / total) for c, v in per.items() if v > 0), key=lambda x: -x[1])[:3]
        info = table.info.get(irq) if table is not None else None
        row = table.row(irq) if table is not None else None
        device = (info.device.description if info is not None and info.device is not None else "") or \
                 (row.name if row is not None else "")
        lines.append(IrqLine(irq, device, total, tuple(ranked),
                             info.requested if info else None, info.effective if info else None))
    lines.sort(key=lambda l: (-l.rate, int(l.irq)))
    return lines[:top], load


def report_from_root(root: SysRoot, *, journal: list[dict] | None = None, probes: list[dict] | None = None,
                     notes: str = "", history: list[dict] | None = None, source: str | None = None,
                     host: str | None = None, top_irqs: int = TOP_IRQS, live_wait: float = 0.5,
                     verifications: list[dict] | None = None, irqbalance: str | None = None,
                     pins_scope: str = "") -> ReportData:
    """ReportData for a machine (live or captured) plus optional pin journal rows and probe results.
    `source` names where the figures came from when `root` is only a snapshot taken for the report
    (the live machine's), `irqbalance` says what the window saw (machine_facts), and `pins_scope`
    which of the journal's rows `journal` holds (app/store/report_pins.py pin_scope)."""
    from app.machine.topology import read_topology
    topo = read_topology(root)
    figures, is_totals, note = _irq_figures(root, history, live_wait)
    irqs, load = _irq_lines(root, figures, top_irqs)
    machine = read_identity(root, topo, name=host)
    return ReportData(
        host=machine.name, source=source or ("live" if root.is_live else str(root.root)), created=_now_iso(),
        facts=machine_facts(topo, root, irqbalance), cpu_count=len(topo.online), totals=is_totals, rate_note=note,
        irqs=irqs, pins=pin_lines(journal or []), probes=probe_sections(probes or [], machine),
        notes=notes, topology=topo, irq_load=load,
        verifications=[VerifySection(dict(v)) for v in (verifications or [])], pins_scope=pins_scope,
        machine=machine)


def probe_sections(results: list[dict], machine) -> list[ProbeSection]:
    """A section per probe result, each saying where it was measured when that was not simply on
    `machine` (app/store/result_host.py check_host: a run of another machine is shown under its own
    name; a door that refuses such runs, the CLI's, has refused them before this)."""
    return [ProbeSection(dict(p), host_note=check_host(p, machine).note()) for p in results]


def report_from_session(session, *, since: float | None = None) -> ReportData:
    """ReportData for an opened app.store.session.Session: its machine, history, pins (those written
    `since`, epoch seconds, when given), probes, notes."""
    journal, scope = session.journal, ""
    if since is not None:
        journal = [r for r in journal if isinstance(r.get("time"), (int, float)) and r["time"] >= since]
        scope = f"Pins made since {format_when(since)}"
        if len(journal) < len(session.journal):
            scope += f"; {plural(len(session.journal) - len(journal), 'earlier row')} of the session left out"
        scope += "."
    data = report_from_root(session.root, journal=journal, probes=[p.result for p in session.probes],
                            notes=session.notes, history=session.history,
                            source=str(session.source) if session.source else None,
                            host=session.host or None, live_wait=0, verifications=session.verifications,
                            pins_scope=scope)
    for name, blob in sorted(session.screenshots.items()):
        if name.endswith(".png"):
            data.extra_images.append((name, Image(blob, "image/png")))
        elif name.endswith(".svg"):
            data.extra_images.append((name, Image(blob, "image/svg+xml")))
    return data


# -- HTML ------------------------------------------------------------------------------------------

_CSS = """
body { font-family: 'DejaVu Sans', Arial, sans-serif; font-size: 10pt; color: #1d2430; margin: 18px; }
h1 { font-size: 17pt; margin: 0 0 4px 0; }
h2 { font-size: 13pt; margin: 18px 0 6px 0; border-bottom: 1px solid #b8c2d0; }
h3 { font-size: 11pt; margin: 12px 0 4px 0; }
table { border-collapse: collapse; margin: 4px 0 8px 0; }
th, td { border: 1px solid #c9d1dc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #e8edf3; }
td.num { text-align: right; font-family: 'DejaVu Sans Mono', monospace; }
.mono { font-family: 'DejaVu Sans Mono', monospace; }
.muted { color: #5a6573; }
.warn { color: #8a4b00; }
.notes { white-space: pre-wrap; font-family: 'DejaVu Sans Mono', monospace; background: #f5f7fa; padding: 6px; }
.probe-text { white-space: pre-wrap; font-family: 'DejaVu Sans Mono', monospace; font-size: 7pt; background: #f5f7fa; padding: 6px; overflow-x: auto; }
img { max-width: 100%; }
tr { page-break-inside: avoid; }
h1, h2, h3 { page-break-after: avoid; }
"""


def fmt_rate(v: float, totals: bool) -> str:
    return format_count(int(round(v))) if totals else format_rate(v)




def build_report_html(report: ReportData, *, image_width: int = 900) -> str:
    """The whole report as one self-contained HTML document (see module docstring): one section
    after the other, each written by its own function into the same list of lines."""
    r = report
    out: list[str] = []
    w = out.append
    w("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
    w(f"<title>coremap report: {_e(r.host)}</title>")
    w(f"<style>{_CSS}</style></head><body>")
    w(f"<h1>coremap report: {_e(r.host)}</h1>")
    w(f'<p class="muted">Source: <span class="mono">{_e(r.source)}</span> · written {_e(r.created)} '
      f"by coremap {_e(app.__version__)}</p>")
    _machine_html(w, r)
    _topology_html(w, r, image_width)
    _irqs_html(w, r)
    _pins_html(w, r)
    probes_html(w, r.probes, r.comparison_plots, image_width)
    for v in r.verifications:
        _verify_html(w, v, image_width)
    if r.extra_images:
        w("<h2>Screenshots</h2>")
        for name, img in r.extra_images:
            w(f"<h3>{_e(name)}</h3><p>{_img(img, name, min(image_width, img.width or image_width))}</p>")
    w("<h2>Notes</h2>")
    if r.notes.strip():
        w(f'<div class="notes">{_e(r.notes)}</div>')
    else:
        w('<p class="muted">No notes.</p>')
    w("</body></html>\n")
    return "\n".join(out)


def _machine_html(w, r: ReportData) -> None:
    w("<h2>Machine</h2><table>")
    for label, value in r.facts:
        cls = ' class="mono"' if label == "Command line" else ""
        w(f"<tr><th>{_e(label)}</th><td{cls}>{_e(value)}</td></tr>")
    w("</table>")


def _topology_html(w, r: ReportData, image_width: int) -> None:
    w("<h2>Topology, coloured by IRQ load</h2>")
    if r.totals:
        w(f'<p class="warn">{_e(r.rate_note)}.</p>')
    else:
        w(f'<p class="muted">{_e(r.rate_note)}.</p>')
    if r.topology_image is not None:
        w(f"<p>{_img(r.topology_image, 'topology grid coloured by IRQ load', min(image_width, r.topology_image.width or image_width))}</p>")
    else:
        w('<p class="muted">No picture of the grid in this report.</p>')


def _irqs_html(w, r: ReportData) -> None:
    unit = "count since boot" if r.totals else "rate"
    w("<h2>Busiest IRQs</h2>")
    if not r.irqs:
        w('<p class="muted">No device interrupts in this capture.</p>' if r.totals else
          f'<p class="muted">No device interrupt fired while the rates were measured ({_e(r.rate_note)}).</p>')
        return
    w(f"<table><tr><th>IRQ</th><th>Device / queue</th><th>{_e(unit.capitalize())}</th>"
      "<th>Top CPUs (share)</th><th>Requested → effective</th></tr>")
    for l in r.irqs:
        tops = ", ".join(f"{c} ({_share(s)})" for c, s in l.top_cpus)
        w(f'<tr><td class="num">{_e(l.irq)}</td><td>{_e(l.device or "–")}</td>'
          f'<td class="num">{_e(fmt_rate(l.rate, r.totals))}</td><td>{_e(tops)}</td>'
          f'<td class="mono">{_e(format_change(l.requested, l.effective))}</td></tr>')
    w("</table>")


def _pins_html(w, r: ReportData) -> None:
    w("<h2>Pins made</h2>")
    if r.pins_scope:
        w(f'<p class="muted">{_e(r.pins_scope)}</p>')
    if not r.pins:
        w('<p class="muted">No pins were made.</p>')
        return
    w("<table><tr><th>Target</th><th>Before → after</th><th>Requested</th><th>Result</th><th>When</th></tr>")
    for p in r.pins:
        change = f"<td>{_e(p.change)}</td>" if p.change else \
            f'<td class="mono">{_e(format_change(p.before, p.after, p.kind))}</td>'
        w(f'<tr><td>{_e(p.target)}</td>{change}'
          f'<td class="mono">{_e(format_value(p.kind, p.requested))}</td><td>{_e(p.result)}</td>'
          f"<td>{_e(format_when(p.time))}</td></tr>")
    w("</table>")


def _verify_html(w, section: VerifySection, image_width: int) -> None:
    """One "before / after" section: the two sides' figures, their ratio, both histograms, each run,
    what the isolate and include moved, and the attribution of each side's gaps where it was traced."""
    v = section.result
    ratio = v.get("ratio") or {}
    w(f"<h2>{_e(section.title)}</h2>")
    w(f'<p class="muted">The jitter probe for {_e(_secs(v.get("seconds")))} a run on {_e(cpus_word(v["cpus"]))}, '
      f'not quiet and quiet in {v["pairs"]} alternated pair{"s" if v["pairs"] != 1 else ""}; the quiet state '
      "was toggled between runs (isolate and include).</p>")
    w("<table><tr><th></th><th>Gaps &ge; 10 µs per second</th><th>Time lost in gaps &ge; 2 µs</th>"
      "<th>Longest gap</th><th>Runs</th></tr>")
    for side in (v["before"], v["after"]):
        pct = side.get("percentiles") or {}
        w(f'<tr><th>{_e(side.get("label", ""))}</th><td class="num">{_e(format_rate(side["gaps10_per_s"]))}</td>'
          f'<td class="num">{_e(format_share(side["lost_share"]))}</td><td class="num">{_e(format_ns(pct.get("max")))}</td>'
          f'<td class="num">{_e(side.get("runs", ""))}</td></tr>')
    w(f'<tr><th>after / before</th><td class="num">{_e(format_ratio(ratio.get("gaps10_per_s")))}</td>'
      f'<td class="num">{_e(format_ratio(ratio.get("lost_share")))}</td><td colspan="2" class="muted">'
      "median of the per-pair ratios</td></tr></table>")
    if section.plot is not None:
        w(f"<p>{_img(section.plot, 'gap lengths before and after', min(image_width, section.plot.width or image_width))}</p>")
    w("<table><tr><th>Pair</th><th>CPU</th><th>State</th><th>Gaps &ge; 10 µs/s</th><th>Time lost</th></tr>")
    for run in v["runs"]:
        w(f'<tr><td class="num">{run["pair"] + 1}</td><td class="num">{_e(run.get("cpu"))}</td>'
          f'<td>{"quiet" if run["quiet"] else "not quiet"}</td><td class="num">{_e(format_rate(run["gaps10_per_s"]))}</td>'
          f'<td class="num">{_e(format_share(run["lost_share"]))}</td></tr>')
    w("</table>")
    for action, sentence in sorted((v.get("outcomes") or {}).items()):
        w(f'<p class="muted">{_e(sentence)}</p>')
    for side in (v["before"], v["after"]):
        if side.get("attribution") is not None:
            w(f"<h3>What ran in the gaps: {_e(side.get('label', ''))}</h3>")
            attribution_html(w, side["attribution"])


def _share(s: float) -> str:
    return "<1%" if 0 < s < 0.005 else f"{s:.0%}"
