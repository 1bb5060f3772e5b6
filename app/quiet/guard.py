"""The guard: pins that stay (issue 13). Every pin and every isolate in effect is compared with what
was set, tick after tick, while the window runs or while `coremap guard` runs headless.

What is guarded comes from the journal (AffinityService.ledger(): the batches in effect), so a pin
made by `coremap pin` in a terminal is guarded by the window too: for each target, the newest write
of a batch in effect, and the affinity it read back.

Each tick (`Guard.tick()`):
- every IRQ and mask target is read and compared (a few files);
- threads are compared with sched_getaffinity(2), from where the last tick stopped, until the tick's
  budget is spent (BUDGET_S): on this VM the call costs ~0.45 µs in C and ~0.85 µs from Python, so
  ~1,700 threads fit in 1.5 ms; more are compared over the next ticks, every one at least every
  `cycle_ticks` ticks (tests/benchmarks/bench_guard.py prints both). The kernel gives no cheaper
  signal: changing a sleeping thread's mask neither wakes it nor moves any counter.
- a pinned process (or a Java thread pinned by name) is looked at for new threads: the link count
  of proc/PID/task is its thread count (one stat, whatever the size), and its threads are listed
  only when that changed, or every BACKSTOP_S (a thread that exited while another started);
  each new thread gets the pin, journalled in the pin's batch with the process's affinity from
  before the pin as its `before` (so undo gives it that). A Java name is matched on the first 15
  bytes of comm (the cheap trigger) and confirmed in the JVM's thread dump (app/machine/java.py, which
  checks it is a JVM before attaching) when the name is longer.

What an include (a give-back) wrote last is not guarded: it is the machine's own again. A change made
by someone else is reported once per new value: target, what was set -> what is
there, when, and who if it can be told — irqbalance when it runs and does not ban that IRQ, a cpuset
change when the thread's cpuset no longer allows what was set, else that it cannot be told (the
kernel records no writer of an affinity), with the time window it happened in (after it was last seen
as set). A write of coremap's own that is under way, or that a crash cut short (a journal record
without its mark), is never taken for someone else's. Before a
change counts, the journal is read again: coremap's own writes are journalled before they are made,
so a pin the window makes while the guard ticks is never taken for someone else's. Per pin (batch)
the user chooses (a "policy" journal line): re-apply, at most REAPPLY_LIMIT times in REAPPLY_WINDOW_S
seconds per target (a fight with irqbalance is lost anyway: the report then says how to ban it), or
report only (the default). Every report goes into the journal as a "guard" line.
"""
from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field

from app.pinning.service import GUARD_ORIGIN, AffinityService, PinResult, PinTarget
from app.errors import CoremapError
from app.format import cpus_word, format_change
from app.machine.irqbalance import IrqbalanceStatus, banned_line, config_path, read_irqbalance
from app.machine.cpusets import read_cpuset_cpus
from app.machine.java import COMM_LEN, JavaThreadError, comm_of, java_thread_ids
from app.pinning.journal import FollowRule, GuardEvent, JournalEntry
from app.pinning.kinds import CPU_KINDS
from app.quiet.latency_hold import LatencyHold
from app.machine.threads import TaskGone, read_task

# Who changed an affinity is not recorded by the kernel: no event names the writer of an IRQ's mask or
# the caller of sched_setaffinity(2) unless tracing was on when it happened.
CANNOT_TELL = "someone coremap cannot tell (the kernel does not record who changes an affinity)"
BUDGET_S = 0.0015            # thread comparisons per tick
CHUNK = 256                  # threads compared between two looks at the clock
BACKSTOP_S = 10.0            # list a followed process's threads at least this often
REAPPLY_LIMIT = 3            # re-applies of one target ...
REAPPLY_WINDOW_S = 60.0      # ... within this many seconds, then report only
_ORDINAL = {1: "1st", 2: "2nd", 3: "3rd"}


@dataclass
class _Watch:
    """One guarded target: what was set, by which batch."""
    target: PinTarget
    expected: frozenset[int] | tuple[int, ...]     # a CPU set, or a setting's value (_as_expected)
    batch: int                       # the user's batch (policies are per user batch)
    starttime: int | None


