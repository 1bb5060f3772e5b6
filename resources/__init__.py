"""coremap's data files: the icon (SVG, and PNGs rendered from it), the .desktop entry, the AppStream
metainfo and the polkit policy of coremap-helper.

This folder is installed as the package `app.resources` (pyproject.toml maps it there, so a wheel
and `pipx install .` carry the files; an editable install finds them here). The screenshots beside
them illustrate the README and are not installed.

The desktop files are named by the reverse-DNS application id (the Desktop Entry and AppStream
specifications ask for it), which the window also gives Qt (setDesktopFileName), so a desktop
matches the running window to its entry and icon.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

APP_ID = "io.github.coremap.Coremap"
ICON = f"{APP_ID}.svg"
DESKTOP_ENTRY = f"{APP_ID}.desktop"
METAINFO = f"{APP_ID}.metainfo.xml"
POLKIT_POLICY = "org.coremap.helper.policy"
# The icon theme specification wants at least a 48x48 icon in hicolor; 128 and 256 are what software
# centres show. Rendered from ICON by widgets/icons.py.
PNG_ICON_SIZES = (48, 128, 256)


def png_icon_name(size: int) -> str:
    return f"{APP_ID}-{size}.png"


def resource_path(name: str) -> Path:
    """The installed file `name` of this package (wheels install unzipped, so it is a real file)."""
    return Path(str(files(__name__).joinpath(name)))
