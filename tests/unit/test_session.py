"""Sessions: a round trip keeps every figure; every kind of bad file is refused with a SessionError
that names the file, and nothing is written or extracted."""
import hashlib
import json
import os
import stat
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app
from app.store import session as S
from app.machine.topology import read_topology
from app.store.session import (ProbeRecord, Session, SessionError, history_tick, open_session, save_session,
                               session_from_root)
from app.sysroot import SysRoot
from probes.results import check_result
from tests.machines import extract


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Point tempfile at an empty folder, so a test can see whether anything was extracted."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


@pytest.fixture(scope="module")
def sno_session_file(tmp_path_factory):
    """A saved session of the sno fixture (12 CPUs, with /proc/interrupts)."""
    root = SysRoot(extract("sno"))
    s = session_from_root(root, history=[history_tick(0.0, {0: {"busy": 0.25}}, {"24": {3: 812.0}})],
                          notes="# sno\n")
    p = tmp_path_factory.mktemp("sess") / "sno.coremap"
    save_session(p, s)
    return p


def _extracted(tmp: Path) -> list[str]:
    """Session extractions left in the temporary folder (the fixture cache may live there too)."""
    return [q.name for q in tmp.iterdir() if q.name.startswith("coremap-session-")]


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _zip(path: Path, members: dict, manifest: dict | None = None, links: dict | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data)
        for name, target in (links or {}).items():
            zi = zipfile.ZipInfo(name)
            zi.create_system = 3
            zi.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(zi, target)
        if manifest is not None:
            zf.writestr("manifest.json", json.dumps(manifest))
    return path


def _manifest(contents, fmt=1):
    return {"format": fmt, "coremap": "0.1.0", "created": "2026-11-21T10:32:00+00:00", "host": "h",
            "contents": list(contents)}


# -- round trip ----------------------------------------------------------------------------------

def test_round_trip_keeps_every_figure(tmp_path, private_tmp):
    root = SysRoot(extract("sno"))
    topo = read_topology(root)
    probe = {"probe": "jitter", "cpu": 0, "loop_ns": 31.5, "sampled_seconds": 0.3, "achieved_duty": 0.99,
             "buckets": [[1000, 5], [2000, 3], [64000, 1]],
             "percentiles": {"p50": 1000, "p90": 2000, "p99": 64000, "p99.9": 64000, "max": 64000}}
    journal = [
        {"id": 1, "kind": "thread", "target_id": 4242, "before": [0, 1], "requested": [1], "after": [1],
         "time": 1.5, "state": "done"},
        {"id": 2, "kind": "irq", "target_id": 24, "before": [0, 1], "requested": [0], "after": [0],
         "time": 2.5, "state": "done"},
    ]
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    s = session_from_root(root, history=[history_tick(t, {0: {"busy": 0.1 * t}}, {"24": {1: 100.0 + t}})
                                         for t in range(3)],
                          probes=[ProbeRecord(probe, b"HISTFAKE-but-opaque-bytes")], journal=journal,
                          screenshots={"grid.png": png, "plot.svg": b"<svg/>"}, notes="note ü\n")
    p = tmp_path / "a.coremap"
    save_session(p, s)
    with zipfile.ZipFile(p) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["format"] == 1 and manifest["coremap"] == app.__version__
    assert manifest["host"] == extract("sno").name      # a capture without meta.json: its folder name
    for m in ("history.jsonl", "probes/1.json", "probes/1.hlog", "journal.jsonl", "notes.md",
              "screenshots/grid.png", "screenshots/plot.svg", "machine/proc/interrupts"):
        assert m in manifest["contents"]

    o = open_session(p, check_result)
    try:
        assert [pr.result for pr in o.probes] == [probe]
        assert o.probes[0].result["percentiles"]["p99.9"] == 64000
        assert o.probes[0].hlog == b"HISTFAKE-but-opaque-bytes"
        assert [(j["target_id"], j["before"], j["after"]) for j in o.journal] == [(4242, [0, 1], [1]), (24, [0, 1], [0])]
        assert o.screenshots == {"grid.png": png, "plot.svg": b"<svg/>"}
        assert o.notes == "note ü\n"
        assert o.history[2] == {"t": 2.0, "cpu": {"0": {"busy": 0.2}}, "irq": {"24": {"1": 102}}}
        assert not o.root.is_live
        reopened = read_topology(o.root)
        assert len(reopened.cpus) == len(topo.cpus) == 12
        assert reopened.online == topo.online
        assert o.root.read(o.root.proc("interrupts")) == root.read(root.proc("interrupts"))
        # The extraction is private to this user.
        assert (o.machine_dir.parent.stat().st_mode & 0o077) == 0
        # Symlinks survive (sysfs bus/ links), and stay inside.
        links = [q for q in o.machine_dir.rglob("*") if q.is_symlink()]
        orig_links = [q for q in root.root.rglob("*") if q.is_symlink()]
        assert len(links) == len(orig_links)
    finally:
        o.close()
    assert not o.machine_dir.exists()
    assert _extracted(private_tmp) == []


