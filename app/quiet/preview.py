"""What an isolate or include will write, target by target, and what it did: QuietPreview (shown
before anything is written: the window's preview dialog, `--dry-run`) and the outcome sentence on the
status line after.

Groups, in the order they are shown: the cpusets that keep the quiet CPUs free (and the processes put
in them), IRQs, threads and kernel threads moved one by one, masks (the default IRQ affinity,
workqueues, RPS/XPS, the watchdog) and kernel settings (timer migration, vmstat interval, PM QoS, and
tuned's knobs the user ticked: app/quiet/knobs.py), each with one line on why.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from app.format import cpus_word, format_change, plural
from app.pinning.targets import PinResult, PinTarget

GROUPS = (("cpuset", "cpusets"), ("process", "processes into the shield"), ("pin", "pins"),
          ("irqbalance", "irqbalance"), ("irq", "IRQs"), ("thread", "threads"),
          ("kthread", "kernel threads"), ("mask", "masks"), ("setting", "kernel settings"))
# A give-back's words for what it does to a group (issue 28: it said it moved processes "into the shield").
GIVE_BACK_TITLES = {"process": "processes out of the shield, back to every CPU",
                    "pin": "pins made while quiet"}
# Refusals that are the kernel's design, not a failure of an isolate (listed, not an error); "gone":
# the target exited between the preview and the write.
UNMOVABLE_CODES = ("kthread", "managed", "cpuset", "gone", "trimmed", "cancelled")
# Why a target stays: code -> what one of them, and several, are called in a sentence (format.plural).
STAY_WORDS = {"kthread": ("per-CPU kernel thread", "per-CPU kernel threads"),
              "managed": ("managed IRQ", "managed IRQs"),
              "cpuset": ("limited by its cpuset", "limited by their cpuset"),
              "pinned": ("pinned there by you",) * 2, "placed": ("left where you pinned it", "left where you pinned them"),
              "name": ("odd device name", "odd device names"),
              "unreadable": ("unreadable",) * 2, "changed": ("changed since by someone else",) * 2}
METHODS = {
    "v1": "cpuset shield (cgroup v1): every process moves into /coremap-system, which allows only the "
          "housekeeping CPUs; processes started later begin there",
    "v2": "cpuset shield (cgroup v2): every process moves into /coremap-system, which allows only the "
          "housekeeping CPUs; processes started later begin there",
    "systemd": "systemd: system.slice, user.slice and init.scope get AllowedCPUs= the housekeeping CPUs at "
               "run time; processes started later in them stay off the quiet CPUs",
    "none": "threads moved one by one (no cpuset here): a process that later asks for every CPU gets the quiet "
            "CPUs back, and processes its parent starts inherit its mask",
}


@dataclass(frozen=True)
class QuietMove:
    target: PinTarget
    before: tuple[int, ...]
    after: tuple[int, ...]
    group: str                       # GROUPS
    note: str = ""                   # "had only quiet CPUs: gets the housekeeping CPUs"

    def line(self) -> str:
        return f"{self.target.describe()}: {format_change(self.before, self.after, self.target.kind)}" + \
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
    method: str = "none"             # METHODS
    options: tuple[str, ...] = ()    # "move_pinned" (an isolate), "keep_pins" (an include): as asked

    def pairs(self) -> list[tuple[PinTarget, tuple[int, ...]]]:
        return [(m.target, m.after) for m in self.moves]

    def counts(self) -> Counter:
        return Counter(m.group for m in self.moves)


# One move of a group ("Move 1 cpuset", not "1 cpusets": seen walking the job under Xvfb).
_ONE = {"cpusets": "cpuset", "processes into the shield": "process into the shield", "pins": "pin",
        "IRQs": "IRQ", "threads": "thread", "kernel threads": "kernel thread", "masks": "mask",
        "kernel settings": "kernel setting",
        "processes out of the shield, back to every CPU": "process out of the shield, back to every CPU",
        "pins made while quiet": "pin made while quiet"}


def group_title(group: str, action: str, n: int = 2) -> str:
    """How `n` moves of a group are called in an isolate's preview, or in a give-back's."""
    if action == "include" and group in GIVE_BACK_TITLES:
        title = GIVE_BACK_TITLES[group]
    else:
        title = dict(GROUPS)[group]
    return _ONE.get(title, title) if n == 1 else title


def failed_results(results: list[PinResult]) -> list[PinResult]:
    """The writes of an isolate or include that failed for a reason other than the kernel's design."""
    return [r for r in results if not r.ok and r.code not in UNMOVABLE_CODES + ("moving",)]


