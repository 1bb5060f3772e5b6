"""QuietService: what the window's Quiet menu and Verify ask of one machine, the same on this machine
(app/quiet/isolate.py LocalQuiet, over an AffinityService) and on one over ssh (app/remote/quiet.py
RemoteQuiet, answered by the agent's LocalQuiet there): a preview of an isolate or include, its writes
as one batch, and the toggle Verify uses between its runs.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from app.pinning.flow import Progress
from app.pinning.targets import BatchResults
from app.pinning.ledger import CutShort
from app.quiet.isolate import QuietPreview


@runtime_checkable
class QuietService(Protocol):
    def preview(self, action: str, cpus, *, pm_qos: bool = False, move_pinned: bool = False,
                keep_pins: bool = False, knobs=()) -> QuietPreview: ...

    def apply(self, preview: QuietPreview, *, progress: Progress | None = None) -> BatchResults: ...

    def set_quiet(self, cpus, quiet: bool) -> tuple[str, BatchResults] | None: ...

    def finish(self, cut: CutShort, *, progress: Progress | None = None) -> tuple[QuietPreview, BatchResults]: ...
