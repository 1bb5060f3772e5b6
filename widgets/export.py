"""Pictures and documents as files: PNG, SVG, PDF, their default names, and which widget a
screenshot of the window, the grid or a plot is.

- PNG: QWidget.grab() (what is on screen, at the device pixel ratio).
- SVG: QSvgGenerator + QPainter, painting the widget or the QGraphicsScene into it, so the grid and
  the plots come out as vector paths and text. pyqtgraph's own SVGExporter is NOT used: on Qt 6.12
  it produces broken files (pyqtgraph issue 3485).
- PDF: the report HTML (app/store/report.py) laid out by QTextDocument onto a QPdfWriter. QTextDocument
  does not fetch data: URIs itself, so each embedded image is decoded and added as a document
  resource under a short name first; widgets/pdf_pages.py then keeps rows whole and headings with
  what they head.

Every file is written atomically (app/atomic.py): a failed export never leaves half a file or
loses the previous one.
"""
from __future__ import annotations

import base64
import datetime as _dt
import re
import socket
import sys
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QPoint, QRectF, QSize, QSizeF, QUrl
from PySide6.QtGui import QImage, QPageLayout, QPageSize, QPainter, QPdfWriter, QTextDocument
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QWidget

from app.atomic import write_atomic
from app.errors import CoremapError
from widgets.pdf_pages import paginate
from widgets.topology.view import TopologyView

SCREENSHOT_KINDS = ("window", "grid", "plot")


class ExportError(CoremapError):
    """A screenshot or document that cannot be made or written."""


# -- names ---------------------------------------------------------------------------------------

def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-") or "machine"


def default_file_name(kind: str, host: str | None = None, ext: str = "png",
                      when: _dt.datetime | None = None) -> str:
    """`coremap-worker1-2026-11-21T1032-grid.png`: host, local date and time to the minute, kind.

    The host is shortened to its first label (worker1.internal -> worker1) and made file-name safe.
    """
    host = (host or socket.gethostname()).split(".")[0]
    when = when or _dt.datetime.now()
    return f"coremap-{_safe(host)}-{when:%Y-%m-%dT%H%M}-{_safe(kind)}.{ext.lstrip('.')}"


# -- PNG -----------------------------------------------------------------------------------------

def image_png_bytes(image: QImage) -> bytes:
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):
        raise ExportError("could not encode the picture as PNG")
    buf.close()
    return bytes(ba.data())


def png_bytes(widget: QWidget) -> bytes:
    """What `widget` shows, as PNG bytes."""
    return image_png_bytes(widget.grab().toImage())


def grab_png(widget: QWidget, path) -> Path:
    """Save what `widget` shows as a PNG file (atomically)."""
    path = Path(path)
    write_atomic(path, png_bytes(widget))
    return path


# -- SVG -----------------------------------------------------------------------------------------

def svg_bytes(target, *, title: str = "coremap", extra_below: QWidget | None = None) -> bytes:
    """`target` (a QWidget, a QGraphicsView such as the TopologyView or a pyqtgraph PlotWidget, or a
    QGraphicsScene) painted into an SVG document. For a view, its whole scene is drawn (not only the
    visible part) unless it is a pyqtgraph plot, whose visible range is the picture. `extra_below`
    (e.g. the grid's colour legend) is painted under it."""
    scene, widget = _scene_or_widget(target)
    if scene is not None:
        src = scene.sceneRect()
        w, h = int(src.width()) + 1, int(src.height()) + 1
    else:
        w, h = widget.width(), widget.height()
    eh = extra_below.height() if extra_below is not None else 0
    old_extra = extra_below.size() if extra_below is not None else None
    if extra_below is not None:
        # Draw the legend as wide as the picture above it (it lays itself out to its width).
        extra_below.resize(w, eh)
    ew = w if extra_below is not None else 0
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    gen.setSize(QSize(max(w, ew), h + eh))
    gen.setViewBox(QRectF(0, 0, max(w, ew), h + eh))
    gen.setTitle(title)
    gen.setDescription("made by coremap")
    p = QPainter()
    if not p.begin(gen):
        raise ExportError("could not start an SVG painter")
    try:
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        if scene is not None:
            bg = scene.backgroundBrush()
            if bg.style() != 0:
                p.fillRect(QRectF(0, 0, w, h), bg)
            scene.render(p, QRectF(0, 0, w, h), src)
        else:
            if isinstance(widget, QGraphicsView):
                # QGraphicsView.render (painter, target, source) hides QWidget.render; pyqtgraph's
                # override also prepares its items for painting first.
                widget.render(p, QRectF(0, 0, w, h), widget.viewport().rect())
            else:
                widget.render(p, QPoint(0, 0))
        if extra_below is not None:
            p.translate(0, h)
            extra_below.render(p, QPoint(0, 0))
    finally:
        p.end()
        if old_extra is not None:
            extra_below.resize(old_extra)
    buf.close()
    return bytes(ba.data())


