"""Host: the machine shown, and everything that can be done with it, as one object.

coremap picks the machine once, with `open_host(args)` (app/sources/live.py), and hands the Host to the
window (`set_host`) or a command (`with open_host(args) as host:`), as psutil picks its platform module
once. Nobody asks afterwards which kind of machine it is: a part the host lacks is None, and
`absent(part)` says why in one sentence.
Its parts: `sampler` (a MachineSource), `pins` (a PinService), `quiet` (a QuietService), `probes` (what
starts a probe run there; `probes_elsewhere`: on another machine, whose CPUs are not this process's),
`capture` (a snapshot of it now, as a Session), `root` (its files here: what the guard, Compare… and
a report read; None when it is read elsewhere). `close()` ends what it holds.

LocalHost: a machine whose files are here (this one, or a writable copy the tests pin in); CaptureHost:
a captured machine or an opened session; app/remote/host.py RemoteHost and app/sources/live.py SourceHost.
They open cheaply: sampler, journal and probe runner are imported and made at first use, not by `coremap irqs`.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import CoremapError
from app.sysroot import SysRoot

if TYPE_CHECKING:
    from app.pinning.api import PinService
    from app.pinning.journal import Journal
    from app.pinning.service import AffinityService
    from app.quiet.service import QuietService
    from app.sampling.sources import MachineSource
    from app.store.session import Session
    from probes.runner import ProbeStarter, RunningProbe


class Host:
    """The machine shown (see the module docstring). `absent` maps a missing part to why it is missing."""

    probes_elsewhere = False
    session: Session | None = None      # the saved session it shows (CaptureHost), else None
    timeline = None     # a replay's history (app/sources/replay.py): the window adds a slider over it
    at: float | None = None     # the replay's moment shown first

    def __init__(self, name: str, sampler: MachineSource | None, *, root: SysRoot | None = None,
                 pins: PinService | None = None, quiet: QuietService | None = None,
                 probes: ProbeStarter | None = None, capture: Callable[[], Session] | None = None,
                 absent: dict[str, str] | None = None):
        self.name, self.root, self._absent = name, root, dict(absent or {})
        self._pins, self._quiet, self.probes, self.capture = pins, quiet, probes, capture
        if sampler is not None:         # else made at its first use (_FilesHere.sampler)
            self.sampler = sampler

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

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _FilesHere(Host):
    """A host whose files are here (`root`), sampled by a Sampler made at the first tick asked for."""

    def __init__(self, name: str, root: SysRoot, interval: float, *, source: str | None = None, **parts):
        super().__init__(name, None, root=root, **parts)
        self._interval, self._source, self._sampler = interval, source, None
        self._opened: list[Journal] = []        # the journals this host opened, and so closes

    def open_pins(self, *, dry_run: bool = False, helper: bool = False) -> AffinityService:
        """Its pins, opened now (CoremapError: the journal cannot be, or a capture is not a `dry_run`, whose
        journal is only read and whose service only plans: a capture's is not its `pins`). `helper`: the
        CLI's coremap-helper for writes the user may not make (the window asks at each retry instead)."""
        if self._pins is not None:
            return self._pins
        if not (dry_run or self.root.writable):
            raise CoremapError(self.absent("pins"))
        from app.pinning.journal import Journal          # here: only a pin or a check needs them
        from app.pinning.service import AffinityService
        from app.store.folders import journal_path
        journal = Journal(journal_path(create=not dry_run), readonly=dry_run)
        self._opened.append(journal)
        writer = None
        if helper and not dry_run and self.root.is_live and os.geteuid() != 0:
            from app.pinning.helper import HelperClient
            writer = HelperClient()
        service = AffinityService(self.root, journal, writer)
        if self.root.writable and not dry_run:
            self._pins = service        # a dry run's read-only journal is never the host's pins
        return service

    @property
    def sampler(self) -> MachineSource:
        if self._sampler is None:
            from app.sampling.sampler import Sampler     # here: it reads the whole topology when made
            self._sampler = Sampler(self.root, interval=self._interval)
            if self._source is not None:
                self._sampler.source = self._source     # a session's file, not the folder it was extracted to
        return self._sampler

    def close(self) -> None:
        while self._opened:
            self._opened.pop().close()


def _start_probe(name: str, args: Iterable = (), *, on_line: Callable[[dict], None] | None = None) -> RunningProbe:
    """ProbeRun.start (a ProbeStarter), its runner imported at the first run rather than by every command."""
    from probes.runner import ProbeRun
    return ProbeRun.start(name, args, on_line=on_line)


def _session_of(root: SysRoot) -> Session:
    from app.store.session import session_from_root
    return session_from_root(root, capture_interval=0.5)


class LocalHost(_FilesHere):
    """A machine whose files are here: this one ("/"), or a copy the tests may write (root.writable),
    pinned through the user's journal, opened at the first pin or check (or given: `pins`, a service
    over a writable copy in the tests). Probes run here, so only a live machine has them."""

    def __init__(self, root: SysRoot | None = None, *, pins: AffinityService | None = None, interval: float = 1.0):
        root = root or SysRoot("/")
        meta = root.snapshot_meta() if not root.is_live else None
        name = (meta or {}).get("host") or ("this machine" if root.is_live else root.root.name)
        # A session of a live machine holds a snapshot taken then; a copy's own folder is what is saved.
        super().__init__(name, root, interval, pins=pins, probes=_start_probe if root.is_live else None,
                         capture=(lambda: _session_of(root)) if root.is_live else None,
                         absent={"capture": f"{name}: its own folder is what is saved",
                                 "probes": f"a copy of {name}: no live probes"})

    @property
    def pins(self) -> AffinityService | None:
        """Opened on first use: the journal is a file of the user's state folder, which may be unwritable
        (then pinning is absent, saying why, and everything else works)."""
        if self._pins is None and "pins" not in self._absent:
            try:
                self.open_pins()
            except CoremapError as e:
                self._absent["pins"] = self._absent["quiet"] = str(e)
        return self._pins

    @property
    def quiet(self) -> QuietService | None:
        if self._quiet is None and self.pins is not None:
            from app.quiet.isolate import LocalQuiet
            self._quiet = LocalQuiet(self._pins)
        return self._quiet

    def has_journal(self) -> bool:
        """A journal from earlier runs exists: the window opens it at once, to offer restoring what they
        left behind (otherwise it is opened by the first pin)."""
        from app.store.folders import journal_path
        return self._pins is not None or journal_path(create=False).exists()

    def guarded(self) -> tuple[SysRoot, Path] | None:
        return (self.root, self._pins.journal.path) if self._pins is not None and self.root.writable else None


class CaptureHost(_FilesHere):
    """A captured machine (`--root DIR`, a snapshot) or an opened session's (`session`, closed with the
    host): read-only, nothing to pin, quiet or probe; its own folder is what a session saves."""

    def __init__(self, root: SysRoot, *, session: Session | None = None, interval: float = 1.0):
        source = str(session.source) if session is not None else str(root.root)
        name = (session.host if session is not None else "") or (root.snapshot_meta() or {}).get("host") or source
        why = f"a capture cannot be pinned — this is a snapshot of {name}: pinning needs the live machine"
        super().__init__(name, root, interval, source=source, absent={
            "pins": why, "quiet": why, "probes": f"a capture of {name}: no live probes",
            "capture": f"a capture of {name}: its own folder is what is saved"})
        self.session = session

    def close(self) -> None:
        super().close()
        if self.session is not None:
            self.session.close()
