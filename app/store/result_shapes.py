"""The stored shape of each probe's result (app/parse/shape.py), keyed by probe name: what its text
(probes/<probe>.py text_lines), its view in the window (widgets/probe/) and the report read, so that
a result out of shape is refused at the door (app/store/results.py clean_probe_result) with one line
naming the field, not met by a traceback half-way through a page.

Each shape was written from the probe's summarize() and every reader of its stored result; the tests
(tests/hostile/test_result_shapes.py) hold real results of every probe and mode to their shape, and
refuse broken ones. Fields every result may have (FIELDS below, and loop_ns, achieved_duty, label,
the CPU, percentiles, buckets in results.py) are checked one by one, for every probe, and left out alone;
fields no reader reads are not listed and pass unread. Bounds far above any machine's keep the readers'
sums finite (a plot refuses an infinite range).
"""
from __future__ import annotations

from app.parse.shape import NULL, Either, Flag, ListOf, MapOf, Num, Obj, Text, Tuple, Where, nullable

CPU = Num(0, 65535, integer=True)
NS = Num(0)

SWEEP = Obj({
    "rounds": nullable(Num(0, integer=True)),           # null: summarized without its hello line
    "cpus": ListOf(Obj({
        "cpu": CPU,
        "mean_ns": NS,
        "sd_ns": NS,
        "cv": Num(0),           # analyse writes null only for a mean of 0 ns, which no timed unit has
        "loss_vs_best": Num(-1),        # mean / best CPU's mean - 1: below 0 for a CPU faster on average
        "flagged": Flag(),
    }, required=("cpu", "mean_ns", "sd_ns", "cv", "loss_vs_best", "flagged")), 1 << 16),
    "best_cpu": nullable(CPU),                          # null: stopped before its first round
    "baseline_ns": nullable(NS),
}, required=("rounds", "cpus", "best_cpu", "baseline_ns"))

# matrix_ns[i][j]: the one-way latency between matrix_cpus[i] and [j], null where not measured. 4096
# CPUs are ~8.4M pairs, a day of ping-pong: no real run holds more.
C2C = Where(Obj({
    "matrix_cpus": ListOf(CPU, 4096),
    "matrix_ns": ListOf(ListOf(nullable(NS), 4096), 4096),
}, required=("matrix_cpus", "matrix_ns")),
    lambda r: len(r["matrix_ns"]) == len(r["matrix_cpus"]) and all(len(row) == len(r["matrix_cpus"])
                                                                  for row in r["matrix_ns"]),
    "matrix_ns is not one row and one column per CPU of matrix_cpus")

# compare: per perf event (probes/_native.c EVENTS), a count null where the kernel refused the counter
# or the mode did not run, a ratio (pinned / unpinned) null where either is unknown or unpinned is 0.
COUNTERS = Obj({
    "cpu": nullable(CPU),                               # null: --modes unpinned without a CPU
    "command": nullable(ListOf(Text(1 << 17), 1 << 16)),    # an argument may be MAX_ARG_STRLEN long
    "compare": MapOf(Obj({"pinned": nullable(Num(0, integer=True)), "unpinned": nullable(Num(0, integer=True)),
                          "ratio": nullable(Num(0))}, required=("pinned", "unpinned", "ratio")), 64),
}, required=("command", "cpu", "compare"))