def render_svg(target, path, **kw) -> Path:
    """Save `target` (see svg_bytes) as an SVG file (atomically)."""
    path = Path(path)
    write_atomic(path, svg_bytes(target, **kw))
    return path


def _scene_or_widget(target):
    if isinstance(target, QGraphicsScene):
        return target, None
    if isinstance(target, QGraphicsView) and not _is_pyqtgraph(target):
        if target.scene() is None:
            raise ExportError("the view shows no scene yet; nothing to draw")
        return target.scene(), None
    if isinstance(target, QWidget):
        return None, target
    raise ExportError(f"cannot draw a {type(target).__name__}: give a widget, a view or a scene")


def _is_pyqtgraph(view) -> bool:
    # A pyqtgraph GraphicsView's scene is unbounded (the plot's range is what is shown), so it is
    # painted as a widget; the TopologyView's scene rect is the machine.
    return type(view).__module__.startswith("pyqtgraph")


# -- PDF -----------------------------------------------------------------------------------------

_DATA_URI = re.compile(r'src="data:(image/(?:png|svg\+xml|jpeg));base64,([A-Za-z0-9+/=]+)"')


def _doc_with_images(html: str) -> QTextDocument:
    doc = QTextDocument()
    images: list[tuple[str, QImage]] = []

    def sub(m):
        mime, b64 = m.group(1), m.group(2)
        img = QImage()
        fmt = "SVG" if mime == "image/svg+xml" else None
        if not img.loadFromData(base64.b64decode(b64), fmt) or img.isNull():
            return 'src=""'
        name = f"coremap-image-{len(images)}.png"
        images.append((name, img))
        return f'src="{name}"'

    body = _DATA_URI.sub(sub, html)
    for name, img in images:
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), img)
    doc.setHtml(body)
    return doc


def pdf_bytes(html: str, *, title: str = "coremap report") -> bytes:
    """The report HTML laid out on A4 pages (portrait, 12 mm margins) as PDF bytes."""
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buf)
    writer.setTitle(title)
    writer.setCreator("coremap")
    writer.setResolution(96)
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize.PageSizeId.A4), QPageLayout.Orientation.Portrait,
                                     QMarginsF(12, 12, 12, 12), QPageLayout.Unit.Millimeter))
    doc = _doc_with_images(html)
    # Lay the text out at the page's width in the writer's units (96 dpi: CSS pixels), so an image
    # 900 px wide fits an A4 page less margins (~700 px) only after it is scaled by the <img width>.
    rect = writer.pageLayout().paintRectPixels(writer.resolution())
    doc.setPageSize(QSizeF(rect.width(), rect.height()))
    paginate(doc)
    doc.print_(writer)
    del writer
    buf.close()
    data = bytes(ba.data())
    if not data.startswith(b"%PDF"):
        raise ExportError("Qt produced no PDF; is the PySide6 installation complete?")
    return data


def render_pdf(html: str, path, **kw) -> Path:
    """Save the report HTML as a PDF file (atomically)."""
    path = Path(path)
    write_atomic(path, pdf_bytes(html, **kw))
    return path


# -- screenshots of the window ----------------------------------------------------------------------

def screenshot_target(window: QWidget, what: str) -> QWidget:
    """What `what` ("window", "grid", "plot") means in a window: the window itself, its
    TopologyView, or the first visible pyqtgraph plot."""
    if what == "window":
        return window
    if what == "grid":
        views = window.findChildren(TopologyView)
        if not views:
            raise ExportError("the window shows no topology grid to save")
        return views[0]
    if what == "plot":
        # pyqtgraph is imported with the first plot built (they are built when first shown, issue 12):
        # before that there is no plot to save.
        pg = sys.modules.get("pyqtgraph")
        every = window.findChildren(pg.PlotWidget) if pg is not None else []
        plots = [w for w in every if w.isVisible()] or every
        if not plots:
            raise ExportError("the window shows no plot to save; open a plot first")
        return plots[0]
    raise ExportError(f"screenshot of {what!r}: choose one of {', '.join(SCREENSHOT_KINDS)}")


def save_screenshot(target, path) -> Path:
    """Save `target` as PNG or SVG, by the file's extension."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext == ".png":
        return grab_png(target, path)
    if ext == ".svg":
        # The grid's colour legend is a separate widget under the view: draw it under the grid.
        extra = target.legend if isinstance(target, TopologyView) else None
        return render_svg(target, path, extra_below=extra)
    raise ExportError(f"{path}: name a .png or .svg file")
