"""RemoteAffinityService: what the window's PinController asks of an AffinityService (apply, preflight,
undo, redo, restore_all, the journal, irqbalance's warning), answered by the agent's own
AffinityService and journal on the server.

The pins are made and journalled there, so a crash of the workstation or of the link leaves the
server's journal able to restore them (`coremap restore` on the server, or the window's restore bar
on the next connection). The journal's view (its entries for the server's machine, whether undo and
redo can go, what is left to restore) comes back with every pin and is fetched again only when the
server's journal changed (the stamp each tick carries: a `coremap pin` in a shell there shows too),
so the window's refresh after every state costs no round trip.

`with_writer()` (the window's "Retry with privileges") gives a service whose pins go through the
helper started with `sudo -n` on the server; the local writer it is handed (pkexec here) has nothing
to do with the server and is not used.
"""
from __future__ import annotations

import time

from app.pinning.service import PinRequest, PinResult, history_of
from app.errors import CoremapError
from app.pinning.journal import JournalEntry, pinned_irqs
from app.remote.codec import Encoder, wire_schema
from app.remote.decode import DecodeError, Decoder
from app.remote.sampler import RemoteSampler
from app.remote.transport import Disconnected, LinkError

PIN_TIMEOUT = 60.0          # a pin of a process with thousands of threads, each read back
PREFLIGHT_TIMEOUT = 0.3     # a drag waits at most this for the server's verdict, then lets the drop go
PREFLIGHT_KEPT_S = 2.0


class RemoteJournal:
    """The journal as the window reads it (entries, unrestored), from the agent's last view."""

    def __init__(self, service: "RemoteAffinityService"):
        self._service = service

    @property
    def session_id(self) -> str:
        return self._service.sampler.session

    def entries(self) -> list[JournalEntry]:
        return list(self._service.view()["entries"])

    def unrestored(self, root: str | None = None) -> list[JournalEntry]:
        v = self._service.view()
        if root is not None and root != v["root_key"]:
            return []
        ids = set(v["unrestored"])
        return [e for e in v["entries"] if e.id in ids]

    def pinned_irqs(self, root: str) -> dict[int, tuple[int, ...]]:
        return pinned_irqs(self.entries(), self.unrestored(root), root)

    def refresh(self):
        """A token that changes when the server's journal changed (its stamp)."""
        return tuple(self._service.view()["stamp"])

    # The guard and quiet CPUs act on the machine they run on (`coremap --host H guard`, `isolate`):
    # the window of a remote host shows its pins, not their guard events or quiet marks.
    def guard_events(self) -> list:
        return []

    def quiet_events(self) -> list:
        return []

    def policies(self) -> dict[int, bool]:
        return {}

    def set_policy(self, batch: int, reapply: bool):
        raise CoremapError(f"{self._service.sampler.host}: guard policies are set where the guard runs: "
                           f"`coremap --host {self._service.sampler.host} guard --policy {batch}="
                           f"{'reapply' if reapply else 'report'}`")


