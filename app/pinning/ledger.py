"""The Ledger: one machine's journal folded, once, into what is in effect now.

Undo and redo, what is quiet and what the isolates in effect moved, the pins in effect, what is left
to restore, the IRQs a pin holds: all are read from the same journal entries, so they are worked out
together, in one pass over the batches, and kept until the journal grows (AffinityService.ledger()).
The window, `coremap include`, the guard in another process and the agent over ssh read the same
Ledger and agree.

A batch is what one apply(), isolate, include, undo, redo or restore wrote. The undo stack is the
batches whose writes are in place (made or redone, and not undone or restored since); an undo batch
goes on the redo stack. A guard re-apply is neither (it keeps the user's pin, it is not a change of
the user's). A CPU is quiet while an isolate of it is on the undo stack and no later include on the
undo stack gave it back.

Pinning onto a quiet CPU is what quiet CPUs are for. A pin warns (`quiet_warning`) when it puts back an
*unrelated* target: one an isolate moved off as background work (an IRQ, a kernel thread, a mask), or a
thread whose new CPUs mix quiet and housekeeping CPUs (it would spread back over the quiet CPU rather
than be placed on it).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.format import cpus_word
from app.pinning.journal_lines import JournalEntry, QuietEvent
from app.pinning.targets import GUARD_ORIGIN, PinTarget

# A key as the pin flow writes it: (kind, netdev, id) (PinTarget.key).
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
class CutShort:
    """An isolate or include that made fewer writes than it planned, or left one journalled and unmarked:
    a crash or a kill -9 stopped it. `interrupted` writes may or may not have reached the kernel; each is
    coremap's own either way."""
    batch: int
    action: str
    cpus: tuple[int, ...]
    made: int
    planned: int
    interrupted: int
    session: str
    last: float                      # when its last write was journalled

    def sentence(self) -> str:
        word = "Make quiet" if self.action == "isolate" else "Give back"
        s = (f"{word} of {cpus_word(self.cpus)} (#{self.batch}) was cut short: {self.made} of {self.planned} "
             "writes made")
        if self.interrupted:
            s += f", {self.interrupted} interrupted (coremap's own, it may or may not have landed)"
        return s


@dataclass(frozen=True)
class Ledger:
    """What the journal of one machine adds up to (see the module docstring)."""
    undo: tuple[int, ...] = ()                                   # batch ids, newest last
    redo: tuple[int, ...] = ()
    batches: Mapping[int, tuple[JournalEntry, ...]] = field(default_factory=dict)
    # An undo or redo batch -> the batch the user made (an undo of a redo of batch 5 is about batch 5).
    original: Mapping[int, int] = field(default_factory=dict)
    quiet_cpus: tuple[int, ...] = ()
    moved: Mapping[Key, Moved] = field(default_factory=dict)           # by the isolates in effect
    pinned: Mapping[Key, JournalEntry] = field(default_factory=dict)   # other pins in effect, newest per key
    unrestored: tuple[JournalEntry, ...] = ()
    quiet_events: Mapping[int, QuietEvent] = field(default_factory=dict)
    entries: tuple[JournalEntry, ...] = ()                       # this machine's, oldest first
    cut_short: tuple[CutShort, ...] = ()                          # isolates and includes a crash stopped

    def done_entries(self, batch: int) -> list[JournalEntry]:
        """The entries of `batch` whose write happened, in journal order."""
        return [e for e in self.batches.get(batch, ()) if e.state == "done"]

    def origin_of(self, batch: int) -> int:
        """The batch the user made that `batch` undoes or redoes (itself for one the user made)."""
        return self.original.get(batch, batch)

    def in_effect(self) -> dict[int, int]:
        """{user's batch: the batch now holding its writes} for every batch whose writes are in place."""
        return {self.origin_of(b): b for b in self.undo}

    def pinned_irqs(self) -> dict[int, tuple[int, ...]]:
        """IRQ -> the CPUs coremap last wrote to it, for IRQs a pin still holds: the window compares
        them with the kernel's mask to show a pin changed back."""
        held = {e.target_id for e in self.unrestored if e.kind == "irq"}
        last: dict[int, tuple[int, ...]] = {}
        for e in self.entries:
            if e.kind == "irq" and e.state == "done" and e.target_id in held:
                last[e.target_id] = e.requested
        return last

    def quiet_warning(self, target: PinTarget, cpus, *, kthread: bool = False) -> str:
        """The warning a pin of `target` onto `cpus` carries ("" when none): see the module docstring."""
        onto = sorted(set(cpus) & set(self.quiet_cpus))
        m = self.moved.get(target.key)
        if not onto or m is None:
            return ""
        background = target.kind != "thread" or kthread
        mixed = not set(cpus) <= set(self.quiet_cpus)
        if not (background or mixed):
            return ""
        why = ("its interrupts would run there again" if target.kind == "irq" else
               "a kernel thread's work would run there again" if kthread else
               "a mask of background work would include it again" if target.kind != "thread" else
               "it would spread over the quiet and the housekeeping CPUs, not be placed")
        return (f"{target.describe()} was moved off quiet {cpus_word(onto)} by isolate #{m.batch}; {why} "
                "(pin only your latency-critical threads there)")


def ledger_of(entries: Iterable[JournalEntry], quiet_events: Iterable[QuietEvent], root_key: str) -> Ledger:
    """The Ledger of the machine `root_key` from a journal's entries and quiet events (all roots)."""
    mine = [e for e in entries if e.root == root_key]
    batches: dict[int, list[JournalEntry]] = {}
    for e in mine:
        batches.setdefault(e.batch, []).append(e)
    undo, redo, original = _stacks(batches)
    events = {q.id: q for q in quiet_events if q.root == root_key}
    quiet, moved, pinned = _in_effect(batches, events, undo, original)
    return Ledger(tuple(undo), tuple(redo), {b: tuple(es) for b, es in batches.items()}, original,
                  tuple(sorted(quiet)), moved, pinned, tuple(unrestored(mine)), events, tuple(mine),
                  _cut_short(batches, events))


