"""The fleet from the real engines (tests/engines.py): two pmcd through one pmproxy, and Prometheus scraping
node_exporter on this machine and on a captured 12-vCPU machine (`--path.procfs`). What coremap shows is
checked against what this machine's /proc and the capture hold."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.machine.topology import read_topology
from app.sources.host import HostCounters, sample_of
from app.sources.pcp import Pmproxy
from app.sources.prometheus import Prometheus
from app.sources.stream import FleetStream, prometheus_rounds
from app.sysroot import SysRoot
from tests.engines import wait_scrapes
from tests.hostile.conftest import run_main
from tests.machines import extract

REPO = Path(__file__).resolve().parents[2]
FIXTURE = "sno"


def coremap(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    return subprocess.run([sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


@pytest.fixture(scope="module")
def pcp(pcp_stack):
    return pcp_stack


@pytest.fixture(scope="module")
def prom(prometheus_stack):
    return prometheus_stack


def _proc_irqs() -> set[str]:
    return {line.split(":", 1)[0].strip() for line in Path("/proc/interrupts").read_text().splitlines()[1:]
            if ":" in line}


# -- PCP -------------------------------------------------------------------------------------------------
def test_fleet_from_pmproxy_reads_each_host_and_says_why_one_cannot_be(pcp):
    a, b = pcp.urls["hosts"]
    r = coremap("fleet", "--pcp", pcp.urls["pmproxy"], a, b, "127.0.0.1:1", "--json")
    assert r.returncode == 1, r.stderr            # one host could not be read
    rows = {d["host"]: d for d in json.loads(r.stdout)["hosts"]}
    online = sorted(os.sched_getaffinity(0) | set(read_topology(SysRoot("/")).online))
    for host in (a, b):
        d = rows[host]
        assert d["status"] == "ok"
        assert sorted(map(int, d["per_cpu"])) == online
        assert d["shape"].endswith("(cores not in source)")        # hinv names no core: said, not guessed
        assert d["name"] == os.uname().nodename
        assert type(d["irq_per_s"]) is float and d["irq_per_s"] > 0     # the local timer alone fires here
        assert all(v["softirq_per_s"] is not None for v in d["per_cpu"].values())
    assert rows["127.0.0.1:1"]["status"].startswith("127.0.0.1:1")
    assert "pmproxy at" in rows["127.0.0.1:1"]["status"]


def test_pcp_times_lie_between_the_clock_before_and_after_each_fetch(pcp):
    # pmproxy's /pmapi/fetch writes nanoseconds unpadded: 0.022 s past a second read as 0.22, so one
    # fetch in ten was up to a second late and a rate 0.5 s later had no interval (a CI run failed on it).
    # Forty reads meet such a time with 98 % odds; pmcd runs here, on this clock.
    host = Pmproxy(pcp.urls["pmproxy"]).host(pcp.urls["hosts"][0])
    host.counters()
    for _ in range(40):
        before = time.time()
        counters, _ = host.counters()
        after = time.time()
        assert before - 0.002 <= counters.time <= after + 0.002, (before, counters.time, after)
        time.sleep(0.011)


def test_a_pcp_host_state_holds_this_machines_irqs_and_a_counter_reset_gives_zero_and_a_note(pcp):
    host = Pmproxy(pcp.urls["pmproxy"]).host(pcp.urls["hosts"][0])
    state = host.state(1)
    assert state.rates is not None and state.rates.seconds > 0
    names = {row.irq for row in state.sample.interrupts.rows}
    assert names & _proc_irqs() >= {"LOC"}
    assert set(state.topology.online) == set(read_topology(SysRoot("/")).online)
    # A counter reset: the same real counters, the next read lower (a freed and requested IRQ restarts at 0).
    counters, _ = host.counters()
    irq = "LOC"
    desc, per = counters.irqs[irq]
    lower = HostCounters(counters.time + 1, counters.cpus, {**counters.irqs, irq: (desc, {c: 0 for c in per})},
                         counters.softirqs, counters.cpu_seconds)
    from app.sampling.rates import rates
    r = rates(sample_of(counters), sample_of(lower))
    assert r.irqs[irq].total == 0 and f"IRQ {irq}" in r.resets


def test_the_wrong_engine_is_one_line_each_way(pcp, prom, capsys):
    r = coremap("fleet", "--prometheus", pcp.urls["pmproxy"], "--json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "is not a Prometheus server" in r.stderr
    # The other way in this process (run_main: the status and output a child gives; the child above
    # covers the process path), saving a Python start and coremap's imports.
    r = run_main(capsys, "fleet", "--pcp", prom.urls["prometheus"], "node1", "--json")
    assert r.returncode == 1
    assert "so it is not a pmproxy" in json.loads(r.stdout)["hosts"][0]["status"]


# -- Prometheus --------------------------------------------------------------------------------------------
def test_fleet_from_prometheus_has_this_machine_and_the_captured_one_as_their_cpus_are(prom):
    r = coremap("fleet", "--prometheus", prom.urls["prometheus"], "--json")
    assert r.returncode == 0, r.stderr
    rows = {d["host"]: d for d in json.loads(r.stdout)["hosts"]}
    here, there = rows[prom.urls["here"]], rows[prom.urls["fixture"]]
    topo = read_topology(SysRoot("/"))
    assert sorted(map(int, here["per_cpu"])) == list(topo.online)
    assert here["model"] == topo.model_name
    assert f"{len(topo.cores)} core" in here["shape"]
    assert type(here["irq_per_s"]) is float and here["irq_per_s"] > 0
    # node_exporter < 1.6 has no per-CPU softirqs: absent (null), never 0
    assert all(v["softirq_per_s"] is None for v in here["per_cpu"].values())
    fixture = read_topology(SysRoot(extract(FIXTURE)))
    assert sorted(map(int, there["per_cpu"])) == list(fixture.online)
    assert there["model"] == fixture.model_name
    assert there["shape"] == f"1 socket × {len(fixture.cores)} cores × 1 thread = {len(fixture.online)} CPUs online"
    assert there["irq_time_pct"] is None                # the capture has no /proc/stat: absent (null), not 0


def test_a_prometheus_host_shown_in_full_has_every_irq_row_on_its_cpu_ids(prom):
    p = Prometheus(prom.urls["prometheus"])
    state = p.host_state(prom.urls["here"], 7)
    assert state.generation == 7 and state.host == prom.urls["here"]
    assert {"LOC"} <= set(state.rates.irqs) <= _proc_irqs() | {"ERR", "MIS"}
    assert state.rates.cpus == tuple(read_topology(SysRoot("/")).online)
    assert state.sample.interrupts.row("LOC").total > 0


def test_match_that_selects_no_host_says_so(prom, capsys):
    # In this process (run_main), as the second wrong engine above: a fleet's refusal as a child is there.
    r = run_main(capsys, "fleet", "--prometheus", prom.urls["prometheus"], "--match", 'job="nothing"', "--csv")
    assert r.returncode == 2
    assert 'no host with node_cpu_seconds_total matching job="nothing"' in r.stderr


def test_the_stream_keeps_a_host_that_stopped_answering_with_when_it_was_last_seen(prom):
    p = Prometheus(prom.urls["prometheus"])
    batches = []
    stream = FleetStream(prometheus_rounds(p), interval=1.0, on_rows=batches.append)
    stream.run_round()
    assert {r.host for b in batches for r in b} == {prom.urls["here"], prom.urls["fixture"]}
    exporter = prom.procs[1]                            # the captured machine's node_exporter
    exporter.terminate()
    exporter.wait(10)
    try:
        _the_stopped_host_stays_stale(prom, stream)
    finally:
        prom.restart(1)                                 # the stack is the run's: others read this host
        wait_scrapes(prom.urls["prometheus"], 2)


def _the_stopped_host_stays_stale(prom, stream) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        stream.run_round()
        row = next(r for r in stream.rows() if r.host == prom.urls["fixture"])
        if row.stale:
            break
        time.sleep(0.2)         # a look costs one query; a second between looks was up to 1 s of waiting
    assert row.stale.startswith("no answer since ")
    assert row.state is not None                         # its last grid is kept
    assert next(r for r in stream.rows() if r.host == prom.urls["here"]).ok


def test_what_coremap_exports_reaches_prometheus_through_node_exporter_and_comes_back_in_the_fleet(prom):
    from app.sources.export import gather, write
    exported = gather(SysRoot("/"))
    quiet = max(read_topology(SysRoot("/")).online)
    exported.quiet = (quiet,)
    exported.gaps = {0: (123.0, 1e-6)}
    textfile = prom.folder / "textfile" / "coremap.prom"
    write(textfile, exported)
    try:
        _exported_comes_back(prom, exported, quiet)
    finally:
        textfile.unlink()               # the stack is the run's: the next module's "here" has no quiet CPU


def _exported_comes_back(prom, exported, quiet: int) -> None:
    p = Prometheus(prom.urls["prometheus"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = next(r for b in p.rows(only=[prom.urls["here"]]) for r in b)
        if row.quiet:
            break
        time.sleep(0.2)
    assert row.quiet == (quiet,)
    assert row.probe == {"cpu": 0, "gaps_per_s": 123.0}
    errors = p.query(f'node_textfile_scrape_error{{instance="{prom.urls["here"]}"}}')
    assert [float(v) for _, v in errors] == [0.0]        # node_exporter parsed the file
    info = p.query(f'coremap_irq_affinity_info{{instance="{prom.urls["here"]}"}}')
    assert {labels["irq"] for labels, _ in info} == {irq for irq, *_ in exported.irqs}
    from app.remote.fleet import csv_rows
    d = csv_rows([row])[0]
    assert d["quiet_cpus"] == str(quiet) and d["irq_on_quiet_per_s"] != ""
    assert d["jitter"] == "CPU 0: 123/s gaps"


def test_one_host_from_either_source_opens_in_the_window_read_only(pcp, prom, tmp_path, capsys):
    from argparse import Namespace

    from app.sources.live import open_host
    for args in (Namespace(pcp=pcp.urls["pmproxy"], prometheus=None, host=pcp.urls["hosts"][1]),
                 Namespace(pcp=None, prometheus=prom.urls["prometheus"], host=prom.urls["here"])):
        host = open_host(args, check=False)
        assert host.pins is None and host.absent("pins").startswith("read-only: a ")
        sampler = host.sampler
        a, b = sampler.tick(), sampler.tick()
        assert (a.generation, b.generation) == (1, 2)
        assert not b.live and b.host == ""                  # nothing is pinned or probed through a source
        assert b.rates is not None and b.rates.per_cpu
    out = tmp_path / "host.png"
    r = coremap("--pcp", pcp.urls["pmproxy"], "--host", pcp.urls["hosts"][0], "--screenshot", out, "--size", "900x600")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The refusal in this process (run_main: the status and line a child gives; the fleet's refusal below
    # runs as a child): a child of its own cost 0.6 s of start-up.
    r = run_main(capsys, "--prometheus", prom.urls["prometheus"], "--host", "no-such-host:9100", "--screenshot", out)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no-such-host:9100" in r.stderr


def test_a_pmlogger_archive_and_a_prometheus_range_replay_as_of_a_moment(pcp, prom, tmp_path, capsys):
    from app.sources.replay import PcpArchiveTimeline
    config = tmp_path / "pmlogger.conf"
    config.write_text("log mandatory on every 1 second {\n kernel.percpu.interrupts\n kernel.percpu.softirqs\n"
                      " kernel.percpu.cpu\n}\nlog mandatory on once {\n hinv.map.cpu_node\n hinv.cpu.model_name\n"
                      " kernel.uname\n}\n")
    archive = tmp_path / "host"
    # pmlogger takes its four samples a second apart (3 s); the Prometheus replay is checked meanwhile.
    logger = subprocess.Popen(["pmlogger", "-h", pcp.urls["hosts"][0], "-c", str(config), "-s", "4", "-l",
                               str(tmp_path / "pmlogger.log"), str(archive)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _a_prometheus_range_replays_as_of_a_moment(prom, tmp_path / "range.png")
        _, err = logger.communicate(timeout=60)
    finally:
        logger.kill()
        logger.wait()
    assert logger.returncode == 0, err
    tl = PcpArchiveTimeline(str(archive))
    assert len(tl.times) >= 3 and tl.wall
    state = tl.state_at(tl.times[2])
    assert set(state.topology.online) == set(read_topology(SysRoot("/")).online)
    assert state.topology.hostname == os.uname().nodename
    assert state.rates.per_cpu and sum(r.irq_per_s for r in state.rates.per_cpu.values()) > 0
    assert not state.live
    out = tmp_path / "archive.png"
    r = coremap("--pcp-archive", archive, "--at", "2", "--screenshot", out, "--size", "900x600")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"
    r = run_main(capsys, "--pcp-archive", tmp_path / "none", "--at", "2", "--screenshot", out)   # a refusal, here
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "pmdumplog failed" in r.stderr


def _a_prometheus_range_replays_as_of_a_moment(prom, out: Path) -> None:
    r = coremap("--prometheus", prom.urls["prometheus"], "--host", prom.urls["here"], "--at", "-2",
                "--screenshot", out, "--size", "900x600")
    assert r.returncode == 0, r.stderr
    assert "prometheus" in r.stdout and prom.urls["here"] in r.stdout
