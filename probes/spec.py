"""ProbeSpec: one probe run as asked for (the probe, its CPUs, its options), and the jobs it becomes.

Which options a probe takes, their bounds, how its runs are cut into jobs and what a job is called
come from the probe's record (probes/catalog.py); this module applies them: it checks a spec against
its record, spells a child's argv (`python -m probes PROBE ARGS`, probes/__main__.py) and names each
job. `coremap probe` (app/cli/probe.py) builds a spec from its options, the window's probe form
(widgets/probe/form.py) from its fields; both run the jobs it yields.

A spec that asks for an option its probe does not take raises ProbeSpecError naming the option
(`--pairs does not apply to the jitter probe; it applies to c2c`), and one
out of its record's bounds says which it takes. CPUs are checked by each front end (the CLI against
this process's affinity, the form against its CPU field) and again by the child before any loop
(probes/common.py check_cpus).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.errors import CoremapError
from app.format import cpus_word, format_size
from app.parse.cpulist import format_cpulist
from probes.catalog import NAMES, RECORDS
from probes.record import COMMON, Field, ProbeRecord

PROBE_NAMES = NAMES

# Which probes take each option (each probe's build_parser in probes/<name>/measure.py is what the child
# accepts): the common ones, then every probe's own, in the catalog's order. `seconds` is passed to
# every child (add_common_args takes it) but only these use it.
APPLIES: dict[str, tuple[str, ...]] = {
    option: tuple(r.name for r in RECORDS.values() if r.takes_option(option))
    for option in dict.fromkeys(COMMON + tuple(f.option for r in RECORDS.values() for f in r.fields))}


class ProbeSpecError(CoremapError):
    """A probe asked for with an option it does not take, or with nothing to run on."""


def record(probe: str) -> ProbeRecord:
    """The record of the probe named `probe`; ProbeSpecError naming the probes there are otherwise."""
    r = RECORDS.get(probe)
    if r is None:
        raise ProbeSpecError(f"no probe named {probe!r}; choose one of {', '.join(PROBE_NAMES)}")
    return r


def applies(option: str, probe: str) -> bool:
    """Whether `probe` takes `option` (a ProbeSpec option name)."""
    return probe in APPLIES[option]


def flag(option: str) -> str:
    """How the command line spells an option: `threshold_ns` -> `--threshold-ns`."""
    return "a command after --" if option == "command" else "--" + option.replace("_", "-")


def _given(value) -> bool:
    return value is not None and value is not False and value != ()


@dataclass(frozen=True)
class Job:
    """One child process: `python -m probes PROBE *args`.

    `cpus` are the CPUs it is pinned to and measures (coremap keeps its own threads off them while
    it runs); () for an unbound run, which measures wherever the scheduler puts it. `seconds` is how
    long it measures (None for a probe that is not timed: it runs its rounds, pairs or pages);
    `steps` is how many interval lines make the whole run (its record's steps; 1 for the others).
    `parallel`: it runs at once with the jobs of its spec beside it (its record's parallel; batches()).
    """
    probe: str
    args: tuple[str, ...]
    cpus: tuple[int, ...]
    label: str
    seconds: float | None
    steps: int = 1
    parallel: bool = False

    def summarize(self, lines) -> dict:
        """The result object of the job's JSON lines (probes/<probe>/measure.py summarize). Lines that do not
        make one (a field missing or of another kind: a child of another version, or lines from another
        machine, app/remote/probe_runs.py) raise ProbeSpecError naming the job, never a traceback."""
        try:
            return RECORDS[self.probe].measure.summarize(lines)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError) as e:
            raise ProbeSpecError(f"{self.label}: its lines do not make a result ({type(e).__name__}: "
                                 f"{str(e)[:80]})") from None


@dataclass(frozen=True, init=False)
class ProbeSpec:
    """A probe run as asked for: `ProbeSpec("jitter", (2,), seconds=5, duty=50.0)`.

    Every option of APPLIES reads as an attribute (`spec.duty`); one not given reads None (False for a
    flag, () for a command): the child's default. `given` holds the options given, in the record's order.
    """
    probe: str
    cpus: tuple[int, ...]
    unbound: bool
    seconds: float
    given: tuple[tuple[str, Any], ...]

    def __init__(self, probe: str, cpus=(), *, unbound: bool = False, seconds: float = 1.0, **options):
        rec = record(probe)
        for name in options:
            if name not in APPLIES or name in ("unbound", "seconds"):
                raise ProbeSpecError(f"no probe option named {name!r}; the options are {', '.join(APPLIES)}")
        options = {k: tuple(v) if k == "command" else v for k, v in options.items() if _given(v)}
        for name in [*options, *(["unbound"] if unbound else [])]:
            if not applies(name, probe):
                names = APPLIES[name]
                to = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
                raise ProbeSpecError(f"{flag(name)} does not apply to the {probe} probe; it applies to {to}")
        for f in rec.fields:
            if f.option in options:
                _check(rec, f, options[f.option])
        order = [o for o in COMMON if o in options] + [f.option for f in rec.fields if f.option in options]
        object.__setattr__(self, "probe", probe)
        object.__setattr__(self, "cpus", tuple(sorted(set(cpus))))
        object.__setattr__(self, "unbound", bool(unbound))
        object.__setattr__(self, "seconds", seconds)
        object.__setattr__(self, "given", tuple((o, options[o]) for o in order))

    def __getattr__(self, name: str):
        # only for names that are not fields: the options
        if name in APPLIES:
            value = dict(self.__dict__.get("given", ())).get(name)
            if value is None:
                return () if name == "command" else False if _is_flag(name) else None
            return value
        raise AttributeError(f"ProbeSpec has no attribute {name!r}")

    @property
    def record(self) -> ProbeRecord:
        return RECORDS[self.probe]

    # -- jobs --------------------------------------------------------------------------------------
    def jobs(self) -> list[Job]:
        """One job per CPU for a per-CPU probe, else one job for the whole list."""
        rec = self.record
        groups = [(c,) for c in self.cpus] if rec.per_cpu and self.cpus else [self.cpus]
        seconds = self.seconds if rec.timed else None
        steps = rec.steps(self) if rec.steps is not None else 1
        together = rec.parallel and len(groups) > 1
        return [Job(self.probe, tuple(self.child_args(g)), self._measured_cpus(g), self.label(g), seconds, steps,
                    together) for g in groups]

    def _measured_cpus(self, cpus: tuple[int, ...]) -> tuple[int, ...]:
        """The CPUs a job measures (Job.cpus): the CPUs it runs on, or, where its record says so, what
        its runner's measured_cpus says (imported here, when a run starts: the CLI imports this module
        to list the probes)."""
        if self.unbound:
            return ()
        return self.record.measure.measured_cpus(self, cpus) if self.record.measured_cpus else cpus

    def child_args(self, cpus: tuple[int, ...]) -> list[str]:
        """The child's arguments after `python -m probes PROBE` for a job on `cpus`."""
        a: list[str] = []
        if cpus:
            a += ["--cpu", format_cpulist(cpus)]
        if self.unbound:
            a.append("--unbound")
        a += ["--seconds", str(self.seconds)]
        command: tuple[str, ...] = ()
        for option, value in self.given:
            if option == "command":
                command = value
            elif value is True:
                a.append(flag(option))
            else:
                a += [flag(option), str(value)]
        if command:
            a += ["--", *command]
        return a

    def label(self, cpus: tuple[int, ...]) -> str:
        """What a job on `cpus` is called in the window: `jitter CPU 2 50% fifo 80`: where it runs
        (where its record says so), each field's tag, the scheduling."""
        rec = self.record
        parts = [rec.name]
        if rec.label_cpus:
            where = cpus_word(cpus) if cpus else rec.no_cpus
            parts.append(where + (" unbound" if self.unbound and cpus else ""))
        for f in rec.fields:
            if f.tag is None or (f.unless and _given(getattr(self, f.unless))):
                continue
            value = getattr(self, f.option)
            text = f.tag(value if _given(value) else f.default)
            if text:
                parts.append(text)
        if self.policy == "fifo":
            parts.append("fifo" + (f" {self.priority}" if self.priority is not None else ""))
        return " ".join(parts)


def batches(jobs, at_most: int | None = None) -> list[list[Job]]:
    """`jobs` in the order they run: each list starts at once and ends before the next starts. The
    parallel jobs of one spec (one pinned child per CPU, as oslat -c) make one list, of at most
    `at_most` (another machine's agent runs a bounded number of streams at once); every other job is a
    list of its own. Both front ends run jobs by this (app/cli/probe.py, widgets/probe/controller.py)."""
    out: list[list[Job]] = []
    for job in jobs:
        last = out[-1] if out else None
        if (job.parallel and last and last[-1].parallel and last[-1].probe == job.probe
                and (at_most is None or len(last) < at_most)):
            last.append(job)
        else:
            out.append([job])
    return out


def _is_flag(option: str) -> bool:
    return any(f.option == option and f.kind == "flag" for r in RECORDS.values() for f in r.fields)


def _check(rec: ProbeRecord, f: Field, value) -> None:
    """A value within the field's bounds and choices, or ProbeSpecError saying what the probe takes."""
    if f.kind == "choice" and value not in f.values():
        raise ProbeSpecError(f"{flag(f.option)} {value!r}: the {rec.name} probe takes {', '.join(f.values())}")
    if f.low is not None and not f.low <= value <= f.high:
        spell = format_size if f.kind == "size" else "{:g}".format
        raise ProbeSpecError(f"{flag(f.option)} {spell(value)}: the {rec.name} probe takes {spell(f.low)} to "
                             f"{spell(f.high)}" + (f" {f.unit}" if f.unit else ""))
