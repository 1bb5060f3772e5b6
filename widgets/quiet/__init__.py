"""Quiet CPUs in the window (issue 13), one room per concern:

- controller.py      QuietController: the Quiet menu; isolate / include through the window's
                     AffinityService, Verify, the plan, the irqbalance fix
- preview_dialog.py  what an isolate or include would write, per target, before it is written
- plan_dialog.py     "Make it permanent…" (app/quiet/boot_plan.py) and irqbalance's banned-CPU line
- verify.py          VerifyRunner: probes/verify.py's pairs of jitter runs, without blocking the UI

The grid's quiet marks come from the journal (PinController sets them); the guard that keeps the
isolate in place is widgets/pinning/guard.py.
"""
