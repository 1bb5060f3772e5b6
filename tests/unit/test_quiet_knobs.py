"""tuned's knobs in an isolate (issue 30): each one the user ticks is one journalled step of the isolate's
batch, named in the preview with tuned's reason, written into a writable copy of a real machine (hwloc's
Raptor Lake hybrid: per-CPU cpufreq policies, governor powersave) and given back exactly by undo, Give
back and restore; a knob the machine lacks is a note and nothing is written. The knob files the capture
lacks are added with the kernel's defaults, the way the kernel shows them. Live on this VM: an isolate
of CPU 1 with the hung-task, NUMA balancing and THP knobs, given back, leaves the machine's fingerprint
(tests/live.py, the knobs included) as it was."""
from __future__ import annotations

import os
import shutil
import struct

import pytest

from app.cli.main import main
from app.format import number_value, value_number
from app.pinning.journal import Journal
from app.pinning.service import AffinityService, PinTarget
from app.quiet.guard import Guard
from app.quiet.isolate import LocalQuiet, QuietError, preview_text
from app.quiet.knobs import WORDS
from app.sysroot import SysRoot
from tests.live import fingerprint_diff, live_test, machine_fingerprint, restore_quiet
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree

QUIET = (2, 3)
# The knob files the capture lacks, with the kernel's defaults as it shows them
# (Documentation/admin-guide/sysctl/kernel.rst, mm/transhuge.rst, mm/ksm.rst, pm/intel_epb.rst).
KNOB_FILES = {"proc/sys/kernel/hung_task_timeout_secs": "120\n", "proc/sys/kernel/numa_balancing": "1\n",
              "proc/sys/kernel/sched_rt_runtime_us": "950000\n", "sys/kernel/mm/ksm/run": "1\n",
              "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
              "proc/sys/kernel/timer_migration": "1\n", "proc/sys/vm/stat_interval": "1\n"}


@pytest.fixture
def tree(tmp_path) -> SysRoot:
    src = extract("20em64t-hybrid-1p6c2t+2ca4co1t")
    dst = tmp_path / "hybrid"
    copy_machine(src, dst, only=("sys/devices/system/cpu", "proc"), leave_out=(CPU_CACHES,))
    for rel, text in KNOB_FILES.items():
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_text(text)
    for cpu in range(20):
        (dst / f"sys/devices/system/cpu/cpu{cpu}/power").mkdir(exist_ok=True)
        (dst / f"sys/devices/system/cpu/cpu{cpu}/power/energy_perf_bias").write_text("6\n")
    (dst / "dev").mkdir()
    (dst / "dev" / "cpu_dma_latency").write_bytes(struct.pack("i", 2000000000))
    return SysRoot(writable_test_tree(dst))


