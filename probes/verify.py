"""Verify quiet CPUs (issue 13, "Prove it"): the jitter probe on the chosen CPUs with them not quiet
("before") and quiet ("after"), the same duration each, in alternated pairs (before/after, then
after/before, ...) so a drift of the machine during the runs falls on both sides alike.

`VerifyPlan` is the sequence, Qt-free: `steps()` gives (pair, quiet) in order; the driver — `coremap
verify` or the window's Verify — sets the quiet state (isolate / include through AffinityService),
runs `jobs()` (jitter, one job per CPU), and hands each finished run to `record()`. `result()` is
the verification: every run's figures, and per side the medians, the histogram of all its runs
merged, and its gap attribution where the runs were attributed (root). That dict goes into the
session (app/store/session.py) and the report's "before / after" section (app/store/report.py) as it is.

Figures, as the benchmarks compute them (tests/benchmarks/bench_window_jitter.py): gaps of at
least 10 µs per second of sampled time, and the share of sampled time lost in gaps of at least
2 µs (probes/histogram.py gaps_per_hour). Per pair, after / before; the verdict is the median.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from app.format import cpus_word, format_ns, format_rate, format_ratio, format_share
from probes import histogram
from probes.spec import Job, ProbeSpec

GAPS_FROM_NS = 10_000
DEFAULT_SECONDS = 5.0
DEFAULT_PAIRS = 2


def run_figures(result: dict) -> dict:
    """Gaps >= 10 µs per second, lost share and the longest gap of one jitter result."""
    sampled = float(result.get("sampled_seconds") or 0.0)
    rows = result.get("gaps_per_cpu_hour") or []
    gaps = sum(r["count"] for r in rows if r["lo_ns"] >= GAPS_FROM_NS)
    return {"gaps10_per_s": gaps / sampled if sampled > 0 else None, "lost_share": result.get("lost_share"),
            "max_ns": (result.get("percentiles") or {}).get("max"), "sampled_seconds": sampled}


@dataclass
class VerifyPlan:
    """`VerifyPlan(cpus, seconds, pairs, attribute)`: what a verification runs, and its result."""
    cpus: tuple[int, ...]
    seconds: float = DEFAULT_SECONDS
    pairs: int = DEFAULT_PAIRS
    attribute: bool = False
    runs: list[dict] = field(default_factory=list)        # {"pair", "quiet", "result"} as recorded
    outcomes: dict[str, str] = field(default_factory=dict)  # "isolate"/"include" -> its last sentence

    def steps(self) -> list[tuple[int, bool]]:
        """(pair, quiet) in run order: before/after, after/before, ... (each pair alternates)."""
        out = []
        for p in range(self.pairs):
            order = (False, True) if p % 2 == 0 else (True, False)
            out += [(p, q) for q in order]
        return out

    def jobs(self) -> list[Job]:
        """The jitter jobs of one step (one per CPU), the same before and after."""
        return ProbeSpec("jitter", tuple(self.cpus), seconds=self.seconds, attribute=self.attribute).jobs()

    def record(self, pair: int, quiet: bool, result: dict) -> None:
        self.runs.append({"pair": pair, "quiet": quiet, "result": result})

    def note_outcome(self, action: str, sentence: str) -> None:
        self.outcomes[action] = sentence

    def result(self) -> dict:
        """The verification as the session and the report keep it (see the module docstring)."""
        runs = [{"pair": r["pair"], "quiet": r["quiet"], "cpu": r["result"].get("cpu"),
                 **run_figures(r["result"])} for r in self.runs]
        return {"kind": "verify", "cpus": list(self.cpus), "seconds": self.seconds, "pairs": self.pairs,
                "time": time.time(), "runs": runs, "before": self._side(False), "after": self._side(True),
                "ratio": _ratios(runs), "outcomes": dict(self.outcomes)}

    def _side(self, quiet: bool) -> dict:
        results = [r["result"] for r in self.runs if r["quiet"] == quiet]
        figures = [run_figures(r) for r in results]
        buckets = histogram.merge_buckets(*(r.get("buckets") or [] for r in results))
        sampled_ns = sum(f["sampled_seconds"] for f in figures) * 1e9
        summary = histogram.summary_from_buckets(buckets, sampled_ns or None)
        asked = [r["attribution"] for r in results if r.get("attribution") is not None]
        # The newest traced run's; else, when tracing was asked for and refused, the reason why.
        attributed = [a for a in asked if a.get("available")] or asked[-1:]
        return {"probe": "jitter", "label": "quiet (after)" if quiet else "not quiet (before)",
                "cpu": results[0].get("cpu") if results else None, "runs": len(results),
                "gaps10_per_s": _median(f["gaps10_per_s"] for f in figures),
                "lost_share": _median(f["lost_share"] for f in figures),
                "sampled_seconds": sampled_ns / 1e9, "buckets": histogram.buckets_as_dicts(buckets),
                "percentiles": summary["percentiles"],
                "gaps_per_cpu_hour": summary["gaps"]["rows"] if "gaps" in summary else [],
                "attribution": attributed[-1] if attributed else None}


def _median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _ratios(runs: list[dict]) -> dict:
    """Per pair and CPU, after / before; the median of each figure's ratios."""
    out = {}
    for key in ("gaps10_per_s", "lost_share"):
        ratios = []
        for p in {r["pair"] for r in runs}:
            for cpu in {r["cpu"] for r in runs}:
                b = [r[key] for r in runs if r["pair"] == p and r["cpu"] == cpu and not r["quiet"]]
                a = [r[key] for r in runs if r["pair"] == p and r["cpu"] == cpu and r["quiet"]]
                if b and a and b[0] and a[0] is not None:
                    ratios.append(a[0] / b[0])
        out[key] = statistics.median(ratios) if ratios else None
    return out


def verify_text(v: dict) -> str:
    """The verification as `coremap verify` prints it: the two sides, their ratio, each run."""
    ratio = v.get("ratio") or {}
    rows = [(side["label"], format_rate(side["gaps10_per_s"]), format_share((side["lost_share"])),
             format_ns((side.get("percentiles") or {}).get("max"))) for side in (v["before"], v["after"])]
    rows.append(("after / before", format_ratio(ratio.get("gaps10_per_s")), format_ratio(ratio.get("lost_share")),
                 "(median of the pairs)"))
    out = [f"verify {cpus_word(v['cpus'])}: jitter {v['seconds']:g} s a run, {v['pairs']} alternated "
           f"pair{'s' if v['pairs'] != 1 else ''}",
           f"  {'':<20}{'gaps >= 10 µs/s':>17}{'time lost':>11}  longest gap"]
    out += [f"  {name:<20}{gaps:>17}{lost:>11}  {longest}" for name, gaps, lost, longest in rows]
    for r in v["runs"]:
        out.append(f"    pair {r['pair'] + 1}, CPU {r['cpu']}, {'quiet' if r['quiet'] else 'not quiet'}: "
                   f"{format_rate(r['gaps10_per_s'])} gaps >= 10 µs, {format_share((r['lost_share']))} lost")
    return "\n".join(out)

