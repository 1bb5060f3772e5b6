"""What a pin names and what it comes back with: PinTarget, PinRequest, PinResult.

A target is a thread, a process (each of its threads), an IRQ, or one of the kernel masks an isolate
moves (app/pinning/masks.py). A result is one line per target, the same in the CLI, the window's
status line, its tooltips and over ssh; its `code` says what happened:

  ok        written and read back as asked
  moving    an IRQ's mask is written; its delivery follows at the next interrupt (x86)
  trimmed   written, but the kernel cut the mask (a cpuset, a chip's limits): a change, with a note
  gone      the target exited (or its id now names another): nothing to do, not a failure
  denied    the user may not make this write (the helper may)
  kthread   a per-CPU kernel thread, which refuses affinity changes
  cpuset    the CPUs lie outside the thread's cpuset
  offline   a CPU asked for is offline
  managed   an IRQ whose affinity the kernel manages
  nospc     the CPUs have no free interrupt vector
  invalid   the request names something that is not there, or CPUs no target can take
  cancelled the batch was cancelled before this target's write
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.format import format_change, format_cpus, target_name
from app.pinning.kinds import KINDS as WRITE_KINDS, PLACEMENT_KINDS
from app.parse.json_text import CpuId

KINDS = ("thread", "process", "irq")      # what a drag or a pin request names
GUARD_ORIGIN = "guard"                   # a pin written back by the guard: not an undo step
CHANGED_CODES = ("ok", "moving", "trimmed")   # the write happened (journal state "done")


@dataclass(frozen=True)
class PinTarget:
    kind: str            # "thread" | "process" | "irq", or another kind the flow writes (app/pinning/kinds.py)
    id: int              # tid, pid, IRQ number, a network queue's number (0 for the other masks)
    pid: int | None = None
    label: str = ""
    netdev: str | None = None      # the network device of an rps/xps mask

    def __post_init__(self):
        if self.kind not in KINDS and self.kind not in WRITE_KINDS:
            raise ValueError(f"pin target kind {self.kind!r}: expected one of {', '.join(KINDS)}")

    def describe(self) -> str:
        """"thread 1234 (java)", "IRQ 24 (ttyS0)", "RPS eth0 rx-0" (app.format.target_name)."""
        return target_name(self.kind, self.id, self.label, self.netdev)

    @property
    def key(self) -> tuple[str, str | None, int]:
        """What the journal keys a write by (JournalEntry.key without the root)."""
        return ("thread" if self.kind == "process" else self.kind, self.netdev, self.id)


@dataclass(frozen=True)
class PinRequest:
    targets: tuple[PinTarget, ...]
    cpus: tuple[CpuId, ...]
    origin: str = ""
    # The full Java thread name the targets were found by (`coremap pin --java NAME`): a new thread of
    # that name in the same JVM gets the same pin while the guard runs (app/quiet/guard.py).
    java_name: str = ""
    # Each target's own CPUs, in the order of `targets`, where they differ (a spread of IRQs,
    # app/pinning/spread.py: one CPU each, among `cpus`); () gives every target `cpus`.
    each: tuple[tuple[CpuId, ...], ...] = ()
    # Each IRQ's network queue steers its packets where the IRQ goes (RPS and XPS, app/pinning/spread.py).
    rps: bool = False

    def __post_init__(self):
        if self.each and (len(self.each) != len(self.targets)
                          or not all(c and set(c) <= set(self.cpus) for c in self.each)):
            raise ValueError("a pin request's per-target CPUs: one non-empty list per target, each among its CPUs")

    def cpus_of(self) -> tuple[tuple[int, ...], ...]:
        """Each target's CPUs, in the order of `targets`."""
        return self.each or (tuple(self.cpus),) * len(self.targets)


@dataclass(frozen=True)
class PinResult:
    target: PinTarget
    ok: bool
    code: str                  # see the module docstring
    message: str
    before: tuple[int, ...] | None
    requested: tuple[int, ...]
    after: tuple[int, ...] | None
    effective: tuple[int, ...] | None
    journal_id: int | None
    warning: str = ""          # e.g. irqbalance may undo this pin (app/pinning/advice.py)

    @property
    def changed(self) -> bool:
        """Whether the write happened (ok, moving, or trimmed by the kernel)."""
        return self.code in CHANGED_CODES

    @property
    def failed(self) -> bool:
        """A write that should have happened and did not; an exited target is not a failure."""
        return not self.changed and self.code not in ("gone", "cancelled")

    def line(self, *, warning: bool = True) -> str:
        """"thread 1234 (java): 0-3 -> 2 ok": one line per target, the same in the CLI, the window's
        status line and its tooltips. A failure is its own sentence (it names the target)."""
        d = self.target.describe()
        if self.changed:
            s = f"{d}: {format_change(self.before, self.requested, self.target.kind)} {self.code}"
            if self.target.kind == "irq" and self.effective is not None:
                s += f" (effective {format_cpus(self.effective)})"
            if self.code != "ok" and self.message:
                s += f": {self.message}"
        else:
            s = self.message if self.message.startswith(d) else f"{d}: {self.message}"
        if warning and self.warning:
            s += f"; warning: {self.warning}"
        return s


@dataclass(frozen=True)
class BatchResults(Sequence):
    """One batch's `results` (in the order written), read as a sequence of them, and its headline
    `warning` (decided once, app/pinning/advice.py; "" when there is none)."""
    results: tuple[PinResult, ...] = ()
    warning: str = ""

    def __post_init__(self):
        object.__setattr__(self, "results", tuple(self.results))

    def __getitem__(self, index):
        return self.results[index]

    def __len__(self) -> int:
        return len(self.results)


def refused(target: PinTarget, code: str, message: str, cpus, before=None) -> PinResult:
    """A result for a request refused before anything was journalled or written (bad input), or a
    target the batch never reached (cancelled)."""
    return PinResult(target, False, code, message, before, tuple(cpus), None, None, None)


def summarize(results: list[PinResult], what: str = "") -> str:
    """One line for a batch: every target when there are few, else counts, the first failure, and how
    many had exited (which is not a failure)."""
    prefix = f"{what}: " if what else ""
    if not results:
        return prefix + "nothing to do"
    if len(results) <= 3:
        # What was asked first: a pin onto a quiet CPU moves its thread into /coremap-pinned before its
        # own write, and the line read "cpuset /coremap-pinned: absent -> 0-1 ok; ..." with the thread's
        # "0-1 -> 1" cut off the status bar (issue 28, seen walking the job under Xvfb).
        shown = sorted(results, key=lambda r: r.target.kind in PLACEMENT_KINDS)
        return prefix + "; ".join(r.line(warning=False) for r in shown)
    bad = [r for r in results if r.failed]
    gone = sum(1 for r in results if r.code == "gone")
    cancelled = sum(1 for r in results if r.code == "cancelled")
    done = len(results) - len(bad) - gone - cancelled
    s = f"{prefix}{len(results)} targets: {done} ok, {len(bad)} failed"
    if gone:
        s += f", {gone} gone"
    if cancelled:
        s += f", {cancelled} not reached (cancelled)"
    if bad:
        s += f" · {bad[0].line(warning=False)}"
    return s
