"""coremap's data files: the icon, the .desktop entry and the polkit policy of coremap-helper.

This folder is installed as the package `app.resources` (pyproject.toml maps it there, so a wheel
and `pipx install .` carry the files; an editable install finds them here). The screenshots beside
them illustrate the README and are not installed.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

ICON = "coremap.svg"
DESKTOP_ENTRY = "coremap.desktop"
POLKIT_POLICY = "org.coremap.helper.policy"


def resource_path(name: str) -> Path:
    """The installed file `name` of this package (wheels install unzipped, so it is a real file)."""
    return Path(str(files(__name__).joinpath(name)))
