"""The grid's "iso" badge, the CPU tooltip and the summary line say which isolation applies (issue 30,
wrong answer 6): worker1's isolcpus=managed_irq,0-4,11-79 leaves the scheduler balancing onto those CPUs,
so they carry no "iso" badge and their tooltip names "managed_irq, nohz_full"; a CPU isolated with the
domain flag keeps its badge. Tooltips are read where the view shows them, from a hover's ToolTip event."""
from __future__ import annotations


import pytest

from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.hover import grid_tooltip
from tests.machines import copy_machine, extract
from widgets.summary_bar import SummaryBar
from widgets.topology.view import TopologyView

pytestmark = pytest.mark.qt_log_level_fail("WARNING")


def _shown(qtbot, root) -> tuple[TopologyView, SummaryBar]:
    state = Sampler(SysRoot(root)).tick()
    view, bar = TopologyView(), SummaryBar()
    for w in (view, bar):
        qtbot.addWidget(w)
    view.resize(1200, 800)
    view.show()
    view.set_topology(state.topology)
    view.set_state(state)
    bar.set_state(state)
    return view, bar


def test_worker1_cpus_are_not_badged_isolated_and_say_their_flags(qtbot, monkeypatch):
    view, bar = _shown(qtbot, extract("worker1.internal"))
    for cpu in (3, 11, 79):
        assert [text for text, _ in view.cell_item(cpu).badges()] == ["nohz"]
    assert view.cell_item(7).badges() == []
    tip = grid_tooltip(view, 11, monkeypatch)
    assert "<i>managed_irq, nohz_full</i>" in tip and "not isolated: the scheduler still balances onto it" in tip
    assert "isolated (" not in tip
    assert "<b>managed_irq, nohz_full</b> 0-4,11-79" in bar.text() and "<b>isolated" not in bar.text()


def test_a_domain_isolated_cpu_keeps_its_badge(qtbot, monkeypatch, tmp_path):
    root = tmp_path / "m"
    copy_machine("linux-amd64-offlineCPUs", root)
    (root / "sys/devices/system/cpu/isolated").unlink()
    (root / "sys/devices/system/cpu/nohz_full").unlink()
    (root / "proc/cmdline").write_text("ro isolcpus=domain,managed_irq,1 nohz_full=1\n")
    view, bar = _shown(qtbot, root)
    assert [text for text, _ in view.cell_item(1).badges()] == ["iso", "nohz"]
    assert view.cell_item(0).badges() == []
    tip = grid_tooltip(view, 1, monkeypatch)
    assert "<i>isolated (domain, managed_irq, nohz_full)</i>" in tip and "not isolated" not in tip
    assert "<b>isolated (domain, managed_irq, nohz_full)</b> 1" in bar.text()
