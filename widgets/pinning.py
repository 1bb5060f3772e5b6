"""Pinning in the window: drag a thread, process or IRQ onto the CPU grid, or pick rows and press Ctrl+P.

What is dragged is the project's own MIME type, `application/x-coremap-pin+json`, carrying
`{"kind": "thread"|"process"|"irq", "ids": [...], "pid": P|null}`; never plain text (tuna's drags
are plain text, so any text dropped from anywhere pins whatever number it holds). The tables build it
in their models' `mimeData` with `pin_mime_data`; the grid reads it back with `decode_pin_mime`.

The path of a pin (STYLE.md, "Data flow"): the grid's `TopologyDropHandler` finds the target under
the cursor (a CPU, a core, a package/die/node/L3/cluster box, or the selected CPUs), asks a check
(`PinController.check`, i.e. `AffinityService.preflight`) whether it can take the payload, lights
the target and says why not before the drop; a drop emits `TopologyView.pin_requested(PinRequest)`.
`PinController` hands requests to the Qt-free `AffinityService` (read before, journal, write, read
back) and shows one result per target in the status bar's `PinResultLine`; failures never open a
modal dialog. A write the kernel denies offers "Retry with privileges", which is the only thing that
starts the pkexec helper: the window itself never runs as root.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import QMimeData, QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (QAction, QBrush, QColor, QFont, QFontMetricsF, QGuiApplication, QKeySequence, QPainter,
                           QPainterPath, QPen)
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QDialog, QDialogButtonBox, QDockWidget, QFrame,
                               QGraphicsItem, QGraphicsPathItem, QHBoxLayout, QLabel, QLayout, QLineEdit, QMenu,
                               QPushButton, QSizePolicy, QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout,
                               QWidget)

from app.affinity import KINDS, AffinityService, PinRequest, PinResult, PinTarget, summarize
from app.format import format_change, offline_sentence, unknown_cpus_sentence
from app.errors import CoremapError, CpuListError
from app.parse.cpulist import format_cpulist, parse_cpulist

PIN_MIME = "application/x-coremap-pin+json"
# A drag of a whole machine's threads is a few thousand ids; far beyond that is not a selection.
MAX_PAYLOAD_IDS = 65536
MAX_PAYLOAD_BYTES = 1 << 20
# Boxes of the grid that take a drop as "all of its CPUs" (the machine box and the offline box do not).
DROP_GROUP_KINDS = ("package", "die", "node", "l3", "cluster")

OK_COLOR = "#1b5e20"
FAIL_COLOR = "#b71c1c"
WARN_COLOR = "#a04a00"
ACCEPT_PEN = QColor(25, 118, 210)
ACCEPT_FILL = QColor(25, 118, 210, 45)
REJECT_PEN = QColor(198, 40, 40)
REJECT_FILL = QColor(198, 40, 40, 40)


class PinPayloadError(CoremapError):
    """A pin drag whose data is not the shape this version of coremap writes."""


# -- the payload -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PinPayload:
    """What a drag or a table selection names: threads, processes or IRQs, by number."""
    kind: str                       # "thread" | "process" | "irq"
    ids: tuple[int, ...]
    pid: int | None = None          # the process of every thread in `ids`, when they share one

    def targets(self) -> tuple[PinTarget, ...]:
        return tuple(PinTarget(self.kind, i, self.pid if self.kind == "thread" else None) for i in self.ids)

    def describe(self) -> str:
        """"thread 1234", "3 threads of process 77", "IRQ 24", "2 processes"."""
        n = len(self.ids)
        name = "IRQ" if self.kind == "irq" else self.kind
        if n == 1:
            return f"{name} {self.ids[0]}"
        plural = "IRQs" if self.kind == "irq" else f"{self.kind}es" if self.kind == "process" else f"{self.kind}s"
        of = f" of process {self.pid}" if self.kind == "thread" and self.pid is not None else ""
        return f"{n} {plural}{of}"

    def to_json(self) -> bytes:
        return json.dumps({"kind": self.kind, "ids": list(self.ids), "pid": self.pid},
                          separators=(",", ":")).encode()


def _positive_int(v, what: str) -> int:
    # bool is an int in Python; a payload of `true` is not an id.
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise PinPayloadError(f"pin drag: {what} {v!r} is not a non-negative integer; drag the row again")
    return v


def parse_pin_payload(data: bytes) -> PinPayload:
    """The payload from the MIME data's bytes; PinPayloadError when it is not what pin_mime_data writes."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise PinPayloadError(f"pin drag: {len(data)} bytes is more than a selection can be; select fewer rows")
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise PinPayloadError(f"pin drag: not JSON ({e}); drag the row again") from None
    if not isinstance(obj, dict):
        raise PinPayloadError("pin drag: expected a JSON object with kind, ids and pid")
    kind = obj.get("kind")
    if kind not in KINDS:
        raise PinPayloadError(f"pin drag: kind {kind!r}: expected one of {', '.join(KINDS)}")
    ids = obj.get("ids")
    if not isinstance(ids, list) or not ids:
        raise PinPayloadError("pin drag: ids must be a non-empty list of numbers")
    if len(ids) > MAX_PAYLOAD_IDS:
        raise PinPayloadError(f"pin drag: {len(ids)} ids is more than a machine holds; select fewer rows")
    clean = tuple(dict.fromkeys(_positive_int(i, "id") for i in ids))
    pid = obj.get("pid")
    if pid is not None:
        pid = _positive_int(pid, "pid")
    if kind != "thread":
        pid = None
    return PinPayload(kind, clean, pid)


