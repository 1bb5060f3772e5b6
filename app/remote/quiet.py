"""RemoteQuiet: the QuietService Protocol (app/quiet/service.py) for a machine over ssh. The preview is
worked out by the agent on the server (it reads every thread and IRQ there) and kept there by id;
applying it is a batch like a pin (streamed results, cancellable), journalled in the server's journal.
"""
from __future__ import annotations

from app.errors import CoremapError
from app.pinning.flow import Progress
from app.pinning.service import BatchResults
from app.pinning.targets import PinResult
from app.quiet.isolate import ACTIONS, QuietPreview
from app.remote.codec import wire_schema
from app.remote.decode import DecodeError, Decoder
from app.remote.pins import PIN_TIMEOUT, RemoteAffinityService

PREVIEW_TIMEOUT = 60.0      # the server reads every thread and IRQ once
KEPT = 4                    # previews remembered with their id on the server (the agent keeps as many)


class RemoteQuiet:
    """QuietService on the machine `pins` is connected to."""

    def __init__(self, pins: RemoteAffinityService):
        self.pins = pins
        self._previews = Decoder(wire_schema(), QuietPreview)
        self._ids: list[tuple[QuietPreview, int]] = []

    def preview(self, action: str, cpus, *, pm_qos: bool = False, move_pinned: bool = False,
                keep_pins: bool = False, knobs=()) -> QuietPreview:
        if action not in ACTIONS:
            raise ValueError(f"quiet action {action!r}: expected one of {', '.join(ACTIONS)}")
        # sent only when asked: a request without them is the one an agent from before them answers
        extra = {"knobs": [str(k) for k in knobs]} if knobs else {}
        reply = self.pins.call("quiet_preview", timeout=PREVIEW_TIMEOUT, action=action, cpus=[int(c) for c in cpus],
                               pm_qos=bool(pm_qos), move_pinned=bool(move_pinned), keep_pins=bool(keep_pins), **extra)
        if not isinstance(reply, dict) or type(reply.get("id")) is not int:
            raise DecodeError("a preview answer without its id")
        preview = self._previews.decode(reply.get("preview"))
        self._ids = (self._ids + [(preview, reply["id"])])[-KEPT:]
        return preview

    def apply(self, preview: QuietPreview, *, progress: Progress | None = None) -> BatchResults:
        ident = next((i for p, i in self._ids if p is preview), None)
        if ident is None:
            raise CoremapError(f"{self.pins.link.host}: that preview was not made on this connection; preview again")
        return self.pins.batch("quiet_apply", progress, preview=ident)

    def finish(self, cut, *, progress: Progress | None = None) -> tuple[QuietPreview, BatchResults]:
        """An isolate or include a crash cut short, previewed again on the server and written."""
        preview = self.preview(cut.action, cut.cpus)
        return preview, self.apply(preview, progress=progress)

    def set_quiet(self, cpus, quiet: bool) -> tuple[str, list[PinResult]] | None:
        reply = self.pins.call("quiet_set", timeout=PIN_TIMEOUT, privileged=self.pins.privileged,
                               cpus=[int(c) for c in cpus], quiet=bool(quiet))
        sentence = reply.get("sentence") if isinstance(reply, dict) else None
        if sentence is None:
            return None
        return str(sentence)[:2000], self.pins.take_results("quiet_set", reply)
