"""A probe's result object as text: what `coremap probe` prints and the window's Summary tab shows.

Every figure is spelled by app/format.py (format_ns, format_cpus); this module only lays them out.
"""
from __future__ import annotations

from app.format import (format_compact, format_count, format_cpus, format_factor, format_ns, format_percent,
                        format_size)

# c2c matrix: a row label column, then one right-aligned cell per CPU (wide enough for '29.2 ns').
_C2C_LABEL = 6
_C2C_CELL = 10


def format_attribution(a: dict | None, *, longest: int = 10) -> list[str]:
    """What ran during the largest gaps of a jitter run (probes/trace.py attribute_run)."""
    if a is None:
        return []
    if not a.get("available"):
        return [f"  gaps not attributed: {a.get('reason')}"]
    out = [f"  what ran in the {a['attributed_gaps']} largest gaps ({format_count(a['cpu_events'])} events traced"
           + (f", {a['untraced_gaps']} gaps before the trace buffer's oldest event" if a["untraced_gaps"] else "")
           + "):"]
    out.append(f"    {'cause':<40}{'gaps':>6}{'time':>12}")
    for row in a["by_cause"][:12]:
        out.append(f"    {row['cause'][:39]:<40}{row['gaps']:>6}{format_ns(row['ns']):>12}")
    out.append(f"  the {min(longest, len(a['gaps']))} longest:")
    for g in a["gaps"][:longest]:
        out.append(f"    {format_ns(g['gap_ns']):>9} at {g['t_ns'] / 1e9:8.4f} s  {g['verdict']}")
    return out


def format_result(r: dict, *, verdict: bool = True) -> str:
    """A result object (probes/<probe>.py summarize) as the lines the CLI prints; without the verdict
    line where it is shown apart (a report prints it above the text)."""
    name = r["probe"]
    lines = _headline(r)
    if r.get("percentiles"):
        p = r["percentiles"]
        lines.append("  " + "  ".join(f"{k} {format_ns(p[k])}" for k in ("p50", "p90", "p99", "p99.9", "max")))
    body = {"jitter": _jitter, "sweep": _sweep, "c2c": _c2c, "counters": _counters, "messaging": _messaging,
            "first-touch": _first_touch, "scaling": _scaling}.get(name)
    if body is not None:
        lines.extend(body(r))
    if verdict and r.get("verdict"):
        lines.append(f"  verdict: {r['verdict']}")
    return "\n".join(lines)


def _headline(r: dict) -> list[str]:
    if r["probe"] == "jitter":
        return [f"jitter on CPU {r['cpu']}: {r['sampled_seconds']:.3f} s sampled "
                f"(duty {100 * (r['achieved_duty'] or 0):.1f}%), loop {format_ns(r['loop_ns'])}, "
                f"{format_count(r['iterations'])} reads"]
    if r["probe"] == "wakeup":
        return [f"wakeup on CPU {r['cpu']}: {format_count(r['wakeups'])} wakeups every {format_ns(r['interval_ns'])}, "
                f"mean latency {format_ns(r['mean_ns'])}, min {format_ns(r['min_ns'])}"]
    return []


def _jitter(r: dict) -> list[str]:
    lines = [f"  gaps per CPU-hour (of {r['sampled_seconds']:.3f} s sampled):",
             f"    {'length':<16}{'count':>8}{'per CPU-hour':>16}"]
    for row in r["gaps_per_cpu_hour"]:
        if row["count"]:
            rng = (f"{format_ns(row['lo_ns'])}-{format_ns(row['hi_ns'])}" if row["hi_ns"]
                   else f">= {format_ns(row['lo_ns'])}")
            lines.append(f"    {rng:<16}{row['count']:>8}{row['per_hour']:>16,.0f}")
    if r["lost_share"] is not None:
        lines.append(f"  time lost in gaps >= 2 us: {100 * r['lost_share']:.4f}%")
    lines.extend(format_attribution(r.get("attribution")))
    return lines


def _sweep(r: dict) -> list[str]:
    lines = [f"sweep over CPUs {format_cpus(c['cpu'] for c in r['cpus'])}: {r['rounds']} rounds, "
             f"best CPU {r['best_cpu']} at {format_ns(r['baseline_ns'])} per unit",
             f"    {'cpu':>4}{'mean':>12}{'sd':>12}{'cv':>8}{'loss':>9}  flag"]
    for c in r["cpus"]:
        lines.append(f"    {c['cpu']:>4}{format_ns(c['mean_ns']):>12}{format_ns(c['sd_ns']):>12}"
                     f"{100 * c['cv']:>7.2f}%{100 * c['loss_vs_best']:>8.2f}%  {'SLOW' if c['flagged'] else ''}")
    return lines


def _c2c(r: dict) -> list[str]:
    """The matrix: each row starts with its CPU in a column of its own, so every cell keeps its
    full width under its CPU's header (a wide value such as '29.2 ns' used to lose its first digit
    in the first column)."""
    cpus = r["matrix_cpus"]
    lines = ["core-to-core one-way latency (median of batches):",
             "    " + " " * _C2C_LABEL + "".join(f"{c:>{_C2C_CELL}}" for c in cpus)]
    for c, row in zip(cpus, r["matrix_ns"]):
        cells = "".join(f"{format_ns(v) if v is not None else '-':>{_C2C_CELL}}" for v in row)
        lines.append(f"    {c:<{_C2C_LABEL}}{cells}")
    return lines


