"""`coremap plan -c/--cpus LIST [--service NAME] [--out DIR] [--root DIR]` (the window's Quiet → Make it
permanent…): what to configure so the CPUs of LIST stay quiet after a reboot, in two routes to take one of (by hand: kernel command line,
irqbalance, systemd; or tuned's cpu-partitioning profile), with the guard unit for either, each piece
with the commands that apply it and that roll it back. The machine is read to say what is in place,
how it keeps its kernel command line (grubby on BLS systems, /etc/default/grub.d on Debian) and
whether its kernel has CONFIG_NO_HZ_FULL. Never applied; with --out, written as files into a folder
for review, with a rollback script per route. `--quiet LIST`, its first spelling, still works (with a
note).

The running kernel command line is read first: every word of it that works against the plan is named
with why, and the CPUs it isolates already stay isolated, its CPU lists merged with LIST
(isolcpus=managed_irq,0-4,11-79 and -c 6-9 give isolcpus=managed_irq,domain,0-4,6-9,11-79); `--replace`
writes LIST alone in their place. systemd.cpu_affinity= and tuned.non_isolcpus= there are changed with the rest:
on the command line they win over systemd's CPUAffinity= file and set the workqueues' CPUs. Route A
adds the boot words tuned's profiles add (nohz=on, skew_tick=1, rcupdate.rcu_normal_after_boot=1,
nosoftlockup, tsc=reliable where the TSC is the clocksource; intel_pstate=disable with
--intel-pstate-disable)."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from app.cli.common import (add_command, add_cpus_argument, add_json_arguments, add_root_argument, opened_host,
                             write_json)
from app.cli.topology import load


def register(subparsers) -> None:
    p = add_command(subparsers, "plan", "write a plan that keeps CPUs quiet across reboots, never applied (the "
                                        "window's Quiet → Make it permanent…)",
                    __doc__, root=None)
    add_cpus_argument(p, "the CPUs to keep quiet, e.g. 2-3", required=True, old=("--quiet",))
    p.add_argument("--service", metavar="NAME", help="a systemd service to run on the quiet CPUs")
    p.add_argument("--out", metavar="DIR", help="also write each piece as a file into this folder")
    p.add_argument("--replace", action="store_true",
                   help="replace the running command line's CPU lists (isolcpus=, nohz_full=, ...) with the CPUs "
                        "given, instead of adding them to what it isolates already")
    p.add_argument("--intel-pstate-disable", action="store_true",
                   help="route A adds intel_pstate=disable too, as tuned's cpu-partitioning profile does")
    add_json_arguments(p)
    add_root_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    # Imported here, not at the top: every `coremap` run imports this module to build its parser,
    # and only this command needs the model behind it (issue 12: start-up time).
    from app.quiet.boot_plan import make_plan
    from app.quiet.boot_plan_text import plan_text, write_plan_folder
    with opened_host(args) as host:
        plan = make_plan(load(host.root), args.cpus, service=args.service, root=host.root, replace=args.replace,
                         intel_pstate=args.intel_pstate_disable)
    written = write_plan_folder(Path(args.out), plan) if args.out else []
    if args.json:
        write_json({**asdict(plan), "cmdline_fragment": plan.cmdline_fragment, "isolated": list(plan.isolated),
                    "conflicts": [{"running": p.running_word, "plan": p.word, "why": p.conflict}
                                  for p in plan.conflicts]}, args)
    else:
        print(plan_text(plan), end="")
        if args.out:
            print(f"\nWritten to {args.out}/: {', '.join(written)}.")
    return 0
