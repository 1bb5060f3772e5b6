"""parse_stat on every /proc/stat sample: node_exporter, prometheus-procfs and the machine tarballs
(4..10 cpu fields across kernel versions)."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from app.errors import ParseError
from app.machine.interrupts import read_stat
from app.parse.stat import CpuTimes, parse_stat
from app.sysroot import SysRoot
from tests.machines import INTERRUPTS_DIR, all_machines, extract, procfs_composite


def _stat_files() -> list[Path]:
    files = sorted(INTERRUPTS_DIR.rglob("stat"))
    files = [f for f in files if f.is_file()]
    for m in all_machines():
        p = extract(m) / "proc" / "stat"
        if p.exists():
            files.append(p)
    files.append(procfs_composite() / "proc" / "stat")
    return files


@pytest.mark.parametrize("path", _stat_files(), ids=lambda p: str(p).split("/")[-3])
def test_every_stat_sample_parses(path):
    text = path.read_text()
    s = parse_stat(text, what=str(path))
    cpu_lines = [ln.split() for ln in text.splitlines() if ln.startswith("cpu") and ln[3:4].isdigit()]
    assert sorted(s.cpus) == sorted(int(t[0][3:]) for t in cpu_lines)
    for toks in cpu_lines:
        t = s.cpus[int(toks[0][3:])]
        assert [getattr(t, f) for f in ("user", "nice", "system", "idle")] == [int(x) for x in toks[1:5]]
    agg = next(ln.split() for ln in text.splitlines() if ln.startswith("cpu "))
    assert s.total.user == int(agg[1]) and s.total.idle == int(agg[4])
    intr = next((ln.split() for ln in text.splitlines() if ln.startswith("intr ")), None)
    assert s.intr_total == (int(intr[1]) if intr else None)


def test_known_values_and_field_counts():
    s = parse_stat((INTERRUPTS_DIR / "node_exporter" / "stat").read_text())
    assert s.cpus[7] == CpuTimes(29098, 268, 10164, 1139282, 555, 0, 31, 0, 9, 8)
    assert (s.ctxt, s.btime, s.processes, s.procs_running, s.procs_blocked) == (38014093, 1418183276, 26442, 2, 0)
    assert s.intr_total == 8885917 and s.softirq_total == 5057579
    # POWER7 (9 fields: no guest_nice), and an old kernel with 8 fields and no softirq line.
    ppc = parse_stat((extract("256ppc-8n8s4t") / "proc" / "stat").read_text())
    assert ppc.total.steal == 115628 and ppc.total.guest == 0 and ppc.total.guest_nice == 0
    old = parse_stat((extract("16em64t-4s2c2t-offlines") / "proc" / "stat").read_text())
    assert old.total.irq == 3245242 and old.softirq_total is None


def test_four_field_kernel_and_errors():
    s = parse_stat("cpu  1 2 3 4\ncpu0 1 2 3 4\n")
    assert s.cpus[0].total == 10 and s.cpus[0].iowait == 0
    for bad in ("", "intr 5\n", "cpu 1 2 3\n", "cpu 1 2 3 x\n", "cpuX 1 2 3 4\ncpu 1 2 3 4\n",
                "cpu 1 2 3 4\ncpu 1 2 3 4\n", "cpu 1 2 3 4\nctxt\n"):
        with pytest.raises(ParseError):
            parse_stat(bad)


def test_live_stat():
    s = read_stat(SysRoot("/"))
    assert s is not None and s.cpus and s.btime and s.total.total > 0


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("cpu0123456789 \nintrsoftirqctx\u0663+-_")), max_size=300))
def test_only_parse_error(text):
    try:
        parse_stat(text)
    except ParseError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(0, 500), st.lists(st.integers(0, 2**63), min_size=4, max_size=10),
                       max_size=8),
       st.lists(st.integers(0, 2**63), min_size=4, max_size=10), st.integers(0, 2**40))
def test_round_trip(cpus, total, ctxt):
    text = "cpu  " + " ".join(map(str, total)) + "\n"
    text += "".join(f"cpu{c} " + " ".join(map(str, v)) + "\n" for c, v in cpus.items())
    text += f"intr {ctxt} 0 1 2\nctxt {ctxt}\nsoftirq {ctxt + 1} 4 5\n"
    s = parse_stat(text)
    assert s.total == CpuTimes(*total) and s.cpus == {c: CpuTimes(*v) for c, v in cpus.items()}
    assert s.ctxt == ctxt and s.intr_total == ctxt and s.softirq_total == ctxt + 1
