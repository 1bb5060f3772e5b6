"""Verify quiet CPUs (issue 13, "Prove it"): the jitter probe on the chosen CPUs with them not quiet
("before") and quiet ("after"), the same duration each, in alternated pairs (before/after, then
after/before, ...) so a drift of the machine during the runs falls on both sides alike.

`VerifyPlan` is the sequence, Qt-free: `steps()` gives (pair, quiet) in order; the driver — `coremap
verify` or the window's Verify — sets the quiet state (isolate / include through AffinityService),
runs `jobs()` (jitter, one job per CPU), and hands each finished run to `record()`. `result()` is
the verification: every run's figures, and per side the medians, the histogram of all its runs
merged, and its gap attribution where the runs were attributed (root). That dict goes into the
session (app/store/session.py) and the report's "before / after" section (app/store/report.py) as it is.

A verification that cannot go on (a probe child that fails, tracefs unmounted under an attributed
run, an isolate refused) is not thrown away (issue 22, "verify"): the driver calls `stop()` with the
run it was at (`where()`: "run 3 of 4 (pair 2, quiet, CPU 1)") and what failed, and `result()` is
then the finished runs, with a "stopped" entry and the same sentence in `outcomes` (which sessions
and the report keep). `result()` is valid after every `record()`, so a driver can write it as each
run finishes; a result with fewer runs than `planned_runs` and no "stopped" is one cut short.

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
    outcomes: dict[str, str] = field(default_factory=dict)  # "isolate"/"include"/"stopped" -> its last sentence
    stopped: dict | None = None                              # where it stopped and why (stop())

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

    @property
    def planned_runs(self) -> int:
        """Every run of the verification: both sides of each pair, on each CPU."""
        return 2 * self.pairs * len(self.cpus)

    def where(self, pair: int, quiet: bool, cpus=None, *, run: int | None = None) -> str:
        """A run as progress and failure lines name it: "run 3 of 4 (pair 2, quiet, CPU 1)". `run`
        counts from 1 and defaults to the next one, the first not recorded yet."""
        run = len(self.runs) + 1 if run is None else run
        return (f"run {run} of {self.planned_runs} (pair {pair + 1}, {'quiet' if quiet else 'not quiet'}, "
                f"{cpus_word(tuple(cpus or self.cpus))})")

    def record(self, pair: int, quiet: bool, result: dict) -> None:
        self.runs.append({"pair": pair, "quiet": quiet, "result": result})

    def note_outcome(self, action: str, sentence: str) -> None:
        self.outcomes[action] = sentence

    def stop(self, where: str, failed: str) -> str:
        """The verification ends at `where` (see where()) because `failed` ("the jitter run failed: ...");
        the runs recorded so far stay. Returns the sentence, which `outcomes["stopped"]` keeps too."""
        kept = len(self.runs)
        sentence = f"verify stopped at {where}: {failed}; " + (
            f"the {kept} finished run{'s are' if kept != 1 else ' is'} kept" if kept else "no run had finished")
        self.stopped = {"at": where, "failed": failed, "finished_runs": kept, "planned_runs": self.planned_runs}
        self.outcomes["stopped"] = sentence
        return sentence

    def result(self) -> dict:
        """The verification as the session and the report keep it (see the module docstring)."""
        runs = [{"pair": r["pair"], "quiet": r["quiet"], "cpu": r["result"].get("cpu"),
                 **run_figures(r["result"])} for r in self.runs]
        out = {"kind": "verify", "cpus": list(self.cpus), "seconds": self.seconds, "pairs": self.pairs,
               "time": time.time(), "runs": runs, "before": self._side(False), "after": self._side(True),
               "ratio": _ratios(runs), "outcomes": dict(self.outcomes)}
        if self.stopped is not None:
            out["stopped"] = dict(self.stopped)
        return out

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
                "gaps_per_cpu_hour": summary.get("gaps_per_cpu_hour", []),
                "attribution": attributed[-1] if attributed else None}


def _median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _pair_ratios(runs: list[dict], key: str) -> list[float]:
    """After / before of `key` for each pair and CPU that has both runs and a figure above 0 before."""
    ratios = []
    for p in {r["pair"] for r in runs}:
        for cpu in {r["cpu"] for r in runs}:
            b = [r[key] for r in runs if r["pair"] == p and r["cpu"] == cpu and not r["quiet"]]
            a = [r[key] for r in runs if r["pair"] == p and r["cpu"] == cpu and r["quiet"]]
            if b and a and b[0] and a[0] is not None:
                ratios.append(a[0] / b[0])
    return ratios


def _ratios(runs: list[dict]) -> dict:
    """Per pair and CPU, after / before; the median of each figure's ratios."""
    out = {}
    for key in ("gaps10_per_s", "lost_share"):
        ratios = _pair_ratios(runs, key)
        out[key] = statistics.median(ratios) if ratios else None
    return out


