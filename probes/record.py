"""What a probe's record is: ProbeRecord, its Fields and Presets, and the parts records share.

Each probe's record is the RECORD of its package, probes/<name>/__init__.py (probes/catalog.py finds
them). A record module imports only this module and app.format: every `coremap` run reads all of them
to build its parser (issue 12), so a probe's runner (probes/<name>/measure.py) reads its defaults and
choices from its record (messaging.TRANSPORTS, sweep.DEFAULT_ROUNDS), never the other way round.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

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
    view and picture: the tab of the probe panel that draws its runs and the plot a report pictures
    them with, both in widgets/probe/<key>.py; named here, not imported, so this layer stays below Qt.
    A view takes `show_result(result, order)` (order: CPU ids in the grid's order); a picture takes
    `set_result(result)`.
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
    measured_cpus: bool = False            # its measure module's measured_cpus(spec, cpus) says what a job measures
    label_cpus: bool = True                # its label says where it runs
    no_cpus: str = "unbound"               # ... and this when it has no CPUs
    pin: bool = True
    view: str = ""                         # its tab's title; the tab is View of widgets/probe/<key>.py
    picture: str = ""                      # what its report picture (Picture, beside View) shows: the caption
    gaps_from: str = ""
    presets: tuple[Preset, ...] = ()
    order: int = 0                         # where the form, the CLI and the tabs list it, lowest first

    @property
    def key(self) -> str:
        """The name of its folder, probes/<key>/, and of its view, widgets/probe/<key>.py."""
        return self.name.replace("-", "_")

    @property
    def measure(self) -> ModuleType:
        """Its runner, probes/<key>/measure.py (build_parser, run, summarize, text_lines)."""
        return self.part("probes.{}.measure")

    def part(self, where: str) -> ModuleType:
        """Its module at `where`, "{}" standing for its key: "probes.{}.measure" (its runner),
        "widgets.probe.{}" (its view and picture). The one place a probe's name becomes a module: a
        part is imported when first used, not with the record, which every `coremap` run reads to
        build its parser (issue 12: the runners import the topology reader and the tracer, the views
        pyqtgraph)."""
        return importlib.import_module(where.format(self.key))

    def field(self, option: str) -> Field:
        """Its Field for `option`; KeyError when it has none."""
        for f in self.fields:
            if f.option == option:
                return f
        raise KeyError(f"the {self.name} probe has no option {option!r}")

    def takes_option(self, option: str) -> bool:
        return option in self.takes or any(f.option == option for f in self.fields)


# -- tags and hooks the records use ------------------------------------------------------------------

def plain_tag(value) -> str:
    return "" if value is None else str(value)


def command_tag(value) -> str:
    return "-- " + " ".join(value) if value else ""


def _attribution_unavailable() -> str | None:
    # imported here: the tracer reads tracefs, which only the form's box needs to know about
    from probes.trace import attribution_unavailable
    return attribution_unavailable()


def _attribution_asks() -> str | None:
    from probes.trace import helper_sentence
    return helper_sentence()


def attribute_field(what: str, when: str) -> Field:
    """--attribute of a probe whose worst samples the CPU's tracefs events explain (jitter, wakeup)."""
    return Field("attribute", f"attribute {what} (tracefs)", "flag",
                 "record interrupts, softirqs, NMIs and task switches on the probed CPU while it runs and say "
                 f"what ran {when} (root, tracefs); tracing adds a little work to every interrupt on that CPU",
                 default=True, unavailable=_attribution_unavailable, asks=_attribution_asks)


# A long run of a per-CPU timed probe reports as it goes (probes/periods.py), as oslat and cyclictest do.
EVERY = Field("every", "report every", "int", "report each period of this many seconds as it ends (the longest, and "
              "how many reached 10 µs, per CPU): for a long run", low=1, high=86400, unit="s", suffix=" s",
              special="at the end only", metavar="S")
