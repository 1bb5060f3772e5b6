"""Messaging: where should a sender and a receiver run? A sender thread and a receiver thread
exchange 64-byte messages as fast as they can (probes/_messaging.c: a shared-memory SPSC ring, a
pipe, or UDP on loopback, multicast where the kernel delivers it, else unicast), each pinned to a CPU
or left to the scheduler, and the receiver counts messages per 100 ms window: the throughput step
plot. Each message carries its send time, so one-way latency is measured per message.

Placements: `auto` runs every kind this machine offers among the CPUs of --cpu (default: every CPU
this process may use), one pair each: the same CPU, SMT siblings, the same L3, another L3 in the node, another node, and
unpinned; or give pairs, `--placement 0:1,2:2,unpinned` (sender:receiver). Alternated order: the
measured time of each placement is cut into --rounds segments (default 2), and round r runs the
placements forward when r is even and backward when odd, so drift over the run (a neighbour's load,
the host) falls on every placement alike.

Per placement: the rate of every window, their median and coefficient of variation (sd / mean: how
much the throughput moves), the migrations of both threads (/proc/self/task/TID/sched), one-way
latency percentiles, messages sent and received (UDP drops what the receiver's buffer cannot hold).
The verdict names the best placement — the steadiest (lowest CV) of those whose median is within 5%
of the highest — and how much steadier it is than unpinned (the ratio of their CVs).
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import asdict, dataclass

from app.format import format_compact, format_factor, format_ns
from app.machine.topology import Topology, read_topology
from app.parse.cpulist import parse_cpulist
from app.parse.number import bounded
from app.sysroot import SysRoot
from probes import histogram
from probes.catalog import RECORDS
from probes.common import (ProbeArgumentParser, ProbeError, add_common_args, allowed_cpus, alternated, counter_delta,
                           hello, host_facts, loop_tsc_hz, run_lines, thread_counters)
from probes.text import count_text, share_text

NAME = "messaging"
RECORD = RECORDS[NAME]
TRANSPORTS = RECORD.field("transport").values()
DEFAULT_ROUNDS = RECORD.field("rounds").default
WINDOW_NS = 100_000_000
NEAR = 0.95     # medians within 5% of the highest count as equally fast; the steadiest of them is best
# The kinds of placement, in the order `auto` tries them, with their names.
KINDS = (("same-cpu", "same CPU"), ("smt", "SMT siblings"), ("l3", "same L3"),
         ("other-l3", "other L3 in the node"), ("node", "same node, L3 unknown"), ("other-node", "other node"),
         ("unpinned", "unpinned"))
KIND_NAMES = dict(KINDS)


def build_parser() -> argparse.ArgumentParser:
    p = ProbeArgumentParser(prog="python -m probes messaging", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p)
    p.add_argument("--placement", default=RECORD.field("placement").default, metavar="auto|A:B,...",
                   help="auto (every kind this machine offers) or sender:receiver pairs and 'unpinned'")
    p.add_argument("--transport", choices=TRANSPORTS, default=TRANSPORTS[0], help="shm (default), pipe or udp")
    p.add_argument("--rounds", type=bounded(1, 10 ** 9, "rounds", integer=True), default=DEFAULT_ROUNDS,
                   help=f"segments per placement, in alternated order (default {DEFAULT_ROUNDS})")
    p.add_argument("--no-multicast", action="store_true", help="udp: unicast even where multicast works")
    return p


@dataclass(frozen=True)
class Placement:
    """A sender CPU and a receiver CPU (None, None: both unpinned) and what they share."""
    kind: str
    send: int | None
    recv: int | None

    @property
    def name(self) -> str:
        if self.kind == "unpinned":
            return "unpinned"
        return f"{KIND_NAMES.get(self.kind, self.kind)} ({self.send}->{self.recv})"


def relation(topology: Topology, a: int, b: int) -> str:
    """What CPUs a and b share, as a placement kind."""
    ca, cb = topology.cpu(a), topology.cpu(b)
    if a == b:
        return "same-cpu"
    if b in ca.siblings:
        return "smt"
    if ca.node is not None and cb.node is not None and ca.node != cb.node:
        return "other-node"
    if ca.l3 is None or cb.l3 is None:
        return "node"
    return "l3" if ca.l3 == cb.l3 else "other-l3"


def offered(topology: Topology, cpus) -> tuple[list[Placement], list[str]]:
    """One placement per kind the CPUs offer (the first pair found, in CPU order), and for each kind
    they do not offer, the reason."""
    cpus = sorted(cpus)
    found: dict[str, Placement] = {"same-cpu": Placement("same-cpu", cpus[0], cpus[0])}
    for i, a in enumerate(cpus):
        for b in cpus[i + 1:]:
            kind = relation(topology, a, b)
            found.setdefault(kind, Placement(kind, a, b))
    found["unpinned"] = Placement("unpinned", None, None)
    l3_known = all(topology.cpu(c).l3 is not None for c in cpus)
    why = {"smt": "no core has two of these CPUs",
           "l3": ("no two cores share an L3 among these CPUs" if l3_known
                  else "the kernel gives no L3 cache groups here"),
           "other-l3": "these CPUs share one L3 per node" if l3_known else "the kernel gives no L3 cache groups here",
           "other-node": "one NUMA node" if len({topology.cpu(c).node for c in cpus}) <= 1
                         else "these CPUs are on one node"}
    missing = [f"{KIND_NAMES[k]}: {why[k]}" for k, _ in KINDS if k in why and k not in found]
    return [found[k] for k, _ in KINDS if k in found], missing


def parse_placements(text: str, topology: Topology, allowed, among=()) -> tuple[list[Placement], list[str]]:
    """`auto` (among `among`, default every allowed CPU), or sender:receiver pairs and `unpinned`,
    each CPU one this process may use."""
    if text.strip() == "auto":
        return offered(topology, among or allowed)
    out = []
    for piece in (p.strip() for p in text.split(",")):
        if piece == "unpinned":
            out.append(Placement("unpinned", None, None))
            continue
        a, sep, b = piece.partition(":")
        if not sep:
            raise ProbeError(f"--placement {text!r}: {piece!r} is not A:B; write auto, or pairs "
                             "sender:receiver such as 0:1,1:1,unpinned")
        (ca,), (cb,) = _one(a, text), _one(b, text)
        for c in (ca, cb):
            if c not in allowed:
                raise ProbeError(f"CPU {c} is not available to this process; choose from "
                                 f"{','.join(map(str, allowed))}")
        out.append(Placement(relation(topology, ca, cb), ca, cb))
    return out, []


def _one(text: str, whole: str) -> tuple[int]:
    cpus = parse_cpulist(text, what="--placement")
    if len(cpus) != 1:
        raise ProbeError(f"--placement {whole!r}: each side of a pair is one CPU, not {text.strip()!r}")
    return cpus


def run(args, emit) -> int:
    if args.rounds < 1:
        raise ProbeError(f"--rounds {args.rounds}: at least 1")
    root = SysRoot("/")
    placements, missing = parse_placements(args.placement, read_topology(root), allowed_cpus(root), args.cpu_ids)
    windows = max(1, round(args.seconds * 1e9 / WINDOW_NS / args.rounds))
    h = hello(NAME, None, {"transport": args.transport, "rounds": args.rounds, "window_ns": WINDOW_NS,
                            "windows_per_segment": windows, "placements": [asdict(p) | {"name": p.name}
                                                                           for p in placements],
                            "missing": missing})
    emit(h)
    tsc_hz = loop_tsc_hz(h, across_cpus=True)
    order = alternated(len(placements), args.rounds)
    t0 = time.monotonic_ns()
    for step, (rnd, i) in enumerate(order):
        _segment(args, emit, placements[i], i, rnd, windows, tsc_hz, (step, len(order)))
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0})
    return 0


def _segment(args, emit, p: Placement, index: int, rnd: int, windows: int, tsc_hz: float, step) -> None:
    """One placement's segment: its windows as interval lines as they close, then its totals."""
    from probes import _native
    cpus = (None, None) if p.send is None else ([p.send], [p.recv])
    run_ = _native.messaging_start(args.transport, cpus[0], cpus[1], WINDOW_NS, windows, tsc_hz,
                                   multicast=not args.no_multicast)
    try:
        info = _native.messaging_info(run_)
        tids = (info["send_tid"], info["recv_tid"])
        start = prev = thread_counters(tids)
        _native.messaging_go(run_)
        have = 0
        while have < windows:
            got = _native.messaging_windows(run_, have)
            if not got:
                break
            now = thread_counters(tids)
            for k, w in enumerate(got):
                last = k == len(got) - 1
                emit({"type": "interval", "step": "window", "placement": index, "round": rnd,
                      "window": w["index"], "messages": w["messages"],
                      "rate": w["messages"] * 1e9 / WINDOW_NS, "mean_latency_ns": w["mean_latency_ns"],
                      "max_latency_ns": w["max_latency_ns"],
                      "migrations": [_moved(prev, now, tids[0]) if last else 0,
                                     _moved(prev, now, tids[1]) if last else 0],
                      "progress": (step[0] + (w["index"] + 1) / windows) / step[1]})
            prev = now
            have += len(got)
        totals = _native.messaging_stop(run_)
        end = thread_counters(tids)
    finally:
        _native.messaging_release(run_)
    emit({"type": "interval", "step": "segment", "placement": index, "round": rnd, "udp": info["udp"] or None,
          "clock": "tsc" if info["tsc"] else "monotonic", "message_bytes": info["message_bytes"], **totals,
          "migrations": [_moved(start, end, tids[0]), _moved(start, end, tids[1])],
          "switches": [counter_delta({t: start[t]}, {t: end[t]}, "voluntary") for t in tids],
          "progress": (step[0] + 1) / step[1]})