def outcome_sentence(preview: QuietPreview, results: list[PinResult]) -> str:
    """The status line after an isolate or include: how many targets moved, which IRQs are still
    delivered on a quiet CPU, how many could not and why ("isolate CPU 1 (cpuset shield): 213 targets
    moved; IRQs 25, 26 still delivered on CPU 1; 9 could not: 6 per-CPU kernel threads, 3 managed IRQs")."""
    what = f"{preview.action} {cpus_word(preview.cpus)}" if preview.cpus else preview.action
    if preview.action == "isolate":
        what += f" ({method_word(preview.method)})"
    moving = [r for r in results if r.code == "moving"]
    ok = sum(1 for r in results if r.changed) - len(moving)
    gone = sum(1 for r in results if r.code == "gone")
    cancelled = sum(1 for r in results if r.code == "cancelled")
    why = Counter(s.code for s in preview.stays if s.code != "placed")
    placed = sum(1 for s in preview.stays if s.code == "placed")
    why.update(r.code for r in results if not r.ok and r.code not in ("trimmed", "gone", "moving", "cancelled"))
    s = f"{what}: {ok} target{'s' if ok != 1 else ''} moved"
    if moving:
        cpus = sorted({c for r in moving for c in (r.effective or ())})
        s += (f"; IRQ{'s' if len(moving) > 1 else ''} {', '.join(str(r.target.id) for r in moving)} still "
              f"delivered on {cpus_word(cpus)} (they move at their next interrupt, or their chip cannot)")
    told = sorted(r.target.id for r in results if r.target.kind == "irqbalancecpu" and r.changed)
    if told:
        pid = next(r.target.pid for r in results if r.target.kind == "irqbalancecpu")
        s += (f"; irqbalance (pid {pid}) {'leaves' if preview.action == 'isolate' else 'balances'} "
              f"{cpus_word(told)} {'alone' if preview.action == 'isolate' else 'again'}")
    if gone:
        s += f" ({gone} exited meanwhile)"
    if placed:
        s += f"; {plural(placed, 'task', 'tasks')} left on {cpus_word(preview.cpus)} where you pinned {'it' if placed == 1 else 'them'}"
    if cancelled:
        s += f"; cancelled, {cancelled} not written (Edit → Undo reverts what was)"
    if why:
        n = sum(why.values())
        s += f"; {n} could not: " + ", ".join(plural(c, *STAY_WORDS.get(k, (k, k))) for k, c in why.most_common())
    elif not results and not preview.moves and not placed:
        s = f"{what}: nothing to give back" if preview.action == "include" else f"{what}: nothing to move"
    return s


def method_word(method: str) -> str:
    return {"v1": "cpuset shield", "v2": "cpuset shield", "systemd": "systemd AllowedCPUs"}.get(method, "threads moved")


def preview_text(preview: QuietPreview, *, limit: int = 0) -> str:
    """The preview as `--dry-run` prints it: the method, moves by group, then what stays and why."""
    out = [f"{preview.action} {cpus_word(preview.cpus)}"
           + (f"; housekeeping {cpus_word(preview.housekeeping)}" if preview.action == "isolate" else "")]
    if preview.action == "isolate":
        out.append(f"  method: {METHODS.get(preview.method, preview.method)}")
    counts = preview.counts()
    for group, _ in GROUPS:
        rows = [m for m in preview.moves if m.group == group]
        if not rows:
            continue
        verb = "set" if group in ("cpuset", "setting", "irqbalance") else "undo" if group == "pin" else "move"
        out.append(f"  {verb} {counts[group]} {group_title(group, preview.action, counts[group])}:")
        shown = rows[:limit] if limit else rows
        out += [f"    {m.line()}" for m in shown]
        if len(shown) < len(rows):
            out.append(f"    … and {len(rows) - len(shown)} more")
    for title, stays in (("left where you pinned them ({n}):", [s for s in preview.stays if s.code == "placed"]),
                         ("cannot move {n}:", [s for s in preview.stays if s.code != "placed"])):
        if not stays:
            continue
        out.append(f"  {title.format(n=len(stays))}")
        shown = stays[:limit] if limit else stays
        out += [f"    {s.line()}" for s in shown]
        if len(shown) < len(stays):
            out.append(f"    … and {len(stays) - len(shown)} more")
    if not preview.moves and not preview.stays:
        out.append("  nothing to move")
    out += [f"  note: {n}" for n in preview.notes]
    return "\n".join(out)


def order(m: QuietMove):
    """The order moves are written in: cpusets before the processes that go in them, then one by one."""
    return ([g for g, _ in GROUPS].index(m.group), m.target.kind, m.target.netdev or "", m.target.id)

