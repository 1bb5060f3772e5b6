"""Messaging: where should a sender and a receiver run? A sender thread and a receiver thread
exchange 64-byte messages (probes/messaging/_loop.c: a shared-memory SPSC ring, a pipe, or UDP on loopback,
multicast where the kernel delivers it, else unicast), each pinned to a CPU or left to the scheduler,
and the receiver counts messages per 100 ms window: the throughput step plot. Each message carries its
send time, so one-way latency is measured per message.

Paces (--rates, default 10k,100k,1M,max): the sender sends at a fixed rate (one message per period),
or as fast as it can (max, saturation). A feed runs at its own pace, and its latency there is what a
user asks about; saturation says how much a placement can carry. Each placement's measured time is
shared among the paces, with latency percentiles at each.

Placements: `auto` runs every kind this machine offers among the CPUs of --cpu (default: every CPU
this process may use), one pair each: the same CPU, SMT siblings, the same L3, another L3 in the node,
another node, and unpinned; or give pairs, `--placement 0:1,2:2,unpinned` (sender:receiver).
Alternated order: each (placement, pace) is cut into --rounds segments (default 2), and round r runs
them forward when r is even and backward when odd, so drift over the run (a neighbour's load, the
host) falls on every one alike.

Per placement: the rate of every window, the median and coefficient of variation (sd / mean: how
much the throughput moves) of the saturation windows, the migrations of both threads
(/proc/self/task/TID/sched) and the CPUs each ran on window by window (the unpinned placement's
steps), messages sent, received and lost (what the kernel dropped: UDP drops what the receiver's
buffer cannot hold; messages still on the way at the end are drained and counted apart), and the
latency percentiles at each pace. The verdict never prefers a placement that loses more than another:
among those that lose the least, the steadiest (lowest CV) of those whose median is within 5% of the
highest; without a saturation pace, the lowest p99 at the fastest pace.
"""
from __future__ import annotations

import argparse
import re
import statistics
import time
from dataclasses import asdict, dataclass

from app.format import format_compact, format_factor, format_ns, format_percent
from app.machine.topology import Topology, read_topology
from app.parse.cpulist import parse_cpulist
from app.parse.number import bounded
from app.sysroot import SysRoot
from probes import histogram
from probes.common import (ProbeArgumentParser, ProbeError, add_common_args, allowed_cpus, alternated, counter_delta,
                           hello, host_facts, loop_tsc_hz, run_lines, thread_counters)
from probes.messaging import RECORD
from probes.text import count_text, share_text

NAME = RECORD.name
TRANSPORTS = RECORD.field("transport").values()
DEFAULT_ROUNDS = RECORD.field("rounds").default
DEFAULT_RATES = RECORD.field("rates").default
MAX_RATE = 100_000_000      # msgs/s: a paced sender faster than this is saturation anyway
_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000}
WINDOW_NS = 100_000_000
STRETCH_S = 2.0             # how far a short run may stretch so that each segment has its window
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
    p.add_argument("--rates", default=DEFAULT_RATES, metavar="RATE,...",
                   help=f"the sender's paces in messages per second, and max: as fast as it can (default {DEFAULT_RATES})")
    p.add_argument("--rounds", type=bounded(1, 10 ** 9, "rounds", integer=True), default=DEFAULT_ROUNDS,
                   help=f"segments per placement and pace, in alternated order (default {DEFAULT_ROUNDS})")
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


def parse_rates(text: str) -> list[float]:
    """`10k,100k,1M,max` -> [10000.0, 100000.0, 1000000.0, 0.0] (0: as fast as it can), in the order
    given, each once; ProbeError naming the piece that is not a pace."""
    out: list[float] = []
    for piece in (p.strip() for p in str(text).split(",")):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmM]?)", piece)
        if piece.lower() == "max":
            rate = 0.0
        elif m and 1 <= float(m[1]) * _SUFFIX[m[2].lower()] <= MAX_RATE:
            rate = float(m[1]) * _SUFFIX[m[2].lower()]
        else:
            raise ProbeError(f"--rates {text!r}: {piece!r} is not a pace; give messages per second from 1 to "
                             f"{format_compact(MAX_RATE)} (10k, 1M) or max, such as 10k,100k,1M,max")
        if rate not in out:
            out.append(rate)
    return out


def rate_label(rate: float | None) -> str:
    """`10k/s`, or `max` for as fast as it can."""
    return "max" if not rate else f"{format_compact(rate)}/s"


