"""tuned's knobs an isolate sets only where the user ticks them (issue 30): the run-time settings of
tuned's latency profiles that quiet a CPU but are the machine's choice, not the quiet CPUs' alone
(profiles/network-latency, latency-performance and realtime tuned.conf). Each is one journalled step of
the isolate's batch (app/pinning/settings.py writes it), named in its preview with tuned's reason, and
given back by undo, Give back and restore; one that this machine lacks is named in a note and
nothing is written.

  hung_task       kernel.hung_task_timeout_secs = 600
  numa_balancing  kernel.numa_balancing = 0
  ksm             sys/kernel/mm/ksm/run = 0
  thp_never       transparent huge pages "never" (or thp_madvise: "madvise")
  performance     the quiet CPUs' cpufreq governor "performance" and energy_perf_bias 0 (performance)
  force_latency   /dev/cpu_dma_latency held at 0 µs while coremap's guard runs
  rt_runtime      kernel.sched_rt_runtime_us = -1
"""
from __future__ import annotations

from dataclasses import dataclass

from app.errors import SysRootReadError
from app.format import GOVERNORS, THP_MODES, cpus_word, format_value, number_value
from app.parse.cpulist import parse_cpulist
from app.pinning.settings import DmaLatencyWriter, ScalarWriter, sysctl_index, sysctl_target
from app.pinning.targets import PinTarget
from app.quiet.preview import QuietMove
from app.sysroot import SysRoot


@dataclass(frozen=True)
class Knob:
    word: str                        # as the CLI, the window and the preview's options say it
    label: str                       # the tick box's words
    why: str                         # tuned's reason, one line in the preview


# In the window two a row, in pairs that belong together (THP's two modes side by side).
KNOBS = (
    Knob("hung_task", "Hung-task timeout 600 s",
         "tuned's network-latency: a task kept waiting behind a busy quiet CPU is not reported hung after 120 s"),
    Knob("numa_balancing", "NUMA balancing off",
         "tuned's network-latency: no page scanning and migrating faults under a latency-critical task"),
    Knob("ksm", "KSM off",
         "tuned's realtime: ksmd stops scanning for pages to merge (a kernel thread that wakes anywhere)"),
    Knob("rt_runtime", "RT throttling off (sched_rt_runtime_us -1)",
         "tuned's realtime: a SCHED_FIFO task may use the whole CPU; a runaway one then starves that CPU's "
         "kernel threads"),
    Knob("thp_never", "Transparent huge pages: never",
         "tuned's network-latency: no huge-page faults that compact memory, no khugepaged collapsing pages"),
    Knob("thp_madvise", "Transparent huge pages: madvise",
         "huge pages only where a program asks (madvise), so no other task's fault compacts memory"),
    Knob("performance", "Governor and energy_perf_bias: performance (quiet CPUs)",
         "tuned's latency-performance: the quiet CPUs run at full speed, no ramp up after a wakeup"),
    Knob("force_latency", "Hold /dev/cpu_dma_latency at 0 µs while coremap's guard runs",
         "tuned's latency-performance force_latency: no CPU enters an idle state slow to leave; released when "
         "the guard stops"),
)
WORDS = tuple(k.word for k in KNOBS)
_BY_WORD = {k.word: k for k in KNOBS}


def knob_refusal(knobs) -> str:
    """Why a set of knob words cannot be asked for ("" when it can): the one check of the CLI, the
    window and a request over ssh."""
    unknown = [w for w in knobs if w not in _BY_WORD]
    if unknown:
        return f"unknown knob {str(unknown[0])[:40]!r}; choose from {', '.join(WORDS)}"
    if "thp_never" in knobs and "thp_madvise" in knobs:
        return "transparent huge pages can be never or madvise, not both"
    return ""