@dataclass
class _Follow:
    """A follow rule in effect and what was seen of its process."""
    rule: FollowRule
    holder: int                      # the batch holding the pin's writes now (new threads join it)
    inherited: tuple[int, ...]       # the process's affinity before the pin
    pinned: set[int]                 # tids the pin (or this rule) already covers
    links: int | None = None
    listed_at: float = -1e9


@dataclass
class GuardTick:
    """What one tick found and did."""
    events: list[GuardEvent] = field(default_factory=list)
    followed: list[PinResult] = field(default_factory=list)     # new threads pinned
    notes: list[str] = field(default_factory=list)              # /dev/cpu_dma_latency held or let go
    checked: int = 0                 # thread comparisons made
    threads: int = 0                 # threads guarded
    targets: int = 0                 # IRQs and masks guarded
    seconds: float = 0.0             # the tick's cost

    @property
    def cycle_ticks(self) -> int:
        """Ticks for every guarded thread to be compared once at this tick's pace."""
        return 1 if self.checked >= self.threads else -(-self.threads // max(1, self.checked))


class Guard:
    """`Guard(service)`: guards the pins in `service`'s journal; call `tick()` once per interval."""

    def __init__(self, service: AffinityService, *, reapply: bool = False, budget_s: float = BUDGET_S,
                 clock=time.time):
        self.service = service
        self.reapply_default = reapply
        self.budget_s = budget_s
        self._clock = clock
        self._token: int | None = None
        self._threads: list[_Watch] = []
        self._tids: list[int] = []               # parallel to _threads: what the inner loop reads
        self._exps: list[frozenset[int]] = []
        self._others: list[_Watch] = []
        self._follows: list[_Follow] = []
        self._cursor = 0
        self._reported: dict[tuple, tuple[int, ...]] = {}     # key -> the changed value last reported
        self._reapplied: dict[tuple, deque] = {}              # key -> times of recent re-applies
        self._counts: dict[tuple, int] = {}                   # key -> re-applies so far
        self._irqbalance: IrqbalanceStatus | None = None
        self._in_flight: dict[tuple, set] = {}
        self._seen: dict[tuple, float] = {}                   # key -> when last found as set (IRQs, masks)
        self._checked_at: list[float] = []                    # parallel to _tids: when last compared
        self.latency = LatencyHold(service.root)              # an isolate's force_latency, while we run
        self._notes: list[str] = []

    # -- what is guarded ------------------------------------------------------------------------------
    def refresh(self, force: bool = False) -> bool:
        """Re-read the journal; rebuild what is guarded when it changed. True when it did."""
        token = self.service.journal.refresh()
        if token == self._token and not force:
            return False
        self._token = token
        history = self.service.ledger()
        self._notes += self.latency.follow(history.entries)
        effect = history.in_effect()
        # Writes journalled and not (yet) marked: coremap's own, under way in another process (an include
        # in the window while `coremap guard` runs) or cut short by a crash. A target found at either
        # end of one is coremap's doing, never a change by someone else.
        self._in_flight = {(e.kind, e.netdev, e.target_id): {e.before, e.requested}
                           for e in history.entries if e.state == "pending"}
        latest: dict[tuple, tuple[JournalEntry, int]] = {}
        for user_batch, holder in effect.items():
            for e in history.done_entries(holder):
                k = (e.kind, e.netdev, e.target_id)
                if k not in latest or e.id > latest[k][0].id:
                    latest[k] = (e, user_batch)
        threads, others = [], []
        me = os.getpid()
        for (e, batch) in latest.values():
            if _given_back(history, batch):
                # What a give-back wrote last is the machine's own again (what it had before the quiet
                # time, a pin made then undone): nothing of coremap's holds it, so a later change is
                # no one's to report (issue 28 reported coremap's own give-back as someone else's).
                continue
            if e.kind == "thread" and e.pid == me:
                # This process's own threads step off the CPUs a probe measures while it runs
                # (probes/own_affinity.py): that is coremap moving itself, not a change to report.
                continue
            want = e.after if e.after is not None else e.requested
            w = _Watch(PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev), _as_expected(e.kind, want), batch,
                       e.starttime)
            (threads if e.kind == "thread" else others).append(w)
        threads.sort(key=lambda w: w.target.id)
        self._set_threads(threads)
        self._others = others
        self._follows = self._build_follows(history, effect, latest)
        return True

    def _build_follows(self, history, effect, latest) -> list[_Follow]:
        old = {(f.rule.batch, f.rule.pid, f.rule.name): f for f in self._follows}
        out = []
        covered = {k[2] for k in latest if k[0] == "thread"}
        for rule in self.service.journal.follow_rules():
            if rule.root != self.service.root_key or rule.batch not in effect or rule.pid == os.getpid():
                continue
            holder = effect[rule.batch]
            mine = [e for e in history.done_entries(holder) if e.kind == "thread" and e.pid == rule.pid]
            if not mine:
                continue
            first = min(mine, key=lambda e: e.id)
            f = old.get((rule.batch, rule.pid, rule.name))
            pinned = (f.pinned if f is not None else set()) | {e.target_id for e in mine} | covered
            out.append(_Follow(rule, holder, first.before or (), pinned,
                               f.links if f is not None else None, f.listed_at if f is not None else -1e9))
        return out

    def close(self) -> None:
        """Let go of what the guard holds (/dev/cpu_dma_latency) when it stops."""
        self.latency.release()

    @property
    def guarded(self) -> int:
        return len(self._threads) + len(self._others)

    # -- one tick -------------------------------------------------------------------------------------
    def tick(self) -> GuardTick:
        t0 = time.perf_counter()
        self.refresh()
        out = GuardTick(threads=len(self._threads), targets=len(self._others))
        out.notes, self._notes = self._notes, []
        self._irqbalance = None
        now = self._clock()
        for w in self._others:
            found = self.service.read_affinity(w.target)
            if found is None:
                continue
            if _as_expected(w.target.kind, found) != w.expected:
                self._changed(w, tuple(found), out, self._seen.get(w.target.key, 0.0))
            else:
                self._seen[w.target.key] = now
        self._check_threads(out, t0)
        for f in list(self._follows):
            self._follow(f, out)
        out.seconds = time.perf_counter() - t0
        return out

    def _check_threads(self, out: GuardTick, t0: float) -> None:
        """Compare threads from the cursor on, in runs of CHUNK, until all were compared or the budget
        is spent. The inner loop is a bare sched_getaffinity and a set comparison over parallel lists
        (tids, expected masks): anything more per thread shows in bench_guard's figures."""
        tids, exps = self._tids, self._exps
        n = len(tids)
        if not n:
            return
        getaff, clock, deadline = os.sched_getaffinity, time.perf_counter, t0 + self.budget_s
        i, checked = self._cursor % n, 0
        gone: list[int] = []
        changed: list[int] = []
        checked_at, now = self._checked_at, self._clock()
        since: dict[int, float] = {}
        while checked < n:
            stop = min(n, i + CHUNK, i + n - checked)
            try:
                run = [j for j, (t, e) in enumerate(zip(tids[i:stop], exps[i:stop]), i) if getaff(t) != e]
            except (ProcessLookupError, PermissionError):
                run = self._one_by_one(i, stop, gone)          # a thread of this run exited
            since.update((j, checked_at[j]) for j in run)
            checked_at[i:stop] = [now] * (stop - i)
            changed += run
            checked += stop - i
            i = stop if stop < n else 0
            if clock() > deadline:
                break
        self._cursor = i
        out.checked = checked
        watches = self._threads
        found_changed = []
        for j in changed:
            try:
                found_changed.append((watches[j], tuple(sorted(getaff(tids[j]))), since.get(j, 0.0)))
            except (ProcessLookupError, PermissionError):
                gone.append(j)              # exited right after the comparison
        if gone:
            dead = {id(watches[j]) for j in gone}
            self._set_threads([w for w in watches if id(w) not in dead])
        for w, found, was_set in found_changed:
            self._changed(w, found, out, was_set)

    def _one_by_one(self, i: int, stop: int, gone: list[int]) -> list[int]:
        """Threads i..stop compared one at a time (a run in which one exited), gone ones noted."""
        out = []
        for j in range(i, stop):
            try:
                if os.sched_getaffinity(self._tids[j]) != self._exps[j]:
                    out.append(j)
            except (ProcessLookupError, PermissionError):
                gone.append(j)              # exited (ESRCH): nothing left to guard there
        return out

    def _set_threads(self, threads: list[_Watch]) -> None:
        old = dict(zip(self._tids, self._checked_at)) if len(self._checked_at) == len(self._tids) else {}
        self._threads = threads
        self._tids = [w.target.id for w in threads]
        self._exps = [w.expected for w in threads]
        self._checked_at = [old.get(t, 0.0) for t in self._tids]
        self._cursor %= max(1, len(threads))

    # -- a change by someone else ---------------------------------------------------------------------
    def _changed(self, w: _Watch, found: tuple[int, ...], out: GuardTick, since: float = 0.0) -> None:
        key = w.target.key
        if self.refresh():
            # The journal moved on (a pin in another window, the CLI): judge against what it says now.
            fresh = next((x for x in self._threads + self._others if x.target.key == key), None)
            if fresh is None or _as_expected(w.target.kind, found) == fresh.expected:
                return
            w = fresh
        if _plain(_as_expected(w.target.kind, found)) in {tuple(v) for v in self._in_flight.get(key, ()) if v is not None}:
            return          # coremap's own write, under way or cut short (a crash): not someone else's
        if w.target.kind in ("thread", "sched") and not _same_thread(self.service.root, w):
            # It exited and its tid names another thread now: nothing of ours to guard there.
            self._set_threads([x for x in self._threads if x is not w])
            return
        reapply = self.service.journal.policies().get(w.batch, self.reapply_default)
        if self._reported.get(key) == found and not (reapply and not self._limited(key)):
            return          # said already (a pin switched to re-apply since is written back now)
        self._reported[key] = found
        who = self._who(w, found)
        action, message = "reported", ""
        if reapply:
            action, message = self._reapply(w, key, who)
        ev = GuardEvent(time=self._clock(), root=self.service.root_key, batch=w.batch, kind=w.target.kind,
                        target_id=w.target.id, netdev=w.target.netdev, pid=w.target.pid, label=w.target.label,
                        expected=_plain(w.expected), found=found, who=who, action=action,
                        count=self._counts.get(key, 0), message=message, since=since)
        try:
            self.service.journal.guard_event(ev)
        except CoremapError:
            pass        # a journal that cannot be written any more still lets the report be shown
        out.events.append(ev)

    def _limited(self, key) -> bool:
        """Whether `key` was re-applied REAPPLY_LIMIT times within the last REAPPLY_WINDOW_S."""
        now = self._clock()
        recent = self._reapplied.setdefault(key, deque())
        while recent and now - recent[0] > REAPPLY_WINDOW_S:
            recent.popleft()
        return len(recent) >= REAPPLY_LIMIT

    def _reapply(self, w: _Watch, key, who: str) -> tuple[str, str]:
        recent = self._reapplied.setdefault(key, deque())
        if self._limited(key):
            return "limited", (f"re-applied {len(recent)} times in {REAPPLY_WINDOW_S:.0f} s; reporting only now: "
                               + self.fix_hint(w.target, who))
        [r] = self.service.apply_each([(w.target, _plain(w.expected))], origin=GUARD_ORIGIN)
        if not r.changed:
            return "failed", r.line()
        recent.append(self._clock())
        self._counts[key] = self._counts.get(key, 0) + 1
        self._reported.pop(key, None)        # the same change again is news again
        return "reapplied", ""

    def fix_hint(self, target: PinTarget, who: str) -> str:
        """What stops the fight: for an IRQ moved off quiet CPUs, irqbalance's banned CPUs line in its
        file; for another pinned IRQ, --banirq; else where to look."""
        if target.kind == "irq" and who.startswith("irqbalance"):
            quiet = self.service.ledger().quiet_cpus
            if quiet:
                return f"ban the quiet CPUs: {banned_line(quiet)} in {config_path(self.service.root)}"
            return f"ban it: add --banirq={target.id} to IRQBALANCE_ARGS in {config_path(self.service.root)}"
        if who.startswith("a cpuset"):
            return "move the process to a cpuset that allows those CPUs"
        return "find what changes it (tuned, a startup script, the program itself)"

    def _who(self, w: _Watch, found) -> str:
        t = w.target
        if t.kind == "irq":
            if self._irqbalance is None:
                self._irqbalance = read_irqbalance(self.service.root)
            st = self._irqbalance
            if st.running and t.id not in st.banned_irqs:
                return f"irqbalance (pid {st.pid})" if st.pid is not None else "irqbalance"
        if t.kind == "thread" and t.pid is not None:
            allowed, where = read_cpuset_cpus(self.service.root, t.pid, t.id)
            if allowed is not None and not w.expected <= set(allowed):
                return f"a cpuset change (cpuset {where} now allows {cpus_word(allowed)})"
        return CANNOT_TELL

    # -- new threads of a pinned process ----------------------------------------------------------------
    def _follow(self, f: _Follow, out: GuardTick) -> None:
        root, pid = self.service.root, f.rule.pid
        links = root.link_count(root.task_dir(pid, None, "task"))
        if links is None:
            self._follows.remove(f)              # the process exited
            return
        now = self._clock()
        if links == f.links and now - f.listed_at < BACKSTOP_S:
            return
        f.links, f.listed_at = links, now
        new = [int(n) for n in root.listdir(root.task_dir(pid, None, "task")) if n.isdigit() and int(n) not in f.pinned]
        if not new:
            return
        if f.rule.starttime is not None and not _same_process(self.service.root, pid, f.rule.starttime):
            self._follows.remove(f)              # the pid now names another process
            return
        for tid in self._named(f, new):
            # A thread the rule found by its Java name is journalled by that name, as the pin was.
            r = self.service.pin_new_thread(PinTarget("thread", tid, pid, f.rule.name), f.rule.cpus, join=f.holder,
                                            inherited=f.inherited)
            f.pinned.add(tid)
            out.followed.append(r)
        f.pinned.update(new)                     # threads of another name: looked at once

    def _named(self, f: _Follow, tids: list[int]) -> list[int]:
        """The new threads the rule covers: all of them, or those called the rule's Java name."""
        name = f.rule.name
        if not name:
            return tids
        root, pid = self.service.root, f.rule.pid
        want = comm_of(name)
        hits = [t for t in tids if (root.read_first_line(root.task_dir(pid, t, "comm")) or "") == want]
        if not hits or len(name.encode("utf-8")) <= COMM_LEN:
            return hits
        try:
            full = java_thread_ids(pid, name, root)
        except JavaThreadError:
            return []
        return hits if full is None else [t for t in hits if t in full]


