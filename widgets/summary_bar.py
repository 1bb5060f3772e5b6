"""SummaryBar: one line that says what machine this is and how it is being watched.

Model, sockets x cores x threads, NUMA nodes, kernel, each set of isolation flags (domain, managed_irq,
nohz, nohz_full) with its CPUs, whether irqbalance
runs (it would undo manual IRQ pinning), the source (live or a snapshot path), the sampling interval
and "paused". Text is rebuilt only when one of those facts changes, not on every tick.
"""
from __future__ import annotations

import html

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from app.format import format_cpus, plural
from app.machine.topology import isolation_label
from app.sampling.machine_state import MachineState
from widgets.theme import alert_color


def machine_facts(topology) -> list[str]:
    """Short facts about a topology, in reading order (no Qt: used by the title and tests too)."""
    facts = []
    if topology.model_name:
        facts.append(topology.model_name)
    n_online = len(topology.online)
    pkgs = len(topology.packages) or 1
    n_cores = len(topology.cores)
    tpc = topology.threads_per_core
    threads = "-".join(map(str, (tpc[0], tpc[-1]))) if len(tpc) > 1 else (str(tpc[0]) if tpc else "?")
    sockets = plural(pkgs, "socket")
    thr = f"{threads} thread{'s' if threads != '1' else ''}"
    if n_cores % pkgs == 0:
        shape = f"{sockets} × {plural(n_cores // pkgs, 'core')} × {thr} = {plural(n_online, 'CPU')}"
    else:   # sockets with different core counts (some CPUs offline): no product to show
        shape = f"{sockets}, {plural(n_cores, 'core')} × {thr} = {plural(n_online, 'CPU')}"
    if topology.offline:
        shape += f" ({len(topology.offline)} offline)"
    facts.append(shape)
    n_nodes = sum(1 for n in topology.nodes if n.cpus)
    if n_nodes:
        facts.append(plural(n_nodes, "NUMA node"))
    if topology.hybrid:
        kinds = {}
        for c in topology.cpus:
            if c.online and c.kind:
                kinds[c.kind] = kinds.get(c.kind, 0) + 1
        facts.append("hybrid: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    if topology.kernel_release:
        facts.append(f"kernel {topology.kernel_release}")
    return facts


def irqbalance_running(state: MachineState) -> bool | None:
    """True/False from the sample's process list; None when the capture has no processes."""
    tasks = state.sample.tasks
    if tasks is None or not tasks.tasks:
        return None
    for p in tasks.processes.values():
        if p.comm == "irqbalance":
            return True
    return any(t.comm == "irqbalance" and t.tid == t.pid for t in tasks.tasks.values())


class SummaryBar(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._label = QLabel(self)
        self._label.setTextFormat(Qt.TextFormat.RichText)
        self._label.setWordWrap(True)
        self._label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 3, 6, 3)
        lay.addWidget(self._label)
        self._key = None
        self._topology = None
        self._irqbalance: bool | None = None
        self._tasks = None                  # the process list irqbalance was looked for in
        self._source = ""
        self._live = True
        self._host = ""             # over ssh: the host as the user named it; its own name is the topology's
        self._stale = ""
        self._interval = 1.0
        self._paused = False

    def text(self) -> str:
        return self._label.text()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._key = None            # the STALE colour follows a switch to a dark theme
            self._refresh()

    def set_state(self, state: MachineState) -> None:
        self._topology = state.topology
        if state.sample.tasks is not self._tasks:     # the thread list is read less often than ticks
            self._tasks = state.sample.tasks
            self._irqbalance = irqbalance_running(state)
        self._source = state.source
        self._live = state.live
        self._host = state.host
        self._stale = state.stale
        self._refresh()

    def set_interval(self, seconds: float) -> None:
        self._interval = seconds
        self._refresh()

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        self._refresh()

    def _refresh(self) -> None:
        key = (id(self._topology), self._irqbalance, self._source, self._live, self._interval, self._paused,
               self._host, self._stale)
        if key == self._key or self._topology is None:
            return
        self._key = key
        t = self._topology
        parts = [html.escape(f) for f in machine_facts(t)]
        # Each set of isolation flags with its CPUs: "isolated (domain, nohz_full) 2-3", or
        # "managed_irq, nohz_full 0-4,11-79" where isolcpus= leaves the scheduler balancing onto them.
        for flags, cpus in t.isolation_groups():
            parts.append(f"<b>{html.escape(isolation_label(flags))}</b> {format_cpus(cpus)}")
        if self._irqbalance is True:
            parts.append("<b>irqbalance running</b> (it moves IRQs you pin)")
        elif self._irqbalance is False:
            parts.append("irqbalance not running")
        else:
            parts.append("irqbalance: unknown (no process list)")
        if self._stale:
            # Never shown as live: the figures are the last ones the host sent.
            src = f'<b style="color:{alert_color(self).name()}">STALE</b> — {html.escape(self._stale)}'
        elif self._host and self._live:
            name = html.escape(t.hostname or "the host")
            src = f"live on <b>{name}</b> over ssh {html.escape(self._host)}, every {self._interval:g} s"
        elif self._host:
            src = f"snapshot {html.escape(self._source)} on {html.escape(self._host)}, over ssh"
        elif self._live:
            src = f"live, every {self._interval:g} s"
        else:
            src = f"snapshot {html.escape(self._source)}"
        if self._paused:
            src += " — <b>paused</b>"
        parts.append(src)
        self._label.setText(" · ".join(parts))
