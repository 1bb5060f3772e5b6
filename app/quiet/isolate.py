"""Make CPUs quiet at run time, and give them back: `coremap isolate` / `coremap include` and the
window's "Make quiet…" (issue 13). tuna's --isolate/--include do the same for threads and IRQs.

A preview first, per target, before anything is written:
- every IRQ whose requested or effective affinity touches the quiet CPUs (the issue says effective;
  the requested list counts too, because the kernel may deliver on any CPU of it at the IRQ's next
  activation): new mask = its mask minus the quiet CPUs;
- every thread allowed there, user or kernel, whose affinity may be changed: its mask minus the
  quiet CPUs;
- the default affinity of new IRQs, the unbound workqueues' cpumask and each network queue's RPS and
  XPS mask that include them (app/pinning/masks.py);
- what stays, and why: per-CPU kernel threads (PF_NO_SETAFFINITY: the kernel refuses), managed IRQs
  (where debugfs says so; elsewhere the kernel's EIO on the write says it), threads whose cpuset has
  no other CPU, and targets a coremap pin in effect put on those CPUs on purpose (the user's pins
  stay).
A target left with no CPU gets the housekeeping CPUs: online, not quiet, not kernel-isolated.

Applying writes everything as ONE batch through AffinityService.apply_each, after a journal line
naming the isolate and its CPUs; one undo reverts it all. `include` gives the CPUs back to the
targets an isolate in effect moved off them (their mask now, minus what the isolate added, plus the
CPUs they had among those given back), again one batch; threads started meanwhile keep their masks.
"""
from __future__ import annotations

import errno
import os
from collections import Counter
from dataclasses import dataclass, field

from app.errors import CoremapError, CpuListError, SysRootReadError
from app.format import cpus_word, format_change, format_cpus, offline_sentence, unknown_cpus_sentence
from app.machine.cpusets import cpuset_cpus_at, read_cpuset_path
from app.machine.interrupts import irq_is_managed, read_irq_cpus
from app.machine.threads import TaskGone, TaskSample, read_task, read_tasks
from app.machine.topology import read_cpu_ids, read_online_cpus, read_topology
from app.parse.cpulist import parse_cpulist
from app.pinning.ledger import Ledger
from app.pinning.masks import mask_path, read_mask
from app.pinning.service import AffinityService, PinResult, PinTarget
from app.sysroot import SysRoot, valid_netdev

# Groups of the preview, in the order they are shown.
GROUPS = (("irq", "IRQs"), ("thread", "threads"), ("kthread", "kernel threads"), ("mask", "masks"))
# Refusals that are the kernel's design, not a failure of an isolate (listed, not an error); "gone":
# the thread exited between the preview and the write.
UNMOVABLE_CODES = ("kthread", "managed", "cpuset", "gone", "trimmed")
# Why a target stays: code -> what a count of them is called in a sentence.
STAY_WORDS = {"kthread": "per-CPU kernel threads", "managed": "managed IRQs", "cpuset": "limited by their cpuset",
              "pinned": "pinned there by you", "name": "odd device names", "unreadable": "unreadable"}


class QuietError(CoremapError):
    """A quiet set that cannot be made (no such CPU, offline, nothing left for housekeeping)."""