def test_history_tick_is_sparse_and_rounded():
    t = history_tick(1.23456, {0: {"busy": 0.0, "irq": 0.0}, 1: {"busy": 0.123456}},
                     {"24": {0: 0.0, 1: 12345.678}, "25": {0: 0.0}})
    assert t == {"t": 1.235, "cpu": {"1": {"busy": 0.1235}}, "irq": {"24": {"1": 12350}}}


def test_session_without_machine_round_trips(tmp_path):
    p = tmp_path / "m.coremap"
    save_session(p, Session(notes="only notes", host="w1"))
    o = open_session(p)
    assert o.machine_dir is None and o.notes == "only notes" and o.host == "w1"
    with pytest.raises(SessionError, match="holds no machine snapshot"):
        o.root


def test_failed_save_keeps_previous_file(tmp_path):
    p = tmp_path / "keep.coremap"
    save_session(p, Session(notes="v1", host="h"))
    before = _digest(p)
    with pytest.raises(SessionError, match="snapshot folder is missing"):
        save_session(p, Session(machine_dir=tmp_path / "gone", notes="v2"))
    assert _digest(p) == before
    assert sorted(q.name for q in tmp_path.iterdir()) == ["keep.coremap"]


def test_bad_screenshot_name_refused_on_save(tmp_path):
    with pytest.raises(SessionError, match="plain file name"):
        save_session(tmp_path / "x.coremap", Session(screenshots={"../x.png": b""}))
    assert not (tmp_path / "x.coremap").exists()


# -- bad input -----------------------------------------------------------------------------------

def _refused(p: Path, private_tmp: Path, match: str) -> SessionError:
    before = _digest(p)
    with pytest.raises(SessionError, match=match) as ei:
        open_session(p)
    assert str(p) in str(ei.value)
    assert _digest(p) == before, "opening must not change the file"
    assert _extracted(private_tmp) == [], "a refused file must extract nothing"
    return ei.value


