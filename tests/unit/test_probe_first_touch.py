"""The first-touch probe (probes/first_touch.py, probes/_touch.c), sizes (app/parse/size.py) and
/proc/meminfo (app/parse/meminfo.py).

Oracles: the kernel's rule for anonymous memory without huge pages (one minor fault per 4 KiB page
on the first write, none on the second); /proc/self/maps (a mapping is there, then gone); the
kernel's own MemAvailable; the node list in sysfs.
"""
from __future__ import annotations

import gc
import json
import os

import pytest

from app.parse.meminfo import parse_meminfo
from app.parse.size import SizeError, parse_size
from app.sysroot import SysRoot
from probes.first_touch import memory_nodes, summarize, system_thp, thp_advice
from probes.runner import run_to_end

native = pytest.importorskip("probes._native", reason="build probes._native with `pip install -e .`")

CPU = sorted(os.sched_getaffinity(0))[-1]
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("text, size", [("4096", 4096), ("64K", 64 << 10), ("64k", 64 << 10), ("512M", 512 << 20),
                                        ("1G", 1 << 30), ("1GiB", 1 << 30), ("1gb", 1 << 30), ("1.5G", 3 << 29),
                                        (" 2 T ", 2 << 40), (".5K", 512)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "1X", "-1G", "1e9", "nan", "inf", "1GG", "0x10", "١G", "9" * 70,
                                  "99999999999T"])
def test_garbage_sizes_are_one_line(text):
    with pytest.raises(SizeError) as e:
        parse_size(text, what="--size")
    assert "\n" not in str(e.value) and str(e.value).startswith("--size ")


def test_meminfo_in_bytes():
    m = parse_meminfo("MemTotal:       24684132 kB\nMemAvailable:   19000000 kB\nHugePages_Total:       0\n")
    assert m == {"MemTotal": 24684132 * 1024, "MemAvailable": 19000000 * 1024, "HugePages_Total": 0}
    live = parse_meminfo(SysRoot("/").read(SysRoot("/").proc("meminfo")))
    assert 0 < live["MemAvailable"] <= live["MemTotal"]


@pytest.mark.parametrize("asked, system, advice", [
    (None, "madvise", "none"), ("never", "always", "nohugepage"), ("madvise", "madvise", "hugepage"),
    ("always", "madvise", "hugepage"), ("always", "always", "none"), ("madvise", "never", "none"),
    ("never", None, "none")])
def test_thp_advice(asked, system, advice):
    assert thp_advice(asked, system)[0] == advice


def test_a_dropped_region_is_unmapped():
    region = native.touch_map(4 << 20, "nohugepage", -1)
    address, length = native.touch_address(region)
    assert address % (2 << 20) == 0 and length == 4 << 20          # aligned for huge pages

    def mapped():
        with open("/proc/self/maps") as f:
            return any(int(line.split("-")[0], 16) == address for line in f)
    r = native.touch_pages(region, 0, length, PAGE, True, 0.0)
    assert r["pages"] == length // PAGE and r["minor_faults"] == length // PAGE and mapped()
    del region
    gc.collect()
    assert not mapped()


@pytest.mark.usefixtures("live_machine")
def test_first_touch_faults_every_page_the_second_none():
    rc, lines, run = run_to_end("first-touch", ["--cpu", CPU, "--size", "32M", "--thp", "never"], timeout=60)
    assert rc == 0, (lines[-1:], run.stderr_lines)
    s = summarize(lines)
    pages = (32 << 20) // PAGE
    (row,) = [r for r in s["nodes"] if r["node"] == memory_nodes(SysRoot("/"))[0]] if len(s["nodes"]) > 1 else s["nodes"]
    f, second = row["first"], row["second"]
    assert f["pages"] == second["pages"] == pages
    assert f["minor_faults"] == pages and second["minor_faults"] == 0
    assert row["huge_pages"] == 0 and row["ratio"] > 3                 # a fault costs more than a write
    assert f["percentiles"]["p50"] <= f["percentiles"]["max"]
    assert row["on_node_share"] == 1.0                                 # mbind put every sampled page there
    assert s["process_minor_faults"] >= pages
    assert s["thp"]["advice"] == "nohugepage"
    if len(memory_nodes(SysRoot("/"))) == 1:
        assert s["table_note"] == "one NUMA node: no remote memory to compare" and len(s["nodes"]) == 1
    assert s["verdict"].startswith("first touch ") and f"{pages:,} minor faults for {pages:,} pages" in s["verdict"]
    # one line per stretch and touch, then the node's line
    assert sum(1 for l in lines if l.get("touch") == 1) == sum(1 for l in lines if l.get("touch") == 2)


@pytest.mark.skipif(system_thp(SysRoot("/"))["enabled"] in (None, "never"), reason="no transparent huge pages")
@pytest.mark.usefixtures("live_machine")
def test_huge_pages_when_asked():
    rc, lines, run = run_to_end("first-touch", ["--cpu", CPU, "--size", "32M", "--thp", "madvise"], timeout=60)
    assert rc == 0, (lines[-1:], run.stderr_lines)
    row = summarize(lines)["nodes"][0]
    # 16 huge pages of 2 MiB when memory is not fragmented; at least some, and far fewer faults than pages
    assert row["huge_pages"] >= 1 and row["first"]["minor_faults"] < row["first"]["pages"] // 2


@pytest.mark.usefixtures("live_machine")
def test_cli_json_and_bad_input(capsys):
    from app.cli.main import main
    assert main(["probe", "first-touch", "--cpu", str(CPU), "--size", "8M", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["probe"] == "first-touch" and out["size_bytes"] == 8 << 20 and out["nodes"]
    avail = parse_meminfo(SysRoot("/").read(SysRoot("/").proc("meminfo")))["MemAvailable"]
    too_big = f"{(avail >> 30) + 64}G"
    for args, says in ((["--size", too_big], "more than the memory available now"),
                       (["--size", "8M", "--node", "1023"], "no NUMA node 1023 with memory"),
                       (["--size", "1Q"], "give a size such as")):
        try:
            rc = main(["probe", "first-touch", "--cpu", str(CPU), *args])
        except SystemExit as e:          # argparse's own refusal (OneLineParser): one line, status 2
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2 and says in err and err.count("\n") == 1, err
