"""The window's report of a capture shows a run measured on another machine under that machine, and a
run that does not say its machine as "host unknown" (issue 30, wrong answer 2; the one check is
app/store/result_host.py, which `coremap report` and `coremap export` use too: tests/unit/test_result_host.py)."""
from __future__ import annotations

import json
from pathlib import Path

from app.store.results import results_in
from app.sysroot import SysRoot
from tests.machines import extract
from app.sources.live import host_of_root
from widgets.application import build_window

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "results"


def test_the_windows_report_of_worker1_names_where_each_run_was_measured(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    w = build_window(host_of_root(SysRoot(extract("worker1.internal"))), crash_recovery=False)
    thread = w.sampler_thread
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.state_applied, timeout=20000):
        thread.start()
    for name in ("kvm-6.18-jitter-with-host.json", "kvm-6.18-wakeup.json"):
        for r in results_in(json.loads((RESULTS / name).read_text())):
            assert w.probe_panel.add_result(r, name) is not None
    html = w.session_controller.export_report("html").read_text()
    # the VM's jitter run (it says so in its result) under its own machine, the older runs host unknown
    assert html.count("Measured on vm (Xeon, 6.18.44-fc-v669), not on worker1.internal") == 1
    assert html.count("Host unknown: the result does not say which machine") == 2
    assert "jitter on CPU 1" in html
    w.close()
