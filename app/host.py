"""Host: the machine shown, and everything that can be done with it, as one object.

coremap picks the machine once, with `open_host(args)` (app/sources/live.py), and hands the Host to the
window (`set_host`) or a command, as psutil picks its platform module once. Nobody asks afterwards which
kind of machine it is: a part the host lacks is None, and `absent(part)` says why in one sentence.
Its parts: `sampler` (a MachineSource), `pins` (a PinService), `quiet` (a QuietService), `probes` (what
starts a probe run there; `probes_elsewhere`: on another machine, whose CPUs are not this process's),
`capture` (a snapshot of it now, as a Session), `root` (its files here: what the guard, Compare… and
a report read; None when it is read elsewhere). `close()` ends what it holds.

LocalHost: a machine whose files are here (this one, or a writable copy the tests pin in); CaptureHost:
a captured machine or an opened session; app/remote/host.py RemoteHost and app/sources/live.py SourceHost.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.errors import CoremapError
from app.pinning.api import PinService
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.quiet.isolate import LocalQuiet
from app.quiet.service import QuietService
from app.sampling.sampler import Sampler
from app.sampling.sources import MachineSource
from app.store.folders import journal_path
from app.store.session import Session, session_from_root
from app.sysroot import SysRoot
from probes.runner import ProbeRun, ProbeStarter


class Host:
    """The machine shown (see the module docstring). `absent` maps a missing part to why it is missing."""

    probes_elsewhere = False
    timeline = None     # a replay's history (app/sources/replay.py): the window adds a slider over it
    at: float | None = None     # the replay's moment shown first

    def __init__(self, name: str, sampler: MachineSource, *, root: SysRoot | None = None,
                 pins: PinService | None = None, quiet: QuietService | None = None,
                 probes: ProbeStarter | None = None, capture: Callable[[], Session] | None = None,
                 absent: dict[str, str] | None = None):
        self.name = name
        self.sampler = sampler
        self.root = root
        self._pins, self._quiet, self.probes, self.capture = pins, quiet, probes, capture
        self._absent = dict(absent or {})

    @property
    def pins(self) -> PinService | None:
        return self._pins

    @property
    def quiet(self) -> QuietService | None:
        return self._quiet

    def connect(self) -> None:
        """Reach the machine now, where open_host(args, check=False) left that to the caller (File →
        Connect… does it off the UI thread); CoremapError when it cannot be. Nothing to do here."""

    def absent(self, part: str) -> str:
        """Why `part` ("pins", "quiet", "probes", "capture") is missing, in one sentence."""
        return self._absent.get(part, f"{self.name}: no {part} here")

    def has_journal(self) -> bool:
        """Its pins have a journal to read now (what earlier pins left to restore)."""
        return self._pins is not None

    def guarded(self) -> tuple[SysRoot, Path] | None:
        """(root, journal file) for the pin guard to watch from this process (widgets/pinning/guard.py),
        once pins were opened; None where it runs elsewhere (over ssh: `coremap --host H guard`)."""
        return None

    def close(self) -> None:
        """End what the host holds; the window calls it when another machine replaces this one."""


class LocalHost(Host):
    """A machine whose files are here: this one ("/"), pinned through the user's journal, opened at the
    first pin or check (or given: `pins`, a service over a writable copy in the tests)."""

    def __init__(self, root: SysRoot | None = None, *, pins: AffinityService | None = None, interval: float = 1.0):
        root = root or SysRoot("/")
        meta = root.snapshot_meta() if not root.is_live else None
        name = (meta or {}).get("host") or ("this machine" if root.is_live else root.root.name)
        # A session of a live machine holds a snapshot taken then; a copy's own folder is what is saved.
        capture = (lambda: session_from_root(root, capture_interval=0.5)) if root.is_live else None
        super().__init__(name, Sampler(root, interval=interval), root=root, probes=ProbeRun.start, capture=capture,
                         absent={"capture": f"{name}: its own folder is what is saved"})
        self._pins = pins
        self._opened: Journal | None = None     # the journal this host opened, and so closes

    @property
    def pins(self) -> AffinityService | None:
        """Opened on first use: the journal is a file of the user's state folder, which may be unwritable
        (then pinning is absent, saying why, and everything else works)."""
        if self._pins is None and "pins" not in self._absent:
            try:
                self._opened = Journal(journal_path())
                self._pins = AffinityService(self.root, self._opened)
            except CoremapError as e:
                self._absent["pins"] = self._absent["quiet"] = str(e)
        return self._pins

    @property
    def quiet(self) -> QuietService | None:
        if self._quiet is None and self.pins is not None:
            self._quiet = LocalQuiet(self._pins)
        return self._quiet

    def has_journal(self) -> bool:
        """A journal from earlier runs exists: the window opens it at once, to offer restoring what they
        left behind (otherwise it is opened by the first pin)."""
        return self._pins is not None or journal_path(create=False).exists()

    def guarded(self) -> tuple[SysRoot, Path] | None:
        return (self.root, self._pins.journal.path) if self._pins is not None and self.root.writable else None

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()


class CaptureHost(Host):
    """A captured machine (`--root DIR`, a snapshot) or an opened session's (`session`, closed with the
    host): read-only, nothing to pin, quiet or probe; its own folder is what a session saves."""

    def __init__(self, root: SysRoot, *, session: Session | None = None, interval: float = 1.0):
        sampler = Sampler(root, interval=interval)
        if session is not None:
            sampler.source = str(session.source)
        name = (session.host if session is not None else "") or (root.snapshot_meta() or {}).get("host") or sampler.source
        why = f"this is a snapshot of {name}: pinning needs the live machine"
        super().__init__(name, sampler, root=root, absent={
            "pins": why, "quiet": why, "probes": f"a capture of {name}: no live probes",
            "capture": f"a capture of {name}: its own folder is what is saved"})
        self.session = session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
