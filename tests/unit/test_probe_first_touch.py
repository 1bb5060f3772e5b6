"""The first-touch probe (probes/first_touch/measure.py, probes/first_touch/_loop.c), sizes (app/parse/size.py) and
/proc/meminfo (app/parse/meminfo.py).

Oracles: the kernel's rule for anonymous memory without huge pages (one minor fault per 4 KiB page
on the first write, none on the second); /proc/self/maps (a mapping is there, then gone); the
kernel's own MemAvailable; the node list in sysfs; /proc/vmstat; a JVM's own minor faults with and
without -XX:+AlwaysPreTouch (one per page of its -Xms heap).
"""
from __future__ import annotations

import gc
import json
import os
import shutil

import pytest

from app.parse.meminfo import parse_meminfo
from app.parse.size import SizeError, parse_size
from app.parse.vmstat import parse_vmstat
from app.sysroot import SysRoot
from probes.first_touch.measure import VMSTAT_KEYS, memory_nodes, summarize, system_thp, thp_advice
from probes.pretouch import with_flag
from probes.runner import run_to_end
from probes.text import format_result

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


@pytest.mark.usefixtures("live_machine")
def test_per_gib_cpu_and_wall_and_the_kernels_thp_counts():
    """ms per GiB from the run's own lines (pages x page size), the wall/CPU split, and the THP counters
    read around each touch; the pages of 1 ms or more are counted by the loop one by one."""
    rc, lines, run = run_to_end("first-touch", ["--cpu", CPU, "--size", "64M", "--thp", "never"], timeout=60)
    assert rc == 0, (lines[-1:], run.stderr_lines)
    s = summarize(lines)
    row = s["nodes"][0]
    first = [l for l in lines if l.get("touch") == 1 and l.get("node") == row["node"]]
    gib = sum(l["pages"] for l in first) * PAGE / (1 << 30)
    f = row["first"]
    assert f["ms_per_gib"] == pytest.approx(sum(l["ns"] for l in first) / 1e6 / gib)
    assert f["cpu_ms_per_gib"] == pytest.approx(sum(l["cpu_ns"] for l in first) / 1e6 / gib)
    assert f["stalls"] == sum(l["stalls"] for l in first)
    # each stalled page is in the buckets at 1 ms or more; the buckets bracket the loop's own count
    surely = sum(c for l in first for lo, _hi, c in l["buckets"] if lo >= 1_000_000)
    maybe = sum(c for l in first for _lo, hi, c in l["buckets"] if hi > 1_000_000)
    assert surely <= f["stalls"] <= maybe
    end = next(l for l in lines if l.get("touch") is None and l.get("node") == row["node"])
    assert f["vmstat"] == end["vmstat"]["1"] and set(f["vmstat"]) <= set(VMSTAT_KEYS)
    # --thp never: no huge page was faulted in by this mapping (others' faults meanwhile could count)
    assert f["vmstat"].get("thp_fault_alloc", 0) >= 0
    if f["cpu_ns"] >= 50_000_000:
        assert f["off_cpu_share"] == pytest.approx(max(0.0, 1 - f["cpu_ns"] / f["ns"]))
        assert ("waited for its CPU" in s["verdict"]) == (f["off_cpu_share"] >= 0.1)
    text = format_result(s)
    assert "per GiB touched (ms)" in text and "compaction stalls" in text
    assert s["verdict"].startswith(f"first touch {f['ms_per_gib']:,.0f} ms per GiB" if f["ms_per_gib"] >= 100
                                   else "first touch ")


def test_vmstat_reads_the_kernels_counters():
    text = SysRoot("/").read(SysRoot("/").proc("vmstat"))
    counters = parse_vmstat(text)
    assert counters["nr_free_pages"] >= 0 and len(counters) == len(text.splitlines())
    from app.errors import ParseError
    with pytest.raises(ParseError, match="is not a counter"):
        parse_vmstat("compact_stall ١٢")


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JVM")
@pytest.mark.usefixtures("live_machine")
def test_a_jvm_run_without_and_with_always_pre_touch():
    """The kernel's own count says the heap was touched at start: with the flag the JVM takes at least
    one minor fault per page of its 128 MiB heap (-Xms) more than without it."""
    rc, lines, run = run_to_end("first-touch", ["--cpu", CPU, "--", "java", "-Xms128m", "-Xmx128m",
                                                "-XX:+AlwaysPreTouch", "-version"], timeout=120)
    assert rc == 0, (lines[-1:], run.stderr_lines)
    s = summarize(lines)
    without, with_ = sorted(s["runs"], key=lambda r: r["pretouch"])
    # the user's own AlwaysPreTouch is replaced: each run has exactly one, right after `java`
    assert without["argv"][:2] == ["java", "-XX:-AlwaysPreTouch"] and with_["argv"][:2] == ["java", "-XX:+AlwaysPreTouch"]
    assert "-XX:+AlwaysPreTouch" not in without["argv"] and without["flag_in"] == "command line"
    assert without["exit_status"] == with_["exit_status"] == 0
    assert with_["minor_faults"] - without["minor_faults"] >= 0.9 * (128 << 20) // PAGE
    assert s["pretouched_bytes"] == (with_["minor_faults"] - without["minor_faults"]) * PAGE
    assert with_["sys_ns"] > without["sys_ns"]
    assert s["verdict"].startswith("with -XX:+AlwaysPreTouch start-up took ")
    assert "start-up" in format_result(s)


def test_the_flag_goes_after_java_or_into_java_tool_options(monkeypatch):
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss2m")
    argv, tool, how = with_flag(["/usr/bin/java", "-XX:+AlwaysPreTouch", "-jar", "a.jar"], False)
    assert argv == ["/usr/bin/java", "-XX:-AlwaysPreTouch", "-jar", "a.jar"] and tool is None
    argv, tool, how = with_flag(["./start.sh", "--fast"], True)
    assert argv == ["./start.sh", "--fast"] and tool == "-Xss2m -XX:+AlwaysPreTouch" and how == "JAVA_TOOL_OPTIONS"


def test_a_command_with_the_mappings_options_is_refused():
    rc, lines, _ = run_to_end("first-touch", ["--cpu", CPU, "--size", "8M", "--", "true"], timeout=30)
    assert rc == 2 and "a command brings its own heap" in lines[-1]["message"]
