"""First touch: what does touching fresh memory cost here? Map --size of anonymous memory, write one
byte per page (each write faults: the kernel allocates and zeroes a page), then write them all again
(pre-touched, as a JVM with AlwaysPreTouch leaves its heap), on one pinned CPU (probes/_touch.c).

Reported: the time per page of each touch and their ratio; the user / system split of each touch
that took 50 ms of CPU or more (getrusage of the thread, split by timer-tick samples: the fault is
system time); the minor and major faults of each touch (the
kernel's own counts of the thread); the per-page cost of the first touch as percentiles (one clock
read per page, ~9 ns with rdtsc, is inside each page's time); and, with transparent huge pages, how
many huge pages the mapping got (AnonHugePages in /proc/self/smaps_rollup). The cost per page over
the run (200 stretches per touch) is the plot: faults get slower under memory pressure.

--thp: the hint this mapping gives the kernel (the system-wide mode in
/sys/kernel/mm/transparent_hugepage/enabled stays as it is, and the result names it):
  never    MADV_NOHUGEPAGE: no huge pages whatever the system's mode;
  madvise  MADV_HUGEPAGE: huge pages where the mode is madvise or always (what a program that asks
           for them gets, e.g. a JVM with -XX:+UseTransparentHugePages);
  always   what the kernel's `always` mode gives a mapping: no hint where the mode is always, else
           MADV_HUGEPAGE, which for this one mapping is the same (only the defrag setting, named in
           the result, treats the two differently when memory is fragmented);
  (not given) no hint: what a program that does not ask gets under the system's mode.

NUMA: each pass binds the memory to one node (mbind MPOL_BIND) with the CPU on --cpu: with --node M
only node M, else every node with memory, one pass each: the local vs remote table. Where pages
landed is checked (move_pages on 64 of them).

Refused with one line before anything is mapped: a size past MemAvailable, a node that does not
exist or has no memory.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import time

from app.format import format_factor, format_ns, format_percent, format_size
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.parse.meminfo import parse_meminfo
from app.parse.number import bounded
from app.parse.size import SizeError, parse_size
from app.sysroot import SysRoot
from probes import histogram
from probes.catalog import RECORDS
from probes.common import (ProbeArgumentParser, ProbeError, add_common_args, hello, host_facts, loop_tsc_hz,
                           run_lines)
from probes.text import count_text, share_text

NAME = "first-touch"
RECORD = RECORDS[NAME]
THP_MODES = RECORD.field("thp").values()
DEFAULT_SIZE = RECORD.field("size").default
STRETCHES = 200            # interval lines per touch: the plot's resolution
HUGE_PAGE = 2 << 20
WHERE_SAMPLES = 64
# The kernel splits a thread's CPU time into user and system by timer-tick samples (getrusage(2),
# kernel/sched/cputime.c cputime_adjust): a touch shorter than this is not split (a second touch
# of 256 MiB takes ~1 ms and read 4 ms of system time).
SPLIT_MIN_CPU_NS = 50_000_000


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes first-touch", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p)
    p.add_argument("--size", type=_size, default=DEFAULT_SIZE, metavar="SIZE",
                   help="memory to map and touch: 1G (default), 512M, ... (powers of 1024)")
    p.add_argument("--node", type=bounded(0, 1023, "(a NUMA node)", integer=True), default=None, metavar="M",
                   help="bind the memory to NUMA node M (default: one pass per node with memory)")
    p.add_argument("--thp", choices=THP_MODES, default=None,
                   help="transparent huge pages for the mapping (see above; default: no hint)")
    return p


def _size(text: str) -> int:
    try:
        return parse_size(text, what="")
    except SizeError as e:
        raise argparse.ArgumentTypeError(str(e).strip()) from None


# -- what the machine offers -----------------------------------------------------------------------
def system_thp(root: SysRoot) -> dict:
    """The kernel's THP mode and defrag setting (the bracketed word of each file), None if absent."""
    out = {}
    for key in ("enabled", "defrag"):
        text = root.read_optional(root.sys("kernel", "mm", "transparent_hugepage", key))
        m = re.search(r"\[(\w[\w+]*)\]", text or "")
        out[key] = m.group(1) if m else None
    return out


