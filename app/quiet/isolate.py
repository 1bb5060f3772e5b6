"""Make CPUs quiet at run time, and give them back: `coremap isolate` / `coremap include` and the
window's Make quiet… / Give back… (issues 13 and 20). tuna's --isolate/--include and `cset shield` do
parts of the same.

A preview first (app/quiet/preview.py), target by target, before anything is written; then ONE batch
through AffinityService.apply_each, after a journal line naming the isolate, its CPUs and how many
writes it plans (a batch a crash cut short is told by that count). One undo reverts it all.

An isolate keeps the quiet CPUs free with a cpuset where the machine has one (app/quiet/shield.py: a
shield, or systemd's AllowedCPUs=), so that what starts later stays off them too, and moves one by one
what no cpuset holds (app/quiet/moves.py: kernel threads, IRQs, masks) and sets tuned's
cpu-partitioning knobs, and those of tuned's other knobs the user ticked (app/quiet/knobs.py: hung-task
timeout, NUMA balancing, KSM, THP, governor and energy_perf_bias, force_latency, RT throttling). The
method used is named in the preview and on the status line.

An include gives each target an isolate in effect changed what it had: a mask gets back the quiet
CPUs it lost (its mask now, minus what the isolate added, plus what it had among the CPUs given back,
so a change made since stays), a setting its value from before (unless someone changed it since), and
the last give-back takes the shield down, every process in it (those born while it stood too) back
in the root cpuset with its own mask or every CPU. Where there is no cpuset, a process born while the
CPU was quiet whose mask is exactly the housekeeping mask it inherited gets every CPU back.
"""
from __future__ import annotations

import time

from app.errors import CoremapError, CpuListError
from app.format import cpus_word, format_value, offline_sentence, unknown_cpus_sentence
from app.machine.threads import read_tasks
from app.machine.topology import read_cpu_ids, read_online_cpus, read_topology
from app.parse.cpulist import parse_cpulist
from app.pinning.kinds import CPU_KINDS, CPU_SCALAR_KINDS, PLACEMENT_KINDS, SCALAR_KINDS
from app.pinning.service import AffinityService, BatchResults
from app.quiet import moves as M
from app.quiet.knobs import knob_refusal
from app.quiet.preview import (GROUPS, METHODS, STAY_WORDS, UNMOVABLE_CODES, QuietMove, QuietPreview,  # noqa: F401
                               QuietStay, failed_results, order, outcome_sentence, preview_text)
from app.quiet.pins_back import pins_back
from app.quiet.shield import giveback_steps, isolate_steps, method_of
from app.sysroot import SysRoot


ACTIONS = ("isolate", "include")


class QuietError(CoremapError):
    """A quiet set that cannot be made (no such CPU, offline, nothing left for housekeeping)."""