def pin_mime_data(payload: PinPayload | None) -> QMimeData | None:
    """MIME data for a drag source's `mimeData`: the pin JSON only (no text/plain), or None."""
    if payload is None or not payload.ids:
        return None
    mime = QMimeData()
    mime.setData(PIN_MIME, payload.to_json())
    return mime


def decode_pin_mime(mime: QMimeData | None) -> PinPayload | None:
    """The payload of a drag; None when it does not carry the pin type (plain text, files, ...).
    Raises PinPayloadError when it carries the type with bad contents."""
    if mime is None or not mime.hasFormat(PIN_MIME):
        return None
    return parse_pin_payload(bytes(mime.data(PIN_MIME).data()))


def payload_from_rows(rows: Iterable[tuple[str, int, int | None]],
                      tids_of: Callable[[int], list[int]] | None = None) -> PinPayload | None:
    """A payload from selected table rows, each (kind, id, pid of a thread).

    Only threads, only processes, or only IRQs give that kind. A selection mixing processes and
    threads becomes threads: each selected process contributes its threads as listed now (a
    process pin is a pin of each of its threads anyway, AffinityService._expand)."""
    rows = list(dict.fromkeys(rows))
    if not rows:
        return None
    kinds = {k for k, _, _ in rows}
    if kinds == {"irq"} or kinds == {"process"}:
        kind = kinds.pop()
        return PinPayload(kind, tuple(sorted(i for _, i, _ in rows)))
    if "irq" in kinds:
        return None                     # one table holds one kind; never reached from the window
    tids: dict[int, int | None] = {}
    for kind, ident, pid in rows:
        if kind == "thread":
            tids[ident] = pid
        elif tids_of is not None:
            for tid in tids_of(ident):
                tids[tid] = ident
    if not tids:
        return None
    pids = set(tids.values())
    pid = pids.pop() if len(pids) == 1 else None
    return PinPayload("thread", tuple(sorted(tids)), pid)


# -- CPU lists typed by hand ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CpuListCheck:
    cpus: tuple[int, ...] | None     # None when the text cannot be used
    message: str                     # why not, or what it means

    @property
    def ok(self) -> bool:
        return self.cpus is not None


def check_cpu_text(text: str, topology=None) -> CpuListCheck:
    """Validate a typed CPU list against the machine: syntax (app.parse.cpulist), then that every CPU
    exists and is online."""
    if not text.strip():
        return CpuListCheck(None, "type the CPUs to pin to, e.g. 2-5,8")
    try:
        cpus = parse_cpulist(text, what="CPU list")
    except CpuListError as e:
        return CpuListCheck(None, str(e))
    if not cpus:
        return CpuListCheck(None, "no CPU in that list; write CPUs like 2-5,8")
    if topology is not None:
        known = {c.id for c in topology.cpus}
        online = set(topology.online)
        missing = [c for c in cpus if c not in known]
        if missing:
            return CpuListCheck(None, unknown_cpus_sentence(missing, known))
        offline = [c for c in cpus if c not in online]
        if offline:
            return CpuListCheck(None, offline_sentence(offline, online))
    n = len(cpus)
    return CpuListCheck(cpus, f"{n} CPU{'s' if n > 1 else ''}: {', '.join(map(str, cpus[:16]))}"
                              f"{' …' if n > 16 else ''}")


def irqbalance_text(root, irqs=()) -> str:
    """What irqbalance, if it runs on `root`, will do to the pinned `irqs`: its pid, what it bans."""
    from app.irqbalance import read_irqbalance
    st = read_irqbalance(root)
    if not st.running:
        return ""
    who = f"irqbalance (pid {st.pid})" if st.pid is not None else "irqbalance"
    cpus = f"CPUs {format_cpulist(st.banned_cpus)}" if st.banned_cpus else "no CPUs"
    banned = f"IRQ{'s' if len(st.banned_irqs) > 1 else ''} {', '.join(map(str, st.banned_irqs))}" \
        if st.banned_irqs else "no IRQs"
    moved = [i for i in irqs if i not in st.banned_irqs]
    what = f"IRQ{'s' if len(moved) > 1 else ''} {', '.join(map(str, moved))}" if moved else "them"
    return (f"{who} bans {cpus} and {banned}; it may move {what} back within 10 s: "
            f"--banirq={moved[0] if moved else 'N'} or stop it")


