"""Counts since boot colour the grid from 0, as rates do (issue 23: worker1's scale started at 71M,
its own smallest count, which painted 71M and 79M as far apart as idle and busy)."""
from __future__ import annotations

import pytest

from app.sysroot import SysRoot
from tests.machines import extract
from widgets.colors import parse_metric, scale_for
from widgets.pictures import state_for


def test_counts_since_boot_are_scaled_from_zero():
    scale = scale_for({0: 71e6, 1: 72e6, 2: 79e6}, parse_metric("irq"), totals=True)
    assert scale.vmin == 0 and scale.vmax == 1e8 and not scale.log
    # 71M and 79M are close on it, as they are close in fact.
    assert scale.fraction(79e6) - scale.fraction(71e6) == pytest.approx(0.08)
    assert scale_for({0: 5.0, 1: 90_000.0}, parse_metric("irq"), totals=True).log      # decades apart: log
    assert scale_for({}, parse_metric("irq"), totals=True).vmin == 0


def test_worker1s_grid_legend_starts_at_zero(qtbot):
    from widgets.topology.view import TopologyView
    view = TopologyView(metric="irq")
    qtbot.addWidget(view)
    view.set_state(state_for(SysRoot(extract("worker1.internal"))))
    assert view.color_scale.vmin == 0 and view.color_scale.vmax >= 79e6
