"""A stored probe result is held to its probe's typed definition at the door (probes/<name>/result.py,
probes/results.py check_result): a real result of every probe and mode passes untouched; a
broken one is refused with one line naming the field; and nothing that passes the door stops a reader
— the text, the report's section and picture, the window's view (issue 24: a messaging result whose
series held a string, or a scaling one without its title, stopped `coremap report` with a traceback).

Oracles: real runs of every probe through the CLI's --json (the module fixture, under the live lock),
and every field of them broken by hand, one at a time."""
from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.store.results import results_in
from app.store.session import ProbeRecord, open_session, save_session, session_from_root
from app.sysroot import SysRoot
from probes.results import check_result
from tests.machines import extract

# Real runs of every probe, pinned to real CPUs, made under the machine lock: the serial live set.
pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
# Every probe, and each of its modes that writes another shape (a command's, a JVM's).
RUNS = {
    "jitter": ["jitter", "-c", "1", "--seconds", "0.2", "--json"],
    "wakeup": ["wakeup", "-c", "1", "--seconds", "0.2", "--json"],
    "sweep": ["sweep", "-c", "0-1", "--rounds", "5", "--json"],
    "c2c": ["c2c", "-c", "0-1", "--json"],
    "counters": ["counters", "-c", "1", "--seconds", "0.2", "--json"],
    "messaging": ["messaging", "-c", "0-1", "--seconds", "0.2", "--rates", "100k,max", "--rounds", "1", "--json"],
    "first-touch": ["first-touch", "-c", "1", "--size", "16M", "--json"],
    "pretouch": ["first-touch", "-c", "1", "--json", "--", "java", "-Xms64m", "-Xmx64m", "-version"],
    "scaling": ["scaling", "-c", "0-1", "--seconds", "0.1", "--rounds", "1", "--json"],
    "scaling-command": ["scaling", "-c", "0-1", "--rounds", "1", "--json", "--", "true"],
}
# What a field is broken into: text, null, an empty list, and where a number stood, nan, a negative and
# a whole number too large for a float.
BROKEN = ("☠", None, [])
BROKEN_NUMBER = (float("nan"), -1, 10 ** 400)


@pytest.fixture(scope="module")
def real() -> dict[str, dict]:
    from tests.live import machine_lock
    out = {}
    from concurrent.futures import ThreadPoolExecutor
    with machine_lock():                 # the runs are pinned to real CPUs: another suite waits meanwhile
        # All at once: only their shapes are checked, and one after the other (each CLI's start and its
        # 1 s look at what else is busy) they took 16 s of the serial live set (issue 31).
        with ThreadPoolExecutor(len(RUNS)) as pool:
            list(pool.map(lambda item: _run(out, *item), RUNS.items()))
    return out


def _run(out: dict, name: str, args: list[str]) -> None:
    if name == "pretouch" and subprocess.run(["sh", "-c", "command -v java"], capture_output=True).returncode:
        return                                          # .ci/run installs a JDK; a bare machine may not
    p = subprocess.run([sys.executable, "-m", "app", "probe", *args], capture_output=True, text=True,
                       timeout=120, cwd=REPO)
    assert p.returncode == 0, (name, p.stderr[-2000:])
    (out[name],) = results_in(json.loads(p.stdout))


def test_a_real_result_of_every_probe_passes_untouched(real):
    assert {"jitter", "wakeup", "sweep", "c2c", "counters", "messaging", "first-touch", "scaling"} <= \
        {r["probe"] for r in real.values()}
    for name, result in real.items():
        kept, notes = check_result(result, name)
        assert notes == [] and kept == {k: v for k, v in result.items() if k != "schema_version"}, (name, notes)


