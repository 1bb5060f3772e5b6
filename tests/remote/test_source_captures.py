"""A metrics source's topology completed from coremap captures (--captures DIR, app/sources/captures.py), on the
real engines (tests/engines.py): Prometheus scraping node_exporter here and on the captured 12-vCPU `sno`
machine, whose exporter names its host `sno` (its own UTS namespace). The captures folder holds real
`coremap snapshot`s: one of `sno` (a tarball, as the command writes it), and one recorded under this
machine's name but of another machine (extracted, as `tar xf` leaves it), which must be refused."""
from __future__ import annotations

import argparse

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from app.machine.topology import read_topology
from app.sources.captures import CaptureShelf, complete, names_match
from app.sources.live import open_host
from app.sources.prometheus import Prometheus
from app.store.capture import take_snapshot
from app.sysroot import SysRoot
from tests.hostile.conftest import run_main
from tests.machines import copy_machine, extract

REPO = Path(__file__).resolve().parents[2]
FIXTURE, OTHER = "sno", "16em64t-4s2c2t-offlines"


def coremap(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    return subprocess.run([sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


@pytest.fixture(scope="module")
def prom(prometheus_stack):
    if not prometheus_stack.named:
        pytest.skip("naming the captured machine's exporter host needs unshare --uts, as root")
    return prometheus_stack


def _snapshot_as(machine: str, host: str, folder: Path, out: Path) -> Path:
    """A real `coremap snapshot` of the captured `machine`, recording `host` as its name (the name of the
    folder it was taken from, as take_snapshot records a capture that holds no hostname)."""
    tree = folder / host
    copy_machine(machine, tree)
    take_snapshot(out, SysRoot(tree), second=False)
    return out


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    work, shelf = tmp_path_factory.mktemp("trees"), tmp_path_factory.mktemp("captures")
    _snapshot_as(FIXTURE, FIXTURE, work, shelf / "sno.tar.gz")
    (work / "x").mkdir()
    wrong = _snapshot_as(OTHER, os.uname().nodename, work / "x", work / "wrong.tar.gz")
    with tarfile.open(wrong) as tf:
        tf.extractall(shelf / "here-extracted", filter="data")
    return shelf


def test_names_match_a_short_name_to_a_full_one_but_not_across_domains():
    assert names_match("node7", "NODE7.example.com") and names_match("node7.a.com", "node7.a.com")
    assert not names_match("node7.a.com", "node7.b.com") and not names_match("node7", "node70")


def test_the_captured_machine_is_completed_from_its_capture_and_this_one_refused(prom, captures):
    r = coremap("fleet", "--prometheus", prom.urls["prometheus"], "--captures", captures, "--json")
    assert r.returncode == 0, r.stderr
    rows = {d["host"]: d for d in json.loads(r.stdout)["hosts"]}
    there, here = rows[prom.urls["fixture"]], rows[prom.urls["here"]]
    fixture = read_topology(SysRoot(extract(FIXTURE)))
    assert there["name"] == FIXTURE                                  # node_uname_info of its own namespace
    assert there["note"].startswith("topology completed from capture sno.tar.gz")
    nodes = "; ".join(f"node {n.id}" for n in fixture.nodes if n.cpus)
    assert there["numa_nodes"].startswith(nodes) and there["numa_nodes"] != "absent"   # node_exporter has none
    assert there["shape"] == f"1 socket × {len(fixture.cores)} cores × 1 thread = {len(fixture.online)} CPUs online"
    assert sorted(map(int, there["per_cpu"])) == list(fixture.online)   # the source's rates, every CPU
    other = read_topology(SysRoot(extract(OTHER)))
    assert here["note"] == (f"capture here-extracted refused: it has {len(other.online)} CPUs online, the source "
                            f"{len(read_topology(SysRoot('/')).online)}; not merged")
    assert here["numa_nodes"] == "absent"                            # nothing of the refused capture shows
    assert here["status"] == "ok"


def _host(prom, name, captures):
    """`coremap --prometheus URL --host NAME --captures DIR`'s host (app/sources/live.py open_host)."""
    return open_host(argparse.Namespace(pcp=None, prometheus=prom.urls["prometheus"], host=name,
                                        captures=str(captures)), check=False)


def test_the_one_host_window_draws_the_capture_s_caches_and_nodes_coloured_by_the_source(prom, captures):
    state = _host(prom, prom.urls["fixture"], captures).sampler.tick()
    fixture = read_topology(SysRoot(extract(FIXTURE)))
    t = state.topology
    assert t.l3_groups == fixture.l3_groups and t.l3_groups                 # absent from the source alone
    assert [(n.id, n.cpus) for n in t.nodes] == [(n.id, n.cpus) for n in fixture.nodes]
    assert [c.cpus for c in t.cores] == [c.cpus for c in fixture.cores]
    assert t.caches == fixture.caches
    assert t.hostname == FIXTURE and t.model_name == fixture.model_name
    assert state.rates.cpus == t.online and set(state.rates.per_cpu) == set(t.online)
    assert any("from capture sno.tar.gz" in n for n in t.notes)
    alone = Prometheus(prom.urls["prometheus"]).host_state(prom.urls["fixture"], 1)
    assert alone.topology.l3_groups == () and alone.topology.nodes == ()    # what the completion added


def test_a_refused_capture_is_a_note_of_the_window_and_never_merged(prom, captures):
    state = _host(prom, prom.urls["here"], captures).sampler.tick()
    here = read_topology(SysRoot("/"))
    assert state.topology.online == here.online
    assert state.topology.caches == ()                                      # the source's, alone
    assert any(n.startswith("capture here-extracted refused: it has ") for n in state.notes)
    done = complete(CaptureShelf(captures), state.topology, "nobody.example.com")
    assert done.note == "" and done.topology is state.topology              # no capture of it: as it was


def test_captures_without_a_source_and_a_folder_that_is_not_one_are_one_line(tmp_path, capsys):
    r = coremap("--captures", tmp_path, "irqs")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--pcp URL or --prometheus URL" in r.stderr
    # The second refusal in this process (run_main: the status and lines a child gives; the first covers
    # the process path), saving a Python start and coremap's imports.
    r = run_main(capsys, "fleet", "--prometheus", "http://127.0.0.1:1", "--captures", tmp_path / "none", "--json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a folder" in r.stderr