# A width's figures are medians of its rounds: null where no round measured one, and a median of whole
# counts may be a half. Ceilings: the plot multiplies a throughput by the widest width, the text adds
# the two switch counts.
SCALING = Obj({
    "title": Text(1 << 16),                             # names the command, its words joined
    "mode": Text(16),                                   # "work" or "command"
    "threads": nullable(Num(1, 1024, integer=True)),    # null for a command
    "rounds": Num(1, integer=True),
    "widths": ListOf(Obj({                              # 1, 2, 4 ... CPUs, then unpinned
        "label": Text(64),
        "width": Num(1, 65536, integer=True),
        "cpus": ListOf(CPU),                            # lit up in the grid when its row is selected
        "pinned": Flag(),
        "throughput": nullable(Num(0, 1e15)),
        "speedup": nullable(Num(0)),
        "factor": nullable(Num(0)),
        "flagged": Flag(),
        "wall_ns": nullable(NS),
        "cpu_ns": nullable(NS),
        "voluntary": nullable(Num(0, 1 << 53)),
        "involuntary": nullable(Num(0, 1 << 53)),
        "migrations": nullable(Num(0, 1 << 53)),
        "wait_share": nullable(Num(0)),                 # not required: a command has none
        "cpus_used": nullable(Num(0)),                  # not required: newer than the first results
    }, required=("label", "width", "cpus", "pinned", "throughput", "speedup", "factor", "flagged", "wall_ns",
                 "cpu_ns", "voluntary", "involuntary", "migrations")), 256),
    "verdict": Text(1 << 16),
}, required=("title", "mode", "threads", "rounds", "widths"))


# -- the histogram probes: what the report and the window read of every histogram result ---------------
U63 = (1 << 63) - 1
PERCENTILES = Obj({k: nullable(Num(0, integer=True)) for k in ("p50", "p90", "p99", "p99.9", "max")},
                  required=("p50", "p90", "p99", "p99.9", "max"))           # null: no sample
# 0 (no interval line) or at least one ns: the histogram's per CPU-hour divides by it
SAMPLED = nullable(Either(Num(0, 0), Num(1e-9)))        # null: a run that samples nothing (c2c)
GAP_ROWS = ListOf(Obj({
    "lo_ns": Num(1, U63, integer=True),                 # its log10 is drawn (widgets/pictures.py)
    "hi_ns": nullable(Num(0, U63, integer=True)),       # null: the open last row
    "count": Num(0, U63, integer=True),
    "per_hour": Num(0, 3_600_000_000_000),              # at most one gap per ns of the hour
}, required=("lo_ns", "count", "per_hour")), 256)
GAPS = Obj({                                            # absent before gaps led the text
    "from_ns": Num(1, integer=True),
    "count": Num(0, integer=True),
    "max_ns": nullable(Num(0, integer=True)),           # null: no gap at all
    "lost_share": nullable(Num(0)),                     # null: nothing sampled
    "at_least": ListOf(Obj({
        "ns": Num(1, integer=True),
        "count": Num(0, integer=True),
        "exact": Flag(),
        "per_second": nullable(Num(0)),
        "per_cpu_hour": nullable(Num(0)),
    }, required=("ns", "count", "exact", "per_second", "per_cpu_hour")), 16),
    "percentiles": PERCENTILES,
}, required=("from_ns", "count", "max_ns", "lost_share", "at_least", "percentiles"))
ATTRIBUTION = nullable(Obj({                            # null: a run without --attribute
    "available": Flag(),
    "reason": Text(),
    "attributed_gaps": Num(0, integer=True),
    "cpu_events": Num(0, integer=True),
    "untraced_gaps": Num(0, integer=True),
    "by_cause": ListOf(Obj({"cause": Text(), "gaps": Num(0, integer=True), "ns": NS},
                           required=("cause", "gaps", "ns"))),
    "gaps": ListOf(Obj({
        "t_ns": NS,
        "gap_ns": NS,
        "unexplained_ns": NS,
        "traced": Flag(),
        "verdict": Text(),
        "causes": ListOf(Obj({"name": Text(), "ns": NS}, required=("name", "ns"))),
    }, required=("t_ns", "gap_ns", "unexplained_ns", "causes")), 1024),
}, required=("available",)))
# The machine a run measured (probes/common.py host_facts): what a report or an export of another
# machine checks it against (app/store/result_host.py). Absent before coremap recorded it, and each
# field null where the machine did not say; a record out of shape is left out: the host is unknown.
HOST = Obj({
    "hostname": nullable(Text(255)),                    # HOST_NAME_MAX (64) is Linux's; DNS names reach 253
    "machine_id": nullable(Text(64)),
    "kernel": nullable(Text(256)),
    "cpu_model": nullable(Text(256)),
})
# Checked one by one in every result, whatever its probe: one out of shape is left out with a note, the
# rest of the run still shows (app/store/results.py).
FIELDS = {"sampled_seconds": SAMPLED, "gaps_per_cpu_hour": GAP_ROWS, "gaps": GAPS, "attribution": ATTRIBUTION,
          "host": HOST}

