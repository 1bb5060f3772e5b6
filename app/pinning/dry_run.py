"""A batch's dry run (PinFlow.plan, AffinityService.plan): each step as the pin flow would take it, read
but not written or journalled. It is the one answer to "can this go there": a drop's highlight, the
Pin to… dialog, `coremap pin --dry-run` and the flow itself read the same writers' `prepare` and
`foresee`, so none of them can disagree with what a pin does (STYLE.md: a preview is the flow's dry run).

A step's `code` is what the write would come to: "ok" (written), "trimmed" (written, the kernel keeps
fewer CPUs), "gone" (the target exited: nothing to do, not a refusal), or the code a refused write
gets (app/pinning/targets.py: kthread, cpuset, managed, offline, invalid).
"""
from __future__ import annotations

from dataclasses import dataclass

from app.format import format_change, format_value
from app.pinning.targets import PinResult, PinTarget

GOES = ("ok", "trimmed")


@dataclass(frozen=True)
class PlannedStep:
    target: PinTarget
    code: str
    message: str
    before: tuple[int, ...] | None
    requested: tuple[int, ...]

    @classmethod
    def of(cls, result: PinResult) -> "PlannedStep":
        """A target refused (or found gone) before its steps were made: bad CPUs, an exited process."""
        return cls(result.target, result.code, result.message, result.before, tuple(result.requested))

    @property
    def goes(self) -> bool:
        return self.code in GOES

    @property
    def refused(self) -> bool:
        return not self.goes and self.code != "gone"

    def line(self) -> str:
        """"thread 1234 (java): 0-3 -> 2 would be written"; a refusal is its own sentence."""
        d = self.target.describe()
        if self.goes and self.before is not None and tuple(self.before) == tuple(self.requested):
            # "other -> other would be written" read as a change (Set scheduling… on an unchanged policy)
            return f"{d}: {format_value(self.target.kind, self.requested)} already; nothing changes"
        if self.goes:
            s = f"{d}: {format_change(self.before, self.requested, self.target.kind)} would be written"
            return s + (f" ({self.message})" if self.code == "trimmed" and self.message else "")
        return self.message if self.message.startswith(d) else f"{d}: {self.message}"


class Plan(list):
    """A batch's planned steps (PlannedStep, in the order they would be written)."""

    @property
    def refusals(self) -> list[PlannedStep]:
        return [s for s in self if s.refused]

    @property
    def goes(self) -> bool:
        """Whether the batch would go: no step refused, and at least one would be written."""
        return not self.refusals and any(s.goes for s in self)

    @property
    def invalid(self) -> bool:
        """The request names what is not there (CPUs beyond the machine, an unknown IRQ): bad input."""
        return any(s.code == "invalid" for s in self)

    def reasons(self) -> list[str]:
        """Why the batch would not go, one sentence a refused step ([] when it would): its refusals, or,
        when every target has exited, that they have (nothing is left to pin)."""
        if self.goes:
            return []
        why = self.refusals or [s for s in self if s.code == "gone"] or []
        seen: dict[str, None] = {}
        for s in why:
            seen.setdefault(s.message or s.line(), None)
        return list(seen) or ["nothing to pin"]
