"""QuietService: what the window's Quiet menu and Verify ask of one machine, the same on this machine
(LocalQuiet, over an AffinityService) and on one over ssh (app/remote/quiet.py RemoteQuiet, answered by
the agent's LocalQuiet there): a preview of an isolate or include, its writes as one batch, and the
toggle Verify uses between its runs.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from app.pinning.flow import Progress
from app.pinning.service import AffinityService
from app.pinning.targets import BatchResults, PinResult
from app.pinning.ledger import CutShort
from app.quiet.isolate import QuietPreview, apply_preview, finish, preview_include, preview_isolate, set_quiet

ACTIONS = ("isolate", "include")


@runtime_checkable
class QuietService(Protocol):
    def preview(self, action: str, cpus, *, pm_qos: bool = False, move_pinned: bool = False,
                keep_pins: bool = False, knobs=()) -> QuietPreview: ...

    def apply(self, preview: QuietPreview, *, progress: Progress | None = None) -> BatchResults: ...

    def set_quiet(self, cpus, quiet: bool) -> tuple[str, BatchResults] | None: ...

    def finish(self, cut: CutShort, *, progress: Progress | None = None) -> tuple[QuietPreview, BatchResults]: ...


class LocalQuiet:
    """QuietService on the machine of `pins` (its writes are batches of that service's journal)."""

    def __init__(self, pins: AffinityService):
        self.pins = pins

    def preview(self, action: str, cpus, *, pm_qos: bool = False, move_pinned: bool = False,
                keep_pins: bool = False, knobs=()) -> QuietPreview:
        """`pm_qos` (an isolate): also keep the quiet CPUs out of deep idle states; `move_pinned` (an
        isolate): move the tasks the user pinned onto those CPUs too; `knobs` (an isolate): tuned's
        knobs the user ticked (app/quiet/knobs.py); `keep_pins` (an include): leave the pins made onto
        them while they were quiet."""
        if action not in ACTIONS:
            raise ValueError(f"quiet action {action!r}: expected one of {', '.join(ACTIONS)}")
        if action == "isolate":
            return preview_isolate(self.pins, cpus, pm_qos=pm_qos, move_pinned=move_pinned, knobs=knobs)
        return preview_include(self.pins, cpus, keep_pins=keep_pins)

    def apply(self, preview: QuietPreview, *, progress: Progress | None = None) -> list[PinResult]:
        return apply_preview(self.pins, preview, progress=progress)

    def set_quiet(self, cpus, quiet: bool) -> tuple[str, list[PinResult]] | None:
        return set_quiet(self.pins, cpus, quiet)

    def finish(self, cut: CutShort, *, progress: Progress | None = None) -> tuple[QuietPreview, list[PinResult]]:
        return finish(self.pins, cut, progress=progress)
