"""`coremap report` and the window's report hold this job's pins, not the journal's whole history
(issue 28: the CLI report repeated 22 rows, 13 of them "gone" lines of earlier restores). On a copy of
sno (12 CPUs) whose journal holds an earlier job: an IRQ pinned and restored."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.parse.cpulist import parse_cpulist
from app.pinning.journal import Journal
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.quiet.isolate import LocalQuiet
from app.sysroot import SysRoot
from tests.gui.pins import show_pins
from tests.machines import copy_machine, writable_test_tree
from app.sources.live import host_of_root
from widgets.application import build_window

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """(a writable copy of sno, its pin service on the journal coremap reads, two free IRQs), with an
    earlier job in that journal: IRQ `old` pinned to CPU 2, then everything restored."""
    copy = tmp_path / "sno"
    copy_machine("sno", copy)
    root = SysRoot(writable_test_tree(copy))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("COREMAP_STATE_DIR", str(state))
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))
    old, new = [int(i) for i in sorted(os.listdir(root.proc("irq")), key=lambda s: (len(s), s)) if i.isdigit()
                and parse_cpulist(root.irq_dir(i, "smp_affinity_list").read_text()) == tuple(range(12))][:2]
    journal = Journal(state / "journal.jsonl")
    service = AffinityService(root, journal)
    [r] = service.apply(PinRequest((PinTarget("irq", old),), (2,)))
    assert r.ok
    service.restore_all()
    yield copy, service, old, new
    journal.close()


def _report(copy: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "app", "report", "--root", str(copy), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=180, env=env)


def _report_here(capsys, copy: Path, out: Path, *extra: str) -> tuple[int, str]:
    """`coremap report` in this process (app.cli.main.main): its status and what it wrote to stderr."""
    from app.cli.main import main
    capsys.readouterr()
    rc = main(["report", "--root", str(copy), "--out", str(out), *extra])
    return rc, capsys.readouterr().err


def test_the_cli_report_holds_this_jobs_pins_and_since_chooses(qapp, machine, tmp_path, capsys):
    """The job's report runs as the command does, headless in a process of its own; the whole journal's
    (--since 0) and the refused --since in this process, which gives the same report and the same line."""
    copy, service, old, new = machine
    LocalQuiet(service).apply(LocalQuiet(service).preview("isolate", "1"))
    [r] = service.apply(PinRequest((PinTarget("irq", new),), (1,)))
    assert r.ok
    job = _report(copy, tmp_path / "job.html")
    assert job.returncode == 0, job.stderr
    html = (tmp_path / "job.html").read_text()
    assert f"IRQ {new}" in html and "Make quiet CPU 1" in html and f"IRQ {old}" not in html
    assert "earlier journal rows left out" in html and "Now CPU 1 quiet" in html
    rc, err = _report_here(capsys, copy, tmp_path / "whole.html", "--since", "0")
    assert rc == 0, err
    html = (tmp_path / "whole.html").read_text()
    assert f"IRQ {old}" in html and f"IRQ {new}" in html and "left out" not in html
    rc, err = _report_here(capsys, copy, tmp_path / "bad.html", "--since", "yesterday")
    assert rc == 2 and not (tmp_path / "bad.html").exists()
    assert err.strip().splitlines() == [
        "coremap: --since 'yesterday': give seconds from the start (90), from the end (-30), end, or a time such as "
        "2026-11-25T13:40:00"]


def test_the_windows_report_holds_the_pins_made_since_it_opened(qtbot, machine):
    copy, service, old, new = machine
    w = build_window(None, crash_recovery=False)
    qtbot.addWidget(w)
    show_pins(w, service)
    thread = w.sampler_thread
    w.show()
    with qtbot.waitSignal(w.state_applied, timeout=20000):
        thread.start()
    [r] = service.apply(PinRequest((PinTarget("irq", new),), (3,)))
    assert r.ok
    html = w.session_controller.export_report("html").read_text()
    assert f"IRQ {new}" in html and f"IRQ {old}" not in html
    assert "since this window opened" in html and "earlier journal rows left out" in html
    w.close()


def test_a_reopened_sessions_runs_stay_their_probes_runs_in_its_report(qtbot, tmp_path, monkeypatch):
    """A session's stored jitter and wakeup runs, opened in the window, are reported as they were
    measured ("1. jitter on CPU 1" with its gap attribution), not as "1. file" runs without a CPU (issue
    28: found by the report engineer)."""
    import json
    from pathlib import Path
    from app.store.results import results_in
    from app.sysroot import SysRoot as _Root
    from tests.machines import extract
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))
    results = Path(__file__).resolve().parents[1] / "fixtures" / "results"
    runs = [r for name in ("kvm-6.18-jitter-attributed.json", "kvm-6.18-wakeup.json")
            for r in results_in(json.loads((results / name).read_text()))]
    w = build_window(host_of_root(_Root(extract("sno"))), crash_recovery=False)
    thread = w.sampler_thread
    qtbot.addWidget(w)
    w.show()
    with qtbot.waitSignal(w.state_applied, timeout=20000):
        thread.start()
    for r in runs:
        assert w.probe_panel.add_result(r, "kvm-6.18.coremap") is not None
    assert sorted((rec.stored["probe"], rec.cpus) for rec in w.probe_panel.runs) == \
        [("jitter", (0,)), ("jitter", (1,)), ("wakeup", (0,)), ("wakeup", (1,))]
    html = w.session_controller.export_report("html").read_text()
    for heading in ("jitter on CPU 1", "jitter on CPU 0", "wakeup on CPU 1", "wakeup on CPU 0"):
        assert heading in html
    assert ". file" not in html and "sh/9561" in html         # the attribution came along
    w.close()