class RemoteAffinityService:
    """Pins on the machine `sampler` is connected to; `privileged`: through `sudo -n` there."""

    live = True

    def __init__(self, sampler: RemoteSampler, *, privileged: bool = False, _shared: dict | None = None):
        self.sampler = sampler
        self.privileged = privileged
        self.journal = RemoteJournal(self)
        self._encoder = Encoder()
        schema = wire_schema()
        self._results = Decoder(schema, list[PinResult])
        self._entries = Decoder(schema, list[JournalEntry])
        self._request = Decoder(schema, PinRequest)     # checks what is sent the way the agent will
        self._shared = _shared if _shared is not None else {"view": None, "preflight": {}}

    @property
    def root_key(self) -> str:
        return self.sampler.root_key or ""

    def with_writer(self, writer) -> "RemoteAffinityService":
        return RemoteAffinityService(self.sampler, privileged=True, _shared=self._shared)

    # -- the calls ------------------------------------------------------------------------------------
    def _client(self):
        c = self.sampler.client
        if c is None:
            raise Disconnected(f"{self.sampler.host}: disconnected — reconnecting; nothing was sent, "
                               "try again once the window shows the machine live")
        return c

    def _send(self, op: str, **params) -> list[PinResult]:
        reply = self._client().call(op, timeout=PIN_TIMEOUT, privileged=self.privileged, **params)
        if not isinstance(reply, dict):
            raise DecodeError(f"an answer to {op} that is not an object")
        results = self._results.decode(reply.get("results"))
        self._take_view(reply.get("journal"))
        self._shared["preflight"].clear()
        return results

    def apply(self, request: PinRequest) -> list[PinResult]:
        form = self._encoder.encode(request)
        self._request.decode(form)
        return self._send("pin", request=form)

    def undo(self) -> list[PinResult]:
        return self._send("undo")

    def redo(self) -> list[PinResult]:
        return self._send("redo")

    def restore_all(self) -> list[PinResult]:
        return self._send("restore")

    def preflight(self, request: PinRequest) -> list[str]:
        """Why the server would refuse (its own AffinityService.preflight); [] when it does not answer
        within PREFLIGHT_TIMEOUT: a drag never waits on the network for long, and the pin itself
        says what went wrong."""
        key = (request.targets, request.cpus)
        kept = self._shared["preflight"].get(key)
        now = time.monotonic()
        if kept is not None and now - kept[0] < PREFLIGHT_KEPT_S:
            return kept[1]
        try:
            reply = self._client().start("preflight", request=self._encoder.encode(request)).wait(
                PREFLIGHT_TIMEOUT, give_up=False)
        except TimeoutError:
            return []
        except LinkError as e:
            return [str(e)]
        reasons = [str(r)[:500] for r in reply] if isinstance(reply, list) else []
        self._shared["preflight"][key] = (now, reasons)
        return reasons

    def history(self):
        """Undo and redo stacks from the agent's view of its own journal (the same rule as here)."""
        return history_of(self.view()["entries"], self.root_key)

    def can_undo(self) -> bool:
        return bool(self.view()["can_undo"])

    def can_redo(self) -> bool:
        return bool(self.view()["can_redo"])

    def pending_restore(self) -> list[JournalEntry]:
        v = self.view()
        ids = set(v["pending"])
        return [e for e in v["entries"] if e.id in ids]

    def irqbalance_warning(self, irqs=()) -> str:
        try:
            text = self._client().call("irqbalance", timeout=5.0, irqs=[int(i) for i in irqs])
        except CoremapError:
            return ""       # the pin's own result lines still carry irqbalance's warning
        return str(text)[:500] if isinstance(text, str) else ""

    # -- the journal's view -----------------------------------------------------------------------------
    def view(self) -> dict:
        """The agent's last journal view, fetched again when the server's journal changed since."""
        v = self._shared["view"]
        stamp = self.sampler.journal_stamp
        if v is None or (stamp is not None and tuple(v["stamp"]) != stamp):
            try:
                self._take_view(self._client().call("journal", timeout=10.0))
            except CoremapError:
                if v is None:
                    return _EMPTY_VIEW
            v = self._shared["view"] or _EMPTY_VIEW
        return v

    def _take_view(self, raw) -> None:
        if not isinstance(raw, dict):
            raise DecodeError("a journal view that is not an object")
        ids = {}
        for key in ("unrestored", "pending"):
            v = raw.get(key)
            if not isinstance(v, list) or not all(type(i) is int for i in v):
                raise DecodeError(f"a journal view whose {key} is not a list of ids")
            ids[key] = tuple(v)
        stamp = raw.get("stamp")
        if not isinstance(stamp, list) or not all(type(i) is int for i in stamp):
            raise DecodeError("a journal view without its stamp")
        self._shared["view"] = {
            "stamp": tuple(stamp), "root_key": str(raw.get("root_key")),
            "entries": self._entries.decode(raw.get("entries")),
            "can_undo": raw.get("can_undo") is True, "can_redo": raw.get("can_redo") is True, **ids}


_EMPTY_VIEW = {"stamp": (), "root_key": "", "entries": [], "can_undo": False, "can_redo": False,
               "unrestored": (), "pending": ()}

