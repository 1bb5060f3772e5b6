"""A fuzz test per reader (issue 24, class 7): hypothesis builds capture trees and input files out of
links (absolute, relative, climbing out with '..', chains, loops), FIFOs, devices (links to /dev/zero,
/dev/urandom, /dev/null), huge sparse files, deep nesting and junk, and every reader is run on them. Each
run asserts: nothing outside the root is read (a secret file beside it never shows up in what comes
back), no call blocks longer than the reader's own timeout, memory stays bounded, and every refusal is
a CoremapError (one line), never another exception.

The readers: SysRoot (read, read_bytes, read_optional, read_small, listdir, listdir_small, exists,
readlink), the thread reader of a capture (read_tasks), app/inputs.py (read_input, open_input), the one
JSON decoder (load_json), a session (open_session) and a snapshot tarball (extract_tarball)."""
from __future__ import annotations

import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
import threading
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import CoremapError
from app.inputs import read_input
from app.machine.threads import read_tasks
from app.parse.json_text import load_json
from app.store.capture import extract_tarball
from app.store.session import open_session
from app.sysroot import SysRoot, confined

SECRET = b"coremap-fuzz-secret-5c1e"
TIMEOUT_S = 10.0                     # no reader may take longer on any of these trees
MEMORY = 64 << 20                    # nor hold more (tracemalloc's peak over the whole run)
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])

NAMES = st.sampled_from(["proc", "sys", "1", "2", "task", "stat", "cmdline", "comm", "status", "cpu0", "a", ".."])
PATHS = st.lists(NAMES, min_size=1, max_size=7).map("/".join)
KINDS = st.one_of(
    st.tuples(st.just("file"), st.binary(max_size=256)),
    st.tuples(st.just("sparse"), st.sampled_from([1 << 20, 9 << 20, 300 << 20, 4 << 30])),
    st.tuples(st.just("fifo"), st.none()),
    st.tuples(st.just("device"), st.sampled_from([(1, 5), (1, 8), (1, 3)])),     # zero, random, null
    st.tuples(st.just("dir"), st.none()),
    st.tuples(st.just("link"), st.sampled_from(["SECRET", "/dev/zero", "/dev/urandom", "/dev/null", "/proc/self",
                                                "/proc/self/task", "CLIMB", "loop", "stat", "../stat", "."])),
)
TREES = st.lists(st.tuples(PATHS, KINDS), min_size=1, max_size=25)


@pytest.fixture
def outside(tmp_path):
    secret = tmp_path / "outside" / "secret"
    secret.parent.mkdir()
    secret.write_bytes(SECRET + b"\n")
    return secret


def build(root: Path, tree, secret: Path) -> list[str]:
    """Make `tree` under `root`, skipping what clashes with what is there; the paths made."""
    made = []
    for rel, (kind, arg) in tree:
        p = root / rel
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            if kind == "file":
                p.write_bytes(arg)
            elif kind == "sparse":
                with open(p, "wb") as f:
                    f.truncate(arg)
            elif kind == "fifo":
                os.mkfifo(p)
            elif kind == "device":
                os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(*arg))     # root only: else skipped below
            elif kind == "dir":
                p.mkdir(exist_ok=True)
            else:
                depth = len(p.parent.relative_to("/").parts)
                target = {"SECRET": str(secret), "CLIMB": "/".join([".."] * depth) + str(secret),
                          "loop": p.name}.get(arg, arg)
                p.symlink_to(target)
        except OSError:
            continue            # a file where a folder is, a name taken: this tree cannot hold both
        made.append(rel)
    return made


def bounded(fn, *args, **kw):
    """fn(*args) on a thread: its value, or a CoremapError; fails the test when it takes longer than
    TIMEOUT_S or raises anything else."""
    out: list = []

    def run():
        try:
            out.append(fn(*args, **kw))
        except CoremapError as e:
            out.append(e)
        except BaseException as e:      # noqa: BLE001 - handed to the test's thread and failed there
            out.append(("crash", e))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(TIMEOUT_S)
    assert not t.is_alive(), f"{getattr(fn, '__name__', fn)}{args} blocked for more than {TIMEOUT_S} s"
    assert not (isinstance(out[0], tuple) and out[0][:1] == ("crash",)), f"{fn}{args}: {out[0][1]!r}"
    return out[0]


def never_secret(value) -> None:
    data = value if isinstance(value, bytes) else repr(value).encode()
    assert SECRET not in data, "a reader returned what lies outside its root"


@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    if request.param == "walk":
        monkeypatch.setattr(confined, "_openat2_works", False)
    return request.param


