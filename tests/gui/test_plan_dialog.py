"""Quiet → Make it permanent…: the plan in a window, read as a user reads it. The machine's facts on
top (the kernel line stands out when it lacks CONFIG_NO_HZ_FULL), one tab per route so the two are
never read as one, each tab with every piece's roll back; "Copy roll back" puts the open route's
script on the clipboard; "Save to folder…" writes the rollback scripts too. The window's controller
hands the plan the machine it shows, so a BLS machine gets grubby there as in the CLI."""
from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from app.machine.topology import read_topology
from app.quiet.boot_plan import machine_root, make_plan
from app.quiet.boot_plan_text import rollback_script
from tests.machines import extract
from tests.unit.test_plan import RELEASE, machine_tree
from widgets.quiet.plan_dialog import PlanDialog


def _dialog(qtbot, root, quiet: str) -> PlanDialog:
    d = PlanDialog(make_plan(read_topology(root), quiet, root=root))
    qtbot.addWidget(d)
    return d


def test_a_route_per_tab_the_kernel_line_and_the_roll_back(qtbot, tmp_path):
    root = machine_tree(tmp_path, {"boot/loader/entries/a.conf": "options ro\n",
                                   f"boot/config-{RELEASE}": "# CONFIG_NO_HZ_FULL is not set\n"})
    d = _dialog(qtbot, root, "2-3")
    assert [d.tabs.tabText(i) for i in range(d.tabs.count())] == ["A. By hand", "B. With tuned"]
    by_hand = d.text.toPlainText()
    assert "isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1,4-11" in by_hand
    assert 'grubby --update-kernel=ALL --args="' in by_hand and "tuned-adm" not in by_hand
    tuned = d.tabs.widget(1).toPlainText()
    assert "tuned-adm profile cpu-partitioning" in tuned and "grubby --" not in tuned
    assert "isolcpus=managed_irq" not in tuned and "irqaffinity=0" not in tuned
    for page in (by_hand, tuned):       # the pieces of either route are on both tabs
        assert "systemctl disable --now coremap-guard.service" in page
    assert "lacks CONFIG_NO_HZ_FULL" in d.kernel_line.text() and "bold" in d.kernel_line.styleSheet()
    assert any(label.text().startswith("boot loader: grubby") for label in d.machine)
    d.tabs.setCurrentIndex(1)
    d.copy_button.click()
    assert QGuiApplication.clipboard().text() == rollback_script(d.plan, d.plan.route("tuned"))
    assert "copied" in d.status.text()
    d.save_to(tmp_path / "plan")
    assert (tmp_path / "plan" / "rollback-by-hand.sh").exists() and (tmp_path / "plan" / "rollback-tuned.sh").exists()
    assert "rollback-by-hand.sh and rollback-tuned.sh" in d.status.text()


def test_the_boot_cpu_alone_leaves_tuned_not_offered_and_says_why(qtbot, tmp_path):
    d = _dialog(qtbot, machine_tree(tmp_path, {}), "0")
    assert d.tabs.tabText(1) == "B. With tuned (not offered)" and d.tabs.isTabEnabled(1)
    assert "the only quiet CPU is the boot CPU (0)" in " ".join(d.tabs.widget(1).toPlainText().split())
    words = d.text.toPlainText().split("the words:\n")[1].split("\n")[0]
    assert words.strip().startswith("isolcpus=managed_irq,domain,0 irqaffinity=1-11 nohz=on")
    d.tabs.setCurrentIndex(1)
    d.copy_button.click()
    assert "nothing to roll back" in d.status.text()


def test_the_window_reads_the_machine_it_shows_and_no_remote_one(tmp_path):
    root = machine_tree(tmp_path, {"usr/sbin/update-grub": "#!/bin/sh\n"})
    assert machine_root(str(root.root)) == root
    assert machine_root("") is None                            # a remote host's window
    assert machine_root(str(tmp_path / "s.coremap")) is None   # a session file
    assert machine_root(str(extract("sno"))) is not None


