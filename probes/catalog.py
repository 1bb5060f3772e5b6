"""The probe catalog: one ProbeRecord per probe, the one place a probe's identity is spelled.

A record says what a probe is called and titled, which common options it takes, its own options (each
a Field: the form's label, default, range and tooltip, the CLI's help, how it shows in a run's label),
how its runs are cut into jobs, how far a run is, which tab of the probe panel draws it and which plot
pictures it in a report. Everything that has to know about a probe reads its record: the spec
(probes/spec.py) and through it the CLI (app/cli/probe.py) and the child (probes/__main__.py), the
panel's form, tabs and live runs (widgets/probe/), the text (probes/text.py), the report's pictures and
sections (widgets/pictures.py, widgets/report_images.py). Adding a probe is its module
(probes/<name>.py: build_parser, run, summarize, text_lines), its loop in C, and its record below.

Why one module of records rather than a RECORD in each probe's module: every `coremap` run builds the
CLI's parser, which lists the probes and their options, and the window's form lists them at start;
reading a record from its probe's module would import all eight (the topology reader, the tracer,
hdrh: issue 12's start-up budget), where this module imports only app.format. A probe's module reads
its defaults and choices from its record (messaging.TRANSPORTS, sweep.DEFAULT_ROUNDS), so each value
is written once.

The views and plots a record names ("module:Class") live in widgets/; they are named, not imported,
so this layer stays below Qt. A view takes `show_result(result, order)` (order: CPU ids in the grid's
order); a picture takes `set_result(result)`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.format import format_size

# The options every probe's child takes (probes/common.py add_common_args); a record lists which of
# them mean something to it, and the form and the spec offer only those.
COMMON = ("unbound", "seconds", "policy", "priority", "slack_ns")
SCHEDULED = ("policy", "priority", "slack_ns")
SECONDS_MEAN = "How long to measure, per CPU"


@dataclass(frozen=True)
class Field:
    """One option of a probe: the ProbeSpec value `option`, the child's `--option`.

    kind: int, choice, text, size (64M, 1G), command (the words after `--`), flag (a check box,
    `--option` alone) or preset (a few `choices` and a custom number). For int and preset, low..high
    bound what the form and the CLI take; with `special`, the form offers one more value below `low`,
    shown as that text, which means "not given" (the child's own default). `choices` are (value, text);
    a None value is "not given". `unless`: not given when that option is (scaling's work and threads,
    when it runs a command). `unavailable()` says why the field cannot be used here (None: it can).
    `tag(value)` is how the value shows in a run's label ("" for nothing); it is given the default
    when the value is not given. `asks()` says what using it asks of the user here (the helper's
    authorisation) or None: a flag that asks starts unticked. `in_form`: False for an option only the
    CLI offers."""
    option: str
    label: str
    kind: str
    help: str                              # what it means, for the CLI's help and the form's tooltip
    default: Any = None
    low: float | None = None
    high: float | None = None
    unit: str = ""                         # the CLI's word for the bounds: "ns", "µs", "percent"
    choices: tuple[tuple[Any, str], ...] = ()
    special: str = ""
    prefix: str = ""
    suffix: str = ""
    placeholder: str = ""
    metavar: str = ""
    custom: float | None = None            # preset: where the custom number starts
    unless: str = ""
    tag: Callable[[Any], str] | None = None
    unavailable: Callable[[], str | None] | None = None
    asks: Callable[[], str | None] | None = None     # what using it asks of the user (authorisation)
    in_form: bool = True

    def values(self) -> tuple:
        """The choices' values, without "not given"."""
        return tuple(v for v, _ in self.choices if v is not None)


@dataclass(frozen=True)
class Preset:
    """Values for some of a probe's options that the form sets in one click (a button on the probe's
    page): common options (policy, priority, slack_ns) and the probe's own fields, by option name."""
    name: str
    help: str
    values: tuple[tuple[str, Any], ...]

    @property
    def key(self) -> str:
        """Its word on the command line: `coremap probe wakeup --like cyclictest`."""
        return self.name.removeprefix("like ").replace(" ", "-")


@dataclass(frozen=True)
class View:
    """A tab of the probe panel that draws one probe's runs, and its class ("module:Class")."""
    title: str
    widget: str


@dataclass(frozen=True)
class ProbeRecord:
    """Everything about one probe that is not its measuring (see the module docstring).

    per_cpu: one child per CPU of the list (else one child for the whole list). parallel: those
    children run at once, each pinned to its CPU, as oslat -c and cyclictest -t -a run one thread per
    CPU (issue 30: 74 isolated CPUs one after another took 74 minutes for 60 s each); a probe whose
    children would disturb each other (sweep, counters) leaves it off. timed: it measures
    for `seconds` per CPU (Job.seconds). cpus_optional: the front ends need no CPUs from the user.
    histogram: its interval lines carry latency buckets: its runs overlay on the Histogram and
    Percentiles tabs, they can be saved as .hlog, and a report draws their gaps and compares their
    percentiles; any other probe's report section is its picture, its verdict and its text.
    progress: how its interval lines say how far a job is: "seconds" (elapsed_ns of `seconds`),
    "steps" (one line per `step`, Job.steps of them) or "share" (each line's `progress`, 0 to 1).
    pin: the child pins itself to its CPU before it measures (counters pins the command it counts).
    gaps_from: for a probe whose samples are read-to-read intervals (jitter), the hello-line key of
    the shortest interval that counts as a gap: its runs are drawn, tabulated and compared by their
    gaps (probes/histogram.py gap_figures), not by every read.
    presets: settings the form offers in one click (wakeup: like cyclictest).
    """
    name: str
    title: str
    fields: tuple[Field, ...] = ()
    takes: tuple[str, ...] = ()            # of COMMON
    per_cpu: bool = False
    parallel: bool = False
    timed: bool = False
    cpus_optional: bool = False
    cpus_means: str = ""                   # what -c/--cpus means where it is not "the CPUs to measure"
    seconds_means: str = SECONDS_MEAN
    usage: str = "-c LIST"                 # the CLI's examples after `coremap probe NAME` ("   or   " between two)
    histogram: bool = False
    progress: str = "steps"
    step: str = "step"
    steps: Callable[[Any], int] | None = None              # (ProbeSpec) -> interval lines of a job
    measured_cpus: str = ""                # a function of its module: (ProbeSpec, CPUs) -> what a job measures
    label_cpus: bool = True                # its label says where it runs
    no_cpus: str = "unbound"               # ... and this when it has no CPUs
    pin: bool = True
    view: View | None = None
    picture: str = ""                      # "module:Class" pictured in a report
    caption: str = ""                      # what the picture shows
    gaps_from: str = ""
    presets: tuple[Preset, ...] = ()

    @property
    def module_name(self) -> str:
        return "probes." + self.name.replace("-", "_")

    def field(self, option: str) -> Field:
        """Its Field for `option`; KeyError when it has none."""
        for f in self.fields:
            if f.option == option:
                return f
        raise KeyError(f"the {self.name} probe has no option {option!r}")

    def takes_option(self, option: str) -> bool:
        return option in self.takes or any(f.option == option for f in self.fields)


# -- tags and hooks the records use ------------------------------------------------------------------

def _plain(value) -> str:
    return "" if value is None else str(value)


def _duty_tag(value) -> str:
    return "" if value == 100.0 else f"{value:g}%"


def _command_tag(value) -> str:
    return "-- " + " ".join(value) if value else ""


def _attribution_unavailable() -> str | None:
    # imported here: the tracer reads tracefs, which only the form's box needs to know about
    from probes.trace import attribution_unavailable
    return attribution_unavailable()


def _attribution_asks() -> str | None:
    from probes.trace import helper_sentence
    return helper_sentence()


def _sweep_steps(spec) -> int:
    return max(1, spec.rounds if spec.rounds is not None else SWEEP.field("rounds").default)


def _c2c_steps(spec) -> int:
    n = len(spec.cpus)
    return max(1, len(spec.pairs.split(",")) if spec.pairs else n * (n - 1) // 2)


# -- the records ---------------------------------------------------------------------------------------

def _attribute(what: str, when: str) -> Field:
    """--attribute of a probe whose worst samples the CPU's tracefs events explain (jitter, wakeup)."""
    return Field("attribute", f"attribute {what} (tracefs)", "flag",
                 "record interrupts, softirqs, NMIs and task switches on the probed CPU while it runs and say "
                 f"what ran {when} (root, tracefs); tracing adds a little work to every interrupt on that CPU",
                 default=True, unavailable=_attribution_unavailable, asks=_attribution_asks)


# A long run of a per-CPU timed probe reports as it goes (probes/periods.py), as oslat and cyclictest do.
EVERY = Field("every", "report every", "int", "report each period of this many seconds as it ends (the longest, and "
              "how many reached 10 µs, per CPU): for a long run", low=1, high=86400, unit="s", suffix=" s",
              special="at the end only", metavar="S")

JITTER = ProbeRecord(
    "jitter", "Jitter (gaps in a busy loop)", takes=COMMON, per_cpu=True, parallel=True, timed=True, histogram=True,
    progress="seconds", gaps_from="threshold_ns",
    fields=(
        Field("duty", "duty cycle", "preset", "percent of time sampling", default=100.0, low=0.1, high=100.0,
              unit="percent", choices=((100.0, "100%"), (50.0, "50%"), (10.0, "10%"), (None, "custom")),
              custom=25.0, suffix=" %", metavar="P", tag=_duty_tag),
        Field("threshold_ns", "threshold", "int", "the shortest read-to-read interval that counts as a gap "
              "(finely binned, in the gap figures and percentiles)", default=1000, low=1, high=10 ** 9,
              unit="ns", metavar="NS", in_form=False),
        _attribute("gaps", "during each large gap"),
        EVERY,
    ))

WAKEUP = ProbeRecord(
    "wakeup", "Wakeup latency (timer sleep)", takes=COMMON, per_cpu=True, parallel=True, timed=True, histogram=True,
    progress="seconds",
    fields=(
        Field("interval_us", "interval", "int", "the period of the timer", default=1000, low=10, high=10 ** 7,
              unit="µs", suffix=" µs", metavar="US"),
        Field("no_dma_latency", "let the CPUs sleep deep", "flag",
              "do not hold /dev/cpu_dma_latency at 0 while it runs; by default it is held, as cyclictest holds it, "
              "which keeps the CPUs out of deep C-states whose exit latency would be measured as late wakeups",
              tag=lambda v: "deep sleep allowed" if v else ""),
        _attribute("late wakeups", "between each of the latest wakeups' due time and its wakeup (as timerlat -a)"),
        EVERY,
    ),
    presets=(Preset("like cyclictest", "what `cyclictest -p 80 -i 1000` measures: SCHED_FIFO 80, a 1 ms timer, "
                    "/dev/cpu_dma_latency held at 0",
                    (("policy", "fifo"), ("priority", 80), ("interval_us", 1000), ("no_dma_latency", False))),))

SWEEP = ProbeRecord(
    "sweep", "Sweep (same work on each CPU)", takes=SCHEDULED, step="round", steps=_sweep_steps,
    view=View("Sweep", "widgets.probe.sweep_plot:SweepPlot"),
    fields=(
        Field("rounds", "rounds", "int", "work units per CPU", default=120, low=2, high=100_000, unit="rounds"),
    ))

C2C = ProbeRecord(
    "c2c", "Core to core (cache-line ping-pong)", step="pair", steps=_c2c_steps,
    view=View("Core to core", "widgets.probe.c2c_heatmap:C2CHeatmap"),
    fields=(
        Field("pairs", "pairs", "text", "only these pairs (default: every pair of the CPUs)", metavar="A:B,...",
              placeholder="every pair of the CPUs, or e.g. 0:1,0:2"),
    ))

COUNTERS = ProbeRecord(
    "counters", "Counters (perf events, pinned vs not)", takes=("unbound", "seconds"), per_cpu=True, timed=True,
    step="run", steps=lambda spec: 2, pin=False, usage="-c LIST [-- COMMAND]",
    fields=(
        Field("command", "command", "command", "the command counted, pinned and unpinned",
              placeholder="default: a jitter probe of the duration"),
    ))

MESSAGING = ProbeRecord(
    "messaging", "Messaging (sender and receiver placements)", takes=("seconds",), cpus_optional=True,
    cpus_means="the CPUs `auto` places among (default: all)",
    seconds_means="Measured time per placement (cut into its rounds)",
    usage="--placement auto|A:B,... --transport shm|pipe|udp --rates 10k,100k,1M,max --seconds S",
    progress="share", measured_cpus="job_cpus", label_cpus=False,
    view=View("Messaging", "widgets.probe.messaging_view:MessagingView"),
    picture="widgets.probe.messaging_view:MessagingPicture",
    caption="messages per second per 100 ms window, one line per placement (at each pace in turn); under it, "
            "the CPUs the unpinned sender and receiver ran on",
    fields=(
        Field("placement", "placements", "text",
              "auto runs every kind of placement this machine offers among the CPUs (all when none are "
              "given): same CPU, SMT siblings, same L3, other L3, other node, and unpinned; or give "
              "sender:receiver pairs and 'unpinned'", default="auto", metavar="auto|A:B,...",
              placeholder="auto, or sender:receiver pairs such as 0:1,1:1,unpinned", tag=_plain),
        Field("transport", "transport", "choice", "how the messages travel", default="shm",
              choices=(("shm", "shared-memory ring"), ("pipe", "pipe"), ("udp", "UDP on loopback")), tag=_plain),
        Field("rates", "sender's pace", "text", "the sender's paces, messages per second (10k, 100k, 1M, ...) and "
              "max (as fast as it can); each placement's time is shared among them, with latency percentiles "
              "at each", default="10k,100k,1M,max", metavar="RATE,...", placeholder="10k,100k,1M,max"),
        Field("rounds", "rounds", "int", "each placement's time is cut into this many segments per pace, run "
              "in alternated order", default=2, low=1, high=100, unit="rounds"),
    ))

FIRST_TOUCH = ProbeRecord(
    "first-touch", "First touch (cost of fresh pages)", takes=("unbound",), per_cpu=True, progress="share",
    usage="-c N --size 1G [--node M] [--thp never|madvise|always]   or   -c N -- JAVA COMMAND",
    view=View("First touch", "widgets.probe.first_touch_view:FirstTouchView"),
    picture="widgets.probe.first_touch_view:PageCostPlot",
    caption="time per page along the mapping, first touch and second",
    fields=(
        Field("size", "size", "size", "memory to map and touch: 64M, 512M, 1G… (powers of 1024)",
              default=1 << 30, low=1, high=1 << 50, metavar="SIZE", tag=format_size, unless="command"),
        Field("node", "memory on", "int", "bind the memory to NUMA node M", low=0, high=1023, unit="(NUMA node)",
              special="each node with memory", prefix="node ", metavar="M", unless="command",
              tag=lambda v: "" if v is None else f"memory on node {v}"),
        Field("thp", "huge pages", "choice", "transparent huge pages for the mapping",
              choices=((None, "no hint (the system's mode)"), ("never", "never"), ("madvise", "madvise"),
                       ("always", "always")), tag=lambda v: f"thp {v}" if v else "", unless="command"),
        Field("command", "JVM command", "command", "a JVM command (java -Xms8g -Xmx8g ...) run twice, without and "
              "with -XX:+AlwaysPreTouch, instead of the probe's own mapping: start-up time and system time",
              placeholder="the probe's own mapping, or a java command to run with and without AlwaysPreTouch",
              tag=_command_tag),
    ))

SCALING = ProbeRecord(
    "scaling", "Scaling (throughput on 1, 2, 4… CPUs)", takes=("seconds", "policy", "priority"),
    cpus_optional=True, cpus_means="the CPUs to widen over (default: all)",
    seconds_means="The size of the work: what all runs would take at one CPU's speed",
    usage="-c LIST --work lock|atomic|private [--threads N]   or   -c LIST -- COMMAND",
    progress="share", no_cpus="all CPUs",
    view=View("Scaling", "widgets.probe.scaling_view:ScalingView"),
    picture="widgets.probe.scaling_view:ScalingPlot", caption="throughput against CPUs, with the ideal line",
    fields=(
        Field("work", "work", "choice", "what the threads share", default="lock",
              choices=(("lock", "a shared lock"), ("atomic", "a shared atomic"), ("private", "private data")),
              unless="command", tag=_plain),
        Field("threads", "threads", "int", "threads", low=1, high=1024, unit="threads", special="one per CPU",
              metavar="N", unless="command"),
        Field("rounds", "rounds", "int", "rounds of alternated order (the widths forward, then backward)",
              low=1, high=100, unit="rounds",
              special="default (3; 1 for a command)"),
        Field("command", "command", "command", "a command to run at each width instead of the built-in work",
              placeholder="the built-in work, or a command to run at each width", tag=_command_tag),
    ))

# In the order the form and the CLI list them.
RECORDS: dict[str, ProbeRecord] = {r.name: r for r in (JITTER, WAKEUP, SWEEP, C2C, COUNTERS, MESSAGING,
                                                        FIRST_TOUCH, SCALING)}
NAMES = tuple(RECORDS)
