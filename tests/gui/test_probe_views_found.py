"""A probe's view is widgets/probe/<name>.py, found by the probe's name (issue 29): the tab its record
titles is that module's View, the report picture its record captions is its Picture, and a probe
without either has no such module. Oracles: the files on disk and the classes' own contracts
(show_result for a tab, set_result for a picture)."""
from __future__ import annotations

from pathlib import Path

import pytest

from probes.catalog import RECORDS
from widgets.probe.tabs import ProbeTabs

VIEWS = Path(__file__).resolve().parents[2] / "widgets" / "probe"


@pytest.mark.parametrize("name", list(RECORDS))
def test_a_probes_view_module_is_there_exactly_when_its_record_names_a_view(name):
    r = RECORDS[name]
    assert (VIEWS / f"{r.key}.py").exists() == bool(r.view or r.picture)
    if r.view:
        assert callable(r.part("widgets.probe.{}").View.show_result)
    if r.picture:
        assert callable(r.part("widgets.probe.{}").Picture.set_result)


def test_each_view_is_a_tab_titled_by_its_record_in_the_catalogs_order(qtbot):
    tabs = ProbeTabs()
    qtbot.addWidget(tabs)
    titles = [tabs.tabText(i) for i in range(tabs.count())]
    own = [r.view for r in RECORDS.values() if r.view]
    assert [t for t in titles if t in own] == own
    for r in RECORDS.values():
        if r.view:
            assert isinstance(tabs.view(r.name), r.part("widgets.probe.{}").View)
            assert tabs.tabText(tabs.indexOf(tabs.view(r.name))) == r.view
