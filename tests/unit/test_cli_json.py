"""Every --json document is an object whose first key is `schema_version` (app/cli/common.py
SCHEMA_VERSION says what the number means), written by the one writer, write_json; what was a bare list
is under a key naming its items; `fleet --json` gives figures as numbers, CPU lists as lists (issue 23).
The readers of these documents (report --probe, export --jitter, report --verify) read both shapes."""
from __future__ import annotations

import ast
import json
import os
import time
from pathlib import Path

import pytest

from app.cli.common import SCHEMA_VERSION, json_document
from app.cli.main import main
from tests.machines import extract

REPO = Path(__file__).resolve().parents[2]
CPU = max(os.sched_getaffinity(0))


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def sno() -> Path:
    return extract("sno")


def _document(capsys, argv, rc=0) -> dict:
    assert main(argv) == rc
    text = capsys.readouterr().out
    doc = json.loads(text)
    assert type(doc) is dict and next(iter(doc)) == "schema_version" and doc["schema_version"] == SCHEMA_VERSION
    return doc


@pytest.mark.parametrize("argv,key", [
    (["topology", "--json"], "online"), (["irqs", "--json"], "irqs"),
    (["cpus", "--json"], "cpus"), (["plan", "-c", "2-3", "--json"], "cmdline_fragment"),
    (["isolate", "-c", "1", "--dry-run", "--json"], "preview"), (["include", "-c", "1", "--dry-run", "--json"], "preview")])
def test_every_document_of_a_capture_leads_with_its_schema_version(capsys, sno, argv, key):
    assert key in _document(capsys, [*argv, "--root", str(sno)])


def test_what_was_a_list_is_under_a_key_naming_its_items(capsys):
    threads = _document(capsys, ["threads", "--pid", str(os.getpid()), "--json"])
    assert set(threads) == {"schema_version", "threads"} and threads["threads"][0]["pid"] == os.getpid()
    assert _document(capsys, ["journal", "--json"]) == {"schema_version": SCHEMA_VERSION, "entries": []}


@pytest.mark.usefixtures("live_machine")
def test_a_probe_on_one_cpu_is_its_result_and_on_several_they_are_under_results(capsys, tmp_path):
    one = _document(capsys, ["probe", "jitter", "-c", str(CPU), "--seconds", "0.05", "--json"])
    assert one["probe"] == "jitter" and one["cpu"] == CPU
    cpus = sorted(os.sched_getaffinity(0))[-2:]
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    several = _document(capsys, ["probe", "jitter", "-c", ",".join(map(str, cpus)), "--seconds", "0.05", "--json"])
    assert set(several) == {"schema_version", "results"} and [r["cpu"] for r in several["results"]] == cpus
    # report --probe and export --jitter read what probe --json wrote, in either shape
    from app.cli.report import _json_values
    from app.store.results import results_in
    from probes.results import check_result
    for doc in (one, several, several["results"]):
        values = _json_values(json.dumps(doc), many=True, what="r.json")
        assert values == results_in(doc) and all(v["probe"] for v in values)
    kept, notes = check_result(one)
    assert "schema_version" not in kept and notes == []


def test_export_reads_a_jitter_document_with_its_schema_version(tmp_path, sno):
    from app.machine.identity import read_identity
    from app.sources.export import _add_result, Exported
    from app.sysroot import SysRoot
    from probes.results import check_result
    gaps = {"from_ns": 1000, "count": 10, "max_ns": 9000, "lost_share": 0.001, "at_least": [],
            "percentiles": {"p50": 2000, "p90": 3000, "p99": 8000, "p99.9": 9000, "max": 9000}}
    result = {"schema_version": SCHEMA_VERSION, "probe": "jitter", "cpu": 3, "sampled_seconds": 2.0, "gaps": gaps}
    for i, doc in enumerate((result, {"schema_version": SCHEMA_VERSION, "results": [result]}, [result])):
        (tmp_path / f"r{i}.json").write_text(json.dumps(doc))
        e = Exported()
        _add_result(e, str(tmp_path / f"r{i}.json"), read_identity(SysRoot(sno)), False, check_result)
        # A result with no host record (an older coremap's) is included, and said to be of an unknown host.
        assert e.gaps == {3: (5.0, 1e-06)} and len(e.notes) == 1 and "host unknown" in e.notes[0], e.notes


