"""coremap's own modules, parsed once per test process for the hostile tests that read the product's code
(the one reader of files, of JSON, of numbers): each of the three parsed all 300 modules again, 0.8 s
each time (issue 31)."""
from __future__ import annotations

import ast
import functools
import gc
from pathlib import Path

from tests.hostile.conftest import REPO


@functools.lru_cache(maxsize=None)
def product_modules() -> tuple[tuple[Path, ast.Module], ...]:
    """(path, parsed tree) of every module of app/, probes/ and widgets/, in a stable order. Parsed with
    the cycle collector paused: the million nodes made it run again and again over a growing heap, 1.6 s
    of the parse's 2.1 s of CPU, and a tree of nodes holds no cycle for it to find."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return tuple((path, ast.parse(path.read_text(), str(path)))
                     for folder in ("app", "probes", "widgets") for path in sorted((REPO / folder).rglob("*.py")))
    finally:
        if was_enabled:
            gc.enable()
