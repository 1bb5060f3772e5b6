"""The probe sections of a report (app/store/report.py builds the rest), and the HTML spellings every
section uses: escaped text, a data: URI picture, seconds and shares.

A section is rendered as handed in: this model does not know the probes. widgets/report_images.py
fills a ProbeSection from the probe's record (probes/catalog.py): its picture and caption, and for a
run with a histogram the figures its users read first (a jitter run: its longest gap, gaps per second
and per CPU-hour at 2, 10, 100 µs and 1 ms, the time lost; a wakeup run: its latest wakeup) and what
its percentiles are of (gap lengths, not every read; wakeup latencies). Runs with figures are compared
side by side, those figures leading, then their percentiles.
"""
from __future__ import annotations

from app.format import format_ns, printable

PERCENTILE_KEYS = ("p50", "p90", "p99", "p99.9", "max")


def escape(x) -> str:
    """Text in a report, the one way (app/format.py printable): HTML-escaped, and control characters
    and bidi overrides from a machine's names escaped too (html.escape keeps them)."""
    return printable(x, html=True)


def img_tag(image, alt: str, width: int | None = None) -> str:
    """An <img> of an app.store.report.Image (its data: URI), `width` pixels wide or its own."""
    w = width or image.width
    wa = f' width="{int(w)}"' if w else ""
    return f'<img src="{image.data_uri()}" alt="{escape(alt)}"{wa}>'


def seconds_text(v) -> str:
    return "–" if v is None else f"{float(v):.2f} s"


def percent_text(v) -> str:
    return "–" if v is None else f"{float(v):.1%}"


def _fit(image, image_width: int) -> int:
    return min(image_width, image.width or image_width)


def probes_html(w, probes: list, comparison_plots: list, image_width: int) -> None:
    """The runs side by side (when more than one has figures), then each run with its plot and gaps.
    `probes`: app.store.report.ProbeSection, in the report's order; `comparison_plots`: a picture of the
    runs of each kind of axes (jitter's gaps, wakeup's latencies)."""
    w("<h2>Probes</h2>")
    if not probes:
        w('<p class="muted">No probe was run.</p>')
        return
    compared = [(i, p) for i, p in enumerate(probes, 1) if not p.text]    # a section with text shows it instead
    if len(compared) > 1:
        _side_by_side(w, compared, comparison_plots, image_width)
    for i, p in enumerate(probes, 1):
        _probe_run_html(w, i, p, image_width)


def _side_by_side(w, compared, comparison_plots: list, image_width: int) -> None:
    w("<h3>Runs side by side</h3>")
    for plot in comparison_plots:
        w(f"<p>{img_tag(plot, 'probe runs compared', _fit(plot, image_width))}</p>")
    # every figure heading any run has, in the order they first come; then the percentiles
    heads = list(dict.fromkeys(h for _, p in compared for h, *_ in p.figures))
    keys = [k for k in PERCENTILE_KEYS if k not in heads and k != "p90"]     # the table fits an A4 page
    w("<table><tr><th>Run</th>" + "".join(f"<th>{escape(h)}</th>" for h in heads + keys) + "<th>Sampled</th></tr>")
    for i, p in compared:
        figures = {h: short for h, short, _long in p.figures}
        pct = p.result.get("percentiles") or {}
        w(f"<tr><td>{i}. {escape(p.title)}</td>"
          + "".join(f'<td class="num">{escape(figures.get(h, "–"))}</td>' for h in heads)
          + "".join(f'<td class="num">{escape(format_ns(pct.get(k)))}</td>' for k in keys)
          + f'<td class="num">{escape(seconds_text(p.result.get("sampled_seconds")))}</td></tr>')
    w("</table>")
    for i, p in compared:
        if p.host_note:         # a run of another machine, or of no known one, beside this one's
            w(f'<p class="warn">Run {i}: {escape(p.host_note)}.</p>')
    of = {p.percentiles_of for _, p in compared if p.percentiles_of}
    if of:
        w(f'<p class="muted">Percentiles are of the {escape(" or ".join(sorted(of)))}.</p>')


def _probe_run_html(w, i: int, p, image_width: int) -> None:
    res = p.result
    w(f"<h3>{i}. {escape(p.title)}</h3>")
    if p.host_note:
        # the run under its own machine (app/store/result_host.py): "Measured on vm (Xeon, 6.18.44), not on ..."
        w(f'<p class="warn">{escape(p.host_note[:1].upper() + p.host_note[1:])}.</p>')
    bits = []
    if res.get("loop_ns") is not None:
        bits.append(f"loop {float(res['loop_ns']):.1f} ns")
    if res.get("sampled_seconds") is not None:
        bits.append(f"sampled {seconds_text(res['sampled_seconds'])}")
    if res.get("achieved_duty") is not None:
        bits.append(f"duty {percent_text(res['achieved_duty'])}")
    if bits:
        w(f'<p class="muted">{escape(" · ".join(bits))}</p>')
    if p.plot is not None:
        w(f"<p>{img_tag(p.plot, p.caption or 'probe plot', _fit(p.plot, image_width))}</p>")
    if p.text:
        if res.get("verdict"):
            w(f"<p><b>{escape(res['verdict'])}</b></p>")
        w(f'<div class="probe-text">{escape(p.text)}</div>')
        return
    if p.figures:
        w("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h, *_ in p.figures) + "</tr><tr>"
          + "".join(f'<td class="num">{escape(long).replace(chr(10), "<br>")}</td>' for _h, _s, long in p.figures)
          + "</tr></table>")
    pct = res.get("percentiles") or {}
    if p.percentiles_of:
        w(f'<p class="muted">Percentiles of the {escape(p.percentiles_of)}:</p>')
    w("<table><tr>" + "".join(f"<th>{escape(k)}</th>" for k in PERCENTILE_KEYS) + "</tr><tr>"
      + "".join(f'<td class="num">{escape(format_ns(pct.get(k)))}</td>' for k in PERCENTILE_KEYS) + "</tr></table>")
    attribution_html(w, res.get("attribution"))


def attribution_html(w, a: dict | None, *, causes: int = 10, gaps: int = 10) -> None:
    """What ran in the run's largest gaps (probes/trace.py), when the run was attributed."""
    if a is None:
        return
    if not a.get("available"):
        w(f'<p class="muted">Gaps not attributed: {escape(a.get("reason"))}</p>')
        return
    w(f"<p>What ran in the {a['attributed_gaps']:,} largest gaps ({a['cpu_events']:,} events traced on the CPU; "
      "&ldquo;hardware / hypervisor&rdquo;: no interrupt, softirq, NMI or task switch in the gap):</p>")
    w("<table><tr><th>Cause</th><th>Gaps</th><th>Time in gaps</th></tr>")
    for row in a.get("by_cause", [])[:causes]:
        w(f'<tr><td>{escape(row["cause"])}</td><td class="num">{row["gaps"]:,}</td>'
          f'<td class="num">{escape(format_ns(row["ns"]))}</td></tr>')
    w("</table>")
    w("<table><tr><th>Gap</th><th>At</th><th>What ran</th></tr>")
    for g in a.get("gaps", [])[:gaps]:
        w(f'<tr><td class="num">{escape(format_ns(g["gap_ns"]))}</td><td class="num">{g["t_ns"] / 1e9:.4f} s</td>'
          f'<td>{escape(g.get("verdict", ""))}</td></tr>')
    w("</table>")
