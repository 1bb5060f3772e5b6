"""First touch: what does touching fresh memory cost here? Map --size of anonymous memory, write one
byte per page (each write faults: the kernel allocates and zeroes a page), then write them all again
(pre-touched, as a JVM with AlwaysPreTouch leaves its heap), on one pinned CPU (probes/first_touch/_loop.c).

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

Per GiB (what a heap's size is spoken of in): the first touch and the pre-touched one in ms of wall
time, of the thread's CPU time and of its system time per GiB touched. On a CPU another task shares,
wall time holds the time the thread waited for its CPU: where CPU time falls short of wall time by
10% or more, the result says so, and the CPU and system figures are the ones to read.

THP stalls: the kernel's own counts around each touch (/proc/vmstat compact_stall: a fault that
stalled to compact memory for a huge page; thp_fault_alloc, thp_fault_fallback; system-wide, so
another process's faults meanwhile count too), and the pages that took 1 ms or more (a compaction
stall, or the thread held off its CPU: the wall-time flag tells which is likelier).

`-- COMMAND` (probes/pretouch.py): instead of mapping memory, run the user's JVM command twice, without
and with -XX:+AlwaysPreTouch, and compare start-up time and system time.

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
from app.parse.vmstat import parse_vmstat
from app.sysroot import SysRoot
from probes import histogram
from probes.common import (ProbeArgumentParser, ProbeError, add_common_args, hello, host_facts, loop_tsc_hz,
                           run_lines)
from probes.first_touch import RECORD
from probes.text import count_text, share_text

NAME = RECORD.name
THP_MODES = RECORD.field("thp").values()
DEFAULT_SIZE = RECORD.field("size").default
STRETCHES = 200            # interval lines per touch: the plot's resolution
HUGE_PAGE = 2 << 20
WHERE_SAMPLES = 64
# The kernel splits a thread's CPU time into user and system by timer-tick samples (getrusage(2),
# kernel/sched/cputime.c cputime_adjust): a touch shorter than this is not split (a second touch
# of 256 MiB takes ~1 ms and read 4 ms of system time).
SPLIT_MIN_CPU_NS = 50_000_000
GiB = float(1 << 30)
STALL_NS = 1_000_000       # a page that took this long held the thread up: a stall
SHARED_CPU = 0.9           # CPU time under this share of wall time: the thread waited for its CPU
VMSTAT_KEYS = ("compact_stall", "compact_fail", "compact_success", "thp_fault_alloc", "thp_fault_fallback")


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes first-touch", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p)
    # None when not given (DEFAULT_SIZE then): a command run refuses a size it would not use
    p.add_argument("--size", type=_size, default=None, metavar="SIZE",
                   help="memory to map and touch: 1G (default), 512M, ... (powers of 1024)")
    p.add_argument("--node", type=bounded(0, 1023, "(a NUMA node)", integer=True), default=None, metavar="M",
                   help="bind the memory to NUMA node M (default: one pass per node with memory)")
    p.add_argument("--thp", choices=THP_MODES, default=None,
                   help="transparent huge pages for the mapping (see above; default: no hint)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- JAVA COMMAND: run it without and with -XX:+AlwaysPreTouch instead of mapping memory")
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


def vmstat(root: SysRoot) -> dict[str, int]:
    """The THP and compaction counters of /proc/vmstat (those this kernel has)."""
    text = root.read_optional(root.proc("vmstat"))
    counters = parse_vmstat(text) if text is not None else {}
    return {k: counters[k] for k in VMSTAT_KEYS if k in counters}


def run(args, emit) -> int:
    command = list(args.command[1:] if args.command[:1] == ["--"] else args.command)
    if command:
        from probes import pretouch
        return pretouch.run(args, emit, command)
    root = SysRoot("/")
    size = check_size(DEFAULT_SIZE if args.size is None else args.size, root)
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
    counted: dict[str, dict] = {}
    region = _native.touch_map(size, h["thp_advice"], node)
    try:
        for touch in (1, 2):
            before = vmstat(root)
            for k, offset in enumerate(range(0, size, stretch)):
                r = _native.touch_pages(region, offset, min(stretch, size - offset), page, touch == 1, tsc_hz,
                                        STALL_NS)
                done = (touch - 1 + (offset + stretch) / size) / 2
                emit({"type": "interval", "node": node, "touch": touch, "stretch": k, "offset": offset, **r,
                      "progress": (step[0] + min(1.0, done)) / step[1]})
            after = vmstat(root)
            counted[str(touch)] = {k: after[k] - before[k] for k in after if k in before}
            if touch == 1:
                huge_after = anon_huge_bytes(root)
                where = _native.touch_nodes(region, WHERE_SAMPLES)
    finally:
        _native.touch_unmap(region)
    huge = (huge_after - huge_before) if huge_after is not None and huge_before is not None else None
    emit({"type": "interval", "node": node, "touch": None, "anon_huge_bytes": huge, "vmstat": counted,
          "where": {str(k): v for k, v in where.items()}, "progress": (step[0] + 1) / step[1]})


# -- the result ------------------------------------------------------------------------------------
def summarize(lines) -> dict:
    """The result object; also of a run still going (the panel redraws from it)."""
    hello_line, ivs = run_lines(lines)
    if hello_line.get("mode") == "command":
        from probes import pretouch
        return pretouch.summarize(lines)
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
    a = _touch_totals(first, per_page=True, page_bytes=h.get("page_bytes"))
    b = _touch_totals(second, per_page=False, page_bytes=h.get("page_bytes"))
    counted = end.get("vmstat") or {}
    a["vmstat"], b["vmstat"] = counted.get("1"), counted.get("2")
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


def _touch_totals(ivs: list[dict], *, per_page: bool, page_bytes: int | None) -> dict:
    pages = sum(l["pages"] for l in ivs)
    ns = sum(l["ns"] for l in ivs)
    user, sys_ = sum(l["user_ns"] for l in ivs), sum(l["sys_ns"] for l in ivs)
    cpu = sum(l["cpu_ns"] for l in ivs)
    gib = pages * page_bytes / GiB if pages and page_bytes else None
    out = {"pages": pages, "ns": ns, "ns_per_page": ns / pages if pages else None,
           "cpu_ns": cpu, "user_ns": user, "sys_ns": sys_,
           "sys_share": sys_ / (user + sys_) if user + sys_ and cpu >= SPLIT_MIN_CPU_NS else None,
           # per GiB touched: wall, the thread's CPU, its system time (split only past SPLIT_MIN_CPU_NS)
           "ms_per_gib": ns / 1e6 / gib if gib else None, "cpu_ms_per_gib": cpu / 1e6 / gib if gib else None,
           "sys_ms_per_gib": sys_ / 1e6 / gib if gib and cpu >= SPLIT_MIN_CPU_NS else None,
           "off_cpu_share": max(0.0, 1 - cpu / ns) if ns and cpu >= SPLIT_MIN_CPU_NS else None,
           "stalls": sum(l.get("stalls", 0) for l in ivs) if per_page else None,
           "stall_ns": sum(l.get("stall_ns", 0.0) for l in ivs) if per_page else None,
           "minor_faults": sum(l["minor_faults"] for l in ivs), "major_faults": sum(l["major_faults"] for l in ivs),
           "switches": sum(l["switches"] for l in ivs),
           "worst_ns": max((l["max_ns"] for l in ivs), default=None) if per_page else None}
    if per_page:
        buckets = histogram.merge_buckets(*(l["buckets"] for l in ivs))
        out["percentiles"] = histogram.percentiles(histogram.buckets_to_histogram(buckets)) if buckets else None
    return out


def shared_cpu_note(f: dict) -> str:
    """What the wall time of a touch holds beside its own work, when its CPU was shared."""
    share = f.get("off_cpu_share")
    if share is None or share < 1 - SHARED_CPU:
        return ""
    return (f"the thread waited for its CPU {format_percent(100 * share)} of the first touch's wall time (another "
            "task shares this CPU): read the CPU and system time per GiB, not the wall time")


def verdict(rows: list[dict], h: dict) -> str:
    """The one sentence: what a first touch costs against the second, and where the time goes."""
    local = next((r for r in rows if r["local"]), rows[0] if rows else None)
    if local is None:
        return "nothing was touched"
    f, s = local["first"], local["second"]
    text = (f"first touch {_ms(f['ms_per_gib'])} per GiB ({format_ns(f['ns_per_page'])} per page), "
            f"{format_factor(local['ratio'])} the pre-touched ({_ms(s['ms_per_gib'])} per GiB)")
    if f["sys_share"] is not None:
        text += f"; {format_percent(100 * f['sys_share'])} of it in the kernel"
    text += f"; {f['minor_faults']:,} minor faults for {f['pages']:,} pages"
    if local["huge_pages"]:
        text += f" ({local['huge_pages']:,} huge pages)"
    if f.get("vmstat") and f["vmstat"].get("compact_stall"):
        text += f"; {f['vmstat']['compact_stall']:,} compaction stalls"
    note = shared_cpu_note(f)
    if note:
        text += f"; {note}"
    remote = [r for r in rows if r["local"] is False and r["first"]["ns_per_page"]]
    if remote and f["ns_per_page"]:
        worst = max(remote, key=lambda r: r["first"]["ns_per_page"])
        text += (f"; memory on node {worst['node']} costs "
                 f"{format_factor(worst['first']['ns_per_page'] / f['ns_per_page'])} the local first touch")
    return text


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
    if r.get("mode") == "command":
        from probes import pretouch
        return pretouch.text_lines(r)
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
    lines += [f"  per GiB touched (ms):  {'first touch':>26}   {'pre-touched':>26}",
              f"    {'node':<18}" + f"{'wall':>9}{'CPU':>9}{'system':>9}" * 2]
    for n in r["nodes"]:
        lines.append(f"    {n['node']:<18}" + "".join(
            f"{_ms(t.get(k), unit=''):>9}" for t in (n["first"], n["second"])
            for k in ("ms_per_gib", "cpu_ms_per_gib", "sys_ms_per_gib")))
    for n in r["nodes"]:
        f = n["first"]
        vm = f.get("vmstat") or {}
        if vm or f.get("stalls") is not None:
            lines.append(f"  THP on node {n['node']}: {count_text(vm.get('compact_stall'))} compaction stalls, "
                         f"{count_text(vm.get('thp_fault_alloc'))} huge pages faulted in, "
                         f"{count_text(vm.get('thp_fault_fallback'))} fell back to small pages (/proc/vmstat, "
                         f"system-wide); {count_text(f.get('stalls'))} pages took 1 ms or more"
                         + (f" ({format_ns(f['stall_ns'])} in all)" if f.get("stalls") else ""))
        note = shared_cpu_note(f)
        if note:
            lines.append(f"  {note}")
    if r.get("table_note"):
        lines.append(f"  {r['table_note']}")
    return lines


def _ms(v, unit: str = " ms") -> str:
    return "-" if v is None else f"{v:,.1f}{unit}" if v < 100 else f"{v:,.0f}{unit}"
