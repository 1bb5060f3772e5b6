"""The PinService Protocol: what the window and the CLI ask of one machine's pins, answered by
AffinityService (app/pinning/service.py) on this machine and by RemoteAffinityService
(app/remote/pins.py) on a machine over ssh. Callers depend on this, not on either class; a test checks
both classes against it (tests/unit/test_pin_protocol.py).

The journal behind a service is seen through JournalView: its entries and events, a token that
changes when it grows, and the guard's policies.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from app.pinning.flow import Progress
from app.pinning.journal_lines import GuardEvent, JournalEntry, QuietEvent
from app.pinning.ledger import Ledger
from app.pinning.targets import BatchResults, PinRequest


@runtime_checkable
class JournalView(Protocol):
    """A pin journal as a service's users read it."""
    session_id: str

    def entries(self) -> list[JournalEntry]: ...

    def refresh(self) -> object: ...

    def quiet_events(self) -> list[QuietEvent]: ...

    def guard_events(self) -> list[GuardEvent]: ...

    def policies(self) -> dict[int, bool]: ...

    def set_policy(self, batch: int, reapply: bool) -> object: ...


@runtime_checkable
class PinService(Protocol):
    """Pins on one machine: every write journalled before it is made, undone from the journal.

    Each batch method returns a BatchResults (its results and the batch's headline warning,
    app/pinning/advice.py); `progress` sees each result as it is made and may cancel the rest."""
    live: bool
    root_key: str
    journal: JournalView

    def ledger(self) -> Ledger: ...

    def apply(self, request: PinRequest, *, progress: Progress | None = None) -> BatchResults: ...

    def undo(self, *, progress: Progress | None = None) -> BatchResults: ...

    def redo(self, *, progress: Progress | None = None) -> BatchResults: ...

    def restore_all(self, *, progress: Progress | None = None) -> BatchResults: ...

    def roll_back(self, batch: int, *, progress: Progress | None = None) -> BatchResults: ...

    def preflight(self, request: PinRequest) -> list[str]: ...

    def pending_restore(self) -> list[JournalEntry]: ...

    def with_writer(self, writer) -> "PinService": ...
