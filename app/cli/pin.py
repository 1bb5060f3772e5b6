"""`coremap pin | undo | redo | restore | journal`: pin threads, processes, Java threads and IRQs to
CPUs, through AffinityService (so the journal and undo stack are the window's too).

  coremap pin (--tid T | --pid P | --java NAME --pid P | --irq N|LIST|PATTERN... --device NAME...)
              -c/--cpus LIST [--spread] [--rps] [--dry-run] [--root DIR]
  coremap undo | redo | restore [--root DIR]
  coremap journal [--json]

One line per target (`thread 1234 (java): 0-3 -> 2 ok`). Exit status: 0 all ok, 1 some target
failed (the line says why and what to do), 2 bad input ("2-x", an unknown IRQ, a --root that is not a
sysroot).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from app.cli.common import (PID_MAX, add_cpus_argument, add_json_arguments, add_root_argument, opened_host, whole,
                             write_json)
from app.errors import CoremapError
from app.format import cpus_word, format_change, format_cpus, printable
from app.parse.cpulist import parse_cpulist
from app.store.folders import journal_path
from app.sysroot import SysRoot

if TYPE_CHECKING:
    from app.host import Host
    from app.pinning.service import AffinityService
    from app.pinning.targets import PinRequest, PinResult, PinTarget


class PinInputError(CoremapError):
    """A pin request that names nothing that exists, or names it twice."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pin", help="pin a thread, process, Java thread or IRQ to CPUs (the window's drop on the grid, Edit → Pin to…)",
        description="Set CPU affinity, as a drop on the window's grid or its Edit → Pin to… does. The "
                    "previous value is journalled first, so `coremap undo` and `coremap restore` can put it "
                    "back even after a crash.")
    p.add_argument("--tid", type=whole(1, PID_MAX, "(a thread id)"), metavar="T", help="one thread")
    p.add_argument("--pid", type=whole(1, PID_MAX, "(a process id)"), metavar="P",
                   help="every thread of a process (or the JVM for --java)")
    p.add_argument("--irq", type=_irq_word, action="append", default=[], metavar="N|LIST|PATTERN",
                   help="interrupts: a number (/proc/irq/N), a list (24,25,30-33) or a handler name pattern "
                        "('i40e-eno1-TxRx-*', the names `coremap irqs --json` lists); may be given again, and "
                        "every IRQ selected is pinned, as one batch")
    p.add_argument("--device", type=_device_word, action="append", default=[], metavar="NAME",
                   help="every interrupt of a device: a network interface (eno1), a disk (nvme0) or a PCI "
                        "address (0000:19:00.0); may be given again")
    p.add_argument("--spread", action="store_true",
                   help="with --irq/--device: one IRQ per CPU over --cpus, each on its device's NUMA node's CPUs "
                        "first, round robin when there are more IRQs than CPUs (as perftune.py and tuna -x do)")
    p.add_argument("--rps", action="store_true",
                   help="with --irq/--device: each network queue's RPS (rx-N/rps_cpus) and XPS (tx-N/xps_cpus) "
                        "follow its IRQ's CPUs, in the same batch")
    p.add_argument("--java", metavar="NAME", help="the Java thread of this full name in JVM --pid "
                   "(found through jcmd/jstack's thread dump)")
    add_cpus_argument(p, "the CPUs to allow, e.g. 2-5,8", required=True)
    p.add_argument("--dry-run", action="store_true",
                   help="print what the pin would write, one line per step, and why not where it would not "
                        "go (the window's drop asks the same); write and journal nothing; exit 0 if it would go, 1 if not")
    add_root_argument(p)
    p.set_defaults(func=run_pin)
    for name, func, text, window in (
            ("undo", run_undo, "undo the last pin or quiet batch", "Edit → Undo"),
            ("redo", run_redo, "redo the last undone pin or quiet batch", "Edit → Redo"),
            ("restore", run_restore, "put every pinned target back to its original affinity", "Edit → Restore all")):
        q = subparsers.add_parser(name, help=f"{text} (the window's {window})",
                                  description=text[0].upper() + text[1:] + f" (from the journal): the window's {window}.")
        add_root_argument(q)
        q.set_defaults(func=func)
    j = subparsers.add_parser("journal", help="show the pin journal (the window's Pins dock)",
                              description="Every pin, undo and restore, oldest first (the window's Pins "
                                          "dock shows the same, newest first).")
    add_json_arguments(j, 'one JSON document, the entries a list under "entries"')
    j.set_defaults(func=run_journal)