def knob_moves(root: SysRoot, quiet, knobs, moves: list, notes: list, *, entries=None) -> None:
    """The steps of the knobs asked for (`knobs`: words of KNOBS) that change something; a knob this
    machine lacks, or holds a value coremap cannot give back, is a note. `entries()`: the machine's
    journal entries (what the guard is asked to hold now)."""
    writer = ScalarWriter(root)
    for word in knobs:
        knob = _BY_WORD[word]
        if word == "performance":
            _performance(root, writer, quiet, knob, moves, notes)
            continue
        if word == "force_latency":
            t = PinTarget("dmalatency", 0)
            now = DmaLatencyWriter(root, entries).read(t)
            if now is None:
                notes.append(f"{t.describe()} is not on this machine: latency is not held")
            elif now != (0,):
                moves.append(QuietMove(t, now, (0,), "setting", knob.why))
                notes.append(f"{t.describe()} is held by `coremap guard` (or the window's guard) while one runs as "
                             "root; the request ends when the guard stops, and starts again with it")
            else:
                notes.append(f"{t.describe()} is already held at 0 µs")
            continue
        t, want = _target(word)
        _one(writer, t, want, knob.why, moves, notes)


def _target(word: str) -> tuple[PinTarget, tuple[int, ...]]:
    if word in ("thp_never", "thp_madvise"):
        return PinTarget("thp", 0), (THP_MODES.index(word[4:]),)
    name, value = {"hung_task": ("kernel.hung_task_timeout_secs", 600), "numa_balancing": ("kernel.numa_balancing", 0),
                   "ksm": ("KSM (mm/ksm/run)", 0), "rt_runtime": ("kernel.sched_rt_runtime_us", -1)}[word]
    return sysctl_target(sysctl_index(name)), number_value(value)


def _one(writer: ScalarWriter, t: PinTarget, want, why: str, moves: list, notes: list, *,
         say_absent: bool = True) -> bool:
    """A move of `t` to `want` unless it is there; a note when it is unreadable, or absent and
    `say_absent`. True when the setting exists."""
    try:
        now = writer.read(t)
    except SysRootReadError as e:
        notes.append(f"{t.describe()}: {e.reason}")
        return True
    if now is None:
        if say_absent:
            notes.append(f"{t.describe()} is not on this machine: nothing to set")
        return False
    if now != tuple(want):
        moves.append(QuietMove(t, now, tuple(want), "setting", why))
    elif t.kind not in ("governor", "epb"):
        notes.append(f"{t.describe()} is already {format_value(t.kind, now)}: nothing to set")
    return True


def _performance(root: SysRoot, writer: ScalarWriter, quiet, knob: Knob, moves: list, notes: list) -> None:
    """Governor and energy_perf_bias on each quiet CPU. A cpufreq policy spans CPUs (its folder's
    affected_cpus): it is written once, through its first quiet CPU, and a policy that also holds
    housekeeping CPUs says so, since they get the governor too."""
    done: set[int] = set()
    missing = []
    for cpu in sorted(quiet):
        if cpu in done:
            continue
        shared = _policy_cpus(root, cpu)
        done |= shared
        note = knob.why
        others = sorted(shared - set(quiet))
        if others:
            note += f"; its cpufreq policy also holds {cpus_word(others)}, which get it too"
        if not _one(writer, PinTarget("governor", cpu), (GOVERNORS.index("performance"),), note, moves, notes,
                    say_absent=False):
            missing.append(cpu)
    no_epb = [cpu for cpu in sorted(quiet)
              if not _one(writer, PinTarget("epb", cpu), (0,), knob.why, moves, notes, say_absent=False)]
    if missing:
        notes.append(f"{cpus_word(missing)} {'has' if len(missing) == 1 else 'have'} no cpufreq governor (no cpufreq "
                     "driver here, as in most virtual machines): nothing to set")
    if no_epb:
        notes.append(f"{cpus_word(no_epb)} {'has' if len(no_epb) == 1 else 'have'} no energy_perf_bias (Intel CPUs "
                     "only): nothing to set")


def _policy_cpus(root: SysRoot, cpu: int) -> set[int]:
    """The CPUs whose frequency one write of `cpu`'s governor sets (its policy's affected_cpus)."""
    try:
        text = root.read_optional(root.cpu_dir(f"cpu{cpu}", "cpufreq", "affected_cpus"))
        return set(parse_cpulist(text.replace(" ", ","))) | {cpu} if text and text.strip() else {cpu}
    except (SysRootReadError, ValueError):
        return {cpu}