def _as_expected(kind: str, value) -> frozenset[int] | tuple[int, ...]:
    """A value as the guard compares it: a CPU set as a set (the kernel lists it in its own order), any
    other kind's value as it is (a setting's number is several integers in order: app/format.py
    number_value, and {0, 1} would be both -1 and 65536 as a set)."""
    return frozenset(value) if kind in CPU_KINDS else tuple(value)


def _plain(expected) -> tuple[int, ...]:
    return tuple(sorted(expected)) if isinstance(expected, frozenset) else tuple(expected)


def _same_thread(root, w: _Watch) -> bool:
    """Whether the watched thread is still the one journalled (not exited, its tid not reused)."""
    pid = w.target.pid if w.target.pid is not None else w.target.id
    try:
        task = read_task(root, pid, w.target.id, detail="fast")
    except TaskGone:
        return False
    return w.starttime is None or task.starttime == w.starttime


def _same_process(root, pid: int, starttime: int) -> bool:
    try:
        return read_task(root, pid, pid, detail="fast").starttime == starttime
    except TaskGone:
        # The leader exited while its threads run on: the task folder is still this process's.
        return True


def _given_back(history, batch: int) -> bool:
    """Whether `batch` is a give-back, or an isolate whose CPUs were all given back since."""
    q = history.quiet_events.get(batch)
    if q is None:
        return False
    return q.action == "include" or not set(q.cpus) & set(history.quiet_cpus)


def event_line(ev: GuardEvent) -> str:
    """One line for the status line, the Pins panel and `coremap guard`:
    "irq 36 (virtio1-req.0): 1 -> 0-1 at 12:03:04 by irqbalance (pid 812); re-applied (2nd time)"."""
    what = PinTarget(ev.kind, ev.target_id, ev.pid, ev.label, ev.netdev).describe()
    when = time.strftime('%H:%M:%S', time.localtime(ev.time))
    if ev.since and ev.since < ev.time:
        when = f"between {time.strftime('%H:%M:%S', time.localtime(ev.since))} and {when}"
    else:
        when = f"by {when}"
    s = f"{what}: {format_change(ev.expected, ev.found, ev.kind)} {when}, by {ev.who}"
    if ev.action == "reapplied":
        s += f"; re-applied ({_ORDINAL.get(ev.count, f'{ev.count}th')} time)"
    elif ev.action == "reported":
        s += "; reported (re-apply is off for this pin)"
    else:
        s += f"; {ev.action}"
    return s + (f": {ev.message}" if ev.message else "")