@SETTINGS
@given(tree=TREES)
def test_sysroot_reads_stay_inside_and_bounded(tmp_path_factory, outside, resolver, tree):
    root_dir = tmp_path_factory.mktemp("cap")
    made = build(root_dir, tree, outside)
    root = SysRoot(root_dir, check=False)
    tracemalloc.start()
    try:
        for rel in made + ["proc/1/task", "nowhere/x"]:
            p = root_dir / rel
            never_secret(bounded(root.read_optional, p, 1 << 20))
            never_secret(bounded(root.read_small, str(p), 1 << 16))
            never_secret(bounded(root.listdir, p))
            never_secret(bounded(root.listdir_small, str(p)))
            never_secret(bounded(root.readlink, p))
            bounded(root.exists, p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY, peak
    shutil.rmtree(root_dir, ignore_errors=True)


@SETTINGS
@given(tree=TREES, detail=st.sampled_from(["fast", "full"]))
def test_the_thread_reader_of_a_capture_stays_inside_and_bounded(tmp_path_factory, outside, resolver, tree, detail):
    root_dir = tmp_path_factory.mktemp("cap")
    # Around a real process tree, so the reader walks past the spoiled members.
    task = root_dir / "proc" / "1" / "task" / "1"
    task.mkdir(parents=True)
    (task / "stat").write_text("1 (init) S 0 " + " ".join(["0"] * 48) + "\n")
    build(root_dir / "proc", tree, outside)
    tracemalloc.start()
    try:
        never_secret(bounded(read_tasks, SysRoot(root_dir, check=False), detail=detail))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY, peak
    shutil.rmtree(root_dir, ignore_errors=True)


@SETTINGS
@given(kind=KINDS)
def test_the_input_reader_takes_regular_files_only_and_bounded(tmp_path_factory, outside, kind):
    folder = tmp_path_factory.mktemp("in")
    made = build(folder, [("input", kind)], outside)
    if not made:
        return
    tracemalloc.start()
    try:
        value = bounded(read_input, folder / "input", what="--file", limit=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY
    if kind[0] in ("fifo", "dir", "device") or kind[1] in ("/dev/zero", "/dev/urandom", "/dev/null", "/proc/self",
                                                   "/proc/self/task", "loop", "."):
        assert isinstance(value, CoremapError) and "\n" not in str(value), (kind, value)
    if kind[0] == "sparse" and kind[1] > 1 << 20:
        assert isinstance(value, CoremapError) and "more than" in str(value)


JSON_ATOMS = st.sampled_from([b"[", b"]", b"{", b"}", b'"', b",", b":", b"1", b"-", b"NaN", b"1e999",
                              b"\\", b'"\\u0000"', b"null", b" ", b"\xff", b"{}", b"[]"])


@SETTINGS
@given(parts=st.lists(st.tuples(JSON_ATOMS, st.integers(1, 5000)), max_size=20))
def test_the_json_decoder_never_raises_anything_else(parts):
    raw = b"".join(atom * n for atom, n in parts)
    tracemalloc.start()
    try:
        value = bounded(load_json, raw, what="fuzz", limit=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY
    assert not isinstance(value, CoremapError) or "\n" not in str(value)


MEMBERS = st.lists(st.tuples(st.sampled_from(["machine/proc/stat", "machine/sys", "manifest.json", "history.jsonl",
                                              "probes/1.json", "notes.md", "../evil", "/abs", "machine/l"]),
                             st.sampled_from([b"", b"{}", b"[" * 3000, b'{"format": 1, "contents": []}',
                                              b"\0" * 5000, b'{"t":0}\n' * 100])),
                   max_size=8)


@SETTINGS
@given(members=MEMBERS, link=st.sampled_from(["", "/etc/passwd", "../../x", "proc/stat"]))
def test_a_session_is_refused_or_opened_never_anything_else(tmp_path_factory, members, link):
    folder = tmp_path_factory.mktemp("sess")
    p = folder / "s.coremap"
    with zipfile.ZipFile(p, "w") as zf:
        names = set()
        for name, data in members:
            if name not in names:
                names.add(name)
                zf.writestr(name, data)
        if link:
            zi = zipfile.ZipInfo("machine/link")
            zi.create_system, zi.external_attr = 3, (0o120777 << 16)
            zf.writestr(zi, link)
    private = folder / "tmp"            # where the session's machine is extracted: seen by this test only
    private.mkdir()
    saved, tempfile.tempdir = tempfile.tempdir, str(private)
    try:
        s = bounded(open_session, p)
    finally:
        tempfile.tempdir = saved
    if not isinstance(s, CoremapError):
        assert s.machine_dir is None or os.path.realpath(s.machine_dir).startswith(str(private))
        s.close()
    else:
        assert "\n" not in str(s)
        assert list(private.iterdir()) == [], "a refusal left a folder behind"


@SETTINGS
@given(members=st.lists(st.tuples(st.sampled_from(["top/a", "top/b/c", "top/../x", "/abs", "other/d", "top/l"]),
                                  st.sampled_from(["file", "dir", "link-out", "link-in", "fifo", "big"])),
                        min_size=1, max_size=6))
def test_a_tarball_is_refused_or_extracted_inside(tmp_path_factory, members):
    dest = tmp_path_factory.mktemp("x")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, kind in members:
            ti = tarfile.TarInfo(name)
            data = b""
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind in ("link-out", "link-in"):
                ti.type, ti.linkname = tarfile.SYMTYPE, "/etc/passwd" if kind == "link-out" else "a"
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            elif kind == "big":
                ti.size = 300 << 20
                tf.fileobj.write(ti.tobuf())            # the header alone: its size is what is checked
                continue
            tf.addfile(ti, io.BytesIO(data))
    buf.seek(0)
    got = bounded(extract_tarball, buf, dest, "fuzz")
    for p in dest.rglob("*"):
        real = os.path.realpath(p)
        assert real.startswith(str(dest.resolve())) or not os.path.exists(real), p
    assert isinstance(got, (Path, CoremapError)), got