JITTER = Obj({
    "cpu": nullable(CPU),                               # null: an --unbound run
    "achieved_duty": nullable(Num(0)),                  # null: nothing elapsed
    "loop_ns": nullable(NS),                            # null: no read
    "iterations": Num(0, U63, integer=True),
})      # nothing required: a stored histogram run is read by its buckets (its text is not printed again)

WAKEUP = Obj({
    "cpu": nullable(CPU),
    "wakeups": Num(0, U63, integer=True),
    "interval_ns": nullable(Num(0, integer=True)),      # null: a run without a hello line
    "mean_ns": nullable(NS),                            # null: no wakeup
    "min_ns": nullable(Num(0, integer=True)),
    "percentiles": PERCENTILES,
    # how it ran: absent before the text said it, null where the hello line did not say
    "policy": nullable(Text(32)),
    "priority": nullable(Num(0, 99, integer=True)),
    "timer_slack_ns": nullable(Num(0, integer=True)),
    "dma_latency": Obj({"held": Flag(), "why": nullable(Text())}, required=("held",)),
})

# -- messaging: results before paced senders have no rates, paces, lost, drained, cpu_series or
# pace_of_window. Rates are at most 1e12 a second (the plot scales its y range by 1.15); per-window
# lists hold 10 windows a second for at most a day.
RATE = Num(0, 1e12)
WINDOWS = 1 << 20


def _placement(side) -> Obj:
    """A placement pins both sides (send, recv: CPUs) or neither (both null): the view sorts {send,
    recv} when send is a CPU, so one without the other is refused; `side` is the shape of both."""
    return Obj({
        "name": Text(),
        "kind": Text(),
        "series": ListOf(RATE, WINDOWS),                        # messages per second of each window
        "pace_of_window": ListOf(Num(0, integer=True), WINDOWS),   # an index into rates
        # each window's [sender, receiver] CPU when last read (-1: not read); null: not kept
        "cpu_series": ListOf(nullable(Tuple(Num(-1, 65535, integer=True), Num(-1, 65535, integer=True))),
                             WINDOWS),
        "median_rate": nullable(RATE),                          # null: no saturation window
        "cv": nullable(Num(0)),                                 # null: fewer than two saturation windows
        "sent": Num(0, integer=True),
        "received": Num(0, integer=True),
        "lost": nullable(Num(0, integer=True)),                 # null: drained messages not counted
        "migrations": Obj({"sender": nullable(Num(0, integer=True)), "receiver": nullable(Num(0, integer=True))},
                          required=("sender", "receiver")),     # null: the kernel did not say
        "paces": ListOf(Obj({
            "label": Text(64),
            "achieved_rate": nullable(RATE),                    # null: no window at this pace
            "sent": Num(0, integer=True),
            "lost": nullable(Num(0, integer=True)),
            "latency": nullable(Obj({k: nullable(Num(0, integer=True)) for k in ("p50", "p99", "max")})),
        }, required=("label", "sent")), 1024),
        "send": side,
        "recv": side,
    }, required=("name", "kind", "send", "recv", "series", "migrations", "cv", "sent", "received"))


MESSAGING = Obj({
    "title": Text(),
    "verdict": Text(),                                          # the view adds to it: never null
    "sampled_seconds": Num(0),
    "window_ns": nullable(Num(0, 1e12, integer=True)),          # null: a run that sent no hello
    "rounds": nullable(Num(1, integer=True)),
    "message_bytes": nullable(Num(1, integer=True)),            # null: no segment finished
    "rates": ListOf(RATE, 1024),                                # 0: as fast as it can
    "missing": ListOf(Text(), 64),
    "placements": ListOf(Either(_placement(CPU), _placement(NULL)), 4096),
}, required=("title", "placements"))