def _counters(r: dict) -> list[str]:
    lines = [f"counters for {' '.join(r['command'] or [])!s} (CPU {r['cpu']}):",
             f"    {'event':<18}{'pinned':>16}{'unpinned':>16}{'ratio':>8}"]
    for ev, c in r["compare"].items():
        ratio = f"{c['ratio']:.2f}" if c["ratio"] is not None else "-"
        lines.append(f"    {ev:<18}{_count(c['pinned']):>16}{_count(c['unpinned']):>16}{ratio:>8}")
    return lines


def _count(v) -> str:
    return "n/a" if v is None else format_count(round(v))


def _pct(share) -> str:
    return format_percent(100 * share) if share is not None else "-"


def _messaging(r: dict) -> list[str]:
    rounds = r.get("rounds") or 1
    udp = r.get("transport") == "udp"
    lines = [f"{r['title']}: {r.get('message_bytes') or 64}-byte messages, {rounds} round{'s' if rounds != 1 else ''} "
             "per placement in alternated order",
             f"    {'placement':<30}{'median':>10}{'CV':>7}{'migrations':>12}{'p50':>10}{'p99':>10}"
             f"{'max':>10}{'received':>13}" + (f"{'lost':>11}" if udp else "")]
    for p in r["placements"]:
        lat = p.get("latency") or {}
        m = p["migrations"]
        moved = f"{_count(m['sender'])}/{_count(m['receiver'])}"
        # UDP drops what the receiver's buffer cannot hold; a ring or a pipe loses nothing (what
        # is sent but not received there was still in flight when the segment ended)
        lost = f"{_count(p['sent'] - p['received']):>11}" if udp else ""
        lines.append(f"    {p['name'][:29]:<30}{format_compact(p['median_rate']) + '/s':>10}{_pct(p['cv']):>7}"
                     f"{moved:>12}{format_ns(lat.get('p50')):>10}{format_ns(lat.get('p99')):>10}"
                     f"{format_ns(lat.get('max')):>10}{_count(p['received']):>13}{lost}")
    if r.get("missing"):
        lines.append("  not on this machine: " + "; ".join(r["missing"]))
    return lines


def _first_touch(r: dict) -> list[str]:
    thp = r["thp"]
    lines = [f"{r['title']}: {format_size(r['page_bytes'])} pages; THP {thp['asked'] or 'not asked'}: "
             f"{thp['meaning']} (system: enabled {thp['system']}, defrag {thp['defrag']})",
             f"    {'node':<10}{'first/page':>12}{'second/page':>13}{'ratio':>8}{'kernel':>8}{'faults':>11}"
             f"{'huge pages':>12}{'p50':>10}{'p99':>10}{'max':>10}{'on node':>9}"]
    for n in r["nodes"]:
        f, s = n["first"], n["second"]
        pct = f.get("percentiles") or {}
        where = {True: "local", False: "remote", None: ""}[n["local"]]
        lines.append(f"    {str(n['node']) + ' ' + where:<10}{format_ns(f['ns_per_page']):>12}"
                     f"{format_ns(s['ns_per_page']):>13}{format_factor(n['ratio']):>8}{_pct(f['sys_share']):>8}"
                     f"{_count(f['minor_faults']):>11}{_count(n['huge_pages']):>12}{format_ns(pct.get('p50')):>10}"
                     f"{format_ns(pct.get('p99')):>10}{format_ns(pct.get('max')):>10}{_pct(n['on_node_share']):>9}")
    if r.get("table_note"):
        lines.append(f"  {r['table_note']}")
    return lines


def _scaling(r: dict) -> list[str]:
    command = r["mode"] == "command"
    unit = "runs/s" if command else "ops/s"
    lines = [f"{r['title']}" + ("" if command else f": {r['threads']} threads") + f", {r['rounds']} round"
             f"{'s' if r['rounds'] != 1 else ''} in alternated order (medians)",
             f"    {'CPUs':<12}{unit:>10}{'speedup':>9}{'ideal':>7}{'waiting' if not command else 'wall':>9}"
             f"{'CPU time':>10}{'switches':>10}{'migrations':>12}  flag"]
    for w in r["widths"]:
        fourth = format_ns(w["wall_ns"]) if command else _pct(w.get("wait_share"))
        switches = None if w["voluntary"] is None else w["voluntary"] + (w["involuntary"] or 0)
        flag = f"{format_factor(w['factor'])} slower" if w["flagged"] else ""
        lines.append(f"    {w['label']:<12}{format_compact(w['throughput']):>10}{format_factor(w['speedup']):>9}"
                     f"{str(w['width']) + 'x':>7}{fourth:>9}{format_ns(w['cpu_ns']):>10}{_count(switches):>10}"
                     f"{_count(w['migrations']):>12}  {flag}")
    return lines