def test_a_verify_out_document_with_its_schema_version_is_a_verification():
    from app.store.results import clean_verification
    side = {"runs": 1, "sampled_seconds": 1.0, "gaps10_per_s": 1.0}
    v = {"kind": "verify", "cpus": [1], "seconds": 1.0, "pairs": 1, "time": 1.0, "runs": [],
         "before": side, "after": side, "ratio": {}, "outcomes": {}}
    kept, _ = clean_verification(json.loads(json.dumps(json_document(v))))
    assert kept is not None and kept["cpus"] == [1]


def test_fleet_json_gives_numbers_as_numbers_and_csv_text_as_before(capsys, monkeypatch):
    from app.remote import fleet
    from app.sampling.sampler import Sampler
    from app.sysroot import SysRoot
    sampler = Sampler(SysRoot("/"))         # this machine: a capture of one set of counters has no rates
    sampler.tick()
    time.sleep(0.3)
    state = sampler.tick()
    assert state.rates is not None
    facts = (("Kernel", "5.14.0"), ("NUMA nodes", "node 0: CPUs 0-11"))
    rows = [fleet.FleetRow("a", "name-a", facts, fleet.top_irq(state), state, {"cpu": 1, "gaps_per_s": 12.5},
                           seconds=1.23456, quiet=(1, 2)),
            fleet.FleetRow("b", "name-b", (("Kernel", "6.1"), facts[1]), "", state, seconds=0.5),
            fleet.FleetRow("c", error="c: the connection was refused")]
    monkeypatch.setattr(fleet, "capture_fleet", lambda hosts, **kw: rows)
    doc = _document(capsys, ["fleet", "a", "b", "c", "--json"], rc=1)
    a, b, c = doc["hosts"]
    assert (a["host"], c["status"]) == ("a", "c: the connection was refused")
    for k in ("irq_per_s", "busiest_cpu_per_s", "irq_on_quiet_per_s", "seconds"):
        assert type(a[k]) is float, k
    isolated = list(state.topology.isolated)        # b's quiet CPUs: none made quiet, so the kernel's isolated
    assert a["seconds"] == 1.235 and a["quiet_cpus"] == [1, 2] and b["quiet_cpus"] == isolated
    assert a["stands_out"] == ["Kernel"] and a["jitter_figures"] == {"cpu": 1, "gaps_per_s": 12.5}
    assert a["jitter"] == fleet.jitter_text(rows[0].probe) and a["jitter"].startswith("CPU 1: ") and a["numa_nodes"] == "node 0: CPUs 0-11"      # text stays text
    assert (b["irq_on_quiet_per_s"] is None) == (not isolated) and c["irq_per_s"] is None and c["jitter_figures"] is None
    assert a["per_cpu"]["0"]["irq_per_s"] >= 0
    # the CSV is the same table, as text
    csv = fleet.csv_rows(rows)
    assert csv[0]["seconds"] == "1.23" and csv[0]["quiet_cpus"] == "1-2" and csv[0]["stands_out"] == "Kernel"
    assert csv[0]["irq_per_s"] == f"{a['irq_per_s']:.1f}" and csv[2]["irq_per_s"] == "" and csv[2]["quiet_cpus"] == ""


def test_every_json_of_the_cli_goes_through_the_one_writer():
    """No command spells JSON itself: json.dumps in app/cli only around json_document (verify --out,
    the same document --json prints); the rest goes through write_json (the documents above)."""
    bad = []
    for path in sorted((REPO / "app" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text() if path.name != "common.py" else "")      # common.py: the writer
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("dumps", "dump") \
                    and getattr(node.func.value, "id", "") == "json":
                arg = node.args[0] if node.args else None
                if not (isinstance(arg, ast.Call) and getattr(arg.func, "id", "") == "json_document"):
                    bad.append(f"{path.name}:{node.lineno}")
    assert bad == []