# -- the grid as a drop target ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DropTarget:
    """What a drop at one point of the grid pins to."""
    items: tuple                    # the graphics items to light up
    cpus: tuple[int, ...]           # online CPUs of the target (a lone cell: its CPU, online or not)
    what: str                       # "CPU 3", "core 1 (CPUs 1,5)", "package 0 (CPUs 0-7)"
    reason: str = ""                # why it takes nothing whatever is dropped (no online CPU)


class _HintItem(QGraphicsItem):
    """A tooltip-like label near the cursor while dragging.

    Contract: ignores the view's transformation (always readable, in device pixels); boundingRect
    covers the text box drawn at (OFFSET, OFFSET) from the item's position; set_text calls
    prepareGeometryChange because the box size follows the text."""

    OFFSET = 14.0
    MAX_W = 420.0

    def __init__(self):
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, True)
        self.setZValue(1e6 + 1)
        self.text = ""
        self.ok = True
        self._font = QFont()
        self._font.setPixelSize(12)
        self._rect = QRectF()

    def set_text(self, text: str, ok: bool) -> None:
        self.prepareGeometryChange()
        self.text, self.ok = text, ok
        fm = QFontMetricsF(self._font)
        r = fm.boundingRect(QRectF(0, 0, self.MAX_W, 1000), int(Qt.TextFlag.TextWordWrap), text)
        self._rect = QRectF(self.OFFSET, self.OFFSET, r.width() + 12, r.height() + 8)
        self.update()

    def boundingRect(self) -> QRectF:
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter: QPainter, option, widget=None) -> None:
        if not self.text:
            return
        painter.setPen(QPen(ACCEPT_PEN if self.ok else REJECT_PEN, 1))
        painter.setBrush(QColor(255, 255, 240) if self.ok else QColor(255, 240, 240))
        painter.drawRoundedRect(self._rect, 4, 4)
        painter.setPen(QColor(30, 30, 30))
        painter.setFont(self._font)
        painter.drawText(self._rect.adjusted(6, 4, -6, -4), int(Qt.TextFlag.TextWordWrap), self.text)