def test_truncated_zip(sno_session_file, tmp_path, private_tmp):
    data = sno_session_file.read_bytes()
    p = tmp_path / "cut.coremap"
    p.write_bytes(data[: len(data) // 2])
    e = _refused(p, private_tmp, "truncated or damaged")
    assert "copy or download it again" in str(e)


def test_truncated_by_only_the_last_bytes(sno_session_file, tmp_path, private_tmp):
    data = sno_session_file.read_bytes()
    p = tmp_path / "cut.coremap"
    p.write_bytes(data[:-10])
    _refused(p, private_tmp, "truncated or damaged")


def test_not_a_zip(tmp_path, private_tmp):
    p = tmp_path / "notes.coremap"
    p.write_text("just some text, not a zip\n" * 10)
    _refused(p, private_tmp, "not a coremap session \\(not a zip file\\)")


def test_empty_file(tmp_path, private_tmp):
    p = tmp_path / "empty.coremap"
    p.write_bytes(b"")
    _refused(p, private_tmp, "not a zip file")


def test_foreign_zip(tmp_path, private_tmp):
    p = _zip(tmp_path / "photos.zip", {"holiday/readme.txt": b"hi", "machine/proc/stat": b"cpu 1 2 3"})
    _refused(p, private_tmp, "is a zip but not a coremap session \\(it has no manifest.json\\)")


def test_newer_format(tmp_path, private_tmp):
    m = _manifest(["notes.md"], fmt=2)
    m["coremap"] = "9.0.0"
    p = _zip(tmp_path / "new.coremap", {"notes.md": b"x"}, m)
    e = _refused(p, private_tmp, "made by coremap 9.0.0 \\(format 2\\)")
    assert "reads format 1: upgrade coremap" in str(e)


@pytest.mark.parametrize("fmt", [0, "1", None, True])
def test_invalid_format_number(tmp_path, private_tmp, fmt):
    p = _zip(tmp_path / "f.coremap", {"notes.md": b"x"}, _manifest(["notes.md"], fmt=fmt))
    _refused(p, private_tmp, "manifest.json: format: expected int")


def test_manifest_not_json(tmp_path, private_tmp):
    p = _zip(tmp_path / "m.coremap", {"manifest.json": b"{not json"})
    _refused(p, private_tmp, "manifest.json: not JSON")


def test_manifest_lists_missing_member(tmp_path, private_tmp):
    p = _zip(tmp_path / "m.coremap", {"notes.md": b"x"}, _manifest(["notes.md", "probes/1.json"]))
    _refused(p, private_tmp, "lists 'probes/1.json', which the zip lacks")


@pytest.mark.parametrize("evil", ["../evil.txt", "machine/../../evil.txt", "/etc/evil", "machine/./x",
                                  "C:/evil", "machine\\..\\evil"])
def test_zip_slip_refuses_whole_file(tmp_path, private_tmp, evil):
    members = {"machine/proc/stat": b"cpu 1 2 3\n", evil: b"pwned"}
    p = _zip(tmp_path / "slip.coremap", members, _manifest(members))
    _refused(p, private_tmp, "refused")
    assert not (tmp_path / "evil.txt").exists() and not Path("/etc/evil").exists()


@pytest.mark.parametrize("target", ["/etc", "../../..", "../../../etc/passwd", "sys/../../.."])
def test_symlink_escaping_refused(tmp_path, private_tmp, target):
    members = {"machine/proc/stat": b"cpu 1 2 3\n"}
    p = _zip(tmp_path / "link.coremap", members, _manifest([*members, "machine/proc/link"]),
             links={"machine/proc/link": target})
    _refused(p, private_tmp, "escapes the session folder")


def test_symlink_chain_escaping_refused(tmp_path, private_tmp):
    # Each link looks harmless on its own (lexically inside machine/), but a/b/c -> machine and
    # z -> a/b/c/../../.. then climbs out of the extraction folder for real.
    members = {"machine/proc/stat": b"cpu 1 2 3\n"}
    links = {"machine/a/b/c": "../..", "machine/z": "a/b/c/../../.."}
    p = _zip(tmp_path / "chain.coremap", members, _manifest([*members, *links]), links=links)
    _refused(p, private_tmp, "outside the session folder")


def test_symlink_inside_is_kept(tmp_path, private_tmp):
    members = {"machine/proc/stat": b"cpu 1 2 3\n", "machine/sys/devices/x/online": b"1\n"}
    links = {"machine/sys/bus/x": "../devices/x"}
    p = _zip(tmp_path / "ok.coremap", members, _manifest([*members, *links]), links=links)
    o = open_session(p)
    try:
        assert (o.machine_dir / "sys/bus/x/online").read_text() == "1\n"
    finally:
        o.close()


def test_oversize_total_refused(tmp_path, private_tmp, monkeypatch):
    members = {"notes.md": b"n" * 5000, "history.jsonl": b"{}\n" * 10}
    p = _zip(tmp_path / "big.coremap", members, _manifest(members))
    monkeypatch.setattr(S, "MAX_TOTAL_BYTES", 4096)
    _refused(p, private_tmp, "unpacks to .* bytes, more than the 4096")


def test_oversize_member_refused(tmp_path, private_tmp, monkeypatch):
    members = {"notes.md": b"n" * 5000}
    p = _zip(tmp_path / "big.coremap", members, _manifest(members))
    monkeypatch.setattr(S, "MAX_MEMBER_BYTES", 4096)
    _refused(p, private_tmp, "'notes.md' unpacks to 5000 bytes")


def test_too_many_members_refused(tmp_path, private_tmp, monkeypatch):
    members = {f"screenshots/s{i}.png": b"x" for i in range(20)}
    p = _zip(tmp_path / "many.coremap", members, _manifest(members))
    monkeypatch.setattr(S, "MAX_MEMBERS", 10)
    _refused(p, private_tmp, "holds 21 members")


def test_lying_size_header_refused(tmp_path, private_tmp):
    # A member whose local data inflates past the size its header declares (a zip bomb's trick).
    members = {"notes.md": b"A" * 100}
    p = _zip(tmp_path / "lie.coremap", members, _manifest(members))
    raw = bytearray(p.read_bytes())
    # Patch the central directory's uncompressed size of notes.md from 100 to 10.
    cd = raw.find(b"PK\x01\x02")     # the first central directory entry is notes.md's
    assert raw[cd + 24:cd + 28] == (100).to_bytes(4, "little")
    raw[cd + 24:cd + 28] = (10).to_bytes(4, "little")
    p.write_bytes(bytes(raw))
    _refused(p, private_tmp, "notes.md")


def test_machine_folder_that_is_not_a_machine(tmp_path, private_tmp):
    members = {"machine/readme.txt": b"hello"}
    p = _zip(tmp_path / "nm.coremap", members, _manifest(members))
    _refused(p, private_tmp, "not a machine snapshot")


def test_missing_and_folder_paths(tmp_path):
    with pytest.raises(SessionError, match="no such file"):
        open_session(tmp_path / "nope.coremap")
    with pytest.raises(SessionError, match="not a file"):
        open_session(tmp_path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_damaged_bytes_give_session_error_or_a_session(tmp_path, data):
    # Any byte damage either still opens (damage in padding) or raises SessionError; never another
    # exception, never an extraction left behind.
    src = tmp_path / "small.coremap"
    if not src.exists():
        save_session(src, Session(history=[history_tick(0, {0: {"busy": 0.5}})], notes="n" * 300,
                                  probes=[ProbeRecord({"probe": "jitter", "cpu": 1})], host="h"))
    raw = bytearray(src.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    p = tmp_path / "damaged.coremap"
    p.write_bytes(bytes(raw))
    try:
        o = open_session(p)
    except SessionError as e:
        assert str(p) in str(e)
    else:
        o.close()


# -- the real thing: a probe run and pins on this process's own threads ------------------------------

@pytest.mark.usefixtures("live_machine")
def test_round_trip_with_real_probe_and_real_pins(tmp_path, private_tmp):
    import io as _io
    import subprocess
    import sys
    import threading
    from app.pinning.service import AffinityService, PinRequest, PinTarget
    from app.pinning.journal import Journal
    from app.store.session import journal_rows
    from probes import histogram
    from probes.jitter import measure as jitter

    cpus = sorted(os.sched_getaffinity(0))
    # A real 0.3 s jitter probe on the first allowed CPU, summarised as the CLI does.
    proc = subprocess.run([sys.executable, "-m", "probes", "jitter", "--cpu", str(cpus[0]), "--seconds", "0.3"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
    result = jitter.summarize(lines)
    hlog = _io.StringIO()
    histogram.write_hlog(hlog, [(i * 0.1, 0.1, histogram.buckets_to_histogram(l["buckets"]))
                                for i, l in enumerate(x for x in lines if x.get("type") == "interval")])

    # Two real pins of this test's own threads, journalled by the AffinityService.
    events = [threading.Event(), threading.Event()]
    threads = [threading.Thread(target=e.wait) for e in events]
    for t in threads:
        t.start()
    try:
        journal = Journal(tmp_path / "journal.jsonl")
        svc = AffinityService(SysRoot("/"), journal)
        r1 = svc.apply(PinRequest((PinTarget("thread", threads[0].native_id),), (cpus[0],)))
        r2 = svc.apply(PinRequest((PinTarget("thread", threads[1].native_id),), (cpus[-1],)))
        assert r1[0].ok and r2[0].ok
        entries = journal.entries()
    finally:
        for e in events:
            e.set()
        for t in threads:
            t.join()
    assert len(entries) == 2

    root = SysRoot(extract("sno"))
    s = session_from_root(root, probes=[ProbeRecord(result, hlog.getvalue().encode())],
                          journal=journal_rows(entries))
    p = tmp_path / "real.coremap"
    save_session(p, s)
    o = open_session(p, check_result)
    try:
        got = o.probes[0]
        assert got.result["percentiles"] == result["percentiles"]
        assert got.result["percentiles"]["max"] > 0
        # The hlog reads back into the same histogram the buckets give.
        back = histogram.parse_hlog(got.hlog.decode()).merged()
        assert histogram.percentiles(back)["p99"] == histogram.percentiles(
            histogram.buckets_to_histogram(result["buckets"]))["p99"]
        pins = [(j["target_id"], tuple(j["requested"]), tuple(j["after"]), j["state"]) for j in o.journal]
        assert pins == [(threads[0].native_id, (cpus[0],), (cpus[0],), "done"),
                        (threads[1].native_id, (cpus[-1],), (cpus[-1],), "done")]
        assert len(read_topology(o.root).cpus) == 12
    finally:
        o.close()


def test_live_machine_is_captured_then_saved(tmp_path):
    s = session_from_root(SysRoot("/"), notes="live", capture_interval=0.2)
    try:
        assert s.machine_dir.is_dir() and (s.machine_dir / ".coremap" / "meta.json").exists()
        p = tmp_path / "live.coremap"
        save_session(p, s)
    finally:
        s.close()
    o = open_session(p)
    try:
        assert not o.root.is_live and o.root.later() is not None      # the second capture came along
        assert read_topology(o.root).online == read_topology(SysRoot("/")).online
    finally:
        o.close()