def _moved(before: dict, after: dict, tid: int) -> int | None:
    return counter_delta({tid: before[tid]}, {tid: after[tid]}, "migrations")


# -- the result ------------------------------------------------------------------------------------
def summarize(lines) -> dict:
    """The result object; also of a run still going (the panel redraws from it)."""
    hello_line, ivs = run_lines(lines)
    rows = [_placement_row(p, [l for l in ivs if l.get("placement") == i])
            for i, p in enumerate(hello_line.get("placements", []))]
    best = best_placement([r for r in rows if r["windows"]])
    measured = [r for r in rows if r["windows"]]
    unpinned = next((r for r in measured if r["kind"] == "unpinned"), None)
    # A run still going may have one window of a placement: no CV yet (None), so no ratio yet.
    steadier = (unpinned["cv"] / best["cv"]) if (best and unpinned and best is not unpinned and best["cv"]
                                                  and unpinned["cv"] is not None) else None
    udp = next((l["udp"] for l in ivs if l.get("udp")), None)
    transport = hello_line.get("transport")
    return {"probe": NAME, "cpu": None, "title": f"messaging over {transport}" + (f" ({udp})" if udp else ""),
            "loop_ns": None, "sampled_seconds": sum(r["seconds"] for r in rows), "achieved_duty": None,
            "buckets": [], "percentiles": None, "transport": transport, "udp": udp,
            "message_bytes": next((l["message_bytes"] for l in ivs if "message_bytes" in l), None), "window_ns": hello_line.get("window_ns"), "rounds": hello_line.get("rounds"),
            "placements": rows, "missing": hello_line.get("missing", []),
            "best": best["name"] if best else None, "steadier_than_unpinned": steadier,
            "verdict": verdict(best, unpinned, steadier), "host": host_facts(hello_line)}


