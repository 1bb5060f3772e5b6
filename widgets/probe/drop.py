"""CpuDrop: CPUs dragged from the grid (CPU_MIME, `{"cpus": [...]}`: a cell, the selection, a box's
header) and dropped on the probe panel become its CPU list, unless they cannot be probed here.

Installed as an event filter on the panel, it takes the panel's drag and drop events: other MIME
types are refused at the door (the drag shows "no drop"); a CPU drop is accepted and reported by
`cpus_dropped`, or refused with the reason by `drop_refused` (the CPU field then stays as it was).
"""
from __future__ import annotations


from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtWidgets import QWidget

from app.errors import CoremapError
from app.format import cpus_word, format_cpus, offline_sentence
from app.machine.topology import Topology
from app.sampling.machine_state import MachineState
from probes.own_affinity import OwnAffinityGuard
from widgets.topology.drag import CPU_MIME, cpus_from_mime

_DRAG_EVENTS = (QEvent.Type.DragEnter, QEvent.Type.DragMove)


class CpuDrop(QObject):
    cpus_dropped = Signal(object)   # tuple of CPU ids
    drop_refused = Signal(str)      # why, a sentence for the status line

    def __init__(self, target: QWidget, guard: OwnAffinityGuard):
        super().__init__(target)
        self._guard = guard
        self._topology: Topology | None = None
        self._live = True
        self._here = True           # False for a machine over ssh: this process's affinity says nothing of it
        target.setAcceptDrops(True)
        target.installEventFilter(self)

    def set_state(self, state: MachineState) -> None:
        self._topology = state.topology
        self._live = state.live
        self._here = not state.host

    def eventFilter(self, obj, event) -> bool:
        if event.type() in _DRAG_EVENTS:
            if event.mimeData().hasFormat(CPU_MIME):
                event.acceptProposedAction()
            else:
                event.ignore()
            return True
        if event.type() == QEvent.Type.Drop:
            self._drop(event)
            return True
        return False

    def _drop(self, event) -> None:
        if not event.mimeData().hasFormat(CPU_MIME):
            event.ignore()
            return
        try:
            cpus = cpus_from_mime(event.mimeData().data(CPU_MIME).data())
        except CoremapError as e:
            event.ignore()
            self.drop_refused.emit(str(e))
            return
        why = self.refused(cpus)
        if why:
            event.ignore()
            self.drop_refused.emit(why)
            return
        event.acceptProposedAction()
        self.cpus_dropped.emit(cpus)

    def refused(self, cpus: tuple[int, ...]) -> str | None:
        """Why dropped CPUs cannot be probed here, or None.

        Online: against the shown topology (none yet: the probe child checks, probes/common.py
        check_cpus). Allowed: against this process's affinity and the quiet CPUs (OwnAffinityGuard.lent)
        on a live window of this machine - skipped while a run has moved coremap's own threads off the
        probed CPUs (OwnAffinityGuard), when that mask is not what the next child would inherit, and for a
        machine over ssh, whose agent's child checks its own."""
        if not cpus:
            return "the drop holds no CPU; drag an online CPU, core or package from the grid"
        if self._topology is None:
            return None
        online = set(self._topology.online)
        offline = [c for c in cpus if c not in online]
        if offline:
            return offline_sentence(offline, online)
        if self._live and self._here and not self._guard.active:
            allowed = online & self._guard.probe_cpus()
            barred = [c for c in cpus if c not in allowed]
            if barred:
                return (f"{cpus_word(barred)} {'are' if len(barred) > 1 else 'is'} not in coremap's allowed "
                        f"CPUs ({format_cpus(sorted(allowed))}); a probe could not run there")
        return None