def pins_of(host: Host, *, dry_run: bool = False) -> AffinityService:
    """The pins a command makes on `host` (app/host.py open_pins: this machine, or a copy the tests may
    write; a capture's refusal is one line), through coremap-helper for writes the user may not make
    (started only when one is denied); its journal's notes on stderr. A `dry_run` only reads the journal."""
    service = host.open_pins(dry_run=dry_run, helper=True)
    for note in service.journal.notes:
        print(f"coremap: note: {note}", file=sys.stderr)
    return service


def _irq_word(text: str) -> str:
    return _word(text, "--irq")


def _device_word(text: str) -> str:
    return _word(text, "--device")


def _word(text: str, what: str) -> str:
    from app.pinning.irq_select import IrqSelectionError, check_word
    try:
        return check_word(text, what)
    except IrqSelectionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _targets(args, root: SysRoot, irqs=None) -> tuple[PinTarget, ...]:
    """What the options name: one thread, a process, a Java thread, or (`coremap pin`, whose `irqs()` is
    the machine's IRQ table, read once and only for names and devices) every IRQ --irq and --device
    select. `coremap sched` reads its --tid, --pid and --java here too, without `irqs`."""
    from app.pinning.targets import PinTarget        # pins_of() imported its package already
    kinds = "--tid T, --pid P" + (", --irq/--device" if irqs else "") + " or --java NAME --pid P"
    given = ["tid"] if args.tid is not None else []
    if irqs and (args.irq or args.device):
        given.append("irq")
    if irqs and (args.spread or args.rps) and given != ["irq"]:
        raise PinInputError("--spread and --rps place IRQs: give them with --irq or --device")
    if args.java is not None:
        if args.pid is None:
            raise PinInputError("--java NAME needs --pid P, the JVM's process id (see `jcmd -l`)")
        if given:
            raise PinInputError(f"give one of {kinds}")
        from app.machine.java import find_java_thread
        tid = find_java_thread(args.pid, args.java, root)
        return (PinTarget("thread", tid, args.pid, args.java),)
    if args.pid is not None:
        given.append("pid")
    if len(given) != 1:
        raise PinInputError(f"give exactly one of {kinds}")
    if given == ["irq"]:
        from app.pinning.irq_select import select_irqs
        where = "this machine" if root.is_live else str(root.root)
        return tuple(PinTarget("irq", n) for n in select_irqs(
            args.irq, args.device, exists=lambda n: root.exists(root.irq_dir(n)), table=irqs, where=where))
    if args.pid is not None:
        if args.pid <= 0 or not root.exists(root.task_dir(args.pid, None, "task")):
            raise PinInputError(f"process {args.pid} does not exist; see `coremap threads`")
        return (PinTarget("process", args.pid),)
    if args.tid <= 0 or not root.exists(root.proc(args.tid, "status")):
        raise PinInputError(f"thread {args.tid} does not exist; see `coremap threads`")
    from app.pinning.names import named_thread      # by its full Java name where its comm is cut
    return (named_thread(root, args.tid),)


def _request(args, root: SysRoot, cpus) -> PinRequest:
    """The pin the options ask for: its targets, and with --spread each IRQ's own CPU."""
    from app.pinning.targets import PinRequest, PinTarget
    table = []

    def irqs():
        if not table:
            from app.machine.interrupts import read_irqs
            table.append(read_irqs(root))
        return table[0]
    targets = _targets(args, root, irqs)
    each = ()
    if args.spread:
        from app.machine.topology import read_topology
        from app.pinning.spread import spread_irqs
        each = spread_irqs([t.id for t in targets], cpus, irqs(), read_topology(root))
    if table:
        # Named as `coremap irqs` names them, where the table was read (a capture has no action folders
        # under /proc/irq/N to name them by).
        rows = {r.irq: r for r in table[0].rows}
        targets = tuple(PinTarget("irq", t.id, None, ",".join(rows[str(t.id)].actions)[:256])
                        if t.kind == "irq" and str(t.id) in rows else t for t in targets)
    return PinRequest(targets, cpus, origin="cli", java_name=args.java or "", each=each, rps=args.rps)