def run(args, emit) -> int:
    if args.rounds < 1:
        raise ProbeError(f"--rounds {args.rounds}: at least 1")
    rates = parse_rates(args.rates)
    segments = args.rounds * len(rates)
    if segments * WINDOW_NS > max(args.seconds * 1.5, STRETCH_S) * 1e9:
        # Each segment takes at least one window: 300 paces "in 0.2 s" ran 300 x 2 x 100 ms (issue 32). A
        # short run may stretch to STRETCH_S for that (the default 4 paces x 2 rounds: 0.8 s), no further.
        need = segments * WINDOW_NS / 1e9
        raise ProbeError(f"--seconds {args.seconds:g} is too short for {len(rates)} pace(s) x {args.rounds} "
                         f"round(s): each takes at least one {WINDOW_NS // 1_000_000} ms window, {need:g} s in "
                         "all; give fewer --rates or --rounds, or more --seconds")
    root = SysRoot("/")
    placements, missing = parse_placements(args.placement, read_topology(root), allowed_cpus(root), args.cpu_ids)
    windows = max(1, round(args.seconds * 1e9 / WINDOW_NS / args.rounds / len(rates)))
    h = hello(NAME, None, {"transport": args.transport, "rounds": args.rounds, "window_ns": WINDOW_NS,
                            "windows_per_segment": windows, "rates": rates,
                            "placements": [asdict(p) | {"name": p.name} for p in placements],
                            "missing": missing,
                            "expect_s": len(placements) * segments * windows * WINDOW_NS / 1e9})
    emit(h)
    tsc_hz = loop_tsc_hz(h, across_cpus=True)
    combos = [(i, k) for i in range(len(placements)) for k in range(len(rates))]
    order = alternated(len(combos), args.rounds)
    t0 = time.monotonic_ns()
    for step, (rnd, c) in enumerate(order):
        i, k = combos[c]
        _segment(args, emit, placements[i], (i, k, rates[k]), rnd, windows, tsc_hz, (step, len(order)))
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0})
    return 0


