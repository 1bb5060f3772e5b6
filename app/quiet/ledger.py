"""Which CPUs are quiet now, and what the isolates in effect moved off them — read from the journal,
so the window, `coremap include` and a guard in another process agree.

A CPU is quiet while an isolate of it is in effect (made, or redone, and not undone, restored or
given back by an include in effect). Everything comes from AffinityService.history(): the undo stack
is exactly the batches whose writes are in place.

Pinning onto a quiet CPU is what quiet CPUs are for, so it is allowed. It warns when the pin puts
back an *unrelated* target: one the isolate moved off as background work — an IRQ, a kernel thread
or a mask — or a thread whose new CPUs mix quiet and housekeeping CPUs (it would spread back over
the quiet CPU rather than be placed on it). Pinning a user thread or process onto quiet CPUs only
is a placement, and says nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from app.pinning.service import AffinityService, PinResult, PinTarget
from app.format import cpus_word
from app.pinning.journal import JournalEntry
from app.machine.threads import TaskGone, read_task

# A key as AffinityService writes it: (kind, netdev, id) (PinTarget.key).
Key = tuple[str, "str | None", int]


@dataclass(frozen=True)
class Moved:
    """A target the isolates in effect moved: what it had, what they set, off which quiet CPUs."""
    target: PinTarget
    before: tuple[int, ...]
    after: tuple[int, ...]
    quiet: tuple[int, ...]           # the quiet CPUs of the isolate(s) that moved it
    batch: int                       # the (first) isolate that moved it
    starttime: int | None = None

    @property
    def removed(self) -> frozenset[int]:
        return frozenset(self.before) - frozenset(self.after)

    @property
    def added(self) -> frozenset[int]:
        """CPUs the isolate gave it because none of its own was left (the housekeeping CPUs)."""
        return frozenset(self.after) - frozenset(self.before)


@dataclass(frozen=True)
class QuietState:
    cpus: tuple[int, ...] = ()                                 # quiet now
    moved: dict[Key, Moved] = field(default_factory=dict)      # by the isolates in effect
    pinned: dict[Key, JournalEntry] = field(default_factory=dict)   # other pins in effect, newest per key

    def warning(self, target: PinTarget, cpus, *, kthread: bool = False) -> str:
        """The warning a pin of `target` onto `cpus` carries ("" when none): see the module docstring."""
        onto = sorted(set(cpus) & set(self.cpus))
        m = self.moved.get(target.key)
        if not onto or m is None:
            return ""
        background = target.kind != "thread" or kthread
        mixed = not set(cpus) <= set(self.cpus)
        if not (background or mixed):
            return ""
        why = ("its interrupts would run there again" if target.kind == "irq" else
               "a kernel thread's work would run there again" if kthread else
               "a mask of background work would include it again" if target.kind != "thread" else
               "it would spread over the quiet and the housekeeping CPUs, not be placed")
        return (f"{target.describe()} was moved off quiet {cpus_word(onto)} by isolate #{m.batch}; {why} "
                "(pin only your latency-critical threads there)")


def read_quiet_state(service: AffinityService, history=None) -> QuietState:
    """What is quiet on `service`'s machine now, from its journal (`history`: service.history(),
    when the caller has it already)."""
    history = history if history is not None else service.history()
    effect = history.in_effect()                 # user's batch -> batch holding its writes now
    events = {q.id: q for q in service.journal.quiet_events() if q.root == service.root_key}
    quiet: set[int] = set()
    moved: dict[Key, Moved] = {}
    pinned: dict[Key, JournalEntry] = {}
    for user_batch in sorted(effect):
        holder = effect[user_batch]
        q = events.get(user_batch)
        entries = history.done_entries(holder)
        if q is None:
            for e in entries:
                pinned[_key(e)] = e
            continue
        if q.action == "isolate":
            quiet |= set(q.cpus)
            for e in entries:
                _add_moved(moved, e, q.cpus, user_batch)
        else:
            quiet -= set(q.cpus)
    return QuietState(tuple(sorted(quiet)), moved, pinned)


def _key(e: JournalEntry) -> Key:
    return (e.kind, e.netdev, e.target_id)


def _add_moved(moved: dict[Key, Moved], e: JournalEntry, quiet, batch: int) -> None:
    if e.before is None:
        return
    after = e.after if e.after is not None else e.requested
    k = _key(e)
    old = moved.get(k)
    target = PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev)
    if old is None:
        moved[k] = Moved(target, e.before, after, tuple(quiet), batch, e.starttime)
    else:
        # A second isolate moved it further: it keeps its first `before` (what to give back).
        moved[k] = Moved(target, old.before, after, tuple(sorted(set(old.quiet) | set(quiet))), old.batch,
                         old.starttime)


def quiet_warnings(service: AffinityService, results: list[PinResult]) -> dict[int, str]:
    """{index in `results`: warning} for the pins that put back onto quiet CPUs what an isolate in
    effect moved off them (QuietState.warning); {} when no CPU is quiet."""
    state = read_quiet_state(service)
    out: dict[int, str] = {}
    if not state.cpus:
        return out
    for i, r in enumerate(results):
        if not (r.ok or r.code == "trimmed"):
            continue
        kthread = False
        if r.target.kind == "thread" and r.target.pid is not None:
            try:
                kthread = read_task(service.root, r.target.pid, r.target.id, detail="fast").kthread
            except TaskGone:
                continue
        w = state.warning(r.target, r.requested, kthread=kthread)
        if w:
            out[i] = w
    return out
