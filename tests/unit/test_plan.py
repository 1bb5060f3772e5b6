"""coremap plan: the kernel command line fragment in the kernel's documented syntax (read back by the
same parser that reads /proc/cmdline), what is already in place on a real isolated node, the files."""
from __future__ import annotations

import re

import pytest

from app.cli.main import main
from app.machine.topology import read_topology
from app.parse.cpulist import parse_cpulist, parse_cpumask
from app.parse.topology import parse_cmdline_isolation
from app.quiet.boot_plan import PlanError, make_plan
from app.sysroot import SysRoot
from tests.machines import extract

# Documentation/admin-guide/kernel-parameters.txt: isolcpus= [flag-list,]<cpu-list>, the flags nohz,
# domain and managed_irq; nohz_full=, rcu_nocbs=, irqaffinity= take a <cpu-list>.
WORD = re.compile(r"(isolcpus)=((?:(?:nohz|domain|managed_irq),)*)([0-9,\-]+)$|"
                  r"(nohz_full|rcu_nocbs|irqaffinity)=([0-9,\-]+)$")


@pytest.fixture(scope="module")
def master():
    return read_topology(SysRoot(extract("master.internal")))


@pytest.fixture(scope="module")
def worker1():
    return read_topology(SysRoot(extract("worker1.internal")))


def test_fragment_follows_the_kernel_syntax_and_reads_back(master):
    plan = make_plan(master, "2-27,58-83")
    for word in plan.cmdline_fragment.split():
        assert WORD.match(word), word
    back = parse_cmdline_isolation(plan.cmdline_fragment)
    assert back.isolcpus == plan.quiet and set(back.isolcpus_flags) == {"managed_irq", "domain"}
    assert back.nohz_full == plan.quiet and back.rcu_nocbs == plan.quiet
    irqaff = dict(w.split("=", 1) for w in plan.cmdline_fragment.split())["irqaffinity"]
    assert parse_cpulist(irqaff) == plan.housekeeping
    assert set(plan.quiet) | set(plan.housekeeping) == set(master.online)
    assert not set(plan.quiet) & set(plan.housekeeping)


def test_says_what_the_running_kernel_already_has(worker1):
    # worker1 booted with isolcpus=managed_irq,0-4,11-79 nohz_full=0-4,11-79 rcu_nocbs=0-4,11-79, no irqaffinity
    plan = make_plan(worker1, "0-4,11-79")
    by = {p.name: p for p in plan.params}
    assert by["nohz_full"].in_place
    assert not by["isolcpus"].in_place and by["isolcpus"].running == "managed_irq,0-4,11-79"
    assert by["rcu_nocbs"].in_place
    assert not by["irqaffinity"].in_place and by["irqaffinity"].running is None


def test_files_carry_the_lists(master):
    plan = make_plan(master, "4-5", service="trading")
    text = {f.name: f.text for f in plan.files}
    assert "isolated_cores=4-5\n" in text["cpu-partitioning-variables.conf"]
    assert "IRQBALANCE_BANNED_CPULIST=4-5\n" in text["irqbalance"]
    mask = re.search(r"IRQBALANCE_BANNED_CPUS=([0-9a-f,]+)", text["irqbalance"]).group(1)
    assert parse_cpumask(mask) == (4, 5)
    assert "[Service]\nCPUAffinity=4-5\n" in text["trading.service.coremap-cpuaffinity.conf"]
    assert "[Manager]\nCPUAffinity=" in text["coremap-housekeeping.conf"]
    assert any("share a core" in n or "shares a core" in n for n in plan.notes)   # 4 and 5 have siblings 60, 61


@pytest.mark.parametrize("quiet, why", [("0-111", "leaves no CPU"), ("200", "not online"), ("2-x", "not a CPU number"),
                                        ("", "names no CPU")])
def test_bad_quiet_sets(master, quiet, why):
    with pytest.raises(PlanError, match=why):
        make_plan(master, quiet)


def test_bad_service_name(master):
    with pytest.raises(PlanError, match="unit name"):
        make_plan(master, "3", service="x; rm -rf /")


def test_cli_writes_a_folder_and_applies_nothing(tmp_path, capsys):
    root = extract("master.internal")
    before = (root / "proc" / "cmdline").read_text()
    assert main(["plan", "--quiet", "3", "--root", str(root), "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert "isolcpus=managed_irq,domain,3 nohz_full=3 rcu_nocbs=3" in out
    names = sorted(p.name for p in (tmp_path / "plan").iterdir())
    assert names == ["cmdline.txt", "coremap-housekeeping.conf", "cpu-partitioning-variables.conf", "irqbalance",
                     "plan.txt"]
    assert (root / "proc" / "cmdline").read_text() == before
