"""RemoteAffinityService: the PinService Protocol (app/pinning/api.py) over ssh, answered by the agent's
own AffinityService and journal on the server. A batch's results arrive one by one as events while it
runs (the window shows progress), and a cancel stops it on the server between two writes.

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

import threading
import time

from app.errors import CoremapError
from app.pinning.flow import Progress
from app.pinning.journal import JournalEntry, QuietEvent
from app.pinning.ledger import Ledger, ledger_of
from app.pinning.service import BatchResults
from app.pinning.targets import PinRequest, PinResult
from app.remote.client import Link
from app.remote.codec import Encoder, wire_schema
from app.remote.pin_ops import MAX_HELD
from app.remote.decode import DecodeError, Decoder
from app.remote.transport import Disconnected, LinkError

PIN_TIMEOUT = 60.0          # a pin of a process with thousands of threads, each read back
PREFLIGHT_KEPT_S = 2.0


class RemoteJournal:
    """The journal as the window reads it (entries, unrestored), from the agent's last view."""

    def __init__(self, service: "RemoteAffinityService"):
        self._service = service

    @property
    def session_id(self) -> str:
        return self._service.link.session

    def entries(self) -> list[JournalEntry]:
        return list(self._service.view()["entries"])

    def refresh(self):
        """A token that changes when the server's journal changed (its stamp)."""
        return tuple(self._service.view()["stamp"])

    # The guard acts on the machine it runs on (`coremap --host H guard`): the window of a remote host
    # shows its pins and quiet CPUs, not the guard's events there.
    def guard_events(self) -> list:
        return []

    def quiet_events(self) -> list:
        return list(self._service.view()["quiet"])

    def policies(self) -> dict[int, bool]:
        return {}

    def set_policy(self, batch: int, reapply: bool):
        raise CoremapError(f"{self._service.link.host}: guard policies are set where the guard runs: "
                           f"`coremap --host {self._service.link.host} guard --policy {batch}="
                           f"{'reapply' if reapply else 'report'}`")