class TopologyDropHandler(QObject):
    """The grid's drag-and-drop: TopologyView forwards its drag events here.

    `set_check(fn)`: fn(PinRequest) -> list of reasons the target cannot take it ([] = fine). Without a
    check every target with an online CPU is accepted (the view alone does not know about services).
    Verdicts are cached per (payload, CPUs) for one drag, since dragMove comes with every mouse move
    and a check reads /proc.
    """

    def __init__(self, view):
        super().__init__(view)
        self.view = view
        self._check: Callable[[PinRequest], list[str]] | None = None
        self._cache: dict[tuple, list[str]] = {}
        self._overlay: QGraphicsPathItem | None = None
        self._hint: _HintItem | None = None
        self.last_hint = ""

    def set_check(self, check: Callable[[PinRequest], list[str]] | None) -> None:
        self._check = check
        self._cache.clear()

    # -- resolving the point under the cursor -----------------------------------------------------------
    def target_at(self, pos) -> DropTarget | None:
        """The drop target at viewport position `pos` (QPoint), or None over empty space."""
        from widgets.topology_view import CoreBoxItem, CpuCellItem, GroupBoxItem
        v = self.view
        for it in v.items(pos):
            if isinstance(it, CpuCellItem):
                selected = [c for c in v.cells().values() if c.isSelected()]
                if it.isSelected() and len(selected) > 1:
                    cpus = tuple(sorted(c.cpu_id for c in selected if c.online))
                    return DropTarget(tuple(selected), cpus, f"the selected CPUs {format_cpulist(cpus)}")
                return DropTarget((it,), (it.cpu_id,), f"CPU {it.cpu_id}")
            if isinstance(it, CoreBoxItem):
                return self._box_target(it, f"core {it.core_index}" if it.core_index >= 0 else "this core")
            if isinstance(it, GroupBoxItem) and it.kind in DROP_GROUP_KINDS:
                return self._box_target(it, it.label or f"{it.kind} {it.group_id}")
        return None

    def _box_target(self, item, name: str) -> DropTarget:
        cells = self.view.cells()
        online = tuple(sorted(c for c in item.cpus if c in cells and cells[c].online))
        if not online:
            return DropTarget((item,), (), name, f"{name} has no online CPU (CPUs {format_cpulist(item.cpus)})")
        return DropTarget((item,), online, f"{name} (CPUs {format_cpulist(online)})")

    def reasons(self, payload: PinPayload, target: DropTarget) -> list[str]:
        if target.reason:
            return [target.reason]
        if self._check is None:
            return []
        key = (payload, target.cpus)
        if key not in self._cache:
            self._cache[key] = list(self._check(PinRequest(payload.targets(), target.cpus, origin="drop")))
        return self._cache[key]

    # -- events -----------------------------------------------------------------------------------------
    def _payload(self, event) -> PinPayload | None:
        try:
            return decode_pin_mime(event.mimeData())
        except PinPayloadError as e:
            self._say(str(e), False, None)
            return None

    def drag_enter(self, event) -> None:
        self._cache.clear()
        payload = self._payload(event)
        if payload is None:
            # Not ours (plain text, files, a malformed pin): refused, so the drop never comes here.
            event.ignore()
            return
        event.acceptProposedAction()
        self._evaluate(event, payload)

    def drag_move(self, event) -> None:
        payload = self._payload(event)
        if payload is None:
            event.ignore()
            return
        if self._evaluate(event, payload) is None:
            event.ignore()
        else:
            event.acceptProposedAction()

    def drag_leave(self, event) -> None:
        self._clear()
        self._say("", True, None)
        event.accept()

    def drop(self, event) -> None:
        payload = self._payload(event)
        target = self._evaluate(event, payload) if payload is not None else None
        self._clear()
        if target is None:
            event.ignore()
            return
        event.acceptProposedAction()
        self._say("", True, None)
        self.view.pin_requested.emit(PinRequest(payload.targets(), target.cpus, origin="drop"))

    def _evaluate(self, event, payload: PinPayload) -> DropTarget | None:
        """Light the target under the cursor and say what a drop would do; the target if acceptable."""
        pos = event.position().toPoint()
        target = self.target_at(pos)
        scene_pos = self.view.mapToScene(pos)
        if target is None:
            self._light((), True)
            self._say(f"drop {payload.describe()} on a CPU, a core or a package", True, scene_pos)
            return None
        why = self.reasons(payload, target)
        self._light(target.items, not why)
        if why:
            more = f" (and {len(why) - 1} more)" if len(why) > 1 else ""
            self._say(f"cannot pin {payload.describe()} to {target.what}: {why[0]}{more}", False, scene_pos)
            return None
        self._say(f"pin {payload.describe()} to {target.what}", True, scene_pos)
        return target

    # -- highlight and hint -----------------------------------------------------------------------------
    def _items_alive(self) -> bool:
        # scene.clear() on a new topology deletes our overlay items with the rest.
        sc = self.view.scene()
        return (self._overlay is not None and shiboken6.isValid(self._overlay) and self._overlay.scene() is sc
                and self._hint is not None and shiboken6.isValid(self._hint) and self._hint.scene() is sc)

    def _ensure_items(self) -> None:
        if self._items_alive():
            return
        self._overlay = QGraphicsPathItem()
        self._overlay.setZValue(1e6)
        self._hint = _HintItem()
        self.view.scene().addItem(self._overlay)
        self.view.scene().addItem(self._hint)

    def _light(self, items, ok: bool) -> None:
        self._ensure_items()
        path = QPainterPath()
        for it in items:
            path.addRoundedRect(it.sceneBoundingRect().adjusted(-1, -1, 1, 1), 3, 3)
        pen = QPen(ACCEPT_PEN if ok else REJECT_PEN, 3)
        pen.setCosmetic(True)              # the same width at any zoom
        if not ok:
            pen.setStyle(Qt.PenStyle.DashLine)
        self._overlay.setPen(pen)
        self._overlay.setBrush(QBrush(ACCEPT_FILL if ok else REJECT_FILL))
        self._overlay.setPath(path)

    def _say(self, text: str, ok: bool, scene_pos: QPointF | None) -> None:
        if scene_pos is not None:
            self._ensure_items()
            self._hint.setPos(scene_pos)
            self._hint.set_text(text, ok)
        elif self._items_alive():
            self._hint.set_text("", ok)
        if text != self.last_hint:
            self.last_hint = text
            self.view.drop_hint.emit(text)

    def _clear(self) -> None:
        if self._items_alive():
            sc = self.view.scene()
            sc.removeItem(self._overlay)
            sc.removeItem(self._hint)
        self._overlay = None
        self._hint = None

    @property
    def highlight_path(self) -> QPainterPath | None:
        """The lit area in scene coordinates while dragging (None when nothing is lit); for tests."""
        return self._overlay.path() if self._items_alive() else None

    @property
    def highlight_accepts(self) -> bool | None:
        if not self._items_alive() or self._overlay.path().isEmpty():
            return None
        return self._overlay.pen().color() == ACCEPT_PEN