def thp_advice(asked: str | None, system: str | None) -> tuple[str, str]:
    """(advice for touch_map, what it means here) for --thp `asked` under the system's mode."""
    if system is None:
        return "none", "this kernel has no transparent huge pages"
    if asked is None:
        return "none", f"no hint: the system's mode ({system}) decides"
    if asked == "never":
        return "nohugepage", "MADV_NOHUGEPAGE"
    if system == "never":
        return "none", "the system's mode is never: no huge pages whatever the hint"
    if asked == "always" and system == "always":
        return "none", "no hint needed: the system's mode is always"
    if asked == "always":
        return "hugepage", f"MADV_HUGEPAGE, which gives this mapping what always would (the system's mode is {system})"
    return "hugepage", "MADV_HUGEPAGE"


def memory_nodes(root: SysRoot) -> tuple[int, ...]:
    """NUMA nodes with memory (sys/devices/system/node/has_memory; node 0 where there is no NUMA)."""
    text = root.read_optional(root.node_dir("has_memory")) or root.read_optional(root.node_dir("online"))
    nodes = parse_cpulist(text, what="node list") if text else ()
    return nodes or (0,)


def check_size(size: int, root: SysRoot) -> int:
    """The size, or ProbeError when it is past the memory available now (MemAvailable)."""
    if size < 1:
        raise ProbeError(f"--size {size}: give a size of at least one page, such as 64M or 1G")
    avail = parse_meminfo(root.read(root.proc("meminfo"))).get("MemAvailable")
    if avail is not None and size > avail:
        raise ProbeError(f"--size {format_size(size)}: more than the memory available now "
                         f"({format_size(avail)}, MemAvailable in /proc/meminfo); give a smaller size")
    return size


def check_node(node: int, nodes) -> int:
    if node not in nodes:
        raise ProbeError(f"--node {node}: no NUMA node {node} with memory on this machine; "
                         f"it has node{'s' if len(nodes) != 1 else ''} {format_cpulist(nodes)}")
    return node


def cpu_node(root: SysRoot, cpu: int | None) -> int | None:
    """The node of a CPU: the nodeN link in its sysfs folder."""
    if cpu is None:
        return None
    for entry in root.listdir(root.cpu_dir(f"cpu{cpu}")):
        if entry.startswith("node") and entry[4:].isdigit():
            return int(entry[4:])
    return None


def anon_huge_bytes(root: SysRoot) -> int | None:
    """AnonHugePages of this process (proc/self/smaps_rollup, Documentation/filesystems/proc.rst)."""
    text = root.read_optional(root.task_dir(os.getpid(), None, "smaps_rollup"))
    return parse_meminfo(text, what="smaps_rollup").get("AnonHugePages") if text else None


# -- the run ---------------------------------------------------------------------------------------
def stretch_bytes(size: int, page: int, advice: str) -> int:
    """One interval line's stretch: size / STRETCHES in whole pages, in whole huge pages when the
    mapping may get them (a stretch never splits one)."""
    unit = HUGE_PAGE if advice != "nohugepage" and size >= HUGE_PAGE * STRETCHES else page
    return max(unit, -(-size // STRETCHES // unit) * unit)


def run(args, emit) -> int:
    root = SysRoot("/")
    size = check_size(args.size, root)
    nodes = memory_nodes(root)
    passes = [check_node(args.node, nodes)] if args.node is not None else list(nodes)
    thp = system_thp(root)
    advice, meaning = thp_advice(args.thp, thp["enabled"])
    page = os.sysconf("SC_PAGE_SIZE")
    here = cpu_node(root, args.cpu_id)
    h = hello(NAME, args.cpu_id, {"size_bytes": size, "page_bytes": page, "thp_asked": args.thp,
                                   "thp_system": thp["enabled"], "thp_defrag": thp["defrag"],
                                   "thp_advice": advice, "thp_meaning": meaning, "nodes": passes,
                                   "memory_nodes": list(nodes), "cpu_node": here,
                                   "stretch_bytes": stretch_bytes(size, page, advice)})
    emit(h)
    t0 = time.monotonic_ns()
    for i, node in enumerate(passes):
        _pass(emit, root, h, node, (i, len(passes)), loop_tsc_hz(h, across_cpus=False))
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0,
          "process_minor_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt,
          "process_major_faults": resource.getrusage(resource.RUSAGE_SELF).ru_majflt})
    return 0


