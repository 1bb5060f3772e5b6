"""The probe panel tells the truth about a run (issue 28, item 5), with real probes and real mouse
clicks: a thread spinning on the probed CPU is named before the run, and Run anyway runs; a wakeup
run is drawn on latency axes, a jitter run on gap axes; a click on a run, in the Figures tab or the
Runs list, shows its tabs; every figure is in view at the window's default size; the legend sits
above the curves. Oracles: the spinner's own pid and CPU, the runs' own records, Qt's geometry."""
from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.unit.test_intruders import spinner  # noqa: F401  (the fixture)
from widgets.probe.panel import ProbePanel
from widgets.probe.run_table import FIGURES


def _click(widget, pos) -> None:
    QTest.mouseClick(widget, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, pos)


def _run(qtbot, panel, probe: str, cpu: int, seconds: float = 0.3) -> None:
    panel.form.probe_combo.setCurrentIndex(panel.form.probe_combo.findData(probe))
    panel.set_cpus([cpu])
    panel.form.seconds_spin.setValue(seconds)
    _click(panel.run_button, panel.run_button.rect().center())
    if panel.busy_check.bar.isVisible():      # someone else's thread on the CPU: not this test's subject
        _click(panel.busy_check.run_button, panel.busy_check.run_button.rect().center())
    assert panel.busy, panel.status_text
    qtbot.waitUntil(lambda: not panel.busy, timeout=20000)
    assert panel.status_text.startswith("done"), panel.status_text


def test_a_thread_busy_on_the_probed_cpu_is_named_and_run_anyway_runs(qtbot, spinner):  # noqa: F811
    panel = ProbePanel()
    qtbot.addWidget(panel)
    panel.show()
    sampler = Sampler(SysRoot("/"))
    panel.set_state(sampler.tick())
    # the two reads the busy check compares: a spin fills its CPU in any window of some clock ticks,
    # ten times BUSY_PCT (1.5 s here added nothing the check reads)
    time.sleep(0.3)
    panel.set_state(sampler.tick())
    panel.set_cpus([spinner.cpu])
    panel.form.seconds_spin.setValue(0.2)
    said = []
    panel.status_changed.connect(said.append)
    _click(panel.run_button, panel.run_button.rect().center())
    assert not panel.busy and panel.runs == []           # nothing ran: the user is asked first
    bar = panel.busy_check.bar
    assert bar.isVisible()
    text = bar.label.text()
    assert text.startswith(f"CPU {spinner.cpu} is busy: ")
    assert f"market-data-fee (thread {spinner.pid}) at " in text and "which may run only there" in text
    line = bar.toolTip()
    assert f"thread {spinner.pid} market-data-fee (process {spinner.pid}) used" in line
    assert f"may run only on CPU {spinner.cpu}" in line
    assert panel.status_text == "not started: another thread is busy there (see above)"
    assert said[-1] == line                               # the whole sentence on the window's status line
    _click(panel.busy_check.run_button, panel.busy_check.run_button.rect().center())
    assert panel.busy and not bar.isVisible()
    qtbot.waitUntil(lambda: not panel.busy, timeout=20000)
    (rec,) = panel.runs
    assert rec.finished and rec.cpus == (spinner.cpu,)


@pytest.mark.usefixtures("live_machine")
def test_wakeup_and_jitter_runs_on_their_own_axes_every_figure_in_view_a_click_shows_its_tabs(qtbot):
    from widgets.application import DEFAULT_SIZE, build_window
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(*DEFAULT_SIZE)
    w.show()
    w.set_state(Sampler(SysRoot("/")).tick())
    w.probe_dock.raise_()
    panel = w.probe_panel
    tabs = panel.plots
    _run(qtbot, panel, "jitter", 0)
    _run(qtbot, panel, "wakeup", 0)
    jitter, wakeup = panel.runs
    # each on axes of its own quantity, never the other's
    assert tabs.histogram_plot.keys() == [jitter.key] and tabs.percentile_plot.keys() == [jitter.key]
    assert tabs.wakeup_plot.keys() == [wakeup.key] and tabs.wakeup_percentile_plot.keys() == [wakeup.key]
    assert tabs.histogram_plot.getPlotItem().getAxis("bottom").labelText == "gap length (ns … s)"
    assert tabs.wakeup_plot.getPlotItem().getAxis("bottom").labelText == "latency (ns … s)"
    assert tabs.wakeup_percentile_plot.getPlotItem().getAxis("left").labelText == "latency (ns … s)"
    # the wakeup run's figures are its own: late wakeups, mean latency; no "-"
    table = panel.table
    tabs.setCurrentWidget(table)
    QApplication.processEvents()
    for figure in FIGURES:
        assert table.cell_text(figure, wakeup.key) not in ("", "-"), figure
    assert table.cell_text("time lost", wakeup.key).startswith("mean ")
    # every figure of both runs is in view at the window's default size
    view = table.viewport().rect()
    for row in range(table.rowCount()):
        for col in range(table.columnCount()):
            assert view.contains(table.visualItemRect(table.item(row, col))), (FIGURES[row], col)
    # a click on the wakeup run's figures shows its plot; on the jitter run in the Runs list, the gaps'
    col = table.keys.index(wakeup.key)
    _click(table.viewport(), table.visualItemRect(table.item(0, col)).center())
    assert tabs.currentWidget() is tabs.wakeup_plot
    assert [r.key for r in panel.run_store.selected()] == [wakeup.key]
    runs_list = panel.run_store.runs_list
    item = panel.run_store.item(jitter.key)
    _click(runs_list.viewport(), runs_list.visualItemRect(item).center())
    assert tabs.currentWidget() is tabs.histogram_plot
    assert [r.key for r in panel.run_store.selected()] == [jitter.key]
    assert table.selectedItems() and table.selectedItems()[0].column() == table.keys.index(jitter.key)
    # from a tab of the run, a click on it stays there (Summary now shows the jitter run)
    tabs.setCurrentWidget(tabs.summary_text)
    _click(runs_list.viewport(), runs_list.visualItemRect(item).center())
    assert tabs.currentWidget() is tabs.summary_text and tabs.summary_text.toPlainText().startswith("jitter")
    # the legend sits above the plot's view, never over a curve
    plot = tabs.histogram_plot
    tabs.setCurrentWidget(plot)
    QApplication.processEvents()
    legend = plot.legend.mapRectToScene(plot.legend.boundingRect())
    vb = plot.getPlotItem().vb.mapRectToScene(plot.getPlotItem().vb.boundingRect())
    assert legend.bottom() <= vb.top() + 1 and len(plot.legend_labels()) == 1


@pytest.mark.parametrize("probe", ["jitter", "wakeup", "sweep", "messaging"])
def test_the_plots_get_the_docked_panels_width_whatever_the_probe(qtbot, probe):
    """Docked beside the IRQ table the panel is ~600 px wide: the form asked for 466 px of it (the combo's
    longest entry, and the widest of every probe's option pages), leaving the histogram 136 px whose
    axis labels ran into each other (issue 28, seen walking the job under Xvfb)."""
    from PySide6.QtWidgets import QSplitter
    panel = ProbePanel()
    qtbot.addWidget(panel)
    panel.resize(610, 400)
    panel.show()
    qtbot.waitExposed(panel)
    panel.form.probe_combo.setCurrentIndex(panel.form.probe_combo.findData(probe))
    QApplication.processEvents()
    split = panel.findChild(QSplitter)
    form, plots = split.sizes()
    assert plots >= form and plots >= 280, (probe, form, plots)