@pytest.fixture
def service(tree, tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    yield AffinityService(tree, j)
    j.close()


def knobs_now(root: SysRoot) -> dict[str, str | None]:
    """Every knob's value, read straight from the tree's files (the oracle): THP's bracketed word (or the
    one word coremap wrote), the numbers as written."""
    out = {}
    for rel in KNOB_FILES:
        p = root.root / rel
        text = p.read_text().strip() if p.exists() else None
        if text is not None and rel.endswith("enabled"):
            words = text.split()
            text = next((w.strip("[]") for w in words if w.startswith("[")), words[0])
        out[rel] = text
    for cpu in range(20):
        for rel in (f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor",
                    f"sys/devices/system/cpu/cpu{cpu}/power/energy_perf_bias"):
            out[rel] = (root.root / rel).read_text().strip()
    return out


# -- the preview ---------------------------------------------------------------------------------------------
def test_every_knob_is_a_step_named_with_tunes_reason_and_nothing_is_written(tree, service):
    before = knobs_now(tree)
    p = LocalQuiet(service).preview("isolate", QUIET, knobs=tuple(w for w in WORDS if w != "thp_never"))  # THP madvise
    got = {m.target.describe(): m for m in p.moves if m.group == "setting"}
    lines = {k: m.line() for k, m in got.items()}
    assert lines["kernel.hung_task_timeout_secs"].startswith("kernel.hung_task_timeout_secs: 120 -> 600 (tuned's")
    assert lines["kernel.numa_balancing"].startswith("kernel.numa_balancing: 1 -> 0 (tuned's")
    assert lines["kernel.sched_rt_runtime_us"].startswith("kernel.sched_rt_runtime_us: 950000 -> -1 (tuned's")
    assert lines["KSM (mm/ksm/run)"].startswith("KSM (mm/ksm/run): 1 -> 0 (tuned's")
    assert lines["transparent huge pages"].startswith("transparent huge pages: always -> madvise (")
    assert lines["/dev/cpu_dma_latency"].startswith("/dev/cpu_dma_latency: not held -> held at 0 µs (tuned's")
    for cpu in QUIET:       # the quiet CPUs only: each its own policy here (affected_cpus is the CPU)
        assert lines[f"CPU {cpu} cpufreq governor"].startswith(f"CPU {cpu} cpufreq governor: powersave -> performance")
        assert lines[f"CPU {cpu} energy_perf_bias"].startswith(f"CPU {cpu} energy_perf_bias: 6 -> 0 (tuned's")
    assert not any(k in lines for k in ("CPU 1 cpufreq governor", "CPU 4 energy_perf_bias"))
    assert all("tuned's" in m.note or "madvise" in m.note for m in got.values()), lines
    assert p.options == tuple(w for w in WORDS if w != "thp_never")
    assert "kernel.hung_task_timeout_secs: 120 -> 600" in preview_text(p)
    assert knobs_now(tree) == before and service.journal.entries() == []


def test_unticked_knobs_are_not_touched(tree, service):
    p = LocalQuiet(service).preview("isolate", QUIET)
    kinds = {m.target.kind for m in p.moves}
    assert kinds == {"sysctl"} and {m.target.label for m in p.moves} == {"kernel.timer_migration", "vm.stat_interval"}


@pytest.mark.parametrize("knobs, why", [
    (("thp_never", "thp_madvise"), "never or madvise, not both"),
    (("hung_task", "swap_off"), "unknown knob 'swap_off'; choose from hung_task"),
])
def test_a_bad_knob_set_is_refused_before_anything(tree, service, knobs, why):
    with pytest.raises(QuietError, match=why):
        LocalQuiet(service).preview("isolate", QUIET, knobs=knobs)
    assert service.journal.entries() == []


def test_an_absent_knob_is_a_note_and_nothing_is_written_or_restored(tree, service):
    shutil.rmtree(tree.root / "sys" / "kernel" / "mm" / "ksm")
    (tree.root / "proc/sys/kernel/numa_balancing").unlink()
    p = LocalQuiet(service).preview("isolate", QUIET, knobs=("ksm", "numa_balancing", "hung_task"))
    assert "KSM (mm/ksm/run) is not on this machine: nothing to set" in p.notes
    assert "kernel.numa_balancing is not on this machine: nothing to set" in p.notes
    assert not any(m.target.label in ("KSM (mm/ksm/run)", "kernel.numa_balancing") for m in p.moves)
    LocalQuiet(service).apply(p)
    assert {e.label for e in service.journal.entries()} >= {"kernel.hung_task_timeout_secs"}
    assert not any(e.label.startswith(("KSM", "kernel.numa")) for e in service.journal.entries())
    service.restore_all()
    assert not (tree.root / "sys/kernel/mm/ksm").exists()
    assert not (tree.root / "proc/sys/kernel/numa_balancing").exists()
    assert (tree.root / "proc/sys/kernel/hung_task_timeout_secs").read_text() == "120\n"


def test_a_value_coremap_cannot_give_back_is_left_alone(tree, service):
    (tree.root / "proc/sys/kernel/hung_task_timeout_secs").write_text("99999999999\n")   # beyond 32 bits
    (tree.root / "sys/devices/system/cpu/cpufreq/policy2/scaling_governor").write_text("mygov\n")
    p = LocalQuiet(service).preview("isolate", QUIET, knobs=("hung_task", "performance"))
    assert not any(m.target.label == "kernel.hung_task_timeout_secs" for m in p.moves)
    assert any("'99999999999' is not a value coremap can journal" in n for n in p.notes), p.notes
    assert any("'mygov' is not a value coremap can journal" in n for n in p.notes), p.notes
    assert {m.target.describe() for m in p.moves if m.target.kind == "governor"} == {"CPU 3 cpufreq governor"}


# -- written, and given back ----------------------------------------------------------------------------------
def _isolate_all(service):
    p = LocalQuiet(service).preview("isolate", QUIET, knobs=("hung_task", "numa_balancing", "ksm", "thp_never",
                                                             "performance", "force_latency", "rt_runtime"))
    results = LocalQuiet(service).apply(p)
    bad = [r.line() for r in results if not r.ok]
    assert not bad, bad
    return p


def test_each_knob_is_journalled_written_and_undo_restores_exactly(tree, service):
    before = knobs_now(tree)
    _isolate_all(service)
    now = knobs_now(tree)
    assert now["proc/sys/kernel/hung_task_timeout_secs"] == "600"
    assert now["proc/sys/kernel/numa_balancing"] == "0" and now["sys/kernel/mm/ksm/run"] == "0"
    assert now["proc/sys/kernel/sched_rt_runtime_us"] == "-1"
    assert now["sys/kernel/mm/transparent_hugepage/enabled"] == "never"
    for cpu in QUIET:
        assert now[f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"] == "performance"
        assert now[f"sys/devices/system/cpu/cpu{cpu}/power/energy_perf_bias"] == "0"
    changed = {k for k in now if now[k] != before[k]}
    assert all("cpu2/" in k or "cpu3/" in k or k in KNOB_FILES for k in changed), changed
    entries = {(e.kind, e.label or e.target_id): e for e in service.journal.entries()}
    rt = entries[("sysctl", "kernel.sched_rt_runtime_us")]
    assert value_number(rt.before) == 950000 and value_number(rt.after) == -1 and rt.state == "done"
    assert entries[("dmalatency", 0)].after == (0,)
    service.undo()
    assert knobs_now(tree) == before
    assert service.read_affinity(PinTarget("dmalatency", 0)) == ()


def test_give_back_returns_a_cpus_own_knobs_then_the_machines_with_the_last(tree, service):
    before = knobs_now(tree)
    _isolate_all(service)
    LocalQuiet(service).apply(LocalQuiet(service).preview("include", (2,)))
    now = knobs_now(tree)
    assert now["sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"] == "powersave"
    assert now["sys/devices/system/cpu/cpu2/power/energy_perf_bias"] == "6"
    assert now["sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"] == "performance"
    assert now["proc/sys/kernel/hung_task_timeout_secs"] == "600"       # CPU 3 is still quiet
    last = LocalQuiet(service).preview("include", (3,))
    assert any(m.line().startswith("kernel.sched_rt_runtime_us: -1 -> 950000") for m in last.moves)
    LocalQuiet(service).apply(last)
    assert knobs_now(tree) == before
    assert service.read_affinity(PinTarget("dmalatency", 0)) == ()


def test_restore_returns_every_knob(tree, service):
    before = knobs_now(tree)
    _isolate_all(service)
    service.restore_all()
    assert knobs_now(tree) == before


def test_a_knob_changed_since_by_someone_else_is_left_by_the_give_back(tree, service):
    _isolate_all(service)
    (tree.root / "proc/sys/kernel/hung_task_timeout_secs").write_text("300\n")
    p = LocalQuiet(service).preview("include", QUIET)
    assert any(s.line() == "kernel.hung_task_timeout_secs: set to 300 since by someone else; left as it is"
               for s in p.stays)
    LocalQuiet(service).apply(p)
    assert (tree.root / "proc/sys/kernel/hung_task_timeout_secs").read_text() == "300\n"


# -- the guard ---------------------------------------------------------------------------------------------------
def test_the_guard_holds_dma_latency_while_asked_and_lets_go_after_undo(tree, service):
    guard = Guard(service)
    try:
        assert guard.tick().notes == [] and guard.latency.fd is None
        _isolate_all(service)
        said = guard.tick().notes
        assert said == [f"{tree.root}/dev/cpu_dma_latency held at 0 µs while the guard runs"], said
        assert guard.latency.fd is not None
        assert (tree.root / "dev" / "cpu_dma_latency").read_bytes() == struct.pack("i", 0)
        assert guard.tick().events == []               # the request itself is not a change to report
        service.undo()
        assert guard.tick().notes == [f"{tree.root}/dev/cpu_dma_latency released (was held at 0 µs)"]
        assert guard.latency.fd is None
    finally:
        guard.close()


def test_the_guard_sees_a_wide_setting_change_a_set_would_hide(tree, service):
    """-1 is journalled as (1, 0, 1) and 65536 as (0, 1, 0): the same set {0, 1}. Compared as sets,
    the guard missed sched_rt_runtime_us put back from -1 to 65536."""
    _isolate_all(service)
    guard = Guard(service)
    try:
        assert guard.tick().events == []
        (tree.root / "proc/sys/kernel/sched_rt_runtime_us").write_text("65536\n")
        [ev] = guard.tick().events
        assert ev.label == "kernel.sched_rt_runtime_us" and value_number(ev.found) == 65536
    finally:
        guard.close()


@pytest.mark.parametrize("n", [0, 1, 65535, 65536, 950000, -1, -950000, (1 << 32) - 1])
def test_a_number_round_trips_through_the_journals_integers(n):
    v = number_value(n)
    assert value_number(v) == n and all(0 <= x <= 65535 for x in v)


def test_the_cli_takes_each_knob_and_a_dry_run_names_them(tree, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    before = knobs_now(tree)
    assert main(["isolate", "--root", str(tree.root), "-c", "2-3", "--dry-run", "--hung-task", "--no-numa-balancing",
                 "--no-ksm", "--thp", "never", "--performance", "--force-latency", "--no-rt-throttling"]) == 0
    out = capsys.readouterr().out
    for line in ("kernel.hung_task_timeout_secs: 120 -> 600", "kernel.numa_balancing: 1 -> 0", "KSM (mm/ksm/run): 1 -> 0",
                 "transparent huge pages: always -> never", "CPU 2 cpufreq governor: powersave -> performance",
                 "CPU 3 energy_perf_bias: 6 -> 0", "/dev/cpu_dma_latency: not held -> held at 0 µs",
                 "kernel.sched_rt_runtime_us: 950000 -> -1"):
        assert f"    {line} (" in out, line
    assert knobs_now(tree) == before


# -- live ----------------------------------------------------------------------------------------------------------
@live_test
def test_live_isolate_with_knobs_and_give_back_leaves_the_machine_as_it_was(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    svc = AffinityService(SysRoot("/"), Journal(tmp_path / "state" / "journal.jsonl"))
    before = machine_fingerprint()
    try:
        assert main(["isolate", "-c", "1", "--hung-task", "--no-numa-balancing", "--thp", "never"]) == 0
        out = capsys.readouterr().out
        during = machine_fingerprint()
        assert during["/proc/sys/kernel/hung_task_timeout_secs"] == "600", out
        assert "[never]" in during["/sys/kernel/mm/transparent_hugepage/enabled"]
        if before["/proc/sys/kernel/numa_balancing"] is not None:
            assert during["/proc/sys/kernel/numa_balancing"] == "0"
        assert main(["include", "-c", "1"]) in (0, 1)
        assert fingerprint_diff(before, machine_fingerprint()) == []
    finally:
        restore_quiet(svc)
        svc.journal.close()


def _dma_latency() -> int:
    with open("/dev/cpu_dma_latency", "rb") as f:
        return struct.unpack("i", f.read(4))[0]


@live_test
def test_live_force_latency_is_held_by_the_guard_and_let_go_by_the_give_back(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    svc = AffinityService(SysRoot("/"), Journal(tmp_path / "state" / "journal.jsonl"))
    guard = Guard(svc)
    try:
        assert main(["isolate", "-c", "1", "--force-latency"]) == 0
        assert "/dev/cpu_dma_latency is held by `coremap guard`" in capsys.readouterr().out
        assert guard.tick().notes == ["/dev/cpu_dma_latency held at 0 µs while the guard runs"]
        fd = guard.latency.fd
        assert os.readlink(f"/proc/self/fd/{fd}") == "/dev/cpu_dma_latency" and _dma_latency() == 0
        assert main(["include", "-c", "1"]) in (0, 1)
        assert guard.tick().notes == ["/dev/cpu_dma_latency released (was held at 0 µs)"]
        assert guard.latency.fd is None
        assert not os.path.exists(f"/proc/self/fd/{fd}") or os.readlink(f"/proc/self/fd/{fd}") != "/dev/cpu_dma_latency"
    finally:
        guard.close()
        restore_quiet(svc)
        svc.journal.close()
