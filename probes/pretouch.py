"""`coremap probe first-touch --cpu N -- JAVA COMMAND`: the user's JVM run twice, without and with
-XX:+AlwaysPreTouch, to say what pre-touching its heap costs at start-up and what it takes out of the
run (issue 22: GC sys-time spikes are the heap's first touch, spread over the run).

Each run is timed from start to exit (start-up, for a command that exits once it is up: `java -Xms8g
-Xmx8g -version`, or an application's start-up self-test) and counted through getrusage of this
probe's children: user and system time, minor and major faults (_native.count_command runs it, so it
dies with the probe). The flag goes in the command line right after the `java` program where the
program is one (replacing any AlwaysPreTouch the command gave), else in JAVA_TOOL_OPTIONS, which every
HotSpot JVM reads (a wrapper script's java too); the result says which. The pre-touched heap is seen
in the kernel's own count: the extra minor faults times the page size. The command inherits the
probe's CPU (--cpu N) or runs where the scheduler puts it (--unbound).
"""
from __future__ import annotations

import os
import resource
import time

from app.format import format_count, format_factor, format_size
from probes.common import ProbeError, hello, host_facts, run_lines

NAME = "first-touch"
FLAGS = ("-XX:-AlwaysPreTouch", "-XX:+AlwaysPreTouch")     # without, with
TOOL_OPTIONS = "JAVA_TOOL_OPTIONS"


def with_flag(command: list[str], pretouch: bool) -> tuple[list[str], str | None, str]:
    """(the command, the JAVA_TOOL_OPTIONS to run it with or None, how the flag was given): the flag
    after the `java` program, or in JAVA_TOOL_OPTIONS for anything else (a script, a launcher)."""
    flag = FLAGS[pretouch]
    if os.path.basename(command[0]) == "java":
        rest = [a for a in command[1:] if a not in FLAGS]
        return [command[0], flag, *rest], None, "command line"
    tool = " ".join(x for x in (os.environ.get(TOOL_OPTIONS, ""), flag) if x)
    return list(command), tool, TOOL_OPTIONS


def run(args, emit, command: list[str]) -> int:
    from probes.scaling.measure import check_command
    check_command(command)
    if args.size is not None or args.node is not None or args.thp is not None:
        raise ProbeError("--size, --node and --thp shape the probe's own mapping; a command brings its own heap: "
                         "drop them or the command")
    emit(hello(NAME, args.cpu_id, {"mode": "command", "command": command,
                                   "page_bytes": os.sysconf("SC_PAGE_SIZE")}))
    t0 = time.monotonic_ns()
    for i, pretouch in enumerate((False, True)):
        emit({"type": "interval", "step": "command", "pretouch": pretouch, **_one_run(command, pretouch),
              "progress": (i + 1) / 2})
    emit({"type": "done", "elapsed_ns": time.monotonic_ns() - t0})
    return 0


def _one_run(command: list[str], pretouch: bool) -> dict:
    from probes import _native
    argv, tool, how = with_flag(command, pretouch)
    saved = os.environ.get(TOOL_OPTIONS)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        if tool is not None:
            os.environ[TOOL_OPTIONS] = tool        # the child's exec takes this process's environment
        # the command's stdout goes to our stderr: our stdout carries only protocol lines
        r = _native.count_command(argv, -1, 2)
    except FileNotFoundError:
        raise ProbeError(f"{command[0]}: command not found; give a program on PATH or its path") from None
    finally:
        if tool is not None:
            if saved is None:
                os.environ.pop(TOOL_OPTIONS, None)
            else:
                os.environ[TOOL_OPTIONS] = saved
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"argv": argv, "java_tool_options": tool, "flag_in": how, "wall_ns": r["wall_ns"],
            "exit_status": r["exit_status"], "user_ns": round((after.ru_utime - before.ru_utime) * 1e9),
            "sys_ns": round((after.ru_stime - before.ru_stime) * 1e9),
            "minor_faults": after.ru_minflt - before.ru_minflt, "major_faults": after.ru_majflt - before.ru_majflt}


def summarize(lines) -> dict:
    """The result object of a command run (first_touch.summarize hands it over)."""
    hello_line, ivs = run_lines(lines)
    runs = [{k: v for k, v in l.items() if k not in ("type", "step", "progress")}
            for l in ivs if l.get("step") == "command"]
    without = next((r for r in runs if not r["pretouch"]), None)
    with_ = next((r for r in runs if r["pretouch"]), None)
    page = hello_line.get("page_bytes") or 4096
    touched = (with_["minor_faults"] - without["minor_faults"]) * page if without and with_ else None
    cmd = hello_line.get("command") or []
    return {"probe": NAME, "mode": "command", "cpu": hello_line.get("cpu"), "command": cmd,
            "title": f"AlwaysPreTouch on `{' '.join(cmd)}`"[:200], "loop_ns": None, "achieved_duty": None,
            "sampled_seconds": sum(r["wall_ns"] for r in runs) / 1e9, "buckets": [], "percentiles": None,
            "runs": runs, "pretouched_bytes": touched if touched and touched > 0 else None,
            "verdict": verdict(without, with_, touched), "host": host_facts(hello_line)}


def _s(ns) -> str:
    return "-" if ns is None else f"{ns / 1e9:.2f} s"


def verdict(without: dict | None, with_: dict | None, touched: int | None) -> str:
    if without is None or with_ is None:
        return "the command has not run both ways yet"
    failed = [r for r in (without, with_) if r["exit_status"] != 0]
    if failed:
        return (f"the command exited with status {failed[0]['exit_status']} "
                f"({'with' if failed[0]['pretouch'] else 'without'} -XX:+AlwaysPreTouch): its times say little")
    text = (f"with -XX:+AlwaysPreTouch start-up took {_s(with_['wall_ns'])} ({_s(without['wall_ns'])} without, "
            f"{format_factor(with_['wall_ns'] / without['wall_ns']) if without['wall_ns'] else '-'}), system time "
            f"{_s(with_['sys_ns'])} ({_s(without['sys_ns'])} without)")
    if touched and touched > 0:
        extra = with_["sys_ns"] - without["sys_ns"]
        per_gib = extra / 1e6 / (touched / (1 << 30))
        text += (f"; {format_size(touched)} more touched at start ({format_count(with_['minor_faults'] - without['minor_faults'])}"
                 f" more minor faults), {per_gib:,.0f} ms of system time per GiB, which a run without it pays "
                 "when its heap is first used (GC)")
    else:
        text += "; no more pages were touched with it: is the heap sized with -Xms, and is this a HotSpot JVM?"
    return text


def text_lines(r: dict) -> list[str]:
    lines = [f"{r['title']}: run twice, without then with the flag"
             + (f", on CPU {r['cpu']}" if r.get("cpu") is not None else ""),
             f"    {'run':<28}{'start-up':>10}{'user':>10}{'system':>10}{'minor faults':>14}  flag given in"]
    for x in r["runs"]:
        name = "with -XX:+AlwaysPreTouch" if x["pretouch"] else "without (-XX:-AlwaysPreTouch)"
        status = "" if x["exit_status"] == 0 else f"  (exit status {x['exit_status']})"
        lines.append(f"    {name:<28}{_s(x['wall_ns']):>10}{_s(x['user_ns']):>10}{_s(x['sys_ns']):>10}"
                     f"{format_count(x['minor_faults']):>14}  {x['flag_in']}{status}")
    return lines
