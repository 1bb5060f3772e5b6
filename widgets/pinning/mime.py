"""The pin drag's payload: what the tables put on a drag and the grid reads back.

The project's own MIME type, `application/x-coremap-pin+json`, carrying
`{"kind": "thread"|"process"|"irq", "ids": [...], "pid": P|null}`; never plain text (tuna's drags
are plain text, so any text dropped from anywhere pins whatever number it holds). The tables build
it in their models' `mimeData` with `pin_mime_data`; the grid's drop policy reads it back with
`decode_pin_mime`.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from PySide6.QtCore import QMimeData

from app.pinning.service import KINDS, PinTarget
from app.errors import CoremapError

PIN_MIME = "application/x-coremap-pin+json"
# A drag of a whole machine's threads is a few thousand ids; far beyond that is not a selection.
MAX_PAYLOAD_IDS = 65536
MAX_PAYLOAD_BYTES = 1 << 20


class PinPayloadError(CoremapError):
    """A pin drag whose data is not the shape this version of coremap writes."""


@dataclass(frozen=True)
class PinPayload:
    """What a drag or a table selection names: threads, processes or IRQs, by number."""
    kind: str                       # "thread" | "process" | "irq"
    ids: tuple[int, ...]
    pid: int | None = None          # the process of every thread in `ids`, when they share one

    def targets(self) -> tuple[PinTarget, ...]:
        return tuple(PinTarget(self.kind, i, self.pid if self.kind == "thread" else None) for i in self.ids)

    def describe(self) -> str:
        """"thread 1234", "3 threads of process 77", "IRQ 24", "2 processes"."""
        n = len(self.ids)
        name = "IRQ" if self.kind == "irq" else self.kind
        if n == 1:
            return f"{name} {self.ids[0]}"
        plural = "IRQs" if self.kind == "irq" else f"{self.kind}es" if self.kind == "process" else f"{self.kind}s"
        of = f" of process {self.pid}" if self.kind == "thread" and self.pid is not None else ""
        return f"{n} {plural}{of}"

    def to_json(self) -> bytes:
        return json.dumps({"kind": self.kind, "ids": list(self.ids), "pid": self.pid},
                          separators=(",", ":")).encode()


def _positive_int(v, what: str) -> int:
    # bool is an int in Python; a payload of `true` is not an id.
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise PinPayloadError(f"pin drag: {what} {v!r} is not a non-negative integer; drag the row again")
    return v


def parse_pin_payload(data: bytes) -> PinPayload:
    """The payload from the MIME data's bytes; PinPayloadError when it is not what pin_mime_data writes."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise PinPayloadError(f"pin drag: {len(data)} bytes is more than a selection can be; select fewer rows")
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise PinPayloadError(f"pin drag: not JSON ({e}); drag the row again") from None
    if not isinstance(obj, dict):
        raise PinPayloadError("pin drag: expected a JSON object with kind, ids and pid")
    kind = obj.get("kind")
    if kind not in KINDS:
        raise PinPayloadError(f"pin drag: kind {kind!r}: expected one of {', '.join(KINDS)}")
    ids = obj.get("ids")
    if not isinstance(ids, list) or not ids:
        raise PinPayloadError("pin drag: ids must be a non-empty list of numbers")
    if len(ids) > MAX_PAYLOAD_IDS:
        raise PinPayloadError(f"pin drag: {len(ids)} ids is more than a machine holds; select fewer rows")
    clean = tuple(dict.fromkeys(_positive_int(i, "id") for i in ids))
    pid = obj.get("pid")
    if pid is not None:
        pid = _positive_int(pid, "pid")
    if kind != "thread":
        pid = None
    return PinPayload(kind, clean, pid)


def pin_mime_data(payload: PinPayload | None) -> QMimeData | None:
    """MIME data for a drag source's `mimeData`: the pin JSON only (no text/plain), or None."""
    if payload is None or not payload.ids:
        return None
    mime = QMimeData()
    mime.setData(PIN_MIME, payload.to_json())
    return mime


def decode_pin_mime(mime: QMimeData | None) -> PinPayload | None:
    """The payload of a drag; None when it does not carry the pin type (plain text, files, ...).
    Raises PinPayloadError when it carries the type with bad contents."""
    if mime is None or not mime.hasFormat(PIN_MIME):
        return None
    return parse_pin_payload(bytes(mime.data(PIN_MIME).data()))


def payload_from_rows(rows: Iterable[tuple[str, int, int | None]],
                      tids_of: Callable[[int], list[int]] | None = None) -> PinPayload | None:
    """A payload from selected table rows, each (kind, id, pid of a thread).

    Only threads, only processes, or only IRQs give that kind. A selection mixing processes and
    threads becomes threads: each selected process contributes its threads as listed now (a
    process pin is a pin of each of its threads anyway, AffinityService._expand)."""
    rows = list(dict.fromkeys(rows))
    if not rows:
        return None
    kinds = {k for k, _, _ in rows}
    if kinds == {"irq"} or kinds == {"process"}:
        kind = kinds.pop()
        return PinPayload(kind, tuple(sorted(i for _, i, _ in rows)))
    if "irq" in kinds:
        return None                     # one table holds one kind; never reached from the window
    tids: dict[int, int | None] = {}
    for kind, ident, pid in rows:
        if kind == "thread":
            tids[ident] = pid
        elif tids_of is not None:
            for tid in tids_of(ident):
                tids[tid] = ident
    if not tids:
        return None
    pids = set(tids.values())
    pid = pids.pop() if len(pids) == 1 else None
    return PinPayload("thread", tuple(sorted(tids)), pid)
