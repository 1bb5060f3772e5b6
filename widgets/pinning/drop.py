"""What the grid may take before a drop: the pin policy TopologyView asks while something is dragged
over it (widgets/topology/drop.py, DropPolicy).

A drag is ours when it carries PIN_MIME; each target under the cursor is checked (`check`, the
controller's service's preflight: the pin flow's dry run of the very batch a drop would write, so a
thread dropped onto a quiet CPU is judged as moved into /coremap-pinned first) and the hint says what
a drop there does or why not.
Verdicts are cached per (payload, CPUs) for one drag, since dragMove comes with every mouse move
and a check reads /proc.
"""
from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QMimeData

from app.pinning.service import PinRequest
from app.pinning.spread import spread_summary
from widgets.pinning.mime import PinPayload, PinPayloadError, Spread, decode_pin_mime
from widgets.topology.drop import DropTarget, DropVerdict

Check = Callable[[PinRequest], list[str]]     # a request -> why it would be refused ([] = fine)


class PinDropPolicy:
    """Judges pin drags over the grid: `PinDropPolicy(check, spread)`; `spread` places several IRQs one
    per CPU (PinPayload.request), and the hint says where each goes before the drop."""

    def __init__(self, check: Check, spread: Spread | None = None):
        self._check = check
        self._spread = spread
        self._cache: dict[tuple, list[str]] = {}

    def begin(self) -> None:
        self._cache.clear()

    def judge(self, mime: QMimeData, target: DropTarget | None) -> DropVerdict:
        try:
            payload = decode_pin_mime(mime)
        except PinPayloadError as e:
            return DropVerdict(False, str(e))
        if payload is None:
            return DropVerdict(False)
        what = payload.describe()
        if target is None:
            return DropVerdict(True, f"drop {what} on a CPU, a core or a package")
        why = self.reasons(payload, target)
        if why:
            more = f" (and {len(why) - 1} more)" if len(why) > 1 else ""
            return DropVerdict(True, f"cannot pin {what} to {target.what}: {why[0]}{more}")
        request = self._request(payload, target)
        if request.each:
            return DropVerdict(True, f"spread {what} over {target.what}: "
                               f"{spread_summary(request.targets, request.each)}", request)
        return DropVerdict(True, f"pin {what} to {target.what}", request)

    def reasons(self, payload: PinPayload, target: DropTarget) -> list[str]:
        """Why `target` cannot take `payload` ([] = it can)."""
        if target.reason:
            return [target.reason]
        key = (payload, target.cpus)
        if key not in self._cache:
            self._cache[key] = list(self._check(self._request(payload, target)))
        return self._cache[key]

    def _request(self, payload: PinPayload, target: DropTarget) -> PinRequest:
        return payload.request(target.cpus, origin="drop", spread=self._spread)
