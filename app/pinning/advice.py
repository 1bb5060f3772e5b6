"""The warnings a batch's results carry, decided once per batch from one Ledger and one look at
irqbalance: a pin that puts background work back onto a quiet CPU (Ledger.quiet_warning), and an IRQ
pin irqbalance will undo. The CLI prints them under each result, the window shows the headline on its
result line; neither works them out again.
"""
from __future__ import annotations

from dataclasses import replace

from app.machine.irqbalance import IrqbalanceStatus
from app.machine.threads import TaskGone, read_task
from app.pinning.ledger import Ledger
from app.pinning.targets import PinResult
from app.sysroot import SysRoot


def advise(root: SysRoot, results: list[PinResult], ledger: Ledger,
           irqbalance: IrqbalanceStatus) -> tuple[list[PinResult], str]:
    """(the results with their warnings, the batch's headline warning or "")."""
    out: list[PinResult] = []
    quiet: list[str] = []
    balanced: list[int] = []
    # IRQs this batch told irqbalance to leave alone (app/pinning/balancer.py): no warning for them.
    left_alone = {r.target.id for r in results if r.target.kind == "irqbalanceirq" and r.ok}
    for r in results:
        if not r.changed:
            out.append(r)
            continue
        notes = []
        if ledger.quiet_cpus:
            w = ledger.quiet_warning(r.target, r.requested, kthread=_kthread(root, r))
            if w:
                quiet.append(w)
                notes.append(w)
        if r.target.kind == "irq" and r.target.id not in left_alone:
            w = irqbalance.warning_for(r.target.id)
            if w:
                balanced.append(r.target.id)
                notes.append(w)
        out.append(replace(r, warning="; ".join(notes)) if notes else r)
    if quiet:
        return out, quiet[0] + (f" (and {len(quiet) - 1} more)" if len(quiet) > 1 else "")
    return out, irqbalance.pinned_text(balanced) if balanced else ""


def _kthread(root: SysRoot, r: PinResult) -> bool:
    if r.target.kind != "thread" or r.target.pid is None:
        return False
    try:
        return read_task(root, r.target.pid, r.target.id, detail="fast").kthread
    except TaskGone:
        return False
