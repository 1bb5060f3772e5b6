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
from app.pinning.kinds import CPU_KINDS, MEMBER_KINDS
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

    def refused_managed(self) -> frozenset[int]:
        """IRQs a Make quiet in effect could not move because the kernel manages them (its write refused
        with the code "managed"). Where debugfs is not mounted nothing else says an IRQ is managed, and the
        window marks these where they are still delivered on a quiet CPU (issue 28: the disk's IRQ 36 stayed
        on quiet CPU 1, unmarked)."""
        effect = self.in_effect()
        out = set()
        for q in self.quiet_events.values():
            if q.action != "isolate" or q.id not in effect:
                continue
            out |= {e.target_id for e in self.batches.get(q.id, ())
                    if e.kind == "irq" and e.state == "failed" and e.code == "managed"}
        return frozenset(out)

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
        if target.kind not in CPU_KINDS or target.kind in ("cpuset", "slice"):
            # A cpuset's or a process's value is a cgroup (/coremap-system is 1), not CPUs: an isolate's
            # own move of process 1 into the shield read as "moved off quiet CPU 1" (issue 28).
            return ""
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
    ended = _given_back_isolates(events, undo, original)
    return Ledger(tuple(undo), tuple(redo), {b: tuple(es) for b, es in batches.items()}, original,
                  tuple(sorted(quiet)), moved, pinned, tuple(unrestored(mine, ended)), events, tuple(mine),
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
            if origin == "include":
                for p in _pins_given_back(batches, undo, original, b):
                    undo.remove(p)
            undo.append(b)
            redo.clear()
    return undo, redo, original


def _pins_given_back(batches: Mapping[int, list[JournalEntry]], undo: list[int], original: Mapping[int, int],
                     include: int) -> list[int]:
    """The pin batches on the undo stack that the give-back `include` undid: one of their threads (its CPUs
    or its scheduling) or IRQs is among its writes (see the module docstring). An isolate's batch is never
    one of them."""
    wrote = {(e.kind, e.netdev, e.target_id) for e in batches[include]
             if e.kind in ("thread", "irq", "sched") and (e.state != "failed" or e.code == "gone")}
    out = []
    for b in undo:
        if batches[original.get(b, b)][0].origin in ("isolate", "include"):
            continue
        if any((e.kind, e.netdev, e.target_id) in wrote for e in batches[b] if e.state == "done"):
            out.append(b)
    return out


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


def _given_back_isolates(events: Mapping[int, QuietEvent], undo: list[int], original: Mapping[int, int]) -> set[int]:
    """The isolates whose every CPU a later include in effect gave back: the quiet time they began is over."""
    effect = {original.get(b, b) for b in undo}
    out = set()
    for q in events.values():
        if q.action != "isolate":
            continue
        back: set[int] = set()
        for r in events.values():
            if r.action == "include" and r.id > q.id and r.id in effect:
                back |= set(r.cpus)
        if set(q.cpus) <= back:
            out.add(q.id)
    return out


def unrestored(entries: Iterable[JournalEntry], ended: frozenset[int] | set[int] = frozenset()) -> list[JournalEntry]:
    """For each target still changed from its original affinity, the first entry of that change (its
    `before` is what a restore writes back), oldest first; `entries` of one machine.

    A target is changed from its first recorded entry until a "done" write puts its original `before`
    back (an undo or restore), or a write finds it gone. Failed writes changed nothing and are ignored;
    a pending entry (crash between journal and read-back) counts as changed. A thread whose tid
    reappears with a new starttime is a different thread: its run restarts.

    A give-back (an include) never starts a run: it only ends those an isolate started. What it writes
    to a target no isolate moved is a task born while the CPUs were quiet, given the machine's own
    cpuset or every CPU; its `before` (coremap's shield) is no original to go back to, and a restore
    that wrote it would put the task back into a cpuset that no longer exists. For the same reason a
    give-back's move of a task into the root cpuset ends its run: the shield it came from is down.

    `ended`: isolates whose CPUs were all given back since. A run such an isolate began, and nothing but
    quiet batches wrote since, is over too: the give-back left it as it meant to (a process that exited
    before it, a setting someone else changed since), and a restore after a give-back has nothing to
    do (issue 28). A target the user pinned after the isolate keeps its run: restore puts it back.
    """
    open_runs: dict[tuple, JournalEntry] = {}
    by_user: set[tuple] = set()          # runs a batch other than an isolate or include wrote
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
            by_user.discard(k)
        if e.origin not in ("isolate", "include"):
            by_user.add(k)
        if e.state == "done" and (e.requested == first.before or _out_of_the_shield(e)):
            open_runs.pop(k, None)
    return sorted((e for k, e in open_runs.items() if e.batch not in ended or k in by_user), key=lambda e: e.id)


def restorable(entries: Iterable[JournalEntry], cpuset_exists) -> tuple[list[JournalEntry], list[str]]:
    """What a restore writes of `entries` (Ledger.unrestored), and notes on what it leaves out: a task's
    move back into coremap's /coremap-system or /coremap-pinned once that cpuset is gone
    (`cpuset_exists(index)` says, app/format.py CPUSET_NAMES). Written, the kernel answers ENOENT, which
    read as "gone" of a task that is alive (issue 28); the task stays where it is, in a cpuset that
    allows it every CPU."""
    keep, notes = [], []
    for e in entries:
        if e.kind in MEMBER_KINDS and e.before and e.before[0] > 0 and not cpuset_exists(e.before[0]):
            notes.append(f"{PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev).describe()}: its cpuset from "
                         "before is gone (the shield came down); left where it is")
            continue
        keep.append(e)
    return keep, notes


def _out_of_the_shield(e: JournalEntry) -> bool:
    """A give-back's write of a task back into the root cpuset (value 0, app/format.py CPUSET_NAMES)."""
    return e.origin == "include" and e.kind in MEMBER_KINDS and tuple(e.requested) == (0,)