def _segment(args, emit, p: Placement, which, rnd: int, windows: int, tsc_hz: float, step) -> None:
    """One segment of a placement at one pace: its windows as interval lines as they close, then its
    totals. `which`: (placement index, pace index, messages per second, 0 for as fast as it can)."""
    from probes import _native
    index, pace, rate = which
    cpus = (None, None) if p.send is None else ([p.send], [p.recv])
    run_ = _native.messaging_start(args.transport, cpus[0], cpus[1], WINDOW_NS, windows, tsc_hz,
                                   multicast=not args.no_multicast, rate=rate)
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
                emit({"type": "interval", "step": "window", "placement": index, "pace": pace, "segment": step[0],
                      "round": rnd, "window": w["index"], "messages": w["messages"],
                      "rate": w["messages"] * 1e9 / WINDOW_NS, "mean_latency_ns": w["mean_latency_ns"],
                      "max_latency_ns": w["max_latency_ns"], "cpus": w["cpus"], "moves": w["moves"],
                      "migrations": [_moved(prev, now, tids[0]) if last else 0,
                                     _moved(prev, now, tids[1]) if last else 0],
                      "progress": (step[0] + (w["index"] + 1) / windows) / step[1]})
            prev = now
            have += len(got)
        totals = _native.messaging_stop(run_)
        end = thread_counters(tids)
    finally:
        _native.messaging_release(run_)
    emit({"type": "interval", "step": "segment", "placement": index, "pace": pace, "segment": step[0], "round": rnd,
          "udp": info["udp"] or None,
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
    rates = hello_line.get("rates") or [0.0]           # a run of an older coremap: saturation only
    rows = [_placement_row(p, [l for l in ivs if l.get("placement") == i], rates)
            for i, p in enumerate(hello_line.get("placements", []))]
    measured = [r for r in rows if r["windows"]]
    best = best_placement(measured)
    unpinned = next((r for r in measured if r["kind"] == "unpinned"), None)
    # A run still going may have one window of a placement: no CV yet (None), so no ratio yet.
    steadier = (unpinned["cv"] / best["cv"]) if (best and unpinned and best is not unpinned and best["cv"]
                                                  and unpinned["cv"] is not None) else None
    udp = next((l["udp"] for l in ivs if l.get("udp")), None)
    transport = hello_line.get("transport")
    return {"probe": NAME, "cpu": None, "title": f"messaging over {transport}" + (f" ({udp})" if udp else ""),
            "loop_ns": None, "sampled_seconds": sum(r["seconds"] for r in rows), "achieved_duty": None,
            "buckets": [], "percentiles": None, "transport": transport, "udp": udp, "rates": rates,
            "message_bytes": next((l["message_bytes"] for l in ivs if "message_bytes" in l), None),
            "window_ns": hello_line.get("window_ns"), "rounds": hello_line.get("rounds"),
            "placements": rows, "missing": hello_line.get("missing", []),
            "best": best["name"] if best else None, "steadier_than_unpinned": steadier,
            "verdict": verdict(best, unpinned, steadier, measured), "host": host_facts(hello_line)}


def _lost_share(r: dict) -> float:
    return r["lost"] / r["sent"] if r.get("sent") else 0.0


def best_placement(rows: list[dict]) -> dict | None:
    """Never one that loses a larger share of its messages than another: among those that lose the
    least, the steadiest (lowest CV) of those whose saturation median is within NEAR of the highest (a
    placement 2% faster but ten times as jumpy is not the better place to run); without saturation
    windows, the lowest p99 latency at the fastest pace."""
    if not rows:
        return None
    least = min(_lost_share(r) for r in rows)
    rows = [r for r in rows if _lost_share(r) <= least]
    fast = [r for r in rows if r.get("median_rate") is not None]
    if fast:
        top = max(r["median_rate"] for r in fast)
        near = [r for r in fast if r["median_rate"] >= NEAR * top]
        return min(near, key=lambda r: (r["cv"] if r["cv"] is not None else float("inf"), -r["median_rate"]))
    return min(rows, key=lambda r: _p99_at_fastest(r))


def _p99_at_fastest(r: dict) -> float:
    paced = [p for p in r["paces"] if p["latency"]]
    if not paced:
        return float("inf")
    return max(paced, key=lambda p: p["rate"] or float("inf"))["latency"]["p99"]


def _placement_row(p: dict, ivs: list[dict], rates: list[float]) -> dict:
    # in the order they ran: segment by segment (older runs, without one, by round), window by window
    wins = sorted((l for l in ivs if l.get("step") == "window"),
                  key=lambda l: (l.get("segment", l["round"]), l["window"]))
    segs = [l for l in ivs if l.get("step") == "segment"]
    saturated = [w["rate"] for w in wins if not rates[w.get("pace", 0)]]
    mean = statistics.fmean(saturated) if saturated else None
    cv = statistics.pstdev(saturated) / mean if len(saturated) > 1 and mean else None
    migrations = [_sum(s["migrations"][k] for s in segs) for k in (0, 1)]
    paces = [_pace_row(rate, [w for w in wins if w.get("pace", 0) == k], [s for s in segs if s.get("pace", 0) == k])
             for k, rate in enumerate(rates)]
    sat = next((x for x in paces if not x["rate"]), None)
    sent, received, drained = (sum(s.get(key, 0) for s in segs) for key in ("sent", "received", "drained"))
    return {"name": p["name"], "kind": p["kind"], "send": p["send"], "recv": p["recv"],
            "series": [w["rate"] for w in wins], "pace_of_window": [w.get("pace", 0) for w in wins],
            "round_of_window": [w["round"] for w in wins], "windows": len(wins),
            # each window's [sender, receiver] CPU when last read (-1 or None: not read)
            "cpu_series": [w.get("cpus") for w in wins],
            "seconds": len(wins) * WINDOW_NS / 1e9, "median_rate": statistics.median(saturated) if saturated else None,
            "mean_rate": mean, "cv": cv, "sent": sent, "received": received, "drained": drained,
            # what the kernel dropped: sent, less what arrived in a window or after the last one
            "lost": max(0, sent - received - drained) if any("drained" in s for s in segs) else None,
            "migrations": {"sender": migrations[0], "receiver": migrations[1]},
            "latency": sat["latency"] if sat else None, "paces": paces}


def _pace_row(rate: float, wins: list[dict], segs: list[dict]) -> dict:
    buckets = histogram.merge_buckets(*(s["buckets"] for s in segs))
    seconds = len(wins) * WINDOW_NS / 1e9
    received = sum(w["messages"] for w in wins)
    sent, drained = sum(s["sent"] for s in segs), sum(s.get("drained", 0) for s in segs)
    return {"rate": rate or None, "label": rate_label(rate), "windows": len(wins),
            "achieved_rate": received / seconds if seconds else None, "sent": sent,
            "received": sum(s["received"] for s in segs),
            "lost": max(0, sent - sum(s["received"] for s in segs) - drained) if segs else None,
            "latency": histogram.percentiles(histogram.buckets_to_histogram(buckets)) if buckets else None,
            "latency_buckets": histogram.buckets_as_dicts(buckets)}


def _sum(values) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def loss_text(r: dict) -> str:
    """`none`, `220,411 of 391,340 (56%)`, or `-` where the run did not count it."""
    if r.get("lost") is None:
        return "-"
    if not r["lost"]:
        return "none"
    pct = 100 * _lost_share(r)
    return f"{r['lost']:,} of {r['sent']:,} ({'<0.1%' if 0 < pct < 0.1 else format_percent(pct)})"


def verdict(best: dict | None, unpinned: dict | None, steadier: float | None, rows: list[dict] = ()) -> str:
    """The one sentence: the best placement, what it lost, how much steadier it is than unpinned, and
    any placement that lost messages."""
    if best is None:
        return "no placement was measured"
    if best.get("median_rate") is not None:
        head = (f"best: {best['name']}, median {format_compact(best['median_rate'])} msgs/s"
                f" (CV {share_text(best['cv'])})")
    else:
        lat = _p99_at_fastest(best)
        head = f"best: {best['name']}, p99 {format_ns(lat)} at the fastest pace"
    if best.get("lost"):
        head += f", lost {loss_text(best)} (the least of any placement)"
    losers = [r for r in rows if r.get("lost") and r is not best]
    tail = ("; lost messages: " + "; ".join(f"{r['name']} {loss_text(r)}" for r in losers)) if losers else ""
    if unpinned is None:
        return head + "; no unpinned run to compare with" + tail
    if best is unpinned:
        return head + "; no pinned placement beat the scheduler here" + tail
    if best.get("median_rate") is None or not unpinned.get("median_rate"):
        return head + tail
    faster = format_factor(best["median_rate"] / unpinned["median_rate"])
    if steadier is None:
        steady = "as steady as unpinned"
    elif 0.95 <= steadier <= 1.05:
        steady = "about as steady as unpinned"
    elif steadier > 1:
        steady = f"{format_factor(steadier)} steadier than unpinned"
    else:
        steady = f"{format_factor(1 / steadier)} less steady than unpinned"
    return f"{head}; {steady} (CV {share_text(unpinned['cv'])}), {faster} its median" + tail


def measured_cpus(spec, cpus) -> tuple[int, ...]:
    """The CPUs a run of `spec` (a ProbeSpec) measures: those of its placements (its record says to ask)."""
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
    """The result as `coremap probe` prints it (probes/text.py adds the verdict): a row per placement
    (saturation median and CV, migrations, messages sent, received and lost), then the latency at
    each pace."""
    rounds = r.get("rounds") or 1
    paces = [rate_label(x) for x in r.get("rates") or [0.0]]
    lines = [f"{r['title']}: {r.get('message_bytes') or 64}-byte messages at {', '.join(paces)}, {rounds} round"
             f"{'s' if rounds != 1 else ''} per placement and pace in alternated order",
             f"    {'placement':<30}{'median':>10}{'CV':>7}{'migrations':>12}{'sent':>13}{'received':>13}  lost"]
    for p in r["placements"]:
        m = p["migrations"]
        moved = f"{count_text(m['sender'])}/{count_text(m['receiver'])}"
        median = format_compact(p["median_rate"]) + "/s" if p.get("median_rate") is not None else "-"
        lines.append(f"    {p['name'][:29]:<30}{median:>10}{share_text(p['cv']):>7}{moved:>12}"
                     f"{count_text(p.get('sent')):>13}{count_text(p['received']):>13}  {loss_text(p)}")
    lines.append("  at each pace: the rate the receiver saw, one-way latency, and what was lost")
    lines.append(f"    {'placement':<30}{'pace':>8}{'reached':>10}{'p50':>10}{'p99':>10}{'max':>10}  lost")
    for p in r["placements"]:
        for i, x in enumerate(p.get("paces") or ()):
            lat = x.get("latency") or {}
            reached = format_compact(x["achieved_rate"]) + "/s" if x.get("achieved_rate") is not None else "-"
            lines.append(f"    {p['name'][:29] if i == 0 else '':<30}{x['label']:>8}{reached:>10}"
                         + "".join(f"{format_ns(lat.get(k)) if lat else '-':>10}" for k in ("p50", "p99", "max"))
                         + f"  {loss_text(x)}")
    if r.get("missing"):
        lines.append("  not on this machine: " + "; ".join(r["missing"]))
    return lines