# -- the "Pin to…" dialog ---------------------------------------------------------------------------------
class PinDialog(QDialog):
    """Pin the chosen rows to a typed CPU list, validated as typed (OK is off while it is invalid)."""

    def __init__(self, payload: PinPayload, topology=None, initial: str = "", parent=None):
        super().__init__(parent)
        self.payload = payload
        self.topology = topology
        self.setWindowTitle("Pin to CPUs")
        self.target_label = QLabel(f"Pin {payload.describe()} to:", self)
        self.target_label.setTextFormat(Qt.TextFormat.PlainText)
        self.cpu_edit = QLineEdit(initial, self)
        self.cpu_edit.setPlaceholderText("CPUs, e.g. 2-5,8")
        self.cpu_edit.setClearButtonEnabled(True)
        self.reason_label = QLabel(self)
        self.reason_label.setTextFormat(Qt.TextFormat.PlainText)
        self.reason_label.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Pin")
        lay = QVBoxLayout(self)
        lay.addWidget(self.target_label)
        lay.addWidget(self.cpu_edit)
        lay.addWidget(self.reason_label)
        lay.addWidget(self.buttons)
        if QGuiApplication.platformName() == "offscreen":
            # As in MainWindow: the offscreen platform warns "does not support propagateSizeHints()"
            # for a top-level window whose layout sets a minimum size.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        self.cpu_edit.textChanged.connect(self._on_cpu_edit_text_changed)
        self.check = check_cpu_text(initial, topology)
        self._show_check()

    def cpus(self) -> tuple[int, ...] | None:
        return self.check.cpus

    def _on_cpu_edit_text_changed(self, text: str) -> None:
        self.check = check_cpu_text(text, self.topology)
        self._show_check()

    def _show_check(self) -> None:
        ok = self.check.ok
        self.ok_button.setEnabled(ok)
        self.reason_label.setText(self.check.message)
        self.reason_label.setStyleSheet(f"color: {'palette(window-text)' if ok else FAIL_COLOR};")

    def _on_buttons_accepted(self) -> None:
        if self.check.ok:              # Enter in the line edit also lands here
            self.accept()


# -- the result line, the journal list and the restore bar -------------------------------------------------------
class PinResultLine(QWidget):
    """The status bar's line for the last pin: per-target text, an irqbalance warning, and
    "Retry with privileges" when a write was denied. The full list is in the tooltip."""

    retry_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.warning_label = QLabel(self)
        self.warning_label.setTextFormat(Qt.TextFormat.PlainText)
        for label in (self.label, self.warning_label):
            # Their text's width when there is room, less when not: a long failure sentence must not
            # widen the window (the tooltip has all of it).
            label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
            label.setMinimumWidth(40)
        self.warning_label.setStyleSheet(f"color: {WARN_COLOR};")
        self.warning_label.hide()
        self.retry_button = QPushButton("Retry with privileges", self)
        self.retry_button.setToolTip("Ask for administrator rights (pkexec) and write the denied pins "
                                     "through coremap-helper")
        self.retry_button.hide()
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.label)
        lay.addWidget(self.warning_label)
        lay.addWidget(self.retry_button)
        lay.addStretch(1)
        self.results: list[PinResult] = []
        self.retry_button.clicked.connect(self.retry_requested)

    def text(self) -> str:
        return self.label.text()

    def show_results(self, results: list[PinResult], what: str = "", warning: str = "",
                     can_retry: bool = False) -> None:
        self.results = list(results)
        self.show_message(summarize(results, what), ok=all(r.ok for r in results))
        self.label.setToolTip("\n".join(r.line() for r in results))
        self.warning_label.setText(warning)
        self.warning_label.setToolTip(warning)
        self.warning_label.setVisible(bool(warning))
        self.retry_button.setVisible(can_retry and any(r.code == "denied" for r in results))

    def show_message(self, text: str, ok: bool = True) -> None:
        self.label.setText(text)
        self.label.setToolTip(text)
        self.label.setStyleSheet(f"color: {OK_COLOR if ok else FAIL_COLOR};")
        self.warning_label.hide()
        self.retry_button.hide()


class PinJournalWidget(QWidget):
    """The pin journal of this machine, newest first: one row per write (pin, undo, redo, restore)."""

    COLUMNS = ("Time", "Action", "Target", "CPUs", "Result", "#")

    def __init__(self, parent=None):
        super().__init__(parent)
        self.tree = QTreeWidget(self)
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        for col, w in enumerate((70, 60, 220, 110, 260)):
            self.tree.setColumnWidth(col, w)
        self.buttons = QHBoxLayout()
        self.buttons.setContentsMargins(0, 0, 0, 0)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(self.buttons)
        lay.addWidget(self.tree)
        self._signature: tuple = ()

    def add_action_button(self, action: QAction) -> None:
        b = QToolButton(self)
        b.setDefaultAction(action)
        self.buttons.addWidget(b)

    def finish_buttons(self) -> None:
        self.buttons.addStretch(1)

    def set_entries(self, entries) -> bool:
        """Show `entries` (JournalEntry, any order); False when nothing changed since the last call."""
        sig = tuple((e.id, e.state, e.code) for e in entries)
        if sig == self._signature:
            return False
        self._signature = sig
        self.tree.clear()
        items = []
        for e in sorted(entries, key=lambda e: e.id, reverse=True):
            action = e.origin.split(":", 1)[0]
            target = f"{'IRQ' if e.kind == 'irq' else e.kind} {e.target_id}" + (f" ({e.label})" if e.label else "")
            result = e.state + (f" {e.code}" if e.code and e.code != "ok" else "")
            item = QTreeWidgetItem([time.strftime("%H:%M:%S", time.localtime(e.time)), action, target,
                                    format_change(e.before, e.requested),
                                    result + (f": {e.message}" if e.message and e.state == "failed" else ""),
                                    str(e.id)])
            if e.message:
                for c in range(len(self.COLUMNS)):
                    item.setToolTip(c, e.message)
            if e.state == "failed":
                item.setForeground(4, QColor(FAIL_COLOR))
            items.append(item)
        self.tree.addTopLevelItems(items)
        return True

    def row_texts(self) -> list[tuple[str, ...]]:
        out = []
        for i in range(self.tree.topLevelItemCount()):
            it = self.tree.topLevelItem(i)
            out.append(tuple(it.text(c) for c in range(len(self.COLUMNS))))
        return out


