"""The committed PNG icons are the SVG rendered at 48, 128 and 256 (widgets/icons.py, `make icons`), and
the window gives Qt the reverse-DNS application id its .desktop file is named by (issue 23)."""
from __future__ import annotations

from PySide6.QtGui import QImage

from app.resources import APP_ID, DESKTOP_ENTRY, ICON, PNG_ICON_SIZES, png_icon_name, resource_path
from widgets.icons import render_icon


def _difference(a: QImage, b: QImage) -> float:
    """The mean absolute difference of two same-sized images' RGBA channels, 0-255."""
    a = a.convertToFormat(QImage.Format.Format_RGBA8888)
    b = b.convertToFormat(QImage.Format.Format_RGBA8888)
    pa, pb = bytes(a.constBits()), bytes(b.constBits())
    return sum(abs(x - y) for x, y in zip(pa, pb)) / len(pa)


def test_the_committed_pngs_are_the_svg_rendered_at_their_sizes(qapp):
    svg = resource_path(ICON).read_bytes()
    for size in PNG_ICON_SIZES:
        committed = QImage(str(resource_path(png_icon_name(size))))
        assert (committed.width(), committed.height()) == (size, size)
        fresh = render_icon(svg, size)
        # Anti-aliasing may differ by a unit between Qt versions; a changed SVG moves far more.
        assert _difference(committed, fresh) < 1.0, f"{png_icon_name(size)} is stale: run `make icons`"


def test_a_changed_svg_is_told_apart(qapp):
    """The comparison above can fail: the icon with one core recoloured differs."""
    svg = resource_path(ICON).read_bytes()
    changed = svg.replace(b'fill="#fde725"', b'fill="#440154"')
    assert changed != svg
    assert _difference(render_icon(svg, 48), render_icon(changed, 48)) >= 1.0


def test_the_window_names_its_desktop_entry(qapp):
    from widgets.application import _application
    app = _application()
    assert app.desktopFileName() == APP_ID and DESKTOP_ENTRY == f"{APP_ID}.desktop"
    assert not app.windowIcon().isNull()