def _report(results: list[PinResult], nothing: str, *, named: bool = False) -> int:
    """One line per target (its warnings with it). Exit 0 when nothing failed (a thread of the batch
    that exited meanwhile is churn, not a failure; an undo or restore whose targets have all exited
    has nothing left to give back), 1 when a write failed or, for the targets a pin `named`, every one
    had exited (nothing named is there to pin: a script must see it), 2 when the request named what
    is not there."""
    if not results:
        print(nothing)
        return 0
    for r in results:
        print(printable(r.line()))
    if any(r.code == "invalid" for r in results):
        return 2
    if named and all(r.code == "gone" for r in results):
        return 1
    return 1 if any(r.failed for r in results) else 0


def run_pin(args) -> int:
    cpus = parse_cpulist(args.cpus, what="--cpus")
    if not cpus:
        raise PinInputError("--cpus is empty; write CPUs like 2-5,8")
    with opened_host(args) as host:
        service = pins_of(host, dry_run=args.dry_run)
        request = _request(args, service.root, cpus)
        if request.each:
            print(f"spread {len(request.targets)} IRQ{'s' if len(request.targets) > 1 else ''} over "
                  f"{cpus_word(cpus)}: one per CPU, each device's NUMA node first")
        if args.dry_run:
            return _report_plan(service.plan(request))
        return _report(service.apply(request), "nothing to pin", named=True)


def _report_plan(plan) -> int:
    """A dry run: one line per step it would take, then whether it would go. Exit 0 when it would, 1
    when a step would be refused or nothing is left to pin, 2 when the request names what is not
    there (as a pin would)."""
    for s in plan:
        print(printable(s.line()))
    if plan.invalid:
        return 2
    print("dry run: it would go; nothing was written" if plan.goes else
          f"dry run: it would not go ({printable(plan.reasons()[0])}); nothing was written")
    return 0 if plan.goes else 1


def run_undo(args) -> int:
    with opened_host(args) as host:
        return _report(pins_of(host).undo(), "nothing to undo")


def run_redo(args) -> int:
    with opened_host(args) as host:
        return _report(pins_of(host).redo(), "nothing to redo")


def run_restore(args) -> int:
    with opened_host(args) as host:
        return _report(pins_of(host).restore_all(), "nothing to restore: every pinned target has its original "
                                                    "affinity")


def run_journal(args) -> int:
    # Imported here for start-up time; PinTarget only for the listing. The journal is the user's file, read
    # whatever machine is shown, and alone: the pin service's imports would slow `coremap journal --json`.
    from app.pinning.journal import Journal
    journal = Journal(journal_path(create=False), readonly=True)
    for note in journal.notes:
        print(f"coremap: note: {note}", file=sys.stderr)
    entries = journal.entries()
    if args.json:
        write_json(entries, args, items="entries")      # dataclasses: write_json spells their fields
        return 0
    if not entries:
        print(f"the journal {journal.path} is empty")
        return 0
    from app.pinning.targets import PinTarget
    quiet = {q.id: q for q in journal.quiet_events()}
    from app.pinning.ledger import ledger_of
    cut = {c.batch: c for root in {e.root for e in entries}
           for c in ledger_of(entries, journal.quiet_events(), root).cut_short}
    for e in entries:
        q = quiet.pop(e.batch, None)
        if q is not None:
            print(f"#{q.id} {_when(q.time)} {q.action:<8} {cpus_word(q.cpus)}")
            if q.id in cut:
                print(f"   {cut[q.id].sentence()}; finish: `coremap {q.action} --cpus {format_cpus(q.cpus)}`, "
                      f"roll back: `coremap undo` while it is the last change")
        where = "" if e.root == "/" else f" [{printable(e.root)}]"
        code = f" {e.code}" if e.code else ""
        what = PinTarget(e.kind, e.target_id, e.pid, printable(e.label), e.netdev).describe()
        print(f"#{e.id} {_when(e.time)} {e.origin:<8} {what}{where}: "
              f"{format_change(e.before, e.requested, e.kind)} {e.state}{code}")
    # imported here: only the listing shows guard reports; the guard's own imports stay out of every command
    from app.quiet.guard import event_line
    for g in journal.guard_events():
        print(f"   {_when(g.time)} guard    {printable(event_line(g))}")
    return 0


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