class RestoreBar(QFrame):
    """A non-modal bar at the top of the window: pins a previous run left in place, Restore / Dismiss."""

    restore_clicked = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("restore-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("QFrame#restore-bar { background: #fff4d6; border: 1px solid #e0b040; }")
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.restore_button = QPushButton("Restore", self)
        self.dismiss_button = QPushButton("Dismiss", self)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.restore_button)
        lay.addWidget(self.dismiss_button)
        self.restore_button.clicked.connect(self.restore_clicked)
        self.dismiss_button.clicked.connect(self.hide)
        self.hide()

    def offer(self, entries) -> None:
        n = len(entries)
        shown = []
        for e in entries[:4]:
            target = f"{'IRQ' if e.kind == 'irq' else e.kind} {e.target_id}" + (f" ({e.label})" if e.label else "")
            shown.append(f"{target} was {format_cpulist(e.before) if e.before is not None else '?'}")
        more = f", and {n - 4} more" if n > 4 else ""
        self.label.setText(f"{n} pin{'s' if n > 1 else ''} from an earlier coremap session "
                           f"{'are' if n > 1 else 'is'} still in place ({'; '.join(shown)}{more}). "
                           "Restore puts back the affinity each had before.")
        self.show()


# -- the controller --------------------------------------------------------------------------------------------
class PinController(QObject):
    """Connects drops, "Pin to…" and Edit → Undo/Redo/Restore all to an AffinityService, and shows results.

    `PinController(window)` installs itself into a MainWindow: the Edit menu, the result line in the
    status bar, the "Pins" dock, the restore bar, the drag sources (the IRQ and thread tables, the CPU
    details' tables) and the grid's drop check. The service is created on the first live state
    (`AffinityService(SysRoot("/"), Journal(journal_path()))`, lazily: the journal is opened when a
    pin is first checked or when a previous journal exists); on a snapshot pinning is refused, unless a
    service is given with `set_service` (tests pin IRQs into a copy of a captured machine that way).
    """

    results_shown = Signal(list)       # the PinResults just shown in the result line

    def __init__(self, window, service: AffinityService | None = None,
                 helper_factory: Callable[[], object] | None = None):
        super().__init__(window)
        self.window = window
        self.service: AffinityService | None = None
        self._injected = False
        self._state_seen = False
        self._live = False
        self._host = ""
        self._topology = None
        self._unavailable = "no machine shown yet"
        self._retry: PinRequest | None = None
        self._helper = None
        self._helper_factory = helper_factory
        self._sources: list[QAbstractItemView] = []
        self._last_source: QAbstractItemView | None = None
        self.dialog: PinDialog | None = None
        self._build()
        if service is not None:
            self.set_service(service)

    # -- installing into the window ---------------------------------------------------------------------
    def _build(self) -> None:
        w = self.window
        self.undo_action = QAction("Undo pin", w)
        self.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
        self.redo_action = QAction("Redo pin", w)
        self.redo_action.setShortcut(QKeySequence("Ctrl+Shift+Z"))
        self.restore_action = QAction("Restore all", w)
        self.restore_action.setToolTip("Put every pinned thread and IRQ back to the affinity it had before coremap "
                                       "changed it")
        self.pin_action = QAction("Pin to…", w)
        self.pin_action.setShortcut(QKeySequence("Ctrl+P"))
        self.pin_action.setToolTip("Pin the selected rows of the IRQ or thread table to CPUs (Ctrl+P)")
        for a in (self.undo_action, self.redo_action, self.restore_action):
            a.setEnabled(False)
        self.edit_menu = w.menuBar().addMenu("&Edit")
        self.edit_menu.addAction(self.pin_action)
        self.edit_menu.addSeparator()
        for a in (self.undo_action, self.redo_action, self.restore_action):
            self.edit_menu.addAction(a)

        self.result_line = PinResultLine(w)
        w.statusBar().insertWidget(0, self.result_line, 3)

        self.journal_widget = PinJournalWidget(w)
        for a in (self.undo_action, self.redo_action, self.restore_action):
            self.journal_widget.add_action_button(a)
        self.journal_widget.finish_buttons()
        self.journal_dock = QDockWidget("Pins", w)
        self.journal_dock.setObjectName("pins-dock")
        self.journal_dock.setWidget(self.journal_widget)
        # A tab beside the thread table: the journal is a wide table, the right-hand dock is narrow.
        w.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.journal_dock)
        threads = getattr(w, "thread_dock", None)
        if threads is not None:
            w.tabifyDockWidget(threads, self.journal_dock)
            threads.raise_()

        self.restore_bar = RestoreBar(w)
        central = w.centralWidget()
        if central is not None and central.layout() is not None:
            central.layout().insertWidget(0, self.restore_bar)

        view = w.topology_view
        view.pin_drops.set_check(self.check)
        view.pin_requested.connect(self._on_view_pin_requested)
        view.drop_hint.connect(self._on_view_drop_hint)
        for source in (w.irq_table.view, w.thread_table.view, w.cpu_details.irq_table, w.cpu_details.thread_table):
            self.add_source(source)

        self.undo_action.triggered.connect(self._on_undo_triggered)
        self.redo_action.triggered.connect(self._on_redo_triggered)
        self.restore_action.triggered.connect(self._on_restore_triggered)
        self.pin_action.triggered.connect(self._on_pin_action_triggered)
        self.result_line.retry_requested.connect(self._on_result_line_retry_requested)
        self.restore_bar.restore_clicked.connect(self._on_restore_bar_restore_clicked)
        w.state_applied.connect(self._on_window_state_applied)

    def add_source(self, view: QAbstractItemView) -> None:
        """Rows of `view` can be dragged onto the grid (its model's mimeData) and pinned with the
        context menu or Ctrl+P."""
        view.setDragEnabled(True)
        view.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        view.customContextMenuRequested.connect(lambda pos, v=view: self._on_source_context_menu(v, pos))
        self._sources.append(view)

    # -- the service ----------------------------------------------------------------------------------------
    def set_service(self, service: AffinityService | None) -> None:
        """Pin through `service` (whatever the window shows); None returns to the window's own choice."""
        self.service = service
        self._injected = service is not None
        self._refresh_journal()
        if service is not None:
            self._offer_restore()

    def _on_window_state_applied(self, state) -> None:
        first = not self._state_seen or state.topology is not self._topology
        self._topology = state.topology
        self._live = bool(state.live)
        self._host = state.topology.hostname or state.source
        self._state_seen = True
        if not self._injected:
            if not self._live:
                self.service = None
                self._unavailable = f"this is a snapshot of {self._host}: pinning needs the live machine"
            elif first and self.service is None and _journal_exists():
                # A journal from earlier runs: open it now, to offer restoring what they left behind.
                if self._open_live_service() is not None:
                    self._offer_restore()
        self._refresh_journal()

    def _open_live_service(self) -> AffinityService | None:
        if self.service is not None:
            return self.service
        from app.journal import Journal
        from app.statedir import journal_path
        from app.sysroot import SysRoot
        try:
            self.service = AffinityService(SysRoot("/"), Journal(journal_path()))
        except CoremapError as e:
            self._unavailable = str(e)
            self.result_line.show_message(str(e), ok=False)
            return None
        return self.service

    def _service(self) -> AffinityService | None:
        if self.service is not None:
            return self.service
        if self._injected or not self._live:
            return None
        return self._open_live_service()

    def unavailable_reason(self) -> str:
        return self._unavailable

    # -- requests -------------------------------------------------------------------------------------------
    def check(self, request: PinRequest) -> list[str]:
        """Why `request` would be refused (AffinityService.preflight), or [] when a drop may go ahead.

        A target that has exited is not a reason to refuse the drop: the pin then fails with its own
        message in the result line and a "failed" journal entry, like any other pin that lost a race."""
        service = self._service()
        if service is None:
            return [self._unavailable]
        gone = {f"{t.describe()} has exited" for t in request.targets}
        try:
            reasons = service.preflight(request)
        except CoremapError as e:          # e.g. a proc file that cannot be read: say so, refuse
            return [str(e)]
        return [r for r in reasons if r not in gone]

    def request(self, request: PinRequest) -> list[PinResult]:
        """Apply `request` and show its results; [] (with the reason shown) when pinning is unavailable."""
        service = self._service()
        if service is None:
            self.result_line.show_message(self._unavailable, ok=False)
            return []
        try:
            results = service.apply(request)
        except CoremapError as e:          # the journal cannot be written, a root that went away, ...
            self.result_line.show_message(str(e), ok=False)
            return []
        denied = tuple(r.target for r in results if r.code == "denied")
        self._retry = PinRequest(denied, request.cpus, origin="retry") if denied else None
        self._show(results, "", can_retry=bool(denied) and service.root.is_live)
        return results

    def _show(self, results: list[PinResult], what: str, can_retry: bool = False) -> None:
        warning = ""
        if any(r.warning for r in results) and self.service is not None:
            irqs = [r.target.id for r in results if r.warning and r.target.kind == "irq"]
            warning = irqbalance_text(self.service.root, irqs) or next(r.warning for r in results if r.warning)
        self.result_line.show_results(results, what, warning, can_retry)
        self._refresh_journal()
        self.results_shown.emit(results)

    def _refresh_journal(self) -> None:
        s = self.service
        if s is None:
            self.journal_widget.set_entries([])
            for a in (self.undo_action, self.redo_action, self.restore_action):
                a.setEnabled(False)
            return
        entries = [e for e in s.journal.entries() if e.root == s.root_key]
        if self.journal_widget.set_entries(entries) or not entries:
            self.undo_action.setEnabled(s.can_undo())
            self.redo_action.setEnabled(s.can_redo())
            self.restore_action.setEnabled(bool(s.journal.unrestored(s.root_key)))

    def _offer_restore(self) -> None:
        s = self.service
        pending = s.pending_restore() if s is not None else []
        if pending:
            self.restore_bar.offer(pending)
        else:
            self.restore_bar.hide()

    # -- sources: context menu and Ctrl+P -------------------------------------------------------------------
    def selection_payload(self, view: QAbstractItemView) -> PinPayload | None:
        """The pin payload of `view`'s selected rows, built by its model's mimeData (as a drag is)."""
        sm = view.selectionModel()
        if sm is None:
            return None
        indexes = sm.selectedRows(0)
        if not indexes:
            return None
        try:
            return decode_pin_mime(view.model().mimeData(indexes))
        except PinPayloadError as e:
            self.result_line.show_message(str(e), ok=False)
            return None

    def source_menu(self, view: QAbstractItemView) -> QMenu:
        """The context menu of a source's rows: "Pin to…" (disabled, saying why, when nothing pinnable
        is selected)."""
        menu = QMenu(view)
        payload = self.selection_payload(view)
        act = menu.addAction("Pin to…\tCtrl+P" if payload else "Pin to… (select threads, processes or numbered IRQs)")
        act.setEnabled(payload is not None)
        act.triggered.connect(lambda _=False, v=view: self.open_pin_dialog(v))
        return menu

    def _on_source_context_menu(self, view, pos) -> None:
        self._last_source = view
        menu = self.source_menu(view)
        menu.popup(view.viewport().mapToGlobal(pos))

    def _focused_source(self) -> QAbstractItemView | None:
        fw = QApplication.focusWidget()
        for v in self._sources:
            if fw is not None and (fw is v or v.isAncestorOf(fw)):
                return v
        return self._last_source

    def _on_pin_action_triggered(self) -> None:
        view = self._focused_source()
        if view is None:
            self.result_line.show_message("select rows in the IRQ or thread table first, then press Ctrl+P",
                                          ok=False)
            return
        self.open_pin_dialog(view)

    def open_pin_dialog(self, view: QAbstractItemView) -> PinDialog | None:
        payload = self.selection_payload(view)
        if payload is None:
            self.result_line.show_message(
                "nothing to pin in that selection: choose threads, processes or numbered IRQs "
                "(LOC, NMI and other per-CPU counters have no affinity)", ok=False)
            return None
        self._last_source = view
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
        selected = self.window.topology_view.selected_cpus()
        self.dialog = PinDialog(payload, self._topology, format_cpulist(selected), self.window)
        self.dialog.accepted.connect(self._on_dialog_accepted)
        self.dialog.open()
        return self.dialog

    def _on_dialog_accepted(self) -> None:
        d = self.sender()
        if not isinstance(d, PinDialog) or d.cpus() is None:
            return
        self.request(PinRequest(d.payload.targets(), d.cpus(), origin="dialog"))

    # -- handlers -------------------------------------------------------------------------------------------
    def _on_view_pin_requested(self, request: PinRequest) -> None:
        self.request(request)

    def _on_view_drop_hint(self, text: str) -> None:
        bar = self.window.statusBar()
        if text:
            bar.showMessage(text)
        else:
            bar.clearMessage()

    def _on_undo_triggered(self) -> None:
        s = self._service()
        if s is not None:
            self._run(s.undo, "undo")

    def _on_redo_triggered(self) -> None:
        s = self._service()
        if s is not None:
            self._run(s.redo, "redo")

    def _on_restore_triggered(self) -> None:
        s = self._service()
        if s is not None and self._run(s.restore_all, "restore"):
            self.restore_bar.hide()

    def _run(self, action: Callable[[], list[PinResult]], what: str) -> bool:
        try:
            results = action()
        except CoremapError as e:
            self.result_line.show_message(f"{what}: {e}", ok=False)
            return False
        self._show(results, what)
        return True

    def _on_restore_bar_restore_clicked(self) -> None:
        self._on_restore_triggered()

    def _on_result_line_retry_requested(self) -> None:
        s, req = self.service, self._retry
        if s is None or req is None:
            return
        if self._helper is None:
            if self._helper_factory is not None:
                self._helper = self._helper_factory()
            else:
                from app.helper import HelperClient
                self._helper = HelperClient()       # pkexec coremap-helper, started by its first request
        # The helper writes for this one retry only: a later denied pin asks again.
        privileged = s.with_writer(self._helper)
        self._run(lambda: privileged.apply(req), "retry")
        self._retry = None

    def close(self) -> None:
        if self._helper is not None and hasattr(self._helper, "close"):
            self._helper.close()
            self._helper = None


def _journal_exists() -> bool:
    from app.statedir import journal_path
    return journal_path(create=False).exists()
