"""`coremap isolate -c/--cpus LIST [--dry-run]` and `coremap include -c/--cpus LIST [--dry-run]`: make
CPUs quiet at run time (every movable IRQ, thread and mask moved off them, app/quiet/isolate.py), and give
them back: the window's Quiet → Make quiet… and Give back…, which show the same outcome line. One batch
each, journalled: `coremap undo` reverts the whole of it. The commands keep tuna's and cset's names
(scripts use them); their help says the window's words beside them.

Output: the outcome ("isolate CPU 1: 88 targets moved; 31 could not: 31 per-CPU kernel threads"),
then what could not be moved and why. --dry-run prints the preview, per target, and writes nothing.
Exit status: 0 when everything movable moved (what the kernel refuses by design — per-CPU kernel
threads, managed IRQs, cpuset limits — is listed, not an error), 1 when other writes failed, 2 for
bad input (a CPU the machine lacks, an offline one, no CPU left for housekeeping).
"""
from __future__ import annotations

from dataclasses import asdict

from app.cli.common import add_cpus_argument, add_json_arguments, add_root_argument, opened_host, write_json
from app.cli.pin import pins_of


ISOLATE = """Make CPUs quiet (the window's Quiet → Make quiet…): keep every process off them with a cpuset where the machine has one (a shield,
or systemd's AllowedCPUs=; otherwise every thread is moved), move every movable IRQ, kernel thread and
mask off them, and set the kernel's noise knobs (timer migration, vmstat interval, the watchdog's CPUs).
A task you pinned onto those CPUs yourself (its mask lies within them) is left there (--move-pinned
moves it too). tuned's other knobs are set only where asked, each one step of the same batch, named in
the preview with tuned's reason and given back with the rest: --hung-task, --no-numa-balancing,
--no-ksm, --thp, --performance, --force-latency, --no-rt-throttling. A knob this machine lacks is
named in a note and nothing is written.
The method used is named in the output. One batch, journalled first: `coremap undo` reverts all of it,
`coremap include` gives the CPUs back."""
INCLUDE = """Give quiet CPUs back (the window's Quiet → Give back…): every target an isolate in effect changed gets back what it had on those CPUs
(a change made since stays, a mask a user set stays), the settings their old values, and when no CPU
stays quiet the shield comes down, every process in it (those started meanwhile too) back on all CPUs.
The pins made onto those CPUs while they were quiet are undone in the same batch (--keep-pins keeps
them), so nothing is left for `coremap restore`. Targets that have exited are reported as gone, not as
failures."""


def register(subparsers) -> None:
    for name, text, description in (
            ("isolate", "make CPUs quiet: a cpuset shield, IRQs, kernel threads, masks, knobs (the window's "
                        "Quiet → Make quiet…)", ISOLATE),
            ("include", "give quiet CPUs back what an isolate moved off them (the window's Quiet → Give back…)",
             INCLUDE)):
        p = subparsers.add_parser(name, help=text, description=description)
        add_cpus_argument(p, f"the CPUs to {'make quiet' if name == 'isolate' else 'give back'}, e.g. 1 or 2-3",
                          required=True)
        p.add_argument("--dry-run", action="store_true", help="print the preview per target; write nothing")
        if name == "isolate":
            p.add_argument("--pm-qos", action="store_true",
                           help="also keep the quiet CPUs out of deep idle states (their PM QoS resume latency 0)")
            p.add_argument("--move-pinned", action="store_true",
                           help="also move tasks you pinned onto these CPUs yourself (taskset); left there by default")
            _add_knob_options(p)
        else:
            p.add_argument("--keep-pins", action="store_true",
                           help="keep the pins made onto these CPUs while they were quiet; undone with the rest by "
                                "default")
        add_json_arguments(p, "the preview (and the results) as one JSON document")
        add_root_argument(p)
        p.set_defaults(func=run, action=name)


# option -> the knob word it asks for (app/quiet/knobs.py KNOBS); --thp takes the mode.
_KNOB_OPTIONS = (("--hung-task", "hung_task", "also set kernel.hung_task_timeout_secs 600 (tuned's network-latency)"),
                 ("--no-numa-balancing", "numa_balancing", "also set kernel.numa_balancing 0 (tuned's network-latency)"),
                 ("--no-ksm", "ksm", "also turn KSM off: /sys/kernel/mm/ksm/run 0 (tuned's realtime)"),
                 ("--performance", "performance", "also set the quiet CPUs' cpufreq governor and "
                                                  "energy_perf_bias to performance (tuned's latency-performance)"),
                 ("--force-latency", "force_latency", "also hold /dev/cpu_dma_latency at 0 µs while coremap guard runs "
                                                      "(tuned's force_latency; released when the guard stops)"),
                 ("--no-rt-throttling", "rt_runtime", "also set kernel.sched_rt_runtime_us -1: a SCHED_FIFO task may use "
                                                      "the whole CPU (tuned's realtime)"))


def _add_knob_options(p) -> None:
    for option, _word, text in _KNOB_OPTIONS:
        p.add_argument(option, action="store_true", help=text)
    p.add_argument("--thp", choices=("never", "madvise"),
                   help="also set transparent huge pages to never (tuned's network-latency) or madvise")


def knobs_asked(args) -> tuple[str, ...]:
    from app.quiet.knobs import WORDS
    """The knob words of the options given, in KNOBS' order (the window's)."""
    words = {w for o, w, _ in _KNOB_OPTIONS if getattr(args, o[2:].replace("-", "_"))}
    if args.thp:
        words.add(f"thp_{args.thp}")
    return tuple(w for w in WORDS if w in words)


def run(args) -> int:
    # imported here: the quiet model reads every thread and IRQ, and every command registers this one
    from app.quiet.isolate import LocalQuiet, failed_results, outcome_sentence, preview_text
    with opened_host(args) as host:
        quiet = LocalQuiet(pins_of(host, dry_run=args.dry_run))
        if args.action == "isolate":
            preview = quiet.preview("isolate", args.cpus, pm_qos=args.pm_qos, move_pinned=args.move_pinned,
                                    knobs=knobs_asked(args))
        else:
            preview = quiet.preview("include", args.cpus, keep_pins=args.keep_pins)
        results = [] if args.dry_run else quiet.apply(preview)
    if args.dry_run:
        if args.json:
            write_json({"preview": asdict(preview)}, args)
        else:
            print(preview_text(preview))
        return 0
    failed = failed_results(results)
    if args.json:
        write_json({"preview": asdict(preview), "results": [asdict(r) for r in results],
                    "outcome": outcome_sentence(preview, results)}, args)
    else:
        print(outcome_sentence(preview, results))
        left = [s.line() for s in preview.stays if s.code == "placed"]
        cannot = [s.line() for s in preview.stays if s.code != "placed"] + [
            r.line(warning=False) for r in results if not r.ok and r.code not in ("gone", "cancelled")]
        if left:
            print("left where you pinned them:")
            print("\n".join(f"  {line}" for line in left))
        gone = [r.target.describe() for r in results if r.code == "gone"]
        if cannot:
            print("could not move:")
            print("\n".join(f"  {line}" for line in cannot))
        if gone:
            print(f"gone (exited, nothing to change): {', '.join(gone[:20])}" + (" …" if len(gone) > 20 else ""))
        for n in preview.notes:
            print(f"note: {n}")
    if any(r.code == "invalid" for r in results):
        return 2
    return 1 if failed else 0
