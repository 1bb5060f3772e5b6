"""The application icon as PNGs at the sizes the freedesktop icon theme wants in hicolor (48x48 at the
least, 128 and 256 for software centres), rendered from the one SVG (resources/) with Qt's SVG
renderer. The PNGs are committed beside the SVG (small files, so a wheel carries them without Qt at
build time); `make icons` renders them again after the SVG changes, and tests/gui/test_desktop_icons.py
fails when a committed PNG no longer matches the SVG.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

from app.resources import ICON, PNG_ICON_SIZES, png_icon_name, resource_path
from widgets.harness import application


def render_icon(svg: bytes, size: int) -> QImage:
    """`svg` drawn on a transparent `size` x `size` image."""
    application()
    renderer = QSvgRenderer(QByteArray(svg))
    if not renderer.isValid():
        raise ValueError("the icon's SVG cannot be read by Qt's SVG renderer")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(p)
    p.end()
    return image


def png_bytes(image: QImage) -> bytes:
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buf, "PNG")
    return bytes(buf.data())


def write_icons(folder: Path | None = None) -> list[Path]:
    """Render the icon at every size into `folder` (default: resources/, where the package data is)."""
    svg = resource_path(ICON).read_bytes()
    folder = folder or resource_path(ICON).parent
    out = []
    for size in PNG_ICON_SIZES:
        path = folder / png_icon_name(size)
        path.write_bytes(png_bytes(render_icon(svg, size)))
        out.append(path)
    return out


if __name__ == "__main__":
    for written in write_icons():
        print(f"wrote {written}")