def best_placement(rows: list[dict]) -> dict | None:
    """The steadiest (lowest CV) of the placements whose median throughput is within NEAR of the
    highest: a placement 2% faster but ten times as jumpy is not the better place to run."""
    if not rows:
        return None
    top = max(r["median_rate"] for r in rows)
    near = [r for r in rows if r["median_rate"] >= NEAR * top]
    return min(near, key=lambda r: (r["cv"] if r["cv"] is not None else float("inf"), -r["median_rate"]))


def _placement_row(p: dict, ivs: list[dict]) -> dict:
    wins = sorted((l for l in ivs if l.get("step") == "window"), key=lambda l: (l["round"], l["window"]))
    segs = [l for l in ivs if l.get("step") == "segment"]
    rates = [w["rate"] for w in wins]
    mean = statistics.fmean(rates) if rates else None
    cv = statistics.pstdev(rates) / mean if len(rates) > 1 and mean else None
    buckets = histogram.merge_buckets(*(s["buckets"] for s in segs))
    migrations = [_sum(s["migrations"][k] for s in segs) for k in (0, 1)]
    return {"name": p["name"], "kind": p["kind"], "send": p["send"], "recv": p["recv"],
            "series": rates, "round_of_window": [w["round"] for w in wins], "windows": len(rates),
            "seconds": len(rates) * WINDOW_NS / 1e9, "median_rate": statistics.median(rates) if rates else None,
            "mean_rate": mean, "cv": cv, "sent": sum(s["sent"] for s in segs),
            "received": sum(s["received"] for s in segs),
            "migrations": {"sender": migrations[0], "receiver": migrations[1]},
            "latency": histogram.percentiles(histogram.buckets_to_histogram(buckets)) if buckets else None,
            "latency_buckets": histogram.buckets_as_dicts(buckets)}