# -- first-touch: a run of the probe's own mapping (no `mode`; a row per NUMA node) or a JVM command
# run twice (`"mode": "command"`, probes/pretouch.py). Results before the per-GiB figures and THP
# counts lack ms_per_gib, cpu_ms_per_gib, sys_ms_per_gib, off_cpu_share, stalls, stall_ns and vmstat.
_PER_GIB = {k: nullable(Num(0)) for k in ("ms_per_gib", "cpu_ms_per_gib", "sys_ms_per_gib")}
FIRST_TOUCH = Where(Where(Obj({
    "mode": Where(Text(7), lambda m: m == "command", 'expected "command"'),   # or absent: the mapping's
    "title": Text(200),
    "cpu": nullable(CPU),                                       # null: an --unbound run
    "sampled_seconds": Num(0),
    "size_bytes": nullable(Num(1, 1 << 50, integer=True)),      # null only without a hello line
    "page_bytes": nullable(Num(1, 1 << 30, integer=True)),
    "stretch_bytes": nullable(Num(1, 1 << 50, integer=True)),
    "table_note": nullable(Text()),                             # null: more than one NUMA node
    "thp": Obj({"asked": nullable(Text(64)), "system": nullable(Text(64)), "defrag": nullable(Text(64)),
                "meaning": Text()}, required=("asked", "system", "defrag", "meaning")),
    "nodes": ListOf(Obj({
        "node": Num(0, 1023, integer=True),
        "local": nullable(Flag()),                              # null: the CPU's node is not known
        "ratio": nullable(Num(0)),
        "huge_pages": nullable(Num(integer=True)),              # a difference: may be below 0
        "on_node_share": nullable(Num(0, 1)),
        "first": Where(Obj({
            "ns_per_page": nullable(Num(0)),
            "sys_share": nullable(Num(0, 1)),                   # null: under 50 ms of CPU time
            "minor_faults": Num(0, integer=True),
            **_PER_GIB,
            "off_cpu_share": nullable(Num(0, 1)),
            "stalls": Num(0, integer=True),
            "stall_ns": Num(0),
            "vmstat": nullable(Obj({k: Num(0, integer=True)     # null: no end line (a run cut short)
                                    for k in ("compact_stall", "thp_fault_alloc", "thp_fault_fallback")})),
            "percentiles": nullable(Obj({k: nullable(Num(0, integer=True)) for k in ("p50", "p99", "max")})),
        }, required=("ns_per_page", "sys_share", "minor_faults")),
            lambda f: not f.get("stalls") or "stall_ns" in f, "stall_ns: missing (stalls counted)"),
        "second": Obj({"ns_per_page": nullable(Num(0)), **_PER_GIB}, required=("ns_per_page",)),
        # [offset in the mapping, ns per page] per stretch
        "series": Obj({k: ListOf(Tuple(Num(0, 1 << 50, integer=True), Num(0)), 4096) for k in ("first", "second")},
                      required=("first", "second")),
    }, required=("node", "local", "first", "second", "ratio", "huge_pages", "on_node_share", "series")), 1024),
    "runs": ListOf(Obj({
        "pretouch": Flag(),
        "exit_status": Num(-64, 255, integer=True),             # -N: killed by signal N
        "wall_ns": Num(0, integer=True),
        "user_ns": Num(0, integer=True),
        "sys_ns": Num(0, integer=True),
        "minor_faults": Num(0, integer=True),
        "flag_in": Text(64),                                    # "command line" or "JAVA_TOOL_OPTIONS"
    }, required=("pretouch", "exit_status", "wall_ns", "user_ns", "sys_ns", "minor_faults", "flag_in")), 16),
}, required=("title",)),
    lambda r: r.get("mode") != "command" or "runs" in r, "runs: missing (a command run)"),
    lambda r: r.get("mode") == "command" or all(k in r for k in ("page_bytes", "thp", "nodes")),
    "page_bytes, thp and nodes: a run of the mapping holds all three")

SHAPES: dict = {"jitter": JITTER, "wakeup": WAKEUP, "sweep": SWEEP, "c2c": C2C, "counters": COUNTERS,
                 "messaging": MESSAGING, "first-touch": FIRST_TOUCH, "scaling": SCALING}
