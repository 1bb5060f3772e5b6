"""A boot plan (app/quiet/boot_plan.py) as people read it: the text `coremap plan` prints and the
window shows (the machine, then each route with every piece's file, apply and roll-back lines, then
what goes with either route), and the plan folder `--out` and "Save to folder…" write: cmdline.txt,
plan.txt, each piece's file, and one rollback script per route.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

from app.atomic import write_atomic
from app.errors import CoremapError
from app.format import cpus_word, format_cpus
from app.quiet.boot_plan import QuietPlan, Route, kernel_config_line
from app.quiet.boot_plan_pieces import Piece

WIDTH = 104
LOADERS = {"grubby": "grubby", "grub-debian": "GRUB, Debian's way", "grub": "GRUB", "unknown": "not known"}
REBOOT = "Then reboot: the kernel reads its command line, and systemd its CPUAffinity=, only at boot."


def plan_text(plan: QuietPlan) -> str:
    """The whole plan as the CLI prints it."""
    out = header_lines(plan)
    for route in plan.routes:
        out += ["", *route_lines(plan, route)]
    out += ["", *common_lines(plan)]
    if plan.notes:
        out.append("")
        out += [line for n in plan.notes for line in _wrap(f"Note: {n}", "", "      ")]
    return "\n".join(out) + "\n"


def header_lines(plan: QuietPlan) -> list[str]:
    """What the plan is for, that nothing is applied, which route to take, and the machine's facts."""
    first, second = intro_sentences(plan)
    out = [*_wrap(first, "", "      "), *_wrap(second, "", ""), "", "This machine:",
           *(line for s in machine_sentences(plan)
             for line in (["  " + s] if s == kernel_config_line(plan.facts) else _wrap(s, "  ", "      ")))]
    if plan.conflicts:
        out += ["", *conflict_lines(plan)]
    return out


def conflicts_heading(plan: QuietPlan) -> str:
    how = ("CPU lists replaced, as --replace asks" if plan.replace else
           "CPU lists merged, not replaced; --replace writes the CPUs asked for alone")
    return f"The running kernel command line, where it works against this plan ({how}):"


def conflict_sentences(plan: QuietPlan) -> list[tuple[str, str]]:
    """(the running word and what the plan makes of it, why) for every word of the running command
    line that works against the plan."""
    return [(f"{p.running_word} -> {p.word}", p.conflict) for p in plan.conflicts]


def conflict_lines(plan: QuietPlan) -> list[str]:
    out = _wrap(conflicts_heading(plan), "", "")
    for words, why in conflict_sentences(plan):
        out += [f"  {words}", *_wrap(why, "      ", "      ")]
    return out


def intro_sentences(plan: QuietPlan) -> list[str]:
    choose = (" Take ONE of the two routes below, never both: each sets the kernel command line its own way, "
              "and words set by both would be there twice." if sum(r.offered for r in plan.routes) > 1 else "")
    kept = (f", with {cpus_word(plan.kept)} the running command line isolates already ({format_cpus(plan.isolated)} "
            f"in all)" if plan.kept else "")
    return [f"Plan: {cpus_word(plan.quiet)} quiet{kept}, {cpus_word(plan.housekeeping)} for housekeeping.",
            f"Nothing is applied: review it, then apply it piece by piece.{choose}"]


def machine_sentences(plan: QuietPlan) -> list[str]:
    """How the machine keeps its command line, whether its kernel has NO_HZ_FULL, its boot CPU, tuned."""
    f = plan.facts
    both = " Both usual ways of setting the kernel command line follow." if f.loader.kind == "unknown" else ""
    out = [f"boot loader: {LOADERS[f.loader.kind]} ({f.loader.why}).{both}", kernel_config_line(f),
           f"boot CPU: {f.boot_cpu_why}"]
    if f.tuned_profile:
        out.append(f"tuned: active profile {f.tuned_profile} (/etc/tuned/active_profile)")
    return out


