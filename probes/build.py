"""Which C files make the probes' extension, probes._native: found, not listed, so a new probe's loop
(probes/<name>/_loop.c) is built without a line anywhere else. setup.py builds them here; a shipped ssh
agent builds the same files on the far side (app/remote/server.py). Standard library only: setup.py
reads this before anything is installed, and the agent runs without coremap's dependencies."""
from __future__ import annotations

from pathlib import Path

HEADER = "_loops.h"     # what every loop file includes: a change rebuilds them all


def native_sources(root: Path) -> list[Path]:
    """The extension's C files under `root` (the folder holding probes/): probes/_native.c (the module
    and what the loops share) and each probe's probes/<name>/_loop.c, in a stable order."""
    probes = root / "probes"
    return sorted([probes / "_native.c", *probes.glob("*/_loop.c")])