def _pass(emit, root: SysRoot, h: dict, node: int, step: tuple[int, int], tsc_hz: float) -> None:
    """Map, touch twice, unmap: one row of the node table."""
    from probes import _native
    size, page, stretch = h["size_bytes"], h["page_bytes"], h["stretch_bytes"]
    huge_before = anon_huge_bytes(root)
    region = _native.touch_map(size, h["thp_advice"], node)
    try:
        for touch in (1, 2):
            for k, offset in enumerate(range(0, size, stretch)):
                r = _native.touch_pages(region, offset, min(stretch, size - offset), page, touch == 1, tsc_hz)
                done = (touch - 1 + (offset + stretch) / size) / 2
                emit({"type": "interval", "node": node, "touch": touch, "stretch": k, "offset": offset, **r,
                      "progress": (step[0] + min(1.0, done)) / step[1]})
            if touch == 1:
                huge_after = anon_huge_bytes(root)
                where = _native.touch_nodes(region, WHERE_SAMPLES)
    finally:
        _native.touch_unmap(region)
    huge = (huge_after - huge_before) if huge_after is not None and huge_before is not None else None
    emit({"type": "interval", "node": node, "touch": None, "anon_huge_bytes": huge,
          "where": {str(k): v for k, v in where.items()}, "progress": (step[0] + 1) / step[1]})


# -- the result ------------------------------------------------------------------------------------
def summarize(lines) -> dict:
    """The result object; also of a run still going (the panel redraws from it)."""
    hello_line, ivs = run_lines(lines)
    done = next((l for l in lines if l.get("type") == "done"), {})
    here = hello_line.get("cpu_node")
    rows = [_node_row(hello_line, node, [l for l in ivs if l.get("node") == node], here)
            for node in hello_line.get("nodes", [])]
    rows = [r for r in rows if r["first"]["pages"]]
    nodes = hello_line.get("memory_nodes", [])
    size = hello_line.get("size_bytes")
    return {"probe": NAME, "cpu": hello_line.get("cpu"), "loop_ns": None, "achieved_duty": None,
            "title": (f"first touch of {format_size(size)} "
                      + (f"on CPU {hello_line['cpu']}" if hello_line.get("cpu") is not None else "unpinned")
                      if size else NAME),
            "sampled_seconds": sum((r["first"]["ns"] + r["second"]["ns"]) for r in rows) / 1e9,
            "buckets": [], "percentiles": None, "size_bytes": size, "page_bytes": hello_line.get("page_bytes"),
            "stretch_bytes": hello_line.get("stretch_bytes"), "cpu_node": here,
            "thp": {"asked": hello_line.get("thp_asked"), "system": hello_line.get("thp_system"),
                    "defrag": hello_line.get("thp_defrag"), "advice": hello_line.get("thp_advice"),
                    "meaning": hello_line.get("thp_meaning")},
            "nodes": rows, "memory_nodes": nodes,
            "table_note": "one NUMA node: no remote memory to compare" if len(nodes) == 1 else None,
            "process_minor_faults": done.get("process_minor_faults"),
            "verdict": verdict(rows, hello_line), "host": host_facts(hello_line)}