def route_lines(plan: QuietPlan, route: Route) -> list[str]:
    letter = "AB"[plan.routes.index(route)] if plan.routes.index(route) < 2 else "?"
    out = [f"== {letter}. {route.title} ==", *_wrap(route.why, "", "")]
    if not route.offered:
        return out
    if route.key == "by-hand":
        out += ["", *kernel_word_lines(plan)]
    for piece in route.pieces:
        out += ["", *piece_lines(piece)]
    out += ["", *_wrap(REBOOT, "", "")]
    return out


def common_lines(plan: QuietPlan) -> list[str]:
    out = ["== On either route =="]
    for piece in plan.common:
        out += ["", *piece_lines(piece)]
    return out


def kernel_word_lines(plan: QuietPlan) -> list[str]:
    """The by-hand route's kernel command line, and what each word does and where it stands now."""
    out = ["Kernel command line, the words:", "    " + plan.cmdline_fragment]
    if plan.facts.boot_cpu in plan.quiet:
        out += _wrap(f"(no nohz_full= or rcu_nocbs= for CPU {plan.facts.boot_cpu}: it is the boot CPU, which keeps "
                     "its tick for timekeeping)", "  ", "   ")
    for p in plan.params:
        out += [f"  {p.word}", *_wrap(p.why, "      ", "      "),
                *_wrap(f"honoured by: {p.since}; {_state(p)}", "      ", "      ")]
    for left in plan.left_out:
        out += [f"  left out: {left.word}", *_wrap(left.why, "      ", "      ")]
    return out


def piece_lines(piece: Piece) -> list[str]:
    """One piece: its title and path, why, the file, and the lines that apply it and roll it back."""
    out = [piece.title + (f": {piece.path}" if piece.path else ":")]
    out += _wrap(piece.why, "  (", "   ", end=")")
    if piece.text is not None:
        out += ["  file:", *(f"    {line}" for line in piece.text.rstrip("\n").split("\n"))]
    if piece.apply:
        out += ["  apply:", *(f"    {line}" for line in piece.apply)]
    if piece.rollback:
        out += ["  roll back:", *(f"    {line}" for line in piece.rollback)]
    return out


def _state(p) -> str:
    if p.ignored:
        return f"ignored by this kernel (built without {p.needs})"
    if p.in_place:
        return "already in place" + (f" (running: {p.name}={p.running})" if p.running != p.value else "")
    return f"running kernel has {p.name}={p.running}" if p.running is not None else "not set now"


def rollback_script(plan: QuietPlan, route: Route) -> str:
    """Every roll-back line of `route` and of the pieces of either route, last applied first."""
    out = ["#!/bin/sh", f"# coremap plan, CPUs {format_cpus(plan.quiet)} quiet: undo route \"{route.title}\".",
           "# Review before running; lines starting with # are for you to do by hand.", "set -e"]
    for piece in [*reversed(plan.common), *reversed(route.pieces)]:
        if piece.rollback and piece.alternative:
            # Which of the two ways was used is the user's to say: neither runs until uncommented.
            out += ["", f"# {piece.title}: one of two ways, {piece.alternative}; uncomment it if you used it",
                    *(line if line.startswith("#") else f"# {line}" for line in piece.rollback)]
        elif piece.rollback:
            out += ["", f"# {piece.title}", *piece.rollback]
    out += ["", "# then reboot: the kernel takes its command line back only at boot"]
    return "\n".join(out) + "\n"


def write_plan_folder(folder: Path, plan: QuietPlan) -> list[str]:
    """The plan as files in `folder` (created): cmdline.txt, plan.txt, one file per piece and
    rollback-ROUTE.sh per route offered. Returns the names written."""
    if folder.exists() and not folder.is_dir():
        raise CoremapError(f"{folder}: not a folder; give a folder for the plan's files")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CoremapError(f"{folder}: cannot create it ({os.strerror(e.errno or 0)})") from None
    files = {"cmdline.txt": plan.cmdline_fragment + "\n", "plan.txt": plan_text(plan)}
    files.update({f.name: f.text for f in plan.files})
    files.update({f"rollback-{r.key}.sh": rollback_script(plan, r) for r in plan.routes if r.offered})
    for name, text in files.items():
        write_atomic(folder / name, text.encode())
    return sorted(files)


def _wrap(text: str, first: str, rest: str, end: str = "") -> list[str]:
    return textwrap.wrap(text + end, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False, break_long_words=False) or [first + end]
