"""The agent's pin and quiet ops: what RemoteAffinityService and RemoteQuiet ask of the server, answered
by the server's own AffinityService, journal and LocalQuiet (app/remote/agent.py serves them).

  preflight, pin, undo, redo, restore,  the PinService's methods;
  roll_back a batch sends each result as an
                                        event as it is made, and stops between two writes when the
                                        client cancels it
  journal                               the journal's view (below)
  quiet_preview, quiet_apply, quiet_set the Quiet menu and Verify: a preview is kept here by id (the
                                        last KEPT_PREVIEWS), and applying it is a batch like a pin

A journal view answers every batch and `journal`. It is a delta: the entries after the newest one
the client holds (`since`), and those it holds still pending (`held`: their marks may have come),
with the journal's size in entries (`total`), so a client that misses something asks again from 0. A
journal of thousands of writes is then not re-sent, and re-decoded by the window, after every pin.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from app.errors import CoremapError
from app.pinning.flow import Progress
from app.pinning.service import AffinityService
from app.pinning.targets import PinRequest, PinTarget
from app.quiet.isolate import ACTIONS, LocalQuiet
from app.remote.codec import Encoder
from app.remote.decode import Schema, build

KEPT_PREVIEWS = 4           # isolate previews kept for quiet_apply
MAX_HELD = 1 << 16          # pending entries a client may name in one request
_REQUEST = Schema(classes=(PinRequest, PinTarget))     # what a pin request is made of


def journal_stamp(path: Path) -> list[int]:
    """What changes when the journal changes (a pin by this agent, or `coremap pin` in a shell there):
    its size and change time."""
    try:
        st = os.stat(path)
    except OSError:
        return [0, 0]           # no journal yet: nothing pinned
    return [st.st_size, st.st_mtime_ns]


class PinOps:
    """The ops, over the machine `machine()` returns (the agent's open machine)."""

    def __init__(self, machine: Callable[[], object]):
        self._machine = machine
        self._previews: dict[int, object] = {}
        self._preview_ids = 0

    def ops(self) -> dict[str, Callable]:
        return {"preflight": self._preflight, "pin": self._pin, "undo": self._undo, "redo": self._redo,
                "restore": self._restore, "roll_back": self._roll_back, "journal": self._journal, "quiet_preview": self._quiet_preview,
                "quiet_apply": self._quiet_apply, "quiet_set": self._quiet_set}

    # -- pins ---------------------------------------------------------------------------------------------
    def _request_of(self, req) -> PinRequest:
        return build(req.params.get("request"), _REQUEST)

    def _service(self, req) -> AffinityService:
        m = self._machine()
        return m.privileged() if req.params.get("privileged") is True else m.service

    def _preflight(self, req) -> list[str]:
        m = self._machine()
        with m.lock:
            return m.service.preflight(self._request_of(req))

    def _pin(self, req) -> dict:
        request = self._request_of(req)
        return self._batch(req, lambda service, progress: service.apply(request, progress=progress))

    def _undo(self, req) -> dict:
        return self._batch(req, lambda service, progress: service.undo(progress=progress))

    def _redo(self, req) -> dict:
        return self._batch(req, lambda service, progress: service.redo(progress=progress))

    def _restore(self, req) -> dict:
        return self._batch(req, lambda service, progress: service.restore_all(progress=progress))

    def _roll_back(self, req) -> dict:
        batch = req.param("batch", int)
        if batch is None or batch < 1:
            raise CoremapError("roll_back: batch must be a journal batch number")
        return self._batch(req, lambda service, progress: service.roll_back(batch, progress=progress))

    def _batch(self, req, run) -> dict:
        """A batch of writes, each result sent as an event as it is made; the client's cancel stops it
        between two writes (app/pinning/flow.py Progress)."""
        m = self._machine()
        progress = Progress(lambda r, done, total: req.event(
            {"result": Encoder().encode(r), "done": done, "total": total}))
        req.on_cancel(progress.cancel)
        with m.lock:
            results = run(self._service(req), progress)
            m.sampler.forget_threads(None)
        return self._results(req, results)

    def _results(self, req, results) -> dict:
        return {"results": Encoder().encode(list(results)), "warning": results.warning,
                "journal": self._view(req)}

    # -- the journal's view ---------------------------------------------------------------------------------
    def _journal(self, req) -> dict:
        return self._view(req)

    def _view(self, req) -> dict:
        since = req.param("since", int, 0)
        held = req.param("held", list, [])
        if since < 0 or len(held) > MAX_HELD:
            raise CoremapError("journal: since must be 0 or more, held at most 65,536 ids")
        held = {i for i in held if type(i) is int}
        s = self._machine().service
        ledger = s.ledger()
        entries = ledger.entries
        return {"stamp": journal_stamp(s.journal.path), "root_key": s.root_key, "session": s.journal.session_id,
                "since": since, "total": len(entries),
                "entries": Encoder().encode([e for e in entries if e.id > since or e.id in held]),
                "unrestored": [e.id for e in ledger.unrestored],
                "quiet": Encoder().encode(list(ledger.quiet_events.values())),
                "pending": [e.id for e in s.pending_restore()]}

    # -- quiet CPUs -----------------------------------------------------------------------------------------
    def _quiet_preview(self, req) -> dict:
        """An isolate's or include's preview on this machine, kept (the last few) for `quiet_apply`."""
        action, cpus = req.param("action", str), req.param("cpus", list)
        pm_qos = req.param("pm_qos", bool, False)
        options = {k: req.param(k, bool, False) for k in ("move_pinned", "keep_pins")}
        knobs = req.param("knobs", list, [])
        if action not in ACTIONS or not cpus or not all(type(c) is int for c in cpus):
            raise CoremapError("quiet_preview: action must be isolate or include, cpus a list of CPU numbers")
        if not all(type(k) is str for k in knobs):
            raise CoremapError("quiet_preview: knobs must be a list of knob names")
        if knobs:
            options["knobs"] = tuple(knobs)         # checked by the preview (app/quiet/knobs.py knob_refusal)
        m = self._machine()
        with m.lock:
            preview = LocalQuiet(m.service).preview(action, cpus, pm_qos=pm_qos, **options)
        self._preview_ids += 1
        self._previews[self._preview_ids] = preview
        while len(self._previews) > KEPT_PREVIEWS:
            del self._previews[min(self._previews)]
        return {"id": self._preview_ids, "preview": Encoder().encode(preview)}

    def _quiet_apply(self, req) -> dict:
        """The writes of a preview this agent made, as one batch (streamed, cancellable)."""
        preview = self._previews.get(req.param("preview", int))
        if preview is None:
            raise CoremapError("that preview is no longer kept here; preview again")
        return self._batch(req, lambda service, progress: LocalQuiet(service).apply(preview, progress=progress))

    def _quiet_set(self, req) -> dict:
        """Verify's toggle: make `cpus` quiet or give them back unless they already are so."""
        cpus, quiet = req.param("cpus", list), req.param("quiet", bool)
        if not cpus or not all(type(c) is int for c in cpus) or quiet is None:
            raise CoremapError("quiet_set: cpus must be a list of CPU numbers, quiet true or false")
        m = self._machine()
        with m.lock:
            done = LocalQuiet(self._service(req)).set_quiet(cpus, quiet)
            m.sampler.forget_threads(None)
        if done is None:
            return {"sentence": None, "results": [], "journal": self._view(req)}
        return {"sentence": done[0], **self._results(req, done[1])}
