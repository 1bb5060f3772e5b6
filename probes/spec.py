"""ProbeSpec: one probe run as asked for (the probe, its CPUs, its options), and the jobs it becomes.

The one place that knows which option applies to which probe, which probes run one process per CPU,
how a child's argv is spelled (`python -m probes PROBE ARGS`, probes/__main__.py) and what each job
is called. `coremap probe` (app/cli/probe.py) builds a spec from its options, the window's probe
form (widgets/probe/form.py) from its fields; both run the jobs it yields.

A spec that asks for an option its probe does not take raises ProbeSpecError naming the option
(`--rounds does not apply to the jitter probe; it applies to sweep`). CPUs are checked by each front
end (the CLI against this process's affinity, the form against its CPU field) and again by the
child before any loop (probes/common.py check_cpus).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, fields

from app.errors import CoremapError
from app.format import cpus_word, format_size
from app.parse.cpulist import format_cpulist

PROBE_NAMES = ("jitter", "wakeup", "sweep", "c2c", "counters", "messaging", "first-touch", "scaling")
# One child per CPU of the list; the others (sweep, c2c, scaling) take the whole list in one child,
# and messaging takes its CPUs from its placements.
PER_CPU = ("jitter", "wakeup", "counters", "first-touch")
# Probes whose intervals carry latency buckets (histograms, .hlog).
HISTOGRAM_PROBES = ("jitter", "wakeup")
SCHED_PROBES = ("jitter", "wakeup", "sweep")
# Probes whose result carries its own series (throughput per window, cost per page, throughput per
# width), tables and a verdict sentence; each interval line says how far the run is (`progress`).
SERIES_PROBES = ("messaging", "first-touch", "scaling")
# Probes a run of which measures for --seconds (Job.seconds): per CPU for the first three.
TIMED = ("jitter", "wakeup", "counters")
# Probes that need no CPUs: messaging takes its CPUs from its placements (a list only narrows `auto`),
# scaling widens over every CPU it may use when it is given none.
CPUS_OPTIONAL = ("messaging", "scaling")

# Which probes take each option (each probe's build_parser in probes/<name>.py is what the child
# accepts). `seconds` is passed to every child (add_common_args takes it) but only these use it:
# sweep runs its rounds, c2c its pairs, first-touch its pages.
APPLIES: dict[str, tuple[str, ...]] = {
    "unbound": PER_CPU,
    "seconds": TIMED + ("messaging", "scaling"),
    "duty": ("jitter",),
    "threshold_ns": ("jitter",),
    "attribute": ("jitter",),
    "interval_us": ("wakeup",),
    "dma_latency": ("wakeup",),
    "policy": SCHED_PROBES + ("scaling",),
    "priority": SCHED_PROBES + ("scaling",),
    "slack_ns": SCHED_PROBES,
    "rounds": ("sweep", "messaging", "scaling"),
    "pairs": ("c2c",),
    "command": ("counters", "scaling"),
    "placement": ("messaging",),
    "transport": ("messaging",),
    "size": ("first-touch",),
    "node": ("first-touch",),
    "thp": ("first-touch",),
    "work": ("scaling",),
    "threads": ("scaling",),
}
# Options with a value, in the order the child's argv has always spelled them.
_VALUED = ("duty", "threshold_ns", "interval_us", "policy", "priority", "slack_ns", "rounds", "pairs",
           "placement", "transport", "size", "node", "thp", "work", "threads")
_FLAGS = ("dma_latency", "attribute")


class ProbeSpecError(CoremapError):
    """A probe asked for with an option it does not take, or with nothing to run on."""


def applies(option: str, probe: str) -> bool:
    """Whether `probe` takes `option` (a ProbeSpec field name)."""
    return probe in APPLIES[option]


def module(probe: str):
    """The module of a probe (probes/<name>.py, `first-touch` in probes/first_touch.py)."""
    return importlib.import_module(f"probes.{probe.replace('-', '_')}")


def flag(option: str) -> str:
    """How the command line spells an option: `threshold_ns` -> `--threshold-ns`."""
    return "a command after --" if option == "command" else "--" + option.replace("_", "-")


@dataclass(frozen=True)
class Job:
    """One child process: `python -m probes PROBE *args`.

    `cpus` are the CPUs it is pinned to and measures (coremap keeps its own threads off them while
    it runs); () for an unbound run, which measures wherever the scheduler puts it. `seconds` is how
    long it measures (None for sweep and c2c, which run their rounds or pairs); `steps` is how many
    interval lines make the whole run (sweep rounds, c2c pairs; 1 for the others).
    """
    probe: str
    args: tuple[str, ...]
    cpus: tuple[int, ...]
    label: str
    seconds: float | None
    steps: int = 1

    def summarize(self, lines) -> dict:
        """The result object of the job's JSON lines (probes/<probe>.py summarize). Lines that do not
        make one (a field missing or of another kind: a child of another version, or lines from another
        machine, app/remote/probe_runs.py) raise ProbeSpecError naming the job, never a traceback."""
        try:
            return module(self.probe).summarize(lines)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError) as e:
            raise ProbeSpecError(f"{self.label}: its lines do not make a result ({type(e).__name__}: "
                                 f"{str(e)[:80]})") from None


@dataclass(frozen=True)
class ProbeSpec:
    """A probe run as asked for. None (or False, or ()) means "not given": the child's default."""
    probe: str
    cpus: tuple[int, ...] = ()
    unbound: bool = False
    seconds: float = 1.0
    duty: float | None = None
    threshold_ns: int | None = None
    interval_us: int | None = None
    policy: str | None = None
    priority: int | None = None
    slack_ns: int | None = None
    dma_latency: bool = False
    attribute: bool = False
    rounds: int | None = None
    pairs: str | None = None
    command: tuple[str, ...] = ()
    placement: str | None = None
    transport: str | None = None
    size: int | None = None
    node: int | None = None
    thp: str | None = None
    work: str | None = None
    threads: int | None = None

    def __post_init__(self):
        if self.probe not in PROBE_NAMES:
            raise ProbeSpecError(f"no probe named {self.probe!r}; choose one of {', '.join(PROBE_NAMES)}")
        object.__setattr__(self, "cpus", tuple(sorted(set(self.cpus))))
        object.__setattr__(self, "command", tuple(self.command))
        for f in fields(self):
            if f.name in APPLIES and f.name != "seconds" and self._given(f.name) \
                    and not applies(f.name, self.probe):
                names = APPLIES[f.name]
                to = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
                raise ProbeSpecError(f"{flag(f.name)} does not apply to the {self.probe} probe; "
                                     f"it applies to {to}")

    def _given(self, option: str) -> bool:
        value = getattr(self, option)
        return value is not None and value is not False and value != ()

    # -- jobs --------------------------------------------------------------------------------------
    def jobs(self) -> list[Job]:
        """One job per CPU for PER_CPU probes, else one job for the whole list."""
        if self.probe in PER_CPU and self.cpus:
            groups = [(c,) for c in self.cpus]
        else:
            groups = [self.cpus]
        seconds = self.seconds if self.probe in TIMED else None
        return [Job(self.probe, tuple(self.child_args(g)), self._measured_cpus(g), self.label(g),
                    seconds, self._steps()) for g in groups]

    def _measured_cpus(self, cpus: tuple[int, ...]) -> tuple[int, ...]:
        """The CPUs a job measures (Job.cpus): a messaging run's are those of its placements."""
        if self.unbound:
            return ()
        if self.probe == "messaging":
            # imported here: the placements' grammar lives with the probe, which the CLI imports
            # only to run it
            from probes.messaging import placement_cpus
            return placement_cpus(self.placement or "auto", cpus)
        return cpus

    def child_args(self, cpus: tuple[int, ...]) -> list[str]:
        """The child's arguments after `python -m probes PROBE` for a job on `cpus`."""
        a: list[str] = []
        if cpus:
            a += ["--cpu", format_cpulist(cpus)]
        if self.unbound:
            a.append("--unbound")
        a += ["--seconds", str(self.seconds)]
        for option in _VALUED:
            value = getattr(self, option)
            if value is not None:
                a += [flag(option), str(value)]
        a += [flag(option) for option in _FLAGS if getattr(self, option)]
        if self.command:
            a += ["--", *self.command]
        return a

    def label(self, cpus: tuple[int, ...]) -> str:
        """What a job on `cpus` is called in the window: `jitter CPU 2 50% fifo 80`."""
        if self.probe == "messaging":
            return f"messaging {self.placement or 'auto'} {self.transport or 'shm'}"
        where = cpus_word(cpus) if cpus else ("all CPUs" if self.probe == "scaling" else "unbound")
        if self.unbound and cpus:
            where += " unbound"
        suffix = ""
        if self.duty is not None and self.duty != 100.0:
            suffix += f" {self.duty:g}%"
        if self.policy == "fifo":
            suffix += " fifo" + (f" {self.priority}" if self.priority is not None else "")
        if self.size is not None:
            suffix += f" {format_size(self.size)}"
        if self.thp is not None:
            suffix += f" thp {self.thp}"
        if self.node is not None:
            suffix += f" memory on node {self.node}"
        if self.probe == "scaling":
            suffix += f" -- {' '.join(self.command)}" if self.command else f" {self.work or 'lock'}"
        return f"{self.probe} {where}{suffix}"

    def _steps(self) -> int:
        if self.probe == "sweep":
            if self.rounds is not None:
                return max(1, self.rounds)
            # imported here: probes.sweep brings hdrh and the topology reader (~150 ms), which every
            # `coremap` command would pay, since the CLI imports this module to list the probes
            from probes.sweep import DEFAULT_ROUNDS
            return DEFAULT_ROUNDS
        if self.probe == "c2c":
            n = len(self.cpus)
            return max(1, len(self.pairs.split(",")) if self.pairs else n * (n - 1) // 2)
        return 1