class LocalQuiet:
    """The quiet service (app/quiet/service.py QuietService) on the machine of `pins`: its writes are
    batches of that AffinityService's journal. The window and the CLI use it here; on a server the agent
    answers with its own (app/remote/pin_ops.py)."""

    def __init__(self, pins: AffinityService):
        self.pins = pins

    def preview(self, action: str, cpus, *, pm_qos: bool = False, move_pinned: bool = False,
                keep_pins: bool = False, knobs=()) -> QuietPreview:
        """What an isolate (`pm_qos`, `move_pinned`, `knobs`) or an include (`keep_pins`) of `cpus`
        would write, per target; nothing is written."""
        if action == "isolate":
            return self._isolate(cpus, pm_qos=pm_qos, move_pinned=move_pinned, knobs=knobs)
        if action == "include":
            return self._include(cpus, keep_pins=keep_pins)
        raise ValueError(f"quiet action {action!r}: expected one of {', '.join(ACTIONS)}")

    def _isolate(self, cpus, *, pm_qos: bool = False, move_pinned: bool = False, knobs=()) -> QuietPreview:
        """What `coremap isolate --cpus CPUS` would write, per target; nothing is written. `pm_qos`: also
        keep the quiet CPUs out of deep idle states; `knobs`: tuned's knobs the user ticked (words of
        app/quiet/knobs.py KNOBS; QuietError for a word it has not). A task whose mask already lies
        within the quiet CPUs was put there by the user (taskset, or the program itself: tuned's
        cpu-partitioning keeps such tasks in its ps_blacklist): it is left there, its process out of the
        shield, and listed as "placed"; `move_pinned` (`--move-pinned`, the preview's tick box) moves it
        like the rest."""
        service = self.pins
        root = service.root
        knobs = tuple(dict.fromkeys(knobs))
        why = knob_refusal(knobs)
        if why:
            raise QuietError(why)
        state = service.ledger()
        quiet = check_cpus(root, cpus)
        hk = _housekeeping(root, set(quiet) | set(state.quiet_cpus))
        method, layout = method_of(root)
        stays: list[QuietStay] = []
        notes: list[str] = []
        sample = read_tasks(root, detail="fast", cmdline=False) if root.is_live else None
        if not root.is_live:
            method = "none"
            notes.append(f"threads are moved only on the live machine, not on {root.root}")
        placed = set() if move_pinned else set(quiet) | set(state.quiet_cpus)
        shield, whole = (isolate_steps(root, layout, state, set(quiet), hk, sample, notes, placed=placed)
                         if method != "none" else ([], set()))
        single: list[QuietMove] = []
        M.irqbalance(root, quiet, single, notes)
        M.irqs(root, service, state, set(quiet), hk, single, stays)
        if sample is not None:
            M.threads(root, service, state, set(quiet), hk, single, stays, sample, skip_pids=whole, placed=placed)
        M.masks(root, set(quiet), hk, single, stays, notes)
        M.settings(root, quiet, pm_qos=pm_qos, moves=single, notes=notes, knobs=knobs, entries=lambda: state.entries)
        single.sort(key=order)
        already = sorted(set(quiet) & set(state.quiet_cpus))
        if already:
            notes.append(f"{cpus_word(already)} already quiet: what has come back since is moved again")
        return QuietPreview("isolate", quiet, hk, tuple(shield + single), tuple(stays), tuple(notes), method,
                            (("move_pinned",) if move_pinned else ()) + knobs)

    def _include(self, cpus, *, keep_pins: bool = False) -> QuietPreview:
        """What `coremap include --cpus CPUS` would write (see the module docstring), the pins made onto
        those CPUs while they were quiet undone with the rest unless `keep_pins` (app/quiet/pins_back.py)."""
        service = self.pins
        root = service.root
        state = service.ledger()
        given = check_cpus(root, cpus)
        notes: list[str] = []
        stays: list[QuietStay] = []
        not_quiet = sorted(set(given) - set(state.quiet_cpus))
        if not_quiet:
            notes.append(f"{cpus_word(not_quiet)} {'is' if len(not_quiet) == 1 else 'are'} not quiet "
                         "(no isolate in effect moved anything off it): nothing to give back there")
        back = set(given) & set(state.quiet_cpus)
        remaining = set(state.quiet_cpus) - back
        pins = pins_back(service, state, back, remaining, keep=keep_pins) if back and root.is_live else []
        undone = {m.target.key for m in pins}
        single = [m for m in (_give_back(service, m, back, remaining, stays, notes) for m in state.moved.values()
                              if m.target.key not in undone) if m]
        if back and root.is_live and remaining == set() and method_of(root)[0] == "none":
            single += M.born_while_quiet(root, _isolate_times(state), state, back)
        single.sort(key=order)
        method, layout = method_of(root)
        shield = giveback_steps(root, layout, state, back, remaining, stays) if back and root.is_live else []
        hk = tuple(sorted(set(read_online_cpus(root)) - remaining))
        # A pinned thread leaves /coremap-pinned before the shield's give-back removes it; while CPUs stay
        # quiet it goes back into the shield once that allows the CPUs given back.
        moves = single + (pins + shield if not remaining else shield + pins)
        return QuietPreview("include", tuple(sorted(back)), hk, tuple(moves), tuple(stays), tuple(notes), method,
                            ("keep_pins",) if keep_pins else ())

    def apply(self, preview: QuietPreview, *, progress=None) -> BatchResults:
        """Write `preview` as one batch (journalled as an isolate or include of its CPUs); `progress`: an
        app.pinning.flow.Progress that sees each result and may cancel the rest."""
        if not preview.moves:
            return BatchResults()
        return self.pins.apply_each(preview.pairs(), origin=preview.action, quiet=(preview.action, preview.cpus),
                                    progress=progress)

    def finish(self, cut, *, progress=None) -> tuple[QuietPreview, BatchResults]:
        """Finish an isolate or include a crash cut short (app/pinning/ledger.py CutShort): the same CPUs
        previewed again (what it already moved is where it should be, so only the rest is in it) and written
        as a new batch."""
        preview = self.preview(cut.action, cut.cpus)
        return preview, self.apply(preview, progress=progress)

    def set_quiet(self, cpus, quiet: bool) -> tuple[str, BatchResults] | None:
        """Make `cpus` quiet (an isolate) or give them back (an include) unless they already are so;
        (outcome sentence, results) of what was done, None when nothing was needed. Verify toggles the
        quiet state between its runs with this: its give-back is for a run, not the end of the quiet job,
        so the pins made onto the CPUs stay."""
        now, want = set(self.pins.ledger().quiet_cpus), set(cpus)
        if (quiet and want <= now) or (not quiet and not want & now):
            return None
        preview = self._isolate(cpus) if quiet else self._include(cpus, keep_pins=True)
        results = self.apply(preview)
        return outcome_sentence(preview, results), results


def _give_back(service: AffinityService, m, back: set[int], remaining: set[int], stays: list,
               notes: list) -> QuietMove | None:
    """One target an isolate in effect changed, given back as far as `back` allows (None: nothing)."""
    kind = m.target.kind
    if kind in PLACEMENT_KINDS:
        return None                         # the shield's own steps (giveback_steps)
    if M.reused(service, m):
        return None                         # exited, or its id now names another: nothing to give back
    try:
        now = service.read_affinity(m.target)
    except CoremapError:
        return None
    if now is None:
        if kind == "irqbalancecpu" and m.target.id in back:
            notes.append(f"{m.target.describe()}: irqbalance (pid {m.target.pid}) is not running any more; the one "
                         "started since read its configuration afresh, so there is nothing to give back")
        return None
    if kind in CPU_KINDS:
        give = m.removed & back
        if not give:
            return None
        after = M.given_back(now, m, back)
        return QuietMove(m.target, now, after, M.group_of(m.target, service)) if after != now else None
    if kind in SCALAR_KINDS or kind == "irqbalancecpu":
        last = m.target.id in back if kind in (*CPU_SCALAR_KINDS, "irqbalancecpu") else not remaining
        if not last or now == m.before:
            return None
        if now != m.after:
            stays.append(QuietStay(m.target, "changed", f"set to {format_value(kind, now)} since by someone "
                                   "else; left as it is"))
            return None
        return QuietMove(m.target, now, m.before, M.group_of(m.target, service), "as it was before the isolate")
    return None


def _isolate_times(state) -> float:
    """When the oldest isolate in effect was made (seconds since 1970)."""
    times = [q.time for q in state.quiet_events.values() if q.action == "isolate" and q.id in state.in_effect()]
    return min(times, default=time.time())


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

