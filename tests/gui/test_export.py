"""widgets/export.py: SVG of the grid and of a plot is valid XML with drawing elements; PNG grabs;
file names; the File menu actions."""
import datetime as dt
import xml.etree.ElementTree as ET

import pyqtgraph as pg
import pytest

from app.sysroot import SysRoot
from tests.machines import extract
from widgets import export
from widgets.application import build_window
from widgets.pictures import state_for

SVG = "{http://www.w3.org/2000/svg}"


def _drawing(svg: bytes) -> dict:
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    counts = {}
    for e in root.iter():
        tag = e.tag.replace(SVG, "")
        counts[tag] = counts.get(tag, 0) + 1
    return counts


@pytest.fixture(scope="module")
def sno_state():
    return state_for(SysRoot(extract("sno")))


def test_default_file_name():
    when = dt.datetime(2026, 11, 21, 10, 32, 59)
    assert export.default_file_name("grid", "worker1.internal", "png", when) == "coremap-worker1-2026-11-21T1032-grid.png"
    assert export.default_file_name("report", "we ird/host", ".pdf", when) == "coremap-we_ird_host-2026-11-21T1032-report.pdf"


def test_grid_svg_and_png(qtbot, tmp_path, sno_state):
    w = build_window(None, metric="irq")
    qtbot.addWidget(w)
    w.resize(1200, 800)
    w.show()
    w.set_state(sno_state)
    qtbot.wait(10)
    path = export.save_screenshot(export.screenshot_target(w, "grid"), tmp_path / "grid.svg")
    counts = _drawing(path.read_bytes())
    # 12 CPU cells and their core/package boxes are rects; labels are text.
    assert counts.get("rect", 0) >= 12 and counts.get("text", 0) >= 12
    texts = [e.text for e in ET.parse(path).iter(SVG + "text")]
    assert "11" in [t.strip() for t in texts if t]           # CPU 11's label is drawn
    png = export.save_screenshot(w, tmp_path / "window.png")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and int.from_bytes(data[16:20], "big") >= 1200


def test_plot_svg(qtbot, tmp_path):
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    w.plot([1, 2, 3, 4], [1, 4, 2], stepMode="center", pen="r")
    w.resize(500, 300)
    w.show()
    qtbot.wait(10)
    counts = _drawing(export.svg_bytes(w))
    assert counts.get("polyline", 0) + counts.get("path", 0) >= 1
    assert counts.get("text", 0) >= 2          # axis tick labels


def test_scene_and_bad_targets(qtbot, tmp_path):
    from PySide6.QtWidgets import QGraphicsScene
    scene = QGraphicsScene()
    scene.addRect(0, 0, 50, 20)
    scene.setSceneRect(0, 0, 60, 30)
    assert _drawing(export.svg_bytes(scene)).get("rect", 0) + _drawing(export.svg_bytes(scene)).get("path", 0) >= 1
    with pytest.raises(export.ExportError, match="cannot draw"):
        export.svg_bytes(object())
    with pytest.raises(export.ExportError, match=".png or .svg"):
        export.save_screenshot(scene, tmp_path / "x.jpg")


def test_pdf_bytes_is_a_pdf():
    data = export.pdf_bytes("<h1>x</h1><p>hello</p>")
    assert data.startswith(b"%PDF") and b"%%EOF" in data[-64:]
