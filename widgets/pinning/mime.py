"""The pin drag's payload: what the tables put on a drag and the grid reads back.

The project's own MIME type, `application/x-coremap-pin+json`, carrying
`{"kind": "thread"|"process"|"irq", "ids": [...], "pid": P|null, "names": {"tid": "full name"}}`;
never plain text (tuna's drags are plain text, so any text dropped from anywhere pins whatever number
it holds). The tables build it in their models' `mimeData` with `pin_mime_data`; the grid's drop
policy reads it back with `decode_pin_mime`.

`names` holds the full Java names the window's sampler read for threads whose comm the kernel cut
(app/machine/thread_names.py ThreadNames.name): they become the pins' labels, so the journal, the
result line, the Pins dock, the guard and reports name "market-data-feed-handler-0", not
"market-data-fee"; and one Java thread dragged alone is pinned by its Java name as `coremap pin
--java` pins it (PinRequest.java_name: the guard gives a new thread of that name the same pin).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QMimeData

from app.pinning.service import KINDS, PinRequest, PinTarget
from app.errors import CoremapError
from app.machine.thread_names import COMM_LEN

PIN_MIME = "application/x-coremap-pin+json"
# A drag of a whole machine's threads is a few thousand ids; far beyond that is not a selection.
MAX_PAYLOAD_IDS = 65536
MAX_PAYLOAD_BYTES = 1 << 20
MAX_NAME_CHARS = 256        # what the journal keeps of a label (app/pinning/journal.py)
# irqs, cpus -> each IRQ's own CPUs: a spread (app/pinning/spread.py), on the machine the window shows
Spread = Callable[[Sequence[int], Sequence[int]], tuple[tuple[int, ...], ...]]


class PinPayloadError(CoremapError):
    """A pin drag whose data is not the shape this version of coremap writes."""


@dataclass(frozen=True)
class PinPayload:
    """What a drag or a table selection names: threads, processes or IRQs, by number."""
    kind: str                       # "thread" | "process" | "irq"
    ids: tuple[int, ...]
    pid: int | None = None          # the process of every thread in `ids`, when they share one
    names: tuple[tuple[int, str], ...] = ()     # (tid, full Java name) of the threads that have one

    def targets(self) -> tuple[PinTarget, ...]:
        names = dict(self.names)
        return tuple(PinTarget(self.kind, i, self.pid if self.kind == "thread" else None, names.get(i, ""))
                     for i in self.ids)

    def request(self, cpus, origin: str, spread: Spread | None = None) -> PinRequest:
        """The pin of these targets onto `cpus`: a drop's, a Pin to… dialog's. One Java thread by its
        full name is pinned by that name, as `coremap pin --java` pins it. Several IRQs are spread over
        the CPUs by `spread` (one per CPU, each device's node first), as `coremap pin --spread` does."""
        java = self.names[0][1] if self.kind == "thread" and len(self.ids) == 1 and self.names else ""
        each = spread(self.ids, tuple(cpus)) if spread is not None and self.spreads else ()
        return PinRequest(self.targets(), tuple(cpus), origin=origin, java_name=java, each=each)

    @property
    def spreads(self) -> bool:
        """Whether a pin of this payload spreads its targets: several IRQs, each to its own CPU."""
        return self.kind == "irq" and len(self.ids) > 1

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
        obj = {"kind": self.kind, "ids": list(self.ids), "pid": self.pid}
        if self.names:
            obj["names"] = {str(tid): name for tid, name in self.names}
        return json.dumps(obj, separators=(",", ":")).encode()


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
    return PinPayload(kind, clean, pid, _names(obj.get("names"), clean) if kind == "thread" else ())


def _names(obj, ids: tuple[int, ...]) -> tuple[tuple[int, str], ...]:
    """The payload's full thread names: {"tid": name} for tids among `ids`, each a name that is
    carried at all (carried_name)."""
    if obj is None:
        return ()
    if not isinstance(obj, dict):
        raise PinPayloadError("pin drag: names must be an object of thread ids and names; drag the row again")
    wanted, out = set(ids), []
    for key, name in obj.items():
        tid = int(key) if isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 11 else None
        if tid not in wanted or not isinstance(name, str) or not carried_name(name):
            raise PinPayloadError(f"pin drag: the name of thread {key!r} is not one this payload can carry; "
                                  "drag the row again")
        out.append((tid, name))
    return tuple(sorted(out))


def carried_name(name: str) -> bool:
    """Whether a drag may carry `name` as a thread's full name: longer than a comm (a name of up to
    15 bytes is its comm, which the pin reads itself) and no longer than the journal keeps."""
    return len(name.encode("utf-8", "surrogatepass")) > COMM_LEN and len(name) <= MAX_NAME_CHARS


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
                      tids_of: Callable[[int], list[int]] | None = None,
                      name_of: Callable[[int, int], str | None] | None = None) -> PinPayload | None:
    """A payload from selected table rows, each (kind, id, pid of a thread).

    Only threads, only processes, or only IRQs give that kind. A selection mixing processes and
    threads becomes threads: each selected process contributes its threads as listed now (a
    process pin is a pin of each of its threads anyway, AffinityService._expand). `name_of(pid, tid)`
    gives a thread's full Java name, or None (see the module docstring)."""
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
    names = () if name_of is None else tuple(
        (tid, name) for tid, p in sorted(tids.items()) if p is not None
        and (name := name_of(p, tid)) is not None and carried_name(name))
    return PinPayload("thread", tuple(sorted(tids)), pid, names)
