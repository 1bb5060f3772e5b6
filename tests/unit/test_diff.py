"""`coremap diff A B` (issue 30, "Diff"): two captures, or a capture and this machine, compared group by
group; on the fixtures worker1 and worker2 its lines are checked against the captured files themselves."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.parse.cpulist import format_cpulist, parse_cpulist, parse_cpumask
from app.store.capture import take_snapshot
from app.sysroot import SysRoot
from tests.machines import MACHINES_DIR, copy_machine, extract


def _diff(capsys, *argv) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(["diff", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _group(doc: dict, name: str) -> dict:
    return {c["what"]: c for c in next(g for g in doc["groups"] if g["name"] == name)["changes"]}


def _model(root: Path) -> str:
    return re.search(r"^model name\s*:\s*(.+)$", (root / "proc" / "cpuinfo").read_text(), re.M).group(1).strip()


def _cmdline_word(root: Path, key: str) -> str | None:
    words = [w.partition("=")[2] for w in (root / "proc" / "cmdline").read_text().split() if w.startswith(key + "=")]
    return " ".join(words) or None


def test_worker1_and_worker2_differ_as_their_files_do(capsys):
    w1, w2 = extract("worker1.internal"), extract("worker2.internal")
    rc, doc = _diff(capsys, str(w1), str(w2))
    assert rc == 1 and doc["same"] is False
    topo = _group(doc, "Topology")
    assert (topo["model"]["a"], topo["model"]["b"]) == (_model(w1), _model(w2))
    cpus = [len([d for d in os.listdir(w / "sys/devices/system/cpu") if re.fullmatch(r"cpu\d+", d)]) for w in (w1, w2)]
    assert (topo["CPUs"]["a"], topo["CPUs"]["b"]) == (str(cpus[0]), str(cpus[1])) == ("80", "32")
    cmd = _group(doc, "Command line")
    for key in ("isolcpus", "nohz_full", "systemd.cpu_affinity", "tuned.non_isolcpus"):
        assert (cmd[key]["a"], cmd[key]["b"]) == (_cmdline_word(w1, key), _cmdline_word(w2, key)), key
    assert cmd["isolcpus"]["a"] == "managed_irq,0-4,11-79" and cmd["isolcpus"]["b"] is None
    assert "intel_iommu" in cmd and "rw" not in cmd          # both have `rw`: not a difference
    masks = _group(doc, "Kernel masks")
    default = [format_cpulist(parse_cpumask((w / "proc/irq/default_smp_affinity").read_text())) for w in (w1, w2)]
    assert [(c["a"], c["b"]) for c in masks.values() if "default IRQ affinity" in c["what"]] == [tuple(default)]
    # IRQ 8 (rtc0 on both) asks for node 0's CPUs on each machine: one change, its items naming it.
    irqs = _group(doc, "IRQs")
    rtc = [(w / "proc/irq/8/smp_affinity_list").read_text().strip() for w in (w1, w2)]
    moved = [c for c in irqs.values() if "8 rtc0" in c["items"] and c["what"].startswith("requested CPUs")]
    assert [(format_cpulist(parse_cpulist(c["a"])), format_cpulist(parse_cpulist(c["b"]))) for c in moved] == \
        [tuple(format_cpulist(parse_cpulist(r)) for r in rtc)]
    # worker1's IOMMU remapping IRQs (intel_iommu=on) are not on worker2, which boots without it.
    only_a = next(c for c in irqs.values() if c["what"].endswith("only in A"))
    assert "24 dmar5" in only_a["items"] and "dmar" not in (w2 / "proc/interrupts").read_text()
    # CPUs 32-79 are worker1's alone; the grid marks them.
    assert all("online in A only" in doc["cpus"][str(c)] for c in range(32, 80))
    threads = next(g for g in doc["groups"] if g["name"] == "Threads")
    assert threads["changes"] == [] and "no threads" in threads["note"]


def test_the_printed_diff_is_grouped_and_says_where_the_rest_is(capsys):
    w1, w2 = extract("worker1.internal"), extract("worker2.internal")
    assert main(["diff", str(w1), str(w2)]) == 1
    out = capsys.readouterr().out
    assert out.index("Topology:") < out.index("Command line:") < out.index("IRQs:") < out.index("Threads:")
    assert "  isolcpus: managed_irq,0-4,11-79 -> absent" in out
    assert "CPUs whose IRQs differ: 0-79" in out


def test_a_capture_compared_with_itself_differs_in_nothing(capsys):
    sno = extract("sno")
    rc, doc = _diff(capsys, str(sno), str(sno))
    assert rc == 0 and doc["same"] and doc["cpus"] == {}


def test_a_capture_by_another_tool_is_read_from_its_tarball(capsys):
    """A must-gather's sysinfo.tgz (proc/, sys/ and machineinfo.json at its top) is checked and
    extracted the one way a tarball is, and is the machine extracted by hand."""
    rc, doc = _diff(capsys, str(MACHINES_DIR / "openshift-nto" / "sno.sysinfo.tgz"), str(extract("sno")))
    assert rc == 0 and doc["same"]


CHILD = """
import ctypes, os, sys, threading
def work():
    ctypes.CDLL(None).prctl(15, b"diff-moved", 0, 0, 0)
    os.sched_setaffinity(0, {int(sys.argv[1])})
    print(threading.get_native_id(), flush=True)
    sys.stdin.readline()
    os.sched_setaffinity(0, {int(sys.argv[2])})
    print("moved", flush=True)
    threading.Event().wait()
