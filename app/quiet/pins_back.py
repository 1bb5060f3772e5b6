"""The pins a give-back undoes (issue 28): Give back returns the machine in one action. The pins made
onto the CPUs being given back while they were quiet (a Java thread dropped onto the quiet CPU, an IRQ
pinned there) are part of the quiet job, so the include writes them back with the rest, in the same
batch, on by default; `keep_pins` (the preview's tick box, `coremap include --keep-pins`) leaves them.

tuned's cpu-partitioning has no pins to give back; tuna's --include gives the CPUs back and leaves
whatever was pinned. The window's user, who dropped the thread there for this job, expects the machine
back as it was (the fingerprint of every mask, cpuset and knob before the isolate), with nothing left
for a second command.

A thread's scheduling (policy and RT priority, app/pinning/sched.py) set while quiet goes back with the
pin of that thread onto the CPUs given back: the FIFO 80 given to a thread dropped on the quiet CPU is
part of the same job, and a SCHED_FIFO thread left spinning on a housekeeping CPU would starve it.

Each target of such a pin gets what it had before coremap first pinned it (the first entry in effect),
and where an isolate had moved it too, what the give-back gives such a target (its mask then, minus
what the isolate added, plus what it had among the CPUs given back). A thread moved out of the shield
for its pin goes back where it was: the root cpuset when the shield comes down, else the shield. Pins
made before the isolate are the user's from before the quiet job: they stay.
"""
from __future__ import annotations

from app.errors import CoremapError
from app.pinning.kinds import CPU_KINDS, MEMBER_KINDS, TASK_KINDS
from app.pinning.ledger import Ledger
from app.pinning.service import AffinityService
from app.pinning.targets import PinTarget
from app.quiet import moves as M
from app.quiet.preview import QuietMove

PIN_NOTE = "pinned while quiet: as it was before the pin"


def pins_back(service: AffinityService, state: Ledger, back: set[int], remaining: set[int], *,
              keep: bool) -> list[QuietMove]:
    """The moves that undo the pins made onto `back` while it was quiet ([] with `keep`, but for the
    moves out of a shield that comes down: see keep_out_of_shield), in the order they are written:
    a thread's cpuset before its mask (a cpuset move may reset the mask)."""
    if keep:
        return keep_out_of_shield(service, state, remaining)
    firsts = _pin_entries(state, back)
    members, masks = [], []
    for e in firsts:
        t = PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev)
        now = _now(service, t, e.starttime)
        if now is None or e.before is None:
            continue
        if e.kind in MEMBER_KINDS:
            want = (0,) if not remaining else tuple(e.before)
            if tuple(now) != want:
                members.append(QuietMove(t, tuple(now), want, "pin", "pinned while quiet: back out of "
                                         + ("the pinned cpuset" if remaining else "coremap's cpusets")))
            continue
        want = tuple(e.before)
        m = state.moved.get(t.key)
        if m is not None and e.kind in CPU_KINDS:
            want = M.given_back(want, m, back)
        if e.kind == "thread" and remaining and set(want) - remaining:
            # Back in the shield, which allows only what is not quiet: its mask from the pinned cpuset
            # (every CPU) less the CPUs that stay quiet, which the kernel would refuse or trim.
            want = tuple(sorted(set(want) - remaining))
        if tuple(now) != want:
            masks.append(QuietMove(t, tuple(now), want, "pin", PIN_NOTE))
    return members + masks


def keep_out_of_shield(service: AffinityService, state: Ledger, remaining: set[int]) -> list[QuietMove]:
    """With the pins kept and the shield coming down: each pinned thread's (or process's) move out of
    /coremap-pinned into the root cpuset, journalled, so that the pin's record of /coremap-pinned is
    not left to read as a change by someone else (its own mask keeps it where it was pinned)."""
    if remaining:
        return []
    out = []
    for key, e in sorted(state.pinned.items(), key=lambda kv: kv[1].id):
        if e.kind not in MEMBER_KINDS:
            continue
        t = PinTarget(e.kind, e.target_id, e.pid, e.label, e.netdev)
        now = _now(service, t, e.starttime)
        if now is not None and tuple(now) != (0,):
            out.append(QuietMove(t, tuple(now), (0,), "pin", "pin kept: out of the pinned cpuset, which is removed"))
    return out


def _pin_entries(state: Ledger, back: set[int]):
    """For each target of a pin batch made while `back` was quiet that put a thread or IRQ there, the
    first entry in effect of the pins of that time (its `before` is what it had before them)."""
    since = min((q.id for q in state.quiet_events.values()
                 if q.action == "isolate" and q.id in state.in_effect() and set(q.cpus) & back), default=None)
    if since is None:
        return []
    effect = state.in_effect()
    pins = [u for u in sorted(effect) if u > since and u not in state.quiet_events]
    first: dict = {}
    chosen: set = set()
    for u in pins:
        done = state.done_entries(effect[u])
        onto = any(e.kind in ("thread", "irq") and set(e.requested) & back for e in done)
        for e in done:
            if e.kind == "cpuset":
                continue                # /coremap-pinned: the shield's give-back removes it
            k = (e.kind, e.netdev, e.target_id)
            first.setdefault(k, e)
            if onto:
                chosen.add(k)
    threads = {k[2] for k in chosen if k[0] == "thread"}
    chosen |= {k for k in first if k[0] == "sched" and k[2] in threads}     # see the module docstring
    return [first[k] for k in sorted(chosen, key=lambda k: first[k].id)]


def _now(service: AffinityService, t: PinTarget, starttime) -> tuple[int, ...] | None:
    """The target's value now; None when it exited, or its id names another task now."""
    if t.kind in TASK_KINDS and M.exited(service, t, starttime):
        return None
    try:
        return service.read_affinity(t)
    except CoremapError:
        return None
