"""JSON and archives (issue 24, class 4): every JSON decode goes through app/parse/json_text.py
load_json (a size cap, a depth limit, a memory bound, one line naming what it came from), and every
snapshot tarball is read back through app/store/capture.py (each member's size and the total capped,
tarfile's "data" filter). Sessions are opened and saved without reading what a capture's links point
to, without waiting on a FIFO, and in time even at their member limit."""
from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import threading
import time
import tracemalloc
import zipfile

import pytest

from app.parse.json_text import JsonInputError, load_json
from app.remote import protocol
from app.store.capture import MAX_MEMBER, SnapshotError, check_tarball, extract_tarball, take_snapshot
from app.store.session import Session, SessionError, open_session, save_session
from app.sysroot import SysRoot
from tests.hostile.conftest import SECRET, replace_with_link

DEEP = b"[" * 1500 + b"]" * 1500


def test_deep_json_is_one_line_not_a_recursion_error():
    for raw in (DEEP, b'{"a":' * 1500 + b"1" + b"}" * 1500, b"[" * 10_000):
        with pytest.raises(JsonInputError, match="^x: JSON nested deeper than 64 levels"):
            load_json(raw, what="x", limit=1 << 20)
    # Brackets inside strings are not nesting.
    assert load_json(b'["' + b"[" * 200 + b'"]', what="x", limit=1 << 20) == ["[" * 200]


def test_json_that_would_fill_memory_is_refused_before_decoding():
    raw = b"[" + b"{}," * (21 << 20) + b"{}]"                   # 63 MiB of empty objects: 1.5 GB decoded
    tracemalloc.start()
    try:
        with pytest.raises(JsonInputError, match="would take about"):
            load_json(raw, what="x", limit=64 << 20)
        with pytest.raises(protocol.ProtocolError, match="not a message"):
            protocol.loads(raw, "node7")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20, peak


def test_json_size_and_constants():
    with pytest.raises(JsonInputError, match="more than the 10 bytes"):
        load_json(b"[1,2,3,4,5,6]", what="x", limit=10)
    assert load_json(b"[NaN]", what="x", limit=100)[0] != 0
    with pytest.raises(JsonInputError, match="NaN is not a JSON number"):
        load_json(b"[NaN]", what="x", limit=100, constants=False)


