"""Which CPUs are isolated, and by which flags (issue 30, wrong answer 6): isolcpus= takes CPUs off the
scheduler only with its domain flag or with no flag at all (kernel/sched/isolation.c); managed_irq or
nohz alone leave the scheduler balancing onto them. worker1 boots with isolcpus=managed_irq,0-4,11-79
nohz_full=0-4,11-79 and was shown as isolated; the other cases are a small real machine's copy with its
command line written in and its own cpu/isolated and cpu/nohz_full files taken out (or set)."""
from __future__ import annotations


import pytest

from app.cli.main import main
from app.machine.topology import isolation_label, read_topology
from app.parse.topology import parse_cmdline_isolation
from app.sysroot import SysRoot
from tests.machines import copy_machine, extract

CPU_DIR = "sys/devices/system/cpu"


@pytest.fixture
def two_cpus(tmp_path):
    """linux-amd64-offlineCPUs (CPUs 0-1 online) without its isolated and nohz_full files."""
    dest = tmp_path / "m"
    copy_machine("linux-amd64-offlineCPUs", dest)
    for name in ("isolated", "nohz_full"):
        (dest / CPU_DIR / name).unlink()
    return dest


def _boot(root, cmdline: str, isolated_file: str | None = None):
    (root / "proc" / "cmdline").write_text(f"BOOT_IMAGE=/vmlinuz ro {cmdline}\n")
    if isolated_file is not None:
        (root / CPU_DIR / "isolated").write_text(isolated_file + "\n")
    return read_topology(SysRoot(root))


@pytest.mark.parametrize("cmdline, isolated, flags", [
    ("isolcpus=1", (1,), ("domain",)),                       # a bare list means domain
    ("isolcpus=domain,managed_irq,1 nohz_full=1", (1,), ("domain", "managed_irq", "nohz_full")),
    ("isolcpus=managed_irq,1 nohz_full=1", (), ("managed_irq", "nohz_full")),
    ("isolcpus=nohz,1", (), ("nohz",)),
    ("nohz_full=1", (), ("nohz_full",)),
])
def test_only_the_domain_flag_isolates_from_the_scheduler(two_cpus, cmdline, isolated, flags):
    t = _boot(two_cpus, cmdline)
    assert t.isolated == isolated and t.cpu(1).isolated == bool(isolated)
    assert t.isolation_of(1) == flags and t.isolation_of(0) == ()
    assert t.isolation_groups() == ((flags, (1,)),)
    assert parse_cmdline_isolation(cmdline).scheduler_isolated == isolated


def test_the_kernels_isolated_file_wins_over_the_command_line(two_cpus):
    t = _boot(two_cpus, "isolcpus=managed_irq,1", isolated_file="1")
    assert t.isolated == (1,) and t.isolation_of(1) == ("domain", "managed_irq")
    t = _boot(two_cpus, "isolcpus=1", isolated_file="")
    assert t.isolated == () and t.isolcpus == (1,) and t.isolation_of(1) == ()
    assert not any("isolcpus" in n for n in t.notes), "the file was read: no note of the command line"


def test_labels_say_isolated_only_with_domain():
    assert isolation_label(("domain", "managed_irq", "nohz_full")) == "isolated (domain, managed_irq, nohz_full)"
    assert isolation_label(("managed_irq", "nohz_full")) == "managed_irq, nohz_full"
    assert isolation_label(()) == ""


def test_worker1_is_not_isolated_and_its_flags_are_named(capsys):
    root = extract("worker1.internal")
    t = read_topology(SysRoot(root))
    assert t.isolated == () and not any(c.isolated for c in t.cpus)
    assert t.isolation_groups() == ((("managed_irq", "nohz_full"), (*range(0, 5), *range(11, 80))),)
    assert main(["topology", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "Isolated CPU(s):     (none)\n" in out
    assert "Isolation flags:     0-4,11-79: managed_irq, nohz_full\n" in out
    from app.cli.cpus import quiet_kinds
    kinds = quiet_kinds(SysRoot(root), t)
    assert kinds[11] == "managed_irq, nohz_full" and 5 not in kinds


def test_report_names_what_isolcpus_holds_and_that_it_does_not_isolate():
    from app.store.report import report_from_root
    facts = dict(report_from_root(SysRoot(extract("worker1.internal"))).facts)
    assert facts["isolcpus"] == "0-4,11-79 (flags: managed_irq), not isolated from the scheduler (no domain flag)"


def test_diff_tells_the_cpus_isolcpus_names_from_those_it_isolates(capsys):
    assert main(["diff", str(extract("worker1.internal")), str(extract("worker2.internal"))]) == 1
    out = capsys.readouterr().out
    assert "  isolcpus CPUs: 0-4,11-79 -> absent\n" in out
    assert "isolated CPUs" not in out          # neither has a CPU the scheduler leaves alone
