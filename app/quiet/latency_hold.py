"""/dev/cpu_dma_latency held by coremap's guard while the journal asks for it (an isolate's
force_latency knob, app/quiet/knobs.py; the request's kind "dmalatency", app/pinning/settings.py).

The kernel keeps a CPU latency request only as long as the file stays open
(Documentation/power/pm_qos_interface.rst), so the guard process holds the fd: the request ends when
an undo, a give-back or a restore journals "not held", and when the guard stops, whichever comes first.
Nothing is left behind by a crash.
"""
from __future__ import annotations

import os

from app.pinning.settings import held_latency, hold_latency, latency_path
from app.sysroot import SysRoot


class LatencyHold:
    """`follow(entries)` after each journal change; `release()` when the guard stops."""

    def __init__(self, root: SysRoot):
        self.root = root
        self.fd: int | None = None
        self.usec: int | None = None          # what is held now (None: nothing)
        self._problem = ""

    def follow(self, entries) -> list[str]:
        """Hold, move or release to what the journal asks (`entries`: Ledger.entries); a sentence when
        that changed what is held or could not be done (said once), none otherwise."""
        want = held_latency(entries)
        usec = want[0] if want else None
        if usec == self.usec:
            return []
        was = self.usec
        self.release()
        if usec is None:
            return [f"{latency_path(self.root)} released (was held at {was} µs)"]
        try:
            self.fd = hold_latency(self.root, usec)
        except OSError as e:
            problem = (f"cannot hold {latency_path(self.root)} at {usec} µs ({e.strerror}): the isolate asked for "
                       "force_latency; run the guard as root (only root may open it)")
            said, self._problem = self._problem == problem, problem
            return [] if said else [problem]
        self.usec, self._problem = usec, ""
        return [f"{latency_path(self.root)} held at {usec} µs while the guard runs"]

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        self.fd, self.usec = None, None

    def __del__(self):
        # A guard dropped without release() (the window's, restarted on another machine) lets go at once.
        self.release()