def session_alive(session: str, last: float, *, now: float, quiet_for: float) -> bool:
    """Whether the session that wrote a batch may still be writing it: its process is alive (a session
    names its pid: app/pinning/journal.py), or, for a session that names none (older journals, an
    agent's), its last write is less than `quiet_for` seconds old."""
    pid, _, rest = session.partition("-")
    if rest and pid.isascii() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True             # alive, another user's
        return now - last < 10 * quiet_for
    return now - last < quiet_for


def _cut_short(batches, events: Mapping[int, QuietEvent]) -> tuple[CutShort, ...]:
    """Quiet batches a crash stopped, unless an undo, a redo, a restore or a later isolate or include of
    their CPUs has dealt with them since."""
    dealt = {int(es[0].origin[5:]) for es in batches.values() if es[0].origin.startswith(("undo:", "redo:"))}
    restores = [b for b, es in batches.items() if es[0].origin == "restore"]
    out = []
    for q in events.values():
        entries = batches.get(q.id, [])
        if not q.planned or q.id in dealt or any(r > q.id for r in restores):
            continue
        if any(later.id > q.id and set(later.cpus) & set(q.cpus) for later in events.values()):
            continue                # finished by a later isolate of those CPUs, or given back since
        pending = sum(1 for e in entries if e.state == "pending")
        if len(entries) < q.planned or pending:
            out.append(CutShort(q.id, q.action, q.cpus, len(entries), q.planned, pending, q.session,
                                max((e.time for e in entries), default=q.time)))
    return tuple(sorted(out, key=lambda c: c.batch))


def _stacks(batches: Mapping[int, list[JournalEntry]]) -> tuple[list[int], list[int], dict[int, int]]:
    undo: list[int] = []
    redo: list[int] = []
    original: dict[int, int] = {}
    for b in sorted(batches):
        origin = batches[b][0].origin
        if origin.startswith(("undo:", "redo:")):
            src = int(origin[5:])
            take, put = (undo, redo) if origin.startswith("undo:") else (redo, undo)
            if src in take:
                take.remove(src)
            put.append(b)
            original[b] = original.get(src, src)
        elif origin == "restore":
            undo.clear()
            redo.clear()
        elif origin == GUARD_ORIGIN:
            continue
        elif any(e.state == "done" for e in batches[b]):
            undo.append(b)
            redo.clear()
    return undo, redo, original


def _in_effect(batches, events: Mapping[int, QuietEvent], undo: list[int], original: Mapping[int, int]):
    """(quiet CPUs, targets the isolates in effect moved, other pins in effect)."""
    quiet: set[int] = set()
    moved: dict[Key, Moved] = {}
    pinned: dict[Key, JournalEntry] = {}
    effect = {original.get(b, b): b for b in undo}
    for user_batch in sorted(effect):
        done = [e for e in batches.get(effect[user_batch], ()) if e.state == "done"]
        q = events.get(user_batch)
        if q is None:
            for e in done:
                pinned[(e.kind, e.netdev, e.target_id)] = e
        elif q.action == "isolate":
            quiet |= set(q.cpus)
            for e in done:
                _add_moved(moved, e, q.cpus, user_batch)
        else:
            quiet -= set(q.cpus)
    return quiet, moved, pinned


def _add_moved(moved: dict[Key, Moved], e: JournalEntry, quiet, batch: int) -> None:
    if e.before is None:
        return
    after = e.after if e.after is not None else e.requested
    k = (e.kind, e.netdev, e.target_id)
    old = moved.get(k)
    target = PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev)
    if old is None:
        moved[k] = Moved(target, e.before, after, tuple(quiet), batch, e.starttime)
    else:
        # A second isolate moved it further: it keeps its first `before` (what to give back).
        moved[k] = Moved(target, old.before, after, tuple(sorted(set(old.quiet) | set(quiet))), old.batch,
                         old.starttime)


def unrestored(entries: Iterable[JournalEntry]) -> list[JournalEntry]:
    """For each target still changed from its original affinity, the first entry of that change (its
    `before` is what a restore writes back), oldest first; `entries` of one machine.

    A target is changed from its first recorded entry until a "done" write puts its original `before`
    back (an undo or restore), or a write finds it gone. Failed writes changed nothing and are ignored;
    a pending entry (crash between journal and read-back) counts as changed. A thread whose tid
    reappears with a new starttime is a different thread: its run restarts.

    A give-back (an include) never starts a run: it only ends those an isolate started. What it writes
    to a target no isolate moved is a task born while the CPUs were quiet, given the machine's own
    cpuset or every CPU; its `before` (coremap's shield) is no original to go back to, and a restore
    that wrote it would put the task back into a cpuset that no longer exists.
    """
    open_runs: dict[tuple, JournalEntry] = {}
    for e in entries:
        k = e.key
        if e.code == "gone":
            open_runs.pop(k, None)
            continue
        if e.state == "failed":
            continue
        first = open_runs.get(k)
        if first is not None and e.starttime is not None and first.starttime != e.starttime:
            first = None
        if first is None:
            if e.before is None or e.origin == "include":
                continue
            open_runs[k] = first = e
        if e.state == "done" and e.requested == first.before:
            open_runs.pop(k, None)
    return sorted(open_runs.values(), key=lambda e: e.id)
