"""Quiet CPUs in the window: Make quiet… previews per target and writes one batch, the grid marks the
quiet CPUs (apart from isolcpus), the result line says how many moved and why the rest could not,
Undo clears it all; a pin back onto a quiet CPU of what the isolate moved off warns; the guard's
report of a change appears in the Pins panel and on the status line, and a row's menu sets its pin's
policy; Make it permanent… writes the plan's files; the irqbalance line is written by the helper only
when asked; Verify runs live and lands in the session and the report.

IRQs and masks on a writable copy of "sno" (openshift-nto); Verify live on this VM as root, restored."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.pinning.helper import Helper
from app.pinning.journal import Journal
from app.parse.cpulist import parse_cpulist
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.live import live_test, read_affinities, restore_quiet
from tests.machines import copy_machine, writable_test_tree
from widgets.application import build_window


def _window(qtbot, sampler: Sampler, interval: float = 1.0):
    """The window applying `sampler`'s states by hand (the fixtures then show the machine they pin,
    so its File menu knows it: sessions, reports). `interval`: how often its guard looks."""
    w = build_window(None, interval=interval)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    assert w.set_state(sampler.tick())
    return w


@pytest.fixture
def sno(qtbot, tmp_path):
    dst = tmp_path / "sno"
    copy_machine("sno", dst)
    (dst / "sys" / "devices" / "virtual" / "workqueue").mkdir(parents=True)
    (dst / "sys" / "devices" / "virtual" / "workqueue" / "cpumask").write_text("fff\n")
    root = SysRoot(writable_test_tree(dst))
    sampler = Sampler(root)
    # The guard looks every 0.25 s on this copy: the guard test waits for its look at a change and for
    # the re-apply (up to a second each at the window's interval), and no test reads the interval.
    w = _window(qtbot, sampler, interval=0.25)
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(root, journal)
    show_pins(w, service)
    assert w.set_state(sampler.tick())             # the guard starts on the first state after a service
    yield w, service, root
    journal.close()


def _irq_masks(root: SysRoot) -> dict:
    return {n: parse_cpulist(root.irq_dir(n, "smp_affinity_list").read_text())
            for n in os.listdir(root.proc("irq")) if n.isdigit()}


def _open(w, which: str):
    """Quiet → Make quiet… (or Give back…): the preview is worked out in the pin worker, then shown."""
    getattr(w.quiet_controller, f"open_{which}")()
    settle(w)
    return w.quiet_controller.dialog


def _isolate(w, cpus):
    w.topology_view.select_cpus(cpus)
    d = _open(w, "isolate")
    assert d is not None
    d.accept()
    settle(w)
    return d


def test_make_quiet_previews_writes_one_batch_marks_the_grid_and_undo_clears_it(sno, qtbot):
    w, service, root = sno
    before = _irq_masks(root)
    w.topology_view.select_cpus([1, 2])
    d = _open(w, "isolate")
    rows = d.row_texts()
    assert rows[0][0].startswith("Move ") and rows[0][0].endswith(" IRQs")
    assert any(r[0] == "workqueue cpumask" and r[1] == "0-11 -> 0,3-11" for r in rows)
    assert _irq_masks(root) == before and service.journal.entries() == []     # a preview writes nothing
    assert d.apply_button.text() == "Make quiet"
    d.accept()
    settle(w)
    line = w.pin_controller.result_line.text()
    assert line.startswith("isolate CPUs 1-2 (threads moved):") and "targets moved" in line
    cells = w.topology_view.cells()
    assert cells[1].quiet and cells[2].quiet and not cells[0].quiet
    assert not cells[1].isolated                                               # quiet is not isolcpus
    assert w.topology_view.quiet_cpus == (1, 2)
    assert all(1 not in m and 2 not in m for m in _irq_masks(root).values() if set(m) - {1, 2})
    actions = {r[1] for r in w.pin_controller.journal_widget.row_texts()}
    assert actions == {"isolate"}
    w.pin_controller.undo_action.trigger()
    settle(w.pin_controller)
    assert _irq_masks(root) == before and w.topology_view.quiet_cpus == ()
    assert not cells[1].quiet


def test_the_preview_names_its_method_and_offers_pm_qos(sno, qtbot):
    w, service, root = sno
    power = root.cpu_dir("cpu1", "power")
    power.mkdir(parents=True, exist_ok=True)
    (power / "pm_qos_resume_latency_us").write_text("n/a\n")
    w.topology_view.select_cpus([1])
    d = _open(w, "isolate")
    assert d.method.text().startswith("How: threads moved one by one (no cpuset here)")   # a capture: no cpuset
    assert not d.pm_qos.isChecked() and not any(r[0].startswith("CPU 1 PM QoS") for r in d.row_texts())
    d.pm_qos.setChecked(True)                        # the preview again, with the quiet CPU's PM QoS
    settle(w)
    d2 = w.quiet_controller.dialog
    assert d2 is not d and d2.pm_qos.isChecked()
    assert ("CPU 1 PM QoS resume latency", "n/a -> 0",
            "kept out of deep idle states: it wakes faster and uses more power") in d2.row_texts()
    d2.accept()
    settle(w)
    assert (power / "pm_qos_resume_latency_us").read_text().strip() == "0"
    w.pin_controller.undo_action.trigger()
    settle(w.pin_controller)
    assert (power / "pm_qos_resume_latency_us").read_text().strip() == "n/a"


def test_pinning_a_moved_irq_back_onto_the_quiet_cpu_warns(sno, qtbot):
    w, service, root = sno
    _isolate(w, [3])
    irq = next(e.target_id for e in service.journal.entries() if e.kind == "irq" and e.state == "done"
               and 3 in e.before)
    with qtbot.waitSignal(w.pin_controller.results_shown, timeout=10000) as shown:
        w.pin_controller.request(PinRequest((PinTarget("irq", irq),), (3,)))
    [r] = shown.args[0]
    assert r.ok and "quiet CPU 3" in r.warning
    label = w.pin_controller.result_line.warning_label
    assert not label.isHidden() and f"IRQ {irq}" in label.text() and "isolate #" in label.text()


def test_the_guards_report_in_the_pins_panel_and_a_rows_policy(sno, qtbot):
    w, service, root = sno
    _isolate(w, [4])
    assert w.guard_thread.running
    moved = next(e for e in service.journal.entries() if e.kind == "irq" and e.state == "done")
    path = root.irq_dir(moved.target_id, "smp_affinity_list")
    events = []
    w.guard_thread.ticked.connect(lambda report: events.extend(report.events))
    # Another process changes the mask, in one step as the kernel's file does: written in place, a look
    # between the truncation and the write (the guard looks every 0.25 s here) found an empty mask.
    subprocess.run([sys.executable, "-c", f"import os; open({str(path)!r} + '.new', 'w').write('0-11'); "
                    f"os.replace({str(path)!r} + '.new', {str(path)!r})"], check=True)
    qtbot.waitUntil(lambda: bool(events), timeout=10000)
    [ev] = events
    assert (ev.target_id, ev.found, ev.action) == (moved.target_id, tuple(range(12)), "reported")
    rows = w.pin_controller.journal_widget.row_texts()
    changed = [r for r in rows if r[1] == "changed"]
    assert changed and changed[0][3] == f"{','.join(map(str, [0, 1, 2, 3]))},5-11 -> 0-11".replace("0,1,2,3", "0-3")
    assert changed[0][4].startswith("by someone coremap cannot tell") and changed[0][4].endswith("; reported")
    assert changed[0][6].endswith(": report")
    assert f"IRQ {moved.target_id}" in w.statusBar().currentMessage()
    batch = service.ledger().undo[-1]
    menu = w.pin_controller.journal_widget.policy_menu(batch)
    [act] = menu.actions()
    assert act.isCheckable() and not act.isChecked()
    act.setChecked(True)
    assert service.journal.policies() == {batch: True}
    assert w.pin_controller.journal_widget.row_texts()[0][6] == f"#{batch}: re-apply"
    qtbot.waitUntil(lambda: path.read_text().strip() == "0-3,5-11", timeout=10000)   # re-applied


def test_make_it_permanent_writes_the_plan(sno, tmp_path):
    w, _, _ = sno
    w.topology_view.select_cpus([2, 3])
    d = w.quiet_controller.open_plan()
    text = d.text.toPlainText()
    assert "isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1,4-11" in text
    d.save_to(tmp_path / "plan")
    assert (tmp_path / "plan" / "cmdline.txt").read_text().startswith("isolcpus=managed_irq,domain,2-3")
    assert (tmp_path / "plan" / "irqbalance").read_text().count("IRQBALANCE_BANNED_CPULIST=2-3") == 1
    assert "written to" in d.status.text()


def test_the_irqbalance_line_is_written_by_the_helper_only_when_asked(sno, tmp_path):
    w, service, root = sno
    (root.root / "etc" / "default").mkdir(parents=True, exist_ok=True)
    conf = root.root / "etc" / "default" / "irqbalance"
    conf.write_text("IRQBALANCE_ONESHOT=0\n")
    _isolate(w, [5])
    helper = Helper(root)          # the helper's own code, on this copy (the live one would write /etc)

    def write(cpus):
        reply = helper.handle(json.dumps({"op": "irqbalance_ban_cpus", "cpus": ",".join(map(str, cpus))}))
        assert reply["ok"], reply
        return reply["path"]

    w.quiet_controller._write_irqbalance = write
    d = w.quiet_controller.open_irqbalance_fix()
    assert d.line.toPlainText() == "IRQBALANCE_BANNED_CPULIST=5" and str(conf) in d.label.text()
    assert conf.read_text() == "IRQBALANCE_ONESHOT=0\n"                 # shown, not written
    d.write_button.click()
    assert conf.read_text().endswith("IRQBALANCE_BANNED_CPULIST=5\n") and "written to" in d.status.text()


live = live_test


@live
def test_verify_runs_live_and_lands_in_the_session_and_the_report(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "reports"))
    sampler = Sampler(SysRoot("/"))
    w = _window(qtbot, sampler)
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(SysRoot("/"), journal)
    show_pins(w, service)
    assert w.set_state(sampler.tick())
    before = read_affinities()
    mine = os.sched_getaffinity(0)
    try:
        w.topology_view.select_cpus([1])
        runs = len(w.probe_panel.runs)
        with qtbot.waitSignal(w.quiet_controller.verified, timeout=120000) as got:
            assert w.quiet_controller.verify(seconds=0.3, pairs=1)
        v = got.args[0]
        assert [(r["pair"], r["quiet"]) for r in v["runs"]] == [(0, False), (0, True)]
        assert len(w.probe_panel.runs) == runs + 2
        assert service.ledger().quiet_cpus == ()                     # as it was found
        # coremap's own threads too: the probe's own-affinity guard must not turn the shield's mask into a
        # mask of their own, which the give-back keeps (every later test of this process ran on CPU 0).
        assert os.sched_getaffinity(0) == mine
        after = read_affinities()
        assert after.irqs == {n: m for n, m in before.irqs.items() if n in after.irqs}
        assert w.session_controller.session().verifications == [v]
        report = w.session_controller.export_report("html")
        assert "Before / after: quiet CPU 1" in report.read_text()
    finally:
        restore_quiet(service)
        journal.close()


def cut_cells(d) -> list[str]:
    """The preview's cells whose text does not fit its column: laid out with word wrap in the column's
    width (less the style's margins), it must fit the cell's width and height (issue 28 showed
    "/ -> /coremap-…" and "(PF_NO_SETAFFINITY…")."""
    from PySide6.QtCore import QRect, Qt
    tree = d.tree
    tree.expandAll()
    fm = tree.fontMetrics()
    margin = 2 * (tree.style().pixelMetric(tree.style().PixelMetric.PM_FocusFrameHMargin, None, tree) + 1)
    out = []
    for i in range(tree.topLevelItemCount()):
        top = tree.topLevelItem(i)
        for j in range(top.childCount()):
            item = top.child(j)
            for c in range(tree.columnCount()):
                text = item.text(c)
                rect = tree.visualRect(tree.indexFromItem(item, c))
                room = rect.width() - margin
                need = fm.boundingRect(QRect(0, 0, max(1, room), 100000), int(Qt.TextFlag.TextWordWrap), text)
                if text and (need.width() > room or need.height() > rect.height()):
                    out.append(f"{text!r} needs {need.width()}x{need.height()} in {room}x{rect.height()}")
    return out


def test_the_preview_columns_fit_or_wrap(sno, qtbot):
    w, service, root = sno
    w.topology_view.select_cpus([1, 2])
    d = _open(w, "isolate")
    qtbot.waitExposed(d)
    assert d.row_texts() and cut_cells(d) == []
    tall = d.tree.visualRect(d.tree.indexFromItem(d.tree.topLevelItem(0).child(0), 2)).height()
    d.resize(520, 480)                      # a narrower dialog wraps its reasons, it never cuts them
    qtbot.waitUntil(lambda: d.width() <= 520)
    qtbot.waitUntil(lambda: cut_cells(d) == [], timeout=2000)
    assert max(d.tree.visualRect(d.tree.indexFromItem(d.tree.topLevelItem(0).child(j), 2)).height()
               for j in range(d.tree.topLevelItem(0).childCount())) > tall, "nothing wrapped: the test tests nothing"


@live
def test_give_back_in_the_window_undoes_the_pin_and_returns_the_machine(qtbot, tmp_path):
    """Make quiet and Give back by their preview dialogs' buttons, a thread pinned onto the quiet CPU in
    between: the give-back's preview lists the pin (its tick box keeps it, off by default) and says where
    the processes go; one Give back leaves the machine's fingerprint as before; the guard reports nothing
    of coremap's own batches; every cell of the live previews fits or wraps."""
    from PySide6.QtCore import QPoint, Qt
    from tests.live import fingerprint_diff, machine_fingerprint
    sampler = Sampler(SysRoot("/"))
    w = _window(qtbot, sampler)
    journal = Journal(tmp_path / "journal.jsonl")
    service = AffinityService(SysRoot("/"), journal)
    show_pins(w, service)
    assert w.set_state(sampler.tick())
    proc = subprocess.Popen([sys.executable, "-c", "import threading, time, os\n"
                             "threading.Thread(target=time.sleep, args=(300,), daemon=True).start()\n"
                             "print(os.getpid(), flush=True); time.sleep(300)"], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    tid = max(int(t) for t in os.listdir(f"/proc/{proc.pid}/task"))
    placed = subprocess.Popen([sys.executable, "-c", "import os, time; os.sched_setaffinity(0, {1}); "
                               "print(os.getpid(), flush=True); time.sleep(300)"], stdout=subprocess.PIPE, text=True)
    placed.stdout.readline()                # the user's own pin onto CPU 1, as taskset -c 1 makes it
    before = machine_fingerprint()

    def through_dialog(which: str):
        with qtbot.waitSignal(w.quiet_controller.preview_shown, timeout=60000) as shown:
            getattr(w.quiet_controller, f"open_{which}")()
        d = shown.args[0]
        qtbot.waitExposed(d)
        return d

    def press(d):
        with qtbot.waitSignal(w.pin_controller.results_shown, timeout=60000):
            qtbot.mouseClick(d.apply_button, Qt.MouseButton.LeftButton)

    try:
        w.topology_view.select_cpus([1])
        d = through_dialog("isolate")
        assert cut_cells(d) == []
        mine = f"thread {placed.pid} (python)"
        assert any(r[0] == mine and r[2].startswith("left: pinned there by you") for r in d.row_texts())
        move = f"process {placed.pid} (python) cpuset"
        assert not any(r[0] == move for r in d.row_texts())
        for want in (True, False):          # its tick box moves it, and unticked leaves it again
            with qtbot.waitSignal(w.quiet_controller.preview_shown, timeout=60000) as shown:
                qtbot.mouseClick(d.move_pinned, Qt.MouseButton.LeftButton,
                                 pos=d.move_pinned.rect().topLeft() + QPoint(8, d.move_pinned.height() // 2))
            d = shown.args[0]
            qtbot.waitExposed(d)
            assert d.move_pinned.isChecked() is want
            assert any(r[0] == move and r[1] == "/ -> /coremap-system" for r in d.row_texts()) is want
        press(d)
        assert Path(f"/proc/{placed.pid}/cpuset").read_text().strip() == "/"
        assert os.sched_getaffinity(placed.pid) == {1}
        assert w.pin_controller.result_line.warning_label.isHidden()    # nothing of its own reads as a warning
        with qtbot.waitSignal(w.pin_controller.results_shown, timeout=30000):
            w.pin_controller.request(PinRequest((PinTarget("thread", tid, proc.pid),), (1,)))
        assert Path(f"/proc/{proc.pid}/task/{tid}/cpuset").read_text().strip() == "/coremap-pinned"
        give = through_dialog("include")
        rows = give.row_texts()
        assert ("Undo 2 pins made while quiet", "", "") in rows, rows
        assert any(r[0] == f"thread {tid} (python)" and r[1] == "1 -> 0-1" for r in rows), rows
        assert any("back to every CPU" in r[0] for r in rows) and not any("into the shield" in r[0] for r in rows)
        assert give.keep_pins.isVisible() and not give.keep_pins.isChecked() and cut_cells(give) == []
        press(give)
        assert fingerprint_diff(before, machine_fingerprint()) == []
        seen = w.guard_thread.last_tick
        qtbot.waitUntil(lambda: w.guard_thread.last_tick is not seen, timeout=10000)   # a look after it
        journal.refresh()
        assert journal.guard_events() == []
        changed = [r for r in w.pin_controller.journal_widget.row_texts() if r[1] == "changed"]
        assert changed == [] and "cannot tell" not in w.statusBar().currentMessage()
        assert service.ledger().unrestored == ()
    finally:
        for p in (proc, placed):
            p.kill()
            p.wait()
        restore_quiet(service)
        journal.close()