def test_the_dialog_names_the_running_words_that_work_against_the_plan(qtbot):
    # worker1's capture, as the window shows it: its kernel booted with systemd.cpu_affinity=5,6,7,8,9,10
    # and tuned.non_isolcpus=000007e0, which would keep putting work on 6-9 (issue 30, wrong answer 1).
    root = machine_root(str(extract("worker1.internal")))
    topology = read_topology(root)
    d = PlanDialog(make_plan(topology, "6-9", root=root), replan=lambda replace, pstate: make_plan(
        topology, "6-9", root=root, replace=replace, intel_pstate=pstate))
    qtbot.addWidget(d)
    d.show()
    qtbot.waitExposed(d)
    text = d.conflicts.text()
    assert d.conflicts.isVisible() and text.startswith("The running kernel command line, where it works against "
                                                       "this plan (CPU lists merged, not replaced")
    lines = [line.removeprefix("• ") for line in text.split("\n")[1:]]
    assert len(lines) == 5
    assert any(t.startswith("systemd.cpu_affinity=5,6,7,8,9,10 -> systemd.cpu_affinity=5,10: ") for t in lines)
    assert any(t.startswith("tuned.non_isolcpus=000007e0 -> tuned.non_isolcpus=00000420: ") for t in lines)
    assert any(t.startswith("isolcpus=managed_irq,0-4,11-79 -> isolcpus=managed_irq,domain,0-4,6-9,11-79: ")
               for t in lines)
    # The by-hand route's words are the merged ones, 0-4,11-79 kept.
    words = d.text.toPlainText().split("the words:\n")[1].split("\n")[0].split()
    assert "isolcpus=managed_irq,domain,0-4,6-9,11-79" in words and "systemd.cpu_affinity=5,10" in words
    assert d.summary.text().startswith("Plan: CPUs 6-9 quiet, with CPUs 0-4,11-79 the running command line")
    # Ticking "Replace" plans again as `plan --replace` does: 6-9 alone, and what that ends said first.
    d.tabs.setCurrentIndex(1)
    qtbot.mouseClick(d.replace_box, Qt.MouseButton.LeftButton, pos=QPoint(8, d.replace_box.height() // 2))
    assert d.replace_box.isChecked() and d.plan.replace and d.tabs.currentIndex() == 1
    words = d.text.toPlainText().split("the words:\n")[1].split("\n")[0].split()
    assert "isolcpus=managed_irq,domain,6-9" in words and "intel_pstate=disable" not in words
    assert "ends the isolation of CPUs 0-4,11-79" in d.conflicts.text() and "replaced" in d.status.text()
    qtbot.mouseClick(d.pstate_box, Qt.MouseButton.LeftButton, pos=QPoint(8, d.pstate_box.height() // 2))
    assert "intel_pstate=disable" in d.text.toPlainText().split("the words:\n")[1].split("\n")[0].split()


def test_a_choice_that_cannot_be_planned_says_why_and_keeps_the_plan_shown(qtbot):
    # 5-10 with the 74 CPUs worker1 isolates already leaves none for housekeeping: only --replace plans it.
    root = machine_root(str(extract("worker1.internal")))
    topology = read_topology(root)
    d = PlanDialog(make_plan(topology, "5-10", root=root, replace=True), replan=lambda replace, pstate: make_plan(
        topology, "5-10", root=root, replace=replace, intel_pstate=pstate))
    qtbot.addWidget(d)
    d.show()
    qtbot.waitExposed(d)
    before = d.text.toPlainText()
    qtbot.mouseClick(d.replace_box, Qt.MouseButton.LeftButton, pos=QPoint(8, d.replace_box.height() // 2))
    assert d.status.text().startswith("not planned again: --cpus 5-10 with CPUs 0-4,11-79")
    assert d.replace_box.isChecked() and d.plan.replace and d.text.toPlainText() == before


def test_no_conflict_no_heading_and_no_choice_without_replan(qtbot, tmp_path):
    d = _dialog(qtbot, machine_tree(tmp_path, {"proc/cmdline": "ro quiet\n"}), "2-3")
    d.show()
    qtbot.waitExposed(d)
    assert not d.conflicts.isVisible() and d.conflicts.text() == ""
    assert not d.replace_box.isVisible() and not d.pstate_box.isVisible()