def _sum(values) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def verdict(best: dict | None, unpinned: dict | None, steadier: float | None) -> str:
    """The one sentence: the best placement, and how much steadier it is than unpinned."""
    if best is None:
        return "no placement was measured"
    head = (f"best: {best['name']}, median {format_compact(best['median_rate'])} msgs/s"
            f" (CV {share_text(best['cv'])})")
    if unpinned is None:
        return head + "; no unpinned run to compare with"
    if best is unpinned:
        return head + "; no pinned placement beat the scheduler here"
    faster = format_factor(best["median_rate"] / unpinned["median_rate"]) if unpinned["median_rate"] else "-"
    if steadier is None:
        steady = "as steady as unpinned"
    elif 0.95 <= steadier <= 1.05:
        steady = "about as steady as unpinned"
    elif steadier > 1:
        steady = f"{format_factor(steadier)} steadier than unpinned"
    else:
        steady = f"{format_factor(1 / steadier)} less steady than unpinned"
    return f"{head}; {steady} (CV {share_text(unpinned['cv'])}), {faster} its median"


def job_cpus(spec, cpus) -> tuple[int, ...]:
    """The CPUs a run of `spec` (a ProbeSpec) measures: those of its placements (its record names this)."""
    return placement_cpus(spec.placement or RECORD.field("placement").default, cpus)


def placement_cpus(text: str, cpus=()) -> tuple[int, ...]:
    """The CPUs a --placement uses (for `auto`, those of the placements this machine offers among
    `cpus`, default all), so the window can keep its own threads off them; () when the text does
    not parse (the child will say why)."""
    root = SysRoot("/")
    try:
        placements, _ = parse_placements(text, read_topology(root), allowed_cpus(root), tuple(cpus))
    except ProbeError:
        return ()
    pinned = {c for p in placements for c in (p.send, p.recv) if c is not None}
    return tuple(sorted(pinned))


def text_lines(r: dict) -> list[str]:
    """The result as `coremap probe` prints it (probes/text.py adds the verdict)."""
    rounds = r.get("rounds") or 1
    udp = r.get("transport") == "udp"
    lines = [f"{r['title']}: {r.get('message_bytes') or 64}-byte messages, {rounds} round{'s' if rounds != 1 else ''} "
             "per placement in alternated order",
             f"    {'placement':<30}{'median':>10}{'CV':>7}{'migrations':>12}{'p50':>10}{'p99':>10}"
             f"{'max':>10}{'received':>13}" + (f"{'lost':>11}" if udp else "")]
    for p in r["placements"]:
        lat = p.get("latency") or {}
        m = p["migrations"]
        moved = f"{count_text(m['sender'])}/{count_text(m['receiver'])}"
        # UDP drops what the receiver's buffer cannot hold; a ring or a pipe loses nothing (what
        # is sent but not received there was still in flight when the segment ended)
        lost = f"{count_text(p['sent'] - p['received']):>11}" if udp else ""
        lines.append(f"    {p['name'][:29]:<30}{format_compact(p['median_rate']) + '/s':>10}{share_text(p['cv']):>7}"
                     f"{moved:>12}{format_ns(lat.get('p50')):>10}{format_ns(lat.get('p99')):>10}"
                     f"{format_ns(lat.get('max')):>10}{count_text(p['received']):>13}{lost}")
    if r.get("missing"):
        lines.append("  not on this machine: " + "; ".join(r["missing"]))
    return lines
