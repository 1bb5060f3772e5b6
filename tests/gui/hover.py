"""A hover's tooltip, read where the widget shows it. The ToolTip event a hover brings is sent alone: a
real mouse move would also start Qt's own tooltip timer, whose tooltip (a top-level window) opened during
the next test and warned offscreen (a Qt warning fails a test)."""
from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication


def send_tooltip_event(viewport, pos) -> None:
    """The ToolTip event a hover at `pos` (viewport coordinates) brings."""
    QApplication.sendEvent(viewport, QHelpEvent(QEvent.Type.ToolTip, pos, viewport.mapToGlobal(pos)))


def grid_tooltip(view, cpu: int, monkeypatch) -> str:
    """The text the topology view shows as CPU `cpu`'s tooltip (QToolTip.showText caught: offscreen, the
    tooltip's window cannot be raised)."""
    from widgets.topology import view as view_module
    shown: list[str] = []
    monkeypatch.setattr(view_module.QToolTip, "showText", lambda _pos, text, *_a: shown.append(text))
    view.centerOn(view.cell_item(cpu))
    pos = view.mapFromScene(view.cell_item(cpu).sceneBoundingRect().center())
    send_tooltip_event(view.viewport(), pos)
    assert len(shown) == 1
    return shown[0]
