"""coremap plan reads the running kernel command line (issue 30, wrong answer 1): on worker1, whose kernel
booted with isolcpus=managed_irq,0-4,11-79, systemd.cpu_affinity=5,6,7,8,9,10 and
tuned.non_isolcpus=000007e0, `plan -c 6-9` names every word that works against it, keeps the 74 CPUs
isolated and adds 6-9 to each list (flags kept), and changes systemd.cpu_affinity= itself, which wins
over the CPUAffinity= file it writes; --replace writes 6-9 alone and says what that ends, up front.
Route A adds the boot words tuned's profiles add, tsc=reliable only where the TSC is the clocksource
and intel_pstate=disable only when asked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.machine.boot import read_clocksource
from app.machine.topology import read_topology
from app.parse.cpulist import parse_cpulist, parse_cpumask
from app.parse.topology import parse_cmdline_isolation
from app.quiet.boot_plan import make_plan
from app.quiet.boot_plan_text import plan_text
from app.sysroot import SysRoot
from tests.machines import extract
from tests.unit.test_plan import machine_tree

REPO = Path(__file__).resolve().parents[2]
KEPT = "0-4,11-79"              # what worker1's kernel isolates


@pytest.fixture(scope="module")
def worker1_root():
    return SysRoot(extract("worker1.internal"))


@pytest.fixture(scope="module")
def worker1_plan(worker1_root):
    return make_plan(read_topology(worker1_root), "6-9", root=worker1_root)


def by_name(plan):
    return {p.name: p for p in plan.params}


def test_worker1_keeps_what_it_isolates_and_adds_6_9(worker1_plan):
    plan = worker1_plan
    assert plan.quiet == (6, 7, 8, 9) and plan.kept == tuple(parse_cpulist(KEPT))
    assert plan.housekeeping == (5, 10)
    p = by_name(plan)
    # The running isolcpus= keeps its managed_irq flag and its CPUs; domain is added, and said so.
    assert p["isolcpus"].value == "managed_irq,domain,0-4,6-9,11-79"
    assert p["nohz_full"].value == "1-4,6-9,11-79"           # CPU 0 boots the machine: the kernel drops it
    assert p["rcu_nocbs"].value == "0-4,6-9,11-79"
    back = parse_cmdline_isolation(plan.cmdline_fragment)
    assert set(back.isolcpus) == set(parse_cpulist(KEPT)) | {6, 7, 8, 9}
    assert back.isolcpus_flags == ("managed_irq", "domain")
    assert set(parse_cpulist(KEPT)) - {0} | {6, 7, 8, 9} == set(back.nohz_full)
    assert p["irqaffinity"].value == "5,10"


def test_worker1_names_every_word_that_works_against_the_plan(worker1_plan):
    conflicts = {p.running_word: p for p in worker1_plan.conflicts}
    assert set(conflicts) == {"isolcpus=managed_irq,0-4,11-79", "nohz_full=0-4,11-79", "rcu_nocbs=0-4,11-79",
                              "systemd.cpu_affinity=5,6,7,8,9,10", "tuned.non_isolcpus=000007e0"}
    affinity = conflicts["systemd.cpu_affinity=5,6,7,8,9,10"]
    assert affinity.word == "systemd.cpu_affinity=5,10"
    assert "6-9 among them" in affinity.conflict and "wins over CPUAffinity=" in affinity.conflict
    tuned = conflicts["tuned.non_isolcpus=000007e0"]
    assert parse_cpumask(tuned.value) == (5, 10) and "unbound workqueues on CPUs 5-10" in tuned.conflict
    iso = conflicts["isolcpus=managed_irq,0-4,11-79"].conflict
    assert "the plan keeps 0-4,11-79 and adds 6-9" in iso and "ends the isolation of CPUs 0-4,11-79" in iso
    assert "adds the domain flag" in iso


def test_the_word_changes_with_the_file_and_the_two_agree(worker1_plan):
    by_hand = worker1_plan.route("by-hand").pieces
    grubby = next(p for p in by_hand if p.title == "Kernel command line, with grubby")
    assert "systemd.cpu_affinity=5,10" in grubby.apply[0] and "tuned.non_isolcpus=00000420" in grubby.apply[0]
    # Its roll back puts back the words the kernel booted with.
    assert "systemd.cpu_affinity=5,6,7,8,9,10 tuned.non_isolcpus=000007e0" in grubby.rollback[-1]
    systemd = next(p for p in by_hand if p.name == "coremap-housekeeping.conf")
    assert "CPUAffinity=5 10\n" in systemd.text and "gets systemd.cpu_affinity=5,10 too" in systemd.why
    assert "isolated_cores=1-4,6-9,11-79\n" in next(p.text for p in worker1_plan.route("tuned").pieces if p.text)


def test_cli_says_so_before_the_routes(worker1_root):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "app", "plan", "--root", str(worker1_root.root), "-c", "6-9"],
                       capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert out.startswith("Plan: CPUs 6-9 quiet, with CPUs 0-4,11-79 the running command line isolates already "
                          "(0-4,6-9,11-79 in all), CPUs 5,10 for housekeeping.")
    for line in ("isolcpus=managed_irq,0-4,11-79 -> isolcpus=managed_irq,domain,0-4,6-9,11-79",
                 "systemd.cpu_affinity=5,6,7,8,9,10 -> systemd.cpu_affinity=5,10",
                 "tuned.non_isolcpus=000007e0 -> tuned.non_isolcpus=00000420",
                 "nohz_full=0-4,11-79 -> nohz_full=1-4,6-9,11-79"):
        assert line in out and out.index(line) < out.index("== A. By hand"), line
    assert "CPU lists merged, not replaced; --replace writes the CPUs asked for alone" in out


def test_replace_writes_the_cpus_asked_for_alone_and_says_what_it_ends(worker1_root, capsys):
    assert main(["plan", "--root", str(worker1_root.root), "-c", "6-9", "--replace", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cmdline_fragment"].startswith("isolcpus=managed_irq,domain,6-9 nohz_full=6-9 rcu_nocbs=6-9 "
                                               "irqaffinity=0-5,10-79 systemd.cpu_affinity=0-5,10-79")
    assert data["kept"] == [] and data["replace"] is True
    why = {c["running"]: c["why"] for c in data["conflicts"]}
    assert "which ends the isolation of CPUs 0-4,11-79" in why["isolcpus=managed_irq,0-4,11-79"]
    assert "6-9 among them" in why["systemd.cpu_affinity=5,6,7,8,9,10"]
    text = plan_text(make_plan(read_topology(worker1_root), "6-9", root=worker1_root, replace=True))
    assert text.index("ends the isolation") < text.index("== A. By hand")


def test_merged_flags_and_lists_on_a_machine_with_its_own_words(tmp_path):
    root = machine_tree(tmp_path, {"proc/cmdline": "ro isolcpus=nohz,domain,5 irqaffinity=0-3 nohz=off skew_tick=0\n"})
    plan = make_plan(read_topology(root), "2-3", root=root)
    p = by_name(plan)
    assert p["isolcpus"].value == "nohz,domain,managed_irq,2-3,5" and plan.kept == (5,)
    # irqaffinity= keeps its own choice less the quiet CPUs, and says which of them it had.
    assert p["irqaffinity"].value == "0-1" and "new IRQs start on CPUs 0-3, 2-3 among them" in p["irqaffinity"].conflict
    assert p["nohz"].word == "nohz=on" and p["nohz"].conflict == "the plan writes nohz=on in its place"
    assert p["skew_tick"].running == "0" and not p["skew_tick"].in_place
    assert "systemd.cpu_affinity" not in p and "tuned.non_isolcpus" not in p    # not on this command line
    # After "--" the words are init's (this Firecracker VM's own line has "-- --firecracker-init ..."):
    init = machine_tree(tmp_path / "init", {"proc/cmdline": "ro quiet -- nosoftlockup=x systemd.cpu_affinity=2\n"})
    plan = make_plan(read_topology(init), "2-3", root=init)
    assert not plan.conflicts and "systemd.cpu_affinity" not in by_name(plan)
    assert by_name(plan)["nosoftlockup"].running is None
    # A bare rcu_nocbs offloads every CPU already: kept as it is, not narrowed to the quiet ones.
    bare = machine_tree(tmp_path / "bare", {"proc/cmdline": "ro rcu_nocbs\n"})
    rcu = by_name(make_plan(read_topology(bare), "2-3", root=bare))["rcu_nocbs"]
    assert rcu.word == "rcu_nocbs" and rcu.in_place and rcu.conflict is None
    # A machine whose command line has nothing to merge gets the plan's own lists.
    plain = machine_tree(tmp_path / "plain", {"proc/cmdline": "ro quiet\n"})
    plan = make_plan(read_topology(plain), "2-3", root=plain)
    assert plan.kept == () and not plan.conflicts
    assert plan.cmdline_fragment.startswith("isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=")


CLOCK = "sys/devices/system/clocksource/clocksource0/"


@pytest.mark.parametrize("current, available, why", [
    ("tsc", "tsc hpet acpi_pm", None),
    ("kvm-clock", "kvm-clock tsc acpi_pm", "the clocksource is kvm-clock, a virtual machine's"),
    ("hpet", "hpet acpi_pm", "the kernel reads time from hpet, not the TSC"),
    (None, None, "whether the TSC is the clocksource is not known"),
])
def test_tsc_reliable_only_where_the_tsc_is_the_clocksource(tmp_path, current, available, why):
    files = {CLOCK + "current_clocksource": f"{current}\n", CLOCK + "available_clocksource": f"{available}\n"}
    root = machine_tree(tmp_path, files if current else {})
    plan = make_plan(read_topology(root), "2-3", root=root)
    left = {w.word: w.why for w in plan.left_out}
    if why is None:
        assert "tsc=reliable" in plan.cmdline_fragment.split() and "tsc=reliable" not in left
    else:
        assert "tsc=reliable" not in plan.cmdline_fragment and why in left["tsc=reliable"]
        assert f"left out: tsc=reliable" in plan_text(plan)


def test_this_machines_clocksource_is_read_as_sysfs_has_it():
    folder = Path("/sys/devices/system/clocksource/clocksource0")
    if not folder.is_dir():
        pytest.skip("this machine shows no clocksource in sysfs")
    clock = read_clocksource(SysRoot("/"))
    assert clock.current == (folder / "current_clocksource").read_text().strip()
    assert clock.available == tuple((folder / "available_clocksource").read_text().split())


def test_tuned_boot_words_each_with_why_and_intel_pstate_only_when_asked(tmp_path, capsys):
    root = machine_tree(tmp_path, {CLOCK + "current_clocksource": "tsc\n"})
    plan = make_plan(read_topology(root), "2-3", root=root)
    words = plan.cmdline_fragment.split()
    for word in ("nohz=on", "skew_tick=1", "rcupdate.rcu_normal_after_boot=1", "tsc=reliable", "nosoftlockup"):
        assert word in words and by_name(plan)[word.split("=")[0]].why, word
    assert "intel_pstate=disable" not in words
    assert "--intel-pstate-disable" in {w.word: w.why for w in plan.left_out}["intel_pstate=disable"]
    assert main(["plan", "--root", str(root.root), "-c", "2-3", "--intel-pstate-disable"]) == 0
    out = capsys.readouterr().out
    assert "intel_pstate=disable" in out.split("the words:\n")[1].split("\n")[0]
    assert "left out: intel_pstate" not in out
