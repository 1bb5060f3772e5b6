"""The window remembers its geometry, docks, columns, sort, metric and probe form between runs, in
the XDG config folder (issue 23: nothing was remembered); the command line wins over what is
remembered, and a damaged settings file restores nothing it cannot."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.store.folders import settings_path
from app.sysroot import SysRoot
from tests.machines import extract
from app.sources.live import host_of_root
from widgets.application import build_window
from widgets.settings import WindowSettings
from widgets.tables.irqs import COL_IRQ, COL_SPREAD
from widgets.tables.threads import COL_MIGR


@pytest.fixture
def make(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def window(metric=None):
        w = build_window(host_of_root(SysRoot(extract("sno"))), metric=metric)
        thread = w.sampler_thread
        qtbot.addWidget(w)
        w.resize(1300, 850)
        return w, thread
    return window


def _show(qtbot, w, thread):
    w.show()
    with qtbot.waitSignal(w.state_applied, timeout=20000):
        thread.start()


def test_settings_live_in_the_xdg_config_folder(make, tmp_path):
    assert settings_path() == tmp_path / "config" / "coremap" / "settings.ini"
    assert WindowSettings().path == settings_path()


def test_what_the_user_changed_comes_back_in_the_next_window(qtbot, make, tmp_path):
    w, thread = make()
    _show(qtbot, w, thread)
    w.resize(711, 533)          # within the offscreen screen (800x600), which restoreGeometry keeps it to
    w.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, w.details_dock)        # the CPU dock moved left
    w.irq_table.view.sortByColumn(COL_IRQ, Qt.SortOrder.AscendingOrder)
    w.irq_table.view.horizontalHeader().resizeSection(COL_SPREAD, 222)
    w.thread_table.view.header().hideSection(COL_MIGR)
    w.topology_view.set_metric("busy")
    form = w.probe_panel.form
    form.set_probe("wakeup")
    form.cpu_edit.setText("1")
    form.seconds_spin.setValue(2.5)
    form.field("interval_us", "wakeup").setValue(250)
    form.field("size", "first-touch").setText("64 M")        # a field of another probe's page, as typed
    WindowSettings().save(w)
    assert settings_path().is_file()
    w.close()

    w2, thread2 = make()
    done = WindowSettings().restore(w2)
    assert set(done) >= {"geometry", "docks", "tables/irqs", "tables/threads", "metric", "probe form"}
    _show(qtbot, w2, thread2)
    assert (w2.width(), w2.height()) == (711, 533)
    assert w2.dockWidgetArea(w2.details_dock) == Qt.DockWidgetArea.LeftDockWidgetArea
    header = w2.irq_table.view.horizontalHeader()
    assert (header.sortIndicatorSection(), header.sortIndicatorOrder()) == (COL_IRQ, Qt.SortOrder.AscendingOrder)
    assert header.sectionSize(COL_SPREAD) == 222
    assert w2.thread_table.view.header().isSectionHidden(COL_MIGR)
    assert w2.topology_view.color_metric.key == "busy" and w2.toolbar.metric_combo.currentData() == "busy"
    f2 = w2.probe_panel.form
    assert f2.probe == "wakeup" and f2.cpu_edit.text() == "1" and f2.seconds_spin.value() == 2.5
    assert f2.field("interval_us", "wakeup").value() == 250
    assert f2.field("size", "first-touch").text() == "64 M"
    w2.close()


def test_the_command_line_wins_over_what_is_remembered(qtbot, make):
    w, thread = make()
    w.topology_view.set_metric("busy")
    WindowSettings().save(w)
    w.close()
    w2, _ = make(metric="softirq")
    done = WindowSettings().restore(w2, metric=False, geometry=False)
    assert "metric" not in done and "geometry" not in done
    assert w2.topology_view.color_metric.key == "softirq"
    w2.close()


def test_a_damaged_or_foreign_settings_file_restores_what_it_can(qtbot, make):
    path = settings_path()
    path.parent.mkdir(parents=True)
    path.write_text("[General]\nformat=1\n[window]\nstate=@ByteArray(garbage)\ngeometry=hello\n"
                    "[grid]\nmetric=no-such-metric\n[probes]\nform=\"{\\\"common\\\": {\\\"probe_combo\\\": \\\"nope\\\", "
                    "\\\"seconds_spin\\\": \\\"x\\\", \\\"cpu_edit\\\": \\\"3\\\"}}\"\n")
    w, _ = make()
    before = w.topology_view.color_metric.key
    done = WindowSettings().restore(w)
    assert done == ["probe form"]                   # only the CPU field was of its kind
    assert w.topology_view.color_metric.key == before
    assert w.probe_panel.form.cpu_edit.text() == "3" and w.probe_panel.form.seconds_spin.value() == 1.0
    path.write_text("[General]\nformat=99\n[grid]\nmetric=busy\n")      # a newer coremap's: ignored
    assert WindowSettings().restore(w) == []
    w.close()


def test_the_window_saves_its_settings_when_sigterm_closes_it(tmp_path):
    """`coremap` itself (offscreen: no display needed): SIGTERM closes the window cleanly, which saves
    its settings and leaves no autosave slot behind."""
    import os
    import signal
    import subprocess
    import sys
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"),
               COREMAP_STATE_DIR=str(tmp_path / "state"), COREMAP_REPORTS_DIR=str(tmp_path / "reports"))
    p = subprocess.Popen([sys.executable, "-m", "app", "--root", str(extract("sno")), "--color-by", "busy"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from tests.processes import settle
        settle(p, quiet_s=0.5)             # started, painted and idle, however long a busy machine takes
        assert p.poll() is None, p.stderr.read()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    ini = tmp_path / "config" / "coremap" / "settings.ini"
    text = ini.read_text()
    assert "metric=busy" in text and "geometry=" in text and "irqs=" in text
    assert not list((tmp_path / "state").glob("instances/*"))