def _paths(value, path=()):
    """Every place in a result (a list: its first item), outermost first."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list) and value:
        yield from _paths(value[0], path + (0,))


def _broken(result, path, bad):
    """`result` with the value at `path` replaced by `bad`: only the dicts and lists on the path are
    copied, the rest is shared with `result` (a deep copy per case was a third of the test's time);
    the test checks at its end that no reader changed what is shared."""
    r = at = copy.copy(result)
    for p in path[:-1]:
        at[p] = copy.copy(at[p])
        at = at[p]
    at[path[-1]] = bad
    return r


def _read_all(result: dict, panel) -> None:
    """What the text, the report and the window (a session's run added to the probe panel) do with a
    stored result."""
    from probes.catalog import RECORDS
    from probes.text import format_result, lead_figures
    from app.store.report import ProbeSection, build_report_html
    # as widgets/report_images.py reads a section: a histogram run's lead figures, any other's text
    section = ProbeSection(result)
    record = RECORDS.get(result["probe"])
    if record is None or record.histogram:
        section.figures, section.percentiles_of = lead_figures(result)
    else:
        section.text = format_result(result, verdict=False)
    build_report_html(dataclasses.replace(_report(), probes=[section]))
    rec = panel.add_result(result, "stored")
    if rec is not None:
        panel.remove_run(rec.key)


@functools.cache
def _report():
    from app.store.report import report_from_root
    return report_from_root(SysRoot(extract("sno")), live_wait=0)


@pytest.fixture
def panel(qtbot):
    from widgets.probe.panel import ProbePanel
    p = ProbePanel()
    qtbot.addWidget(p)
    p.resize(900, 500)
    p.show()
    return p


def test_every_field_broken_is_refused_or_read_without_harm(real, panel):
    """Each place of each real result, broken in turn each way BROKEN holds (a number also as
    BROKEN_NUMBER): the door refuses it naming where, or what it lets through is read by the text, the
    report and the probe panel without an error. One broken value per place, taken in turn, keeps the
    test within seconds; the helpers that wrote the shapes ran every value on every place."""
    refused = passed = 0
    counter = itertools.count()
    untouched = copy.deepcopy(real)
    for name, result in real.items():
        for path in list(_paths(result))[1:]:
            at = result
            for p in path:
                at = at[p]
            kinds = BROKEN + (BROKEN_NUMBER if type(at) in (int, float) else ())
            turn = next(counter)
            for bad in (kinds[turn % len(kinds)], kinds[(turn + 1) % len(kinds)]):
                r = _broken(result, path, bad)
                kept, notes = check_result(r, "r")
                if kept is None:
                    refused += 1
                    assert len(notes) == 1 and ("out of shape" in notes[0] or path == ("probe",)), notes
                    continue
                passed += 1
                try:
                    _read_all(kept, panel)
                except Exception as e:              # noqa: BLE001 — any error is the failure reported
                    pytest.fail(f"{name}: {'.'.join(map(str, path))} = {bad!r} passed the door, then "
                                f"{type(e).__name__}: {e}")
    assert refused > 300 and passed > 100, (refused, passed)
    assert real == untouched, "a check or a reader changed a result it was given"


def test_the_report_pictures_what_passes_the_door(real, tmp_path):
    """The report's pictures (widgets/report_images.py) of every real result, and a report written."""
    from app.store.report import build_report_html, report_from_root
    from widgets.report_images import add_images
    root = SysRoot(extract("sno"))
    data = report_from_root(root, probes=list(real.values()), live_wait=0)
    add_images(data, root=root)
    assert data.topology_image is not None
    html = build_report_html(data)
    from probes.catalog import RECORDS
    pictured = [r for r in real.values() if RECORDS[r["probe"]].picture or RECORDS[r["probe"]].histogram]
    assert html.count("data:image/png;base64,") >= len(pictured) + 1         # and the grid


def test_a_session_keeps_its_other_runs_when_one_is_out_of_shape(real, tmp_path):
    good = real["sweep"]
    bad = copy.deepcopy(real["messaging"])
    bad["placements"][0]["series"][0] = "a"
    path = tmp_path / "s.coremap"
    save_session(path, session_from_root(SysRoot(extract("sno")), probes=[ProbeRecord(good), ProbeRecord(bad)]))
    s = open_session(path, check_result)
    try:
        assert [p.result["probe"] for p in s.probes] == ["sweep"]
        assert any("a messaging result out of shape (placements[0].series[0]: expected float, got str)"
                   in n for n in s.problems), s.problems
    finally:
        s.close()


def test_report_probe_says_which_field(real, tmp_path):
    bad = copy.deepcopy(real["scaling"])
    del bad["title"]
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bad))
    p = subprocess.run([sys.executable, "-m", "app", "report", "--root", str(extract("sno")), "--probe", str(f),
                        "--out", str(tmp_path / "r.html")], capture_output=True, text=True, cwd=REPO,
                       timeout=120, env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin",
                                         "COREMAP_STATE_DIR": str(tmp_path / "state")})
    assert p.returncode == 2 and p.stderr.strip() == (
        f"coremap: --probe {f}: a scaling result out of shape (object missing required field title); "
        "give the output of `coremap probe --json`"), p.stderr
    assert not (tmp_path / "r.html").exists()