threading.Thread(target=work, daemon=True).start()
threading.Event().wait()
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to move a thread between")
def test_this_machine_against_its_capture_shows_the_thread_that_moved(live_machine, tmp_path, capsys):
    a, b = sorted(os.sched_getaffinity(0))[:2]
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(a), str(b)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        tid = int(child.stdout.readline())
        proc = Path(f"/proc/{child.pid}/comm").read_text().strip()
        res = take_snapshot(tmp_path / "before.tar.gz", SysRoot("/"), second=False)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "moved"
        rc, doc = _diff(capsys, str(res.path), "live")
    finally:
        child.kill()
        child.wait(10)
    assert rc == 1
    for same in ("Topology", "Command line", "Isolation", "Kernel masks"):
        assert _group(doc, same) == {}, same
    moved = _group(doc, "Threads")[f"{proc} / diff-moved"]
    assert (moved["a"], moved["b"]) == (f"CPUs {a}, other", f"CPUs {b}, other")


def _device_shares(root: Path) -> dict[int, float]:
    """Each CPU's share of the numbered IRQs' counts, read from /proc/interrupts by hand."""
    lines = (root / "proc" / "interrupts").read_text().splitlines()
    cpus = [int(c[3:]) for c in lines[0].split()]
    per = dict.fromkeys(cpus, 0)
    for ln in lines[1:]:
        head, _, rest = ln.partition(":")
        if head.strip().isdigit():
            for c, n in zip(cpus, rest.split()[:len(cpus)]):
                per[c] += int(n)
    total = sum(per.values())
    return {c: n / total for c, n in per.items()}


def _effective_on(root: Path, cpu: int) -> set[str]:
    out = set()
    for d in (root / "proc" / "irq").iterdir():
        f = d / "effective_affinity_list"
        if d.name.isdigit() and f.exists() and f.read_text().strip() and cpu in parse_cpulist(f.read_text()):
            out.add(d.name)
    return out


def test_the_marked_cpus_are_where_their_irq_load_or_placement_differs(capsys):
    w1, w2 = extract("worker1.internal"), extract("worker2.internal")
    _rc, doc = _diff(capsys, str(w2), str(w1))
    sa, sb = _device_shares(w2), _device_shares(w1)
    for cpu in range(32):
        hi = max(sa[cpu], sb[cpu])
        loaded = hi >= 0.01 and min(sa[cpu], sb[cpu]) < hi / 2
        assert ("IRQ load differs" in doc["cpus"].get(str(cpu), "")) == loaded, cpu
        if loaded:
            assert f"{sa[cpu]:.1%} of device interrupts in A, {sb[cpu]:.1%} in B" in doc["cpus"][str(cpu)]
    assert any("IRQ load differs" in why for why in doc["cpus"].values())
    # CPU 0's IRQs by their effective CPUs: worker2 delivers some there that worker1 does not, and back.
    on_a, on_b = _effective_on(w2, 0), _effective_on(w1, 0)
    assert on_a != on_b and "IRQ placement differs" in doc["cpus"]["0"]


def _with_comm(src: Path, dst: Path, comm: str) -> Path:
    """A copy of prometheus/procfs's tree whose first thread is called `comm`."""
    copy_machine(src, dst)
    stat = next((dst / "proc").glob("[0-9]*/task/[0-9]*/stat"))
    text = stat.read_text()
    stat.write_text(text[:text.index("(") + 1] + comm + text[text.rindex(")"):])
    return dst


def test_a_kworker_is_the_same_worker_whatever_it_works_on_now(tmp_path, capsys):
    from tests.machines import procfs_composite
    src = procfs_composite()
    a = _with_comm(src, tmp_path / "a", "kworker/1:1-events")
    b = _with_comm(src, tmp_path / "b", "kworker/1:1-mm_percpu_wq")
    c = _with_comm(src, tmp_path / "c", "kworker/1:2-events")
    assert _group(_diff(capsys, str(a), str(b))[1], "Threads") == {}
    moved = _group(_diff(capsys, str(a), str(c))[1], "Threads")
    assert {k.split(" / ")[0] for k in moved} == {"kworker/1:1", "kworker/1:2"}