def _node_row(h: dict, node: int, ivs: list[dict], here: int | None) -> dict:
    first = [l for l in ivs if l.get("touch") == 1]
    second = [l for l in ivs if l.get("touch") == 2]
    end = next((l for l in ivs if l.get("touch") is None), {})
    where = end.get("where") or {}
    sampled = sum(where.values())
    a, b = _touch_totals(first, per_page=True), _touch_totals(second, per_page=False)
    page_sizes = h.get("size_bytes") or 0
    huge = end.get("anon_huge_bytes")
    return {"node": node, "local": (node == here) if here is not None else None,
            "first": a, "second": b,
            "ratio": a["ns_per_page"] / b["ns_per_page"] if a["ns_per_page"] and b["ns_per_page"] else None,
            "huge_pages": huge // HUGE_PAGE if huge is not None else None,
            "huge_share": (huge / page_sizes) if huge is not None and page_sizes else None,
            "on_node_share": where.get(str(node), 0) / sampled if sampled else None,
            "series": {"first": [[l["offset"], l["ns"] / l["pages"]] for l in first if l["pages"]],
                       "second": [[l["offset"], l["ns"] / l["pages"]] for l in second if l["pages"]]}}


def _touch_totals(ivs: list[dict], *, per_page: bool) -> dict:
    pages = sum(l["pages"] for l in ivs)
    ns = sum(l["ns"] for l in ivs)
    user, sys_ = sum(l["user_ns"] for l in ivs), sum(l["sys_ns"] for l in ivs)
    cpu = sum(l["cpu_ns"] for l in ivs)
    out = {"pages": pages, "ns": ns, "ns_per_page": ns / pages if pages else None,
           "cpu_ns": cpu, "user_ns": user, "sys_ns": sys_,
           "sys_share": sys_ / (user + sys_) if user + sys_ and cpu >= SPLIT_MIN_CPU_NS else None,
           "minor_faults": sum(l["minor_faults"] for l in ivs), "major_faults": sum(l["major_faults"] for l in ivs),
           "switches": sum(l["switches"] for l in ivs),
           "worst_ns": max((l["max_ns"] for l in ivs), default=None) if per_page else None}
    if per_page:
        buckets = histogram.merge_buckets(*(l["buckets"] for l in ivs))
        out["percentiles"] = histogram.percentiles(histogram.buckets_to_histogram(buckets)) if buckets else None
    return out


def verdict(rows: list[dict], h: dict) -> str:
    """The one sentence: what a first touch costs against the second, and where the time goes."""
    local = next((r for r in rows if r["local"]), rows[0] if rows else None)
    if local is None:
        return "nothing was touched"
    f, s = local["first"], local["second"]
    text = (f"first touch {format_ns(f['ns_per_page'])} per page, {format_factor(local['ratio'])} the second "
            f"({format_ns(s['ns_per_page'])})")
    if f["sys_share"] is not None:
        text += f"; {format_percent(100 * f['sys_share'])} of it in the kernel"
    text += f"; {f['minor_faults']:,} minor faults for {f['pages']:,} pages"
    if local["huge_pages"]:
        text += f" ({local['huge_pages']:,} huge pages)"
    remote = [r for r in rows if r["local"] is False and r["first"]["ns_per_page"]]
    if remote and f["ns_per_page"]:
        worst = max(remote, key=lambda r: r["first"]["ns_per_page"])
        text += (f"; memory on node {worst['node']} costs "
                 f"{format_factor(worst['first']['ns_per_page'] / f['ns_per_page'])} the local first touch")
    return text


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
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
                     f"{format_ns(s['ns_per_page']):>13}{format_factor(n['ratio']):>8}{share_text(f['sys_share']):>8}"
                     f"{count_text(f['minor_faults']):>11}{count_text(n['huge_pages']):>12}{format_ns(pct.get('p50')):>10}"
                     f"{format_ns(pct.get('p99')):>10}{format_ns(pct.get('max')):>10}{share_text(n['on_node_share']):>9}")
    if r.get("table_note"):
        lines.append(f"  {r['table_note']}")
    return lines