def finished_line(where: str, result: dict) -> str:
    """One run as `coremap verify` prints it when it finishes: "run 1 of 4 (pair 1, not quiet, CPU 1)
    done: gaps >= 10 µs 622/s, time lost 52%, longest gap 5.1 ms"."""
    f = run_figures(result)
    return (f"{where} done: gaps >= 10 µs {format_rate(f['gaps10_per_s'])}, "
            f"time lost {format_share(f['lost_share'])}, longest gap {format_ns(f['max_ns'])}")


_COLUMNS = f"{'gaps >= 10 µs/s':>16}{'time lost':>11}{'longest gap':>13}"


def verify_text(v: dict, *, stopped: bool = True) -> str:
    """The verification as `coremap verify` prints it: what ran; before, after and after / before; what
    the ratio says; each run in the order it ran; and where it stopped when it did (unless `stopped` is
    False: `coremap verify` says that on stderr, as its error)."""
    pairs, runs, cpus = v.get("pairs") or 0, v.get("runs") or [], v["cpus"]
    planned = 2 * pairs * len(cpus)
    seconds = f"{v['seconds']:g} s" if v.get("seconds") is not None else "an unknown time"
    out = [f"verify {cpus_word(cpus)}: jitter {seconds} a run, not quiet (before) and quiet (after), {pairs} "
           f"alternated pair{'s' if pairs != 1 else ''}"]
    if len(runs) < planned:
        out.append(f"  {len(runs)} of its {planned} runs finished; the figures are theirs")
    out.append(f"  {'':<26}{_COLUMNS}{'runs':>6}")
    for side, label in ((v["before"], "not quiet (before)"), (v["after"], "quiet (after)")):
        label = side.get("label") or label
        if not side.get("runs"):
            out.append(f"  {label:<26}  no run finished")
            continue
        out.append(f"  {label:<26}{format_rate(side['gaps10_per_s']):>16}{format_share(side['lost_share']):>11}"
                   f"{format_ns((side.get('percentiles') or {}).get('max')):>13}{side['runs']:>6}")
    ratio = v.get("ratio") or {}
    out.append(f"  {'after / before':<26}{format_ratio(ratio.get('gaps10_per_s')):>16}"
               f"{format_ratio(ratio.get('lost_share')):>11}  (median of the pairs)")
    out.append(f"  {_verdict(v)}")
    if runs:
        out.append("  each run, in the order it ran:")
    for r in runs:
        name = f"pair {r['pair'] + 1}, {'quiet' if r['quiet'] else 'not quiet'}, CPU {r['cpu']}"
        out.append(f"    {name:<24}{format_rate(r['gaps10_per_s']):>16}{format_share(r['lost_share']):>11}"
                   f"{format_ns(r.get('max_ns')):>13}")
    out.append("  time lost: the share of the sampled time in gaps >= 2 µs; each side: the median of its runs")
    why = (v.get("outcomes") or {}).get("stopped")
    if why and stopped:
        out.append(why)
    return "\n".join(out)


def _verdict(v: dict) -> str:
    """What after / before says in words: fewer or more gaps >= 10 µs per second once quiet."""
    ratio = (v.get("ratio") or {}).get("gaps10_per_s")
    runs, who = v.get("runs") or [], cpus_word(v["cpus"])
    if ratio is None:
        both = {r["pair"] for r in runs if r["quiet"]} & {r["pair"] for r in runs if not r["quiet"]}
        return ("no after / before: no pair finished both its runs" if not both else
                f"no after / before: not quiet, {who} had no gaps >= 10 µs to compare with")
    n = len(_pair_ratios(runs, "gaps10_per_s"))
    of = (f"(median of {n} pair{'s' if n != 1 else ''})" if len(v["cpus"]) == 1
          else f"(median of {n} ratio{'s' if n != 1 else ''}, one per pair and CPU)")
    it = "they" if len(v["cpus"]) > 1 else "it"
    if ratio == 0:
        return f"quiet, {who} had none of the gaps >= 10 µs per second {it} had not quiet {of}"
    if ratio <= 0.5:
        return f"quiet, {who} had {format_ratio(1 / ratio)} fewer gaps >= 10 µs per second than not quiet {of}"
    if format_ratio(ratio) == format_ratio(1.0):
        return f"quiet, {who} had about as many gaps >= 10 µs per second as not quiet {of}"
    more = ": more, not fewer" if ratio > 1 else ""
    return f"quiet, {who} had {format_ratio(ratio)} the gaps >= 10 µs per second {it} had not quiet{more} {of}"
