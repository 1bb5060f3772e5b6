"""A stored probe result is checked against its probe's typed definition (probes/<name>/result.py), which
extends the fields every result has (probes/result.py): a shared field out of its definition is left out
alone; one the probe's type defines again is that type's, and refuses the result whole (issue 29).
Oracles: real results stored from a KVM guest (tests/fixtures/results)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from app.store.results import results_in
from app.store.session import ProbeRecord, open_session, save_session, session_from_root
from app.sysroot import SysRoot
from probes.results import check_result
from tests.machines import extract

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "results"


def _real(name: str) -> dict:
    return results_in(json.loads((RESULTS / name).read_text()))[0]


def test_real_stored_results_pass_untouched():
    for name in ("kvm-6.18-jitter-attributed.json", "kvm-6.18-jitter-with-host.json", "kvm-6.18-wakeup.json"):
        for r in results_in(json.loads((RESULTS / name).read_text())):
            assert check_result(r, name) == ({k: v for k, v in r.items() if k != "schema_version"}, []), name


def test_a_shared_field_out_of_its_definition_is_left_out_alone():
    r = _real("kvm-6.18-jitter-attributed.json")
    assert r["attribution"]["available"] and r["attribution"]["by_cause"]
    bad = copy.deepcopy(r)
    bad["attribution"]["by_cause"][0]["ns"] = -1
    kept, notes = check_result(bad, "j.json")
    assert "attribution" not in kept and kept["buckets"] == r["buckets"] and kept["cpu"] == r["cpu"]
    assert notes == ["j.json: 'attribution' has the wrong type or a value out of range "
                     "(attribution.by_cause[0].ns: expected float >= 0.0); left out"]


def test_a_field_its_probe_defines_again_refuses_the_result_whole():
    """A jitter run is on one CPU (or unbound): a list of CPUs, which the shared field takes (a sweep's),
    is out of the jitter type; a probe this coremap does not know keeps it."""
    r = dict(_real("kvm-6.18-jitter-with-host.json"), cpu=[0, 1])
    assert check_result(r, "j.json") == (None, ["j.json: a jitter result out of shape (cpu: expected int | null, "
                                                "got array); left out"])
    kept, notes = check_result(dict(r, probe="newer-probe"), "n.json")
    assert kept["cpu"] == [0, 1] and notes == []


def test_a_session_keeps_its_probe_runs_only_when_given_their_check(tmp_path):
    """The model sits below probes/ and cannot check a probe result: opened without the check (to read
    its machine), a session reads its runs but keeps none."""
    r = _real("kvm-6.18-wakeup.json")
    path = tmp_path / "s.coremap"
    save_session(path, session_from_root(SysRoot(extract("sno")), probes=[ProbeRecord(r)]))
    for check, runs in ((None, []), (check_result, [{k: v for k, v in r.items() if k != "schema_version"}])):
        s = open_session(path, check)
        try:
            assert [p.result for p in s.probes] == runs and s.problems == []
        finally:
            s.close()