# -- sessions -----------------------------------------------------------------------------------------------
def _zip(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.mark.parametrize("member,data", [("manifest.json", DEEP), ("history.jsonl", b'{"t":0}\n' + DEEP),
                                         ("probes/1.json", DEEP)])
def test_a_session_nested_too_deep_is_one_line(tmp_path, member, data):
    members = {member: data, "notes.md": b""}
    if member != "manifest.json":
        members["manifest.json"] = json.dumps({"format": 1, "contents": list(members)}).encode()
    p = _zip(tmp_path / "deep.coremap", members)
    with pytest.raises(SessionError, match="nested deeper than 64 levels") as e:
        open_session(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)


def test_a_session_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    fifo = tmp_path / "s.coremap"
    os.mkfifo(fifo)
    link = tmp_path / "zero.coremap"
    link.symlink_to("/dev/zero")
    for p, why in ((fifo, "is a pipe, not a file"), (link, "is a device or socket, not a file")):
        t0 = time.monotonic()
        with pytest.raises(SessionError, match=why):
            open_session(p)
        assert time.monotonic() - t0 < 5


@pytest.fixture
def spoiled(capture, secret):
    """The capture with its meta.json a link to a secret, its cmdline a link to /dev/zero and its
    softirqs a FIFO: what saving it as a session must neither read nor wait on."""
    meta = capture / ".coremap"
    meta.mkdir()
    (meta / "meta.json").symlink_to(secret)
    replace_with_link(capture / "proc" / "cmdline", "/dev/zero")
    (capture / "proc" / "softirqs").unlink()
    os.mkfifo(capture / "proc" / "softirqs")
    return capture


def test_saving_a_capture_never_reads_through_its_links(spoiled, tmp_path):
    out = tmp_path / "s.coremap"
    done = threading.Event()
    errors = []

    def save():
        try:
            save_session(out, Session(machine_dir=spoiled))
        except Exception as e:     # noqa: BLE001 - handed to the test thread
            errors.append(e)
        done.set()
    threading.Thread(target=save, daemon=True).start()
    assert done.wait(60), "saving a session waited on a FIFO or read /dev/zero"
    assert not errors, errors
    with zipfile.ZipFile(out) as zf:
        for zi in zf.infolist():
            assert SECRET.encode() not in zf.read(zi)
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["host"] == "capture"


def test_saving_a_capture_with_a_huge_sparse_file_is_refused(capture, tmp_path):
    with open(capture / "proc" / "interrupts", "r+b") as f:
        f.truncate(2 << 30)                  # 2 GB of nothing on disk
    t0 = time.monotonic()
    with pytest.raises(SessionError, match="proc/interrupts: is 2,147,483,648 bytes"):
        save_session(tmp_path / "s.coremap", Session(machine_dir=capture))
    assert time.monotonic() - t0 < 10


def test_a_big_session_shares_its_repeated_files(tmp_path):
    """400,000 empty members (the limit is 500,000) took more than 20 s, 40 s of it creating files:
    repeated small contents are now hard links to one file."""
    from tests.machines import extract
    p = tmp_path / "many.coremap"
    save_session(p, Session(machine_dir=extract("sno")))
    with zipfile.ZipFile(p) as zin, zipfile.ZipFile(tmp_path / "more.coremap", "w") as zout:
        extra = [f"machine/x/{i // 1000}/{i}" for i in range(20_000)]
        for zi in zin.infolist():
            if zi.filename != "manifest.json":
                zout.writestr(zi, zin.read(zi))
        for name in extra:
            zout.writestr(name, b"")
        contents = [zi.filename for zi in zin.infolist() if zi.filename != "manifest.json"] + extra
        zout.writestr("manifest.json", json.dumps({"format": 1, "contents": contents}))
    s = open_session(tmp_path / "more.coremap")
    try:
        st = [os.stat(s.machine_dir / "x" / str(i // 1000) / str(i)) for i in (0, 7_777, 19_999)]
        assert len({x.st_ino for x in st}) < 3 and st[0].st_nlink > 1
    finally:
        s.close()


# -- tarballs ---------------------------------------------------------------------------------------------
def _tar(members) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for ti, data in members:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return buf


def _info(name, kind=tarfile.REGTYPE, size=0, linkname=""):
    ti = tarfile.TarInfo(name)
    ti.type, ti.size, ti.linkname = kind, size, linkname
    return ti


@pytest.mark.parametrize("members,why", [
    ([(_info("top/a", size=MAX_MEMBER + 1), None)], "more than"),
    ([(_info("top/dev", tarfile.CHRTYPE), None)], "which no coremap snapshot holds"),
    ([(_info("/etc/x"), b"")], "which no coremap snapshot holds"),
    ([(_info("top/l", tarfile.SYMTYPE, linkname="/etc/shadow"), None)], "leaves it"),
    ([(_info("top/l", tarfile.SYMTYPE, linkname="../../x"), None)], "leaves it"),
    ([(_info("top/a"), b""), (_info("other/b"), b"")], "more than one top folder"),
], ids=["member-too-large", "device", "absolute", "link-out", "link-up", "two-tops"])
def test_a_tarball_is_checked_member_by_member(members, why, tmp_path):
    if members[0][0].size > MAX_MEMBER:
        # The declared size is checked before any data is read: the header alone says it.
        buf = io.BytesIO(gzip.compress(members[0][0].tobuf()))
    else:
        buf = _tar(members)
    with pytest.raises(SnapshotError, match=why):
        extract_tarball(buf, tmp_path / "x", "node7 sent a snapshot")
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").rglob("*"))


def test_a_snapshot_of_a_capture_is_bounded_in_all(capture, tmp_path):
    """240 sparse 8 MiB IRQ files took 2 GB: the capture's files are bounded in all, not only each."""
    for irq in range(40):
        folder = capture / "proc" / "irq" / str(1000 + irq)
        folder.mkdir(parents=True)
        with open(folder / "smp_affinity_list", "wb") as f:
            f.truncate(8 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(SnapshotError, match="more than the 256 MiB a machine's capture does"):
            take_snapshot(tmp_path / "s.tar.gz", SysRoot(capture))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400 << 20
    assert not (tmp_path / "s.tar.gz").exists()


def test_a_snapshot_reads_back_the_one_way(capture, tmp_path):
    res = take_snapshot(tmp_path / "s.tar.gz", SysRoot(capture))
    with open(res.path, "rb") as f:
        t = check_tarball(f, str(res.path))
        f.seek(0)
        top = extract_tarball(f, tmp_path / "x", str(res.path))
    assert t.top == res.top and top == tmp_path / "x" / res.top and SysRoot(top).exists(top / "proc")


# Where JSON is still decoded by another function, and why (each to move to load_json).
JSON_ALLOWED = {
    "app/pinning/journal_lines.py": "the journal's own typed decoder (msgspec, in C) and its fallback; lines "
                                    "bounded by the journal's size cap and MAX_LINE (the lead's: to move)",
    "app/pinning/helper.py": "the helper's request (4 KiB at most) and its reply line (the lead's request "
                             "handling: to move)",
    "widgets/pinning/mime.py": "a dropped pin payload (the lead's: to move)",
}


def test_every_json_decode_goes_through_load_json():
    import ast
    from tests.hostile.conftest import REPO
    from tests.hostile.sources import product_modules
    bad = []
    for path, tree in product_modules():
        rel = str(path.relative_to(REPO))
        if rel == "app/parse/json_text.py" or rel in JSON_ALLOWED:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = ast.unparse(node.func)
                if name in ("json.loads", "json.load") or name.endswith(("json.decode", ".Decoder", "raw_decode")):
                    bad.append(f"{rel}:{node.lineno} {name}")
    assert bad == [], "decode JSON with app/parse/json_text.py load_json or decode_json:\n" + "\n".join(bad)