class RemoteAffinityService:
    """Pins on the machine `link` connects to; `privileged`: through `sudo -n` there."""

    live = True

    def __init__(self, link: Link, *, privileged: bool = False, _shared: dict | None = None):
        self.link = link
        self.privileged = privileged
        self.journal = RemoteJournal(self)
        self._encoder = Encoder()
        schema = wire_schema()
        self._results = Decoder(schema, list[PinResult])
        self._entries = Decoder(schema, list[JournalEntry])
        self._quiet = Decoder(schema, list[QuietEvent])
        self._request = Decoder(schema, PinRequest)     # checks what is sent the way the agent will
        self._shared = _shared if _shared is not None else {"view": None, "preflight": {},
                                                            "lock": threading.Lock()}

    @property
    def root_key(self) -> str:
        return self.link.root_key or ""

    def with_writer(self, writer) -> "RemoteAffinityService":
        return RemoteAffinityService(self.link, privileged=True, _shared=self._shared)

    # -- the calls ------------------------------------------------------------------------------------
    def _client(self):
        c = self.link.client
        if c is None:
            raise Disconnected(f"{self.link.host}: disconnected — reconnecting; nothing was sent, "
                               "try again once the window shows the machine live")
        return c

    def batch(self, op: str, progress: Progress | None, **params) -> BatchResults:
        """One batch on the server: each result an event as it is made (handed to `progress`), the whole
        list and the journal's new view at the end; `progress.cancel()` asks the server to stop."""
        on_event = None
        if progress is not None:
            def on_event(ev: dict) -> None:
                try:
                    [r] = self._results.decode([ev.get("result")])
                except (DecodeError, ValueError):
                    return          # a malformed progress event: the final list still says it all
                done, total = ev.get("done"), ev.get("total")
                if type(done) is int and type(total) is int and 0 < done <= total:
                    progress.report(r, done, total)
        pending = self._client().start(op, on_event=on_event, privileged=self.privileged, **self._view_params(),
                                       **params)
        if progress is not None:
            progress.add_cancel_hook(pending.cancel)
        return self.take_results(op, pending.wait(PIN_TIMEOUT))

    def call(self, op: str, *, timeout: float, **params):
        """One request to the agent and its answer (a LinkError or AgentError when there is none)."""
        return self._client().call(op, timeout=timeout, **params)

    def take_results(self, op: str, reply) -> BatchResults:
        """A batch's answer: its results and warning; the journal view it carries is taken."""
        if not isinstance(reply, dict):
            raise DecodeError(f"an answer to {op} that is not an object")
        results = self._results.decode(reply.get("results"))
        warning = reply.get("warning")
        self._take_view(reply.get("journal"))
        self._shared["preflight"].clear()
        return BatchResults(results, str(warning)[:1000] if isinstance(warning, str) else "")

    def apply(self, request: PinRequest, *, progress: Progress | None = None) -> BatchResults:
        form = self._encoder.encode(request)
        self._request.decode(form)
        return self.batch("pin", progress, request=form)

    def undo(self, *, progress: Progress | None = None) -> BatchResults:
        return self.batch("undo", progress)

    def redo(self, *, progress: Progress | None = None) -> BatchResults:
        return self.batch("redo", progress)

    def restore_all(self, *, progress: Progress | None = None) -> BatchResults:
        return self.batch("restore", progress)

    def roll_back(self, batch: int, *, progress: Progress | None = None) -> BatchResults:
        return self.batch("roll_back", progress, batch=int(batch))

    def preflight(self, request: PinRequest) -> list[str]:
        """Why the server would refuse (its own AffinityService.preflight), never waiting on the
        network: a drag asks on every move, so the first ask starts the request and answers [] (let
        the drop go), and a later ask, once the server has answered, gets its reasons. A drop made
        before the answer came is a pin whose own result says what went wrong."""
        key = (request.targets, request.cpus)
        table = self._shared["preflight"]
        now = time.monotonic()
        kept = table.get(key)
        if kept is not None and isinstance(kept[1], list) and now - kept[0] < PREFLIGHT_KEPT_S:
            return kept[1]
        if kept is not None and not isinstance(kept[1], list):
            pending = kept[1]
            if not pending.done:
                return []
            try:
                reply = pending.wait(0)
            except CoremapError as e:
                reply = [str(e)]
            reasons = [str(r)[:500] for r in reply] if isinstance(reply, list) else []
            table[key] = (now, reasons)
            return reasons
        try:
            table[key] = (now, self._client().start("preflight", request=self._encoder.encode(request)))
        except LinkError as e:
            return [str(e)]
        return []

    def ledger(self) -> Ledger:
        """The agent's view of its own journal (its entries and quiet events) folded by the same rule as
        here, kept per view."""
        v = self.view()
        kept = self._shared.get("ledger")
        if kept is None or kept[0] is not v:
            kept = (v, ledger_of(v["entries"], v["quiet"], self.root_key))
            self._shared["ledger"] = kept
        return kept[1]

    def pending_restore(self) -> list[JournalEntry]:
        v = self.view()
        ids = set(v["pending"])
        return [e for e in v["entries"] if e.id in ids]

    # -- the journal's view -----------------------------------------------------------------------------
    def view(self) -> dict:
        """The agent's last journal view. When the server's journal changed since (the stamp each tick
        carries) a fetch is started, and the old view kept until its answer is in: it is decoded and
        taken in the connection's reader thread, so the window, which asks on every state, never waits
        on the network or on decoding a long journal."""
        v = self._shared["view"]
        stamp = self.link.journal_stamp
        fetch = self._shared.get("fetch")
        if (fetch is None or fetch.done) and (v is None or (stamp is not None and tuple(v["stamp"]) != stamp)):
            try:
                self._shared["fetch"] = self._client().start("journal", on_done=self._on_view_fetched,
                                                             **self._view_params())
            except CoremapError:
                pass        # disconnected: the sampler reconnects, and the next state asks again
        return v or _EMPTY_VIEW

    def _on_view_fetched(self, pending) -> None:
        try:
            self._take_view(pending.wait(0))
        except LinkError:
            pass            # the link dropped: the next state asks again

    def _view_params(self) -> dict:
        """What the agent's delta view needs (app/remote/pin_ops.py): the newest entry held, and the
        entries held still pending."""
        v = self._shared["view"]
        if v is None:
            return {"since": 0, "held": []}
        entries = v["entries"]
        return {"since": entries[-1].id if entries else 0,
                "held": [e.id for e in entries if e.state == "pending"][-MAX_HELD:]}

    def _take_view(self, raw) -> None:
        """Merge the delta view `raw` into the view kept (by entry id: a write's mark replaces its
        pending record, never the other way round), unless the view kept is newer: a fetch started
        before a pin can answer after the pin's own answer brought a later view, and the window's UI
        thread and the pin worker take views at once. The journal only grows, so a view with less
        journal and no later change time is older. A merge that does not add up to the server's count
        (a journal moved aside there) is dropped, and the next view asked for whole."""
        if not isinstance(raw, dict):
            raise DecodeError("a journal view that is not an object")
        ids = {}
        for key in ("unrestored", "pending"):
            v = raw.get(key)
            if not isinstance(v, list) or not all(type(i) is int for i in v):
                raise DecodeError(f"a journal view whose {key} is not a list of ids")
            ids[key] = tuple(v)
        stamp, since, total = raw.get("stamp"), raw.get("since"), raw.get("total")
        if not isinstance(stamp, list) or len(stamp) != 2 or not all(type(i) is int for i in stamp):
            raise DecodeError("a journal view without its stamp")
        if type(since) is not int or type(total) is not int or since < 0 or total < 0:
            raise DecodeError("a journal view without since and total")
        delta = self._entries.decode(raw.get("entries"))
        quiet = self._quiet.decode(raw.get("quiet", []))
        with self._shared["lock"]:
            kept = self._shared["view"]
            if kept is not None and len(kept["stamp"]) == 2:
                (size, mtime), (kept_size, kept_mtime) = tuple(stamp), kept["stamp"]
                if size < kept_size and mtime <= kept_mtime:
                    return
            merged = {e.id: e for e in kept["entries"]} if kept is not None and since else {}
            for e in delta:
                old = merged.get(e.id)
                if old is None or old.state == "pending" or e.state != "pending":
                    merged[e.id] = e
            if len(merged) != total:
                self._shared["view"] = None          # out of step: the next view comes whole
                return
            self._shared["view"] = {"stamp": tuple(stamp), "root_key": str(raw.get("root_key")),
                                    "entries": [merged[i] for i in sorted(merged)], "quiet": quiet, **ids}


_EMPTY_VIEW = {"stamp": (), "root_key": "", "entries": [], "quiet": [], "unrestored": (), "pending": ()}