@dataclass(frozen=True)
class QuietMove:
    target: PinTarget
    before: tuple[int, ...]
    after: tuple[int, ...]
    group: str                       # "irq", "thread", "kthread", "mask"
    note: str = ""                   # "had only quiet CPUs: gets the housekeeping CPUs"

    def line(self) -> str:
        return f"{self.target.describe()}: {format_change(self.before, self.after)}" + \
            (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class QuietStay:
    target: PinTarget
    code: str                        # STAY_WORDS
    reason: str
    what: str = ""                   # how to name it when the target alone cannot (a device's odd name)
    cpus: tuple[int, ...] | None = None   # where it stays

    def line(self) -> str:
        return f"{self.what or self.target.describe()}: {self.reason}"


@dataclass(frozen=True)
class QuietPreview:
    action: str                      # "isolate" | "include"
    cpus: tuple[int, ...]            # made quiet, or given back
    housekeeping: tuple[int, ...]
    moves: tuple[QuietMove, ...] = ()
    stays: tuple[QuietStay, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def pairs(self) -> list[tuple[PinTarget, tuple[int, ...]]]:
        return [(m.target, m.after) for m in self.moves]

    def counts(self) -> Counter:
        return Counter(m.group for m in self.moves)


def preview_isolate(service: AffinityService, cpus) -> QuietPreview:
    """What `coremap isolate --cpus CPUS` would write, per target; nothing is written."""
    root = service.root
    state = service.ledger()
    quiet = check_cpus(root, cpus)
    hk = _housekeeping(root, set(quiet) | set(state.quiet_cpus))
    moves: list[QuietMove] = []
    stays: list[QuietStay] = []
    notes: list[str] = []
    _irqs(root, service, state, set(quiet), hk, moves, stays)
    if root.is_live:
        _threads(root, service, state, set(quiet), hk, moves, stays)
    else:
        notes.append(f"threads are moved only on the live machine, not on {root.root}")
    _masks(root, set(quiet), hk, moves, stays, notes)
    already = sorted(set(quiet) & set(state.quiet_cpus))
    if already:
        notes.append(f"{cpus_word(already)} already quiet: what has come back since is moved again")
    return QuietPreview("isolate", quiet, hk, tuple(moves), tuple(stays), tuple(notes))


def preview_include(service: AffinityService, cpus) -> QuietPreview:
    """What `coremap include --cpus CPUS` would write: each target an isolate in effect moved off
    these CPUs gets back the ones it had."""
    root = service.root
    state = service.ledger()
    given = check_cpus(root, cpus)
    notes = []
    not_quiet = sorted(set(given) - set(state.quiet_cpus))
    if not_quiet:
        notes.append(f"{cpus_word(not_quiet)} {'is' if len(not_quiet) == 1 else 'are'} not quiet "
                     "(no isolate in effect moved anything off it): nothing to give back there")
    back = set(given) & set(state.quiet_cpus)
    moves = []
    for m in state.moved.values():
        give = m.removed & back
        if not give:
            continue
        now = service.read_affinity(m.target) if not _reused(service, m) else None
        if now is None:
            continue            # exited (or its id now names another thread): nothing to give back
        after = tuple(sorted((set(now) - m.added) | give))
        if after != now:
            moves.append(QuietMove(m.target, now, after, _group_of(m.target, service)))
    moves.sort(key=_order)
    hk = tuple(sorted(set(read_online_cpus(root)) - set(state.quiet_cpus)))
    return QuietPreview("include", tuple(sorted(back)), hk, tuple(moves), (), tuple(notes))


def apply_preview(service: AffinityService, preview: QuietPreview, *, progress=None) -> list[PinResult]:
    """Write `preview` as one batch (journalled as an isolate or include of its CPUs); `progress`: an
    app.pinning.flow.Progress that sees each result and may cancel the rest."""
    if not preview.moves:
        return []
    return service.apply_each(preview.pairs(), origin=preview.action, quiet=(preview.action, preview.cpus),
                              progress=progress)


def failed_results(results: list[PinResult]) -> list[PinResult]:
    """The writes of an isolate or include that failed for a reason other than the kernel's design."""
    return [r for r in results if not r.ok and r.code not in UNMOVABLE_CODES]


def outcome_sentence(preview: QuietPreview, results: list[PinResult]) -> str:
    """The status line after an isolate or include: how many targets moved, how many could not and
    why ("isolate CPU 1: 213 targets moved; 9 could not: 6 per-CPU kernel threads, 3 managed IRQs")."""
    what = f"{preview.action} {cpus_word(preview.cpus)}" if preview.cpus else preview.action
    ok = sum(1 for r in results if r.changed)
    gone = sum(1 for r in results if r.code == "gone")
    why = Counter(s.code for s in preview.stays)
    why.update(r.code for r in results if not r.ok and r.code not in ("trimmed", "gone"))
    s = f"{what}: {ok} target{'s' if ok != 1 else ''} moved"
    if gone:
        s += f" ({gone} exited meanwhile)"
    if why:
        n = sum(why.values())
        s += f"; {n} could not: " + ", ".join(f"{c} {STAY_WORDS.get(k, k)}" for k, c in why.most_common())
    elif not results and not preview.moves:
        s = f"{what}: nothing to give back" if preview.action == "include" else f"{what}: nothing to move"
    return s


def preview_text(preview: QuietPreview, *, limit: int = 0) -> str:
    """The preview as `--dry-run` prints it: moves by group, then what stays and why."""
    out = [f"{preview.action} {cpus_word(preview.cpus)}"
           + (f"; housekeeping {cpus_word(preview.housekeeping)}" if preview.action == "isolate" else "")]
    counts = preview.counts()
    for group, title in GROUPS:
        rows = [m for m in preview.moves if m.group == group]
        if not rows:
            continue
        out.append(f"  move {counts[group]} {title}:")
        shown = rows[:limit] if limit else rows
        out += [f"    {m.line()}" for m in shown]
        if len(shown) < len(rows):
            out.append(f"    … and {len(rows) - len(shown)} more")
    if preview.stays:
        out.append(f"  cannot move {len(preview.stays)}:")
        shown = preview.stays[:limit] if limit else preview.stays
        out += [f"    {s.line()}" for s in shown]
        if len(shown) < len(preview.stays):
            out.append(f"    … and {len(preview.stays) - len(shown)} more")
    if not preview.moves and not preview.stays:
        out.append("  nothing to move")
    out += [f"  note: {n}" for n in preview.notes]
    return "\n".join(out)


# -- the checks ------------------------------------------------------------------------------------
def check_cpus(root: SysRoot, cpus) -> tuple[int, ...]:
    if isinstance(cpus, str):
        try:
            cpus = parse_cpulist(cpus, what="--cpus")
        except CpuListError as e:
            raise QuietError(str(e)) from None
    quiet = tuple(sorted(set(int(c) for c in cpus)))
    if not quiet:
        raise QuietError("--cpus names no CPU; write CPUs like 2-3")
    known = read_cpu_ids(root)
    missing = [c for c in quiet if c not in known]
    if missing:
        raise QuietError(unknown_cpus_sentence(missing, known))
    online = read_online_cpus(root)
    offline = sorted(set(quiet) - set(online))
    if offline:
        raise QuietError(offline_sentence(offline, online))
    return quiet


def _housekeeping(root: SysRoot, quiet: set[int]) -> tuple[int, ...]:
    """Online CPUs that are not (to be) quiet, kernel-isolated ones left out while others remain."""
    online = set(read_online_cpus(root))
    left = online - quiet
    if not left:
        raise QuietError(f"quieting {cpus_word(sorted(quiet))} leaves no CPU for everything else; keep at least "
                         "one (CPU 0 is the usual choice)")
    try:
        isolated = set(read_topology(root).isolated)
    except CoremapError:
        isolated = set()        # a tree without topology files: no isolation to leave out
    return tuple(sorted(left - isolated or left))


def _new_mask(mask, quiet: set[int], hk) -> tuple[tuple[int, ...], str]:
    new = tuple(sorted(set(mask) - quiet))
    if new:
        return new, ""
    return tuple(hk), "had only quiet CPUs: gets the housekeeping CPUs"


def _kept_pin(state: Ledger, key, quiet: set[int], now) -> str:
    """Why a target stays where a coremap pin in effect put it on quiet CPUs, or ""."""
    e = state.pinned.get(key)
    if e is None or not set(e.requested) & quiet or tuple(now) != (e.after or e.requested):
        return ""
    return f"pinned to {cpus_word(e.requested)} by coremap (#{e.batch}): your pin stays"


# -- IRQs ------------------------------------------------------------------------------------------
def _irqs(root, service, state, quiet, hk, moves, stays) -> None:
    """Every IRQ folder of proc/irq (IRQs without a handler too: they may be started later)."""
    for name in sorted((n for n in root.listdir(root.proc("irq")) if n.isdigit()), key=int):
        try:
            req, eff = read_irq_cpus(root, name)
        except (SysRootReadError, CpuListError):
            continue                 # freed between listing and reading (a driver unloaded), or unreadable
        if req is None or not (set(req) | set(eff or ())) & quiet:
            continue
        label = ",".join(n for n in root.listdir(root.irq_dir(name)) if root.is_dir(root.irq_dir(name, n)))
        t = PinTarget("irq", int(name), None, label)
        if irq_is_managed(root, name):
            stays.append(QuietStay(t, "managed", "a managed IRQ: the kernel spreads it over the CPUs itself and "
                                                 "refuses to move it (isolcpus=managed_irq keeps it off at boot)",
                                   cpus=req))
            continue
        kept = _kept_pin(state, t.key, quiet, req)
        if kept:
            stays.append(QuietStay(t, "pinned", kept, cpus=req))
            continue
        new, note = _new_mask(req, quiet, hk)
        if new == req:
            note = f"delivered on CPU {format_cpus(eff)}: rewriting its mask moves it"
        moves.append(QuietMove(t, req, new, "irq", note))


# -- threads ---------------------------------------------------------------------------------------
def _threads(root, service, state, quiet, hk, moves, stays) -> None:
    sample = read_tasks(root, detail="fast", cmdline=False)
    cpusets: dict[str, tuple | None] = {}
    found = []
    for t in sample.tasks.values():
        if t.state in ("Z", "X") or t.allowed is None or not set(t.allowed) & quiet:
            continue
        found.append(t)
    found.sort(key=lambda t: (t.kthread, t.pid, t.tid))
    for t in found:
        target = PinTarget("thread", t.tid, t.pid, t.comm)
        if t.no_setaffinity:
            stays.append(QuietStay(target, "kthread", _kthread_reason(t), cpus=t.allowed))
            continue
        kept = _kept_pin(state, target.key, quiet, t.allowed)
        if kept:
            stays.append(QuietStay(target, "pinned", kept, cpus=t.allowed))
            continue
        new, note = _new_mask(t.allowed, quiet, hk)
        if not set(new) <= set(t.allowed):
            limit = _cpuset_of(service, t, cpusets)
            if limit is not None and not set(new) & set(limit[1]):
                stays.append(QuietStay(target, "cpuset", f"its cpuset {limit[0]} allows only "
                                                         f"{cpus_word(limit[1])}", cpus=t.allowed))
                continue
        moves.append(QuietMove(target, t.allowed, new, "kthread" if t.kthread else "thread", note))


def _kthread_reason(t: TaskSample) -> str:
    if t.comm.startswith(("kworker/u", "kworker/R-")):
        return "a workqueue worker (PF_NO_SETAFFINITY): it follows the workqueue cpumask, moved above"
    return "a per-CPU kernel thread (PF_NO_SETAFFINITY): the kernel refuses to move it"


def _cpuset_of(service: AffinityService, t: TaskSample, cache: dict) -> tuple[str, tuple] | None:
    """(cpuset path, its CPUs) of a thread, cached per cpuset; None when it cannot be read."""
    where = read_cpuset_path(service.root, t.pid, t.tid)
    if where is None:
        return None
    if where not in cache:
        cache[where] = cpuset_cpus_at(service.root, where)
    return (where, cache[where]) if cache[where] is not None else None


# -- masks -----------------------------------------------------------------------------------------
def _masks(root, quiet, hk, moves, stays, notes) -> None:
    for kind in ("irqdefault", "workqueue"):
        _mask_move(root, PinTarget(kind, 0), quiet, hk, moves, notes)
    for dev in root.listdir(root.net_dir()):
        if not valid_netdev(dev):
            stays.append(QuietStay(PinTarget("rps", 0), "name", "a name coremap does not build paths from; "
                                   "check its RPS and XPS masks by hand", what=f"network device {dev[:40]!r}"))
            continue
        for q in root.listdir(root.net_dir(dev) / "queues"):
            kind = "rps" if q.startswith("rx-") else "xps" if q.startswith("tx-") else None
            num = q[3:]
            if kind is None or not num.isdigit() or len(num) > 5:
                continue
            _mask_move(root, PinTarget(kind, int(num), None, "", dev), quiet, hk, moves, notes)


def _mask_move(root, t: PinTarget, quiet, hk, moves, notes) -> None:
    try:
        mask = read_mask(root, mask_path(root, t.kind, t.id, t.netdev))
    except SysRootReadError as e:
        if e.reason == os.strerror(errno.ENOENT):
            # xps_cpus of a device with one transmit queue is listed, but reading it fails with
            # ENOENT (net/core/net-sysfs.c xps_cpus_show: !netif_is_multiqueue): it has no XPS.
            return
        notes.append(f"{t.describe()} cannot be read ({e.reason}); left alone")
        return
    if mask is None or not set(mask) & quiet:
        return
    new, note = _new_mask(mask, quiet, hk)
    moves.append(QuietMove(t, mask, new, "mask", note))


# -- include ---------------------------------------------------------------------------------------
def _reused(service: AffinityService, m) -> bool:
    """Whether the thread a move was about has exited and its tid now names another thread."""
    if m.target.kind != "thread" or m.starttime is None:
        return False
    pid = m.target.pid if m.target.pid is not None else m.target.id
    try:
        return read_task(service.root, pid, m.target.id, detail="fast").starttime != m.starttime
    except TaskGone:
        return True


def _group_of(t: PinTarget, service: AffinityService) -> str:
    if t.kind == "irq":
        return "irq"
    if t.kind != "thread":
        return "mask"
    try:
        task = read_task(service.root, t.pid if t.pid is not None else t.id, t.id, detail="fast")
    except TaskGone:
        return "thread"
    return "kthread" if task.kthread else "thread"


def _order(m: QuietMove):
    return ([g for g, _ in GROUPS].index(m.group), m.target.kind, m.target.netdev or "", m.target.id)



def set_quiet(service: AffinityService, cpus, quiet: bool) -> tuple[str, list[PinResult]] | None:
    """Make `cpus` quiet (an isolate) or give them back (an include) unless they already are so;
    (outcome sentence, results) of what was done, None when nothing was needed. Verify toggles the
    quiet state between its runs with this."""
    now, want = set(service.ledger().quiet_cpus), set(cpus)
    if (quiet and want <= now) or (not quiet and not want & now):
        return None
    preview = preview_isolate(service, cpus) if quiet else preview_include(service, cpus)
    results = apply_preview(service, preview)
    return outcome_sentence(preview, results), results
