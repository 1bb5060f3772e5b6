"""Sessions: one `.coremap` file that reopens what was seen, on any workstation.

A session is a zip (so `unzip -l` explains it) holding:

    manifest.json          {"format": 1, "coremap": "0.1.0", "created": ISO-8601, "host": ..., "contents": [...]}
    machine/               the machine snapshot (sys/, proc/, .coremap/meta.json): a SysRoot once extracted
    history.jsonl          the sampled history shown, one compact JSON object per tick (see history_tick)
    probes/<n>.json        probe results (the JSON objects the probe runner prints)
    probes/<n>.hlog        the same histogram in HdrHistogram's log format, when one was written
    verify/<n>.json        a before / after verification of quiet CPUs (probes/verify.py)
    journal.jsonl          the pin journal (target, before, requested, after, time, state)
    screenshots/NAME.png|svg
    notes.md

Opening is defensive, because a session is a file someone mailed you: everything is checked
(zip structure, manifest, format number, every member's name, symlink targets, member count,
total uncompressed size) BEFORE one byte is extracted, and a refusal leaves nothing behind.
The rules against "zip slip" follow the ones CPython's own docs warn about in zipfile.extract
("Never extract archives from untrusted sources without prior inspection").
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import errno
import json
import os
import posixpath
import re
import shutil
import socket
import stat
import tempfile
import weakref
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec

import app
from app.atomic import atomic_writer
from app.errors import CoremapError, SysRootReadError
from app.inputs import open_input
from app.parse.json_text import JsonInputError, Meta, decode_json, load_json
from app.store.results import clean_history, clean_journal_rows, clean_verification
from app.sysroot import SysRoot

FORMAT = 1
MANIFEST = "manifest.json"
MACHINE = "machine/"
HISTORY = "history.jsonl"
JOURNAL = "journal.jsonl"
NOTES = "notes.md"
PROBES = "probes/"
SCREENSHOTS = "screenshots/"
VERIFY = "verify/"

# Bounds on what one session may unpack to. A 112-CPU machine snapshot is ~19,000 members and
# ~10 MB uncompressed; these leave two orders of magnitude of room and stop a zip bomb.
MAX_TOTAL_BYTES = 2 * 1024 ** 3
MAX_MEMBERS = 500_000
MAX_MEMBER_BYTES = 512 * 1024 ** 2
MAX_SESSION_BYTES = MAX_TOTAL_BYTES         # the file itself, compressed

_SCREENSHOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.(png|svg)$")
_PROBE_MEMBER = re.compile(r"^probes/([0-9]{1,6})\.(json|hlog)$")
_VERIFY_MEMBER = re.compile(r"^verify/([0-9]{1,6})\.json$")


class SessionError(CoremapError):
    """A .coremap file that cannot be opened or saved; the message names the file and what to do."""


@dataclass
class ProbeRecord:
    """One probe run: its result object (probe, cpu, loop_ns, sampled_seconds, achieved_duty,
    buckets, percentiles) and, when there is one, its HdrHistogram log."""
    result: dict
    hlog: bytes | None = None


@dataclass
class Session:
    """What a session file holds. `machine_dir` is a folder with sys/ and proc/: a capture made for
    saving, or (after open_session) a private temporary folder removed by close()."""
    machine_dir: Path | None = None
    history: list[dict] = field(default_factory=list)
    probes: list[ProbeRecord] = field(default_factory=list)
    journal: list[dict] = field(default_factory=list)
    screenshots: dict[str, bytes] = field(default_factory=dict)
    notes: str = ""
    verifications: list[dict] = field(default_factory=list)     # before / after runs of quiet CPUs
    host: str = ""
    created: str = ""
    coremap_version: str = app.__version__
    source: Path | None = None            # the file it was opened from
    problems: list[str] = field(default_factory=list)   # what opening left out (app/store/results.py)
    _cleanup: object = field(default=None, repr=False, compare=False)

    @property
    def root(self) -> SysRoot:
        """The embedded machine as a SysRoot (not live: nothing can be pinned on it)."""
        if self.machine_dir is None:
            raise SessionError(f"{self.source or 'this session'}: holds no machine snapshot; "
                               "save it again from a window that shows a machine")
        return SysRoot(self.machine_dir)

    def close(self) -> None:
        """Remove the temporary folder open_session extracted the machine into."""
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None


# -- history ----------------------------------------------------------------------------------

def _compact(x: float) -> float | int:
    """4 significant digits: a rate shown in a table needs no more, and the file stays small."""
    if x == 0:
        return 0
    r = float(f"{x:.4g}")
    return int(r) if r.is_integer() and abs(r) < 2 ** 53 else r


def history_tick(t: float, cpu: dict[int, dict[str, float]] | None = None,
                 irq: dict[str, dict[int, float]] | None = None) -> dict:
    """One history.jsonl line: `t` seconds since the first tick; per-CPU metrics
    ({cpu: {"busy": 0.42, "irq": 1200.0}}) and per-IRQ per-CPU rates ({"24": {3: 812.0}}).
    Zero values are left out (most IRQs fire on one or two CPUs), numbers keep 4 digits."""
    out: dict = {"t": round(float(t), 3)}
    if cpu:
        out["cpu"] = {str(c): {k: _compact(v) for k, v in m.items() if v}
                      for c, m in cpu.items() if any(m.values())}
    if irq:
        out["irq"] = {str(i): {str(c): _compact(v) for c, v in per.items() if v}
                      for i, per in irq.items() if any(per.values())}
    return out


# -- saving -------------------------------------------------------------------------------------

def journal_rows(entries) -> list[dict]:
    """Pin journal entries (app.pinning.journal.JournalEntry values) as the dicts journal.jsonl holds."""
    return [dataclasses.asdict(e) if dataclasses.is_dataclass(e) else dict(e) for e in entries]


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, separators=(",", ":"), sort_keys=True) + "\n" for r in rows).encode()


def _symlink_info(name: str, target: str) -> zipfile.ZipInfo:
    # Unix zip tools keep a symlink as a member whose data is the link target and whose
    # external_attr high 16 bits are the st_mode with S_IFLNK (Info-ZIP's convention).
    zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    zi.create_system = 3
    zi.external_attr = (stat.S_IFLNK | 0o777) << 16
    return zi


MAX_DEPTH = 64              # folders below a capture's root; /sys's deepest are about 20


def _add_machine(zf: zipfile.ZipFile, folder: Path, contents: list[str]) -> None:
    if not folder.is_dir():
        raise SessionError(f"{folder}: the machine snapshot folder is missing; capture the machine again")
    # Its files are read as coremap reads a capture (SysRoot: never through a link out of it, regular
    # files only, each bounded by its kind's limit), and their total bounded as an opened session is.
    root, total = SysRoot(folder, check=False), 0
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(folder)
        if len(rel_dir.parts) > MAX_DEPTH:
            # os.walk recurses: 1,500 levels stopped the save with a RecursionError (issue 32)
            raise SessionError(f"{folder}: its folders nest more than {MAX_DEPTH} deep; not a machine capture")
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath, name)
            arc = MACHINE + (rel_dir / name).as_posix()
            if arc.startswith(MACHINE + "./"):
                arc = MACHINE + arc[len(MACHINE) + 2:]
            if full.is_symlink():
                zf.writestr(_symlink_info(arc, ""), os.readlink(full))
            elif full.is_file():
                try:
                    data = root.read_bytes(full)
                except SysRootReadError as e:
                    raise SessionError(f"{e}; a session cannot hold it: remove it from the capture") from None
                total += len(data)
                if total > MAX_TOTAL_BYTES:
                    raise SessionError(f"{folder}: its files hold more than the {MAX_TOTAL_BYTES:,} bytes a "
                                       "session may; not a machine capture")
                zf.writestr(zipfile.ZipInfo.from_file(full, arc), data, compress_type=zipfile.ZIP_DEFLATED)
            else:
                continue  # sockets, fifos: a capture holds none; nothing to keep
            contents.append(arc)


def save_session(path: str | os.PathLike, session: Session) -> None:
    """Write `session` to `path` atomically: a failure leaves the previous file as it was."""
    path = Path(path)
    for name in session.screenshots:
        if not _SCREENSHOT_NAME.match(name):
            raise SessionError(f"{path}: screenshot name {name!r} must be a plain file name ending in .png or .svg")
    created = session.created or _now_iso()
    host = session.host or _host_of(session)
    contents: list[str] = []
    try:
        with atomic_writer(path) as f:
            with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
                def put(name: str, data: bytes) -> None:
                    zf.writestr(zipfile.ZipInfo(name, date_time=_zip_time()), data,
                                compress_type=zipfile.ZIP_DEFLATED)
                    contents.append(name)
                if session.machine_dir is not None:
                    _add_machine(zf, Path(session.machine_dir), contents)
                put(HISTORY, _jsonl(session.history))
                for n, probe in enumerate(session.probes, 1):
                    put(f"{PROBES}{n}.json", json.dumps(probe.result, indent=1, sort_keys=True).encode())
                    if probe.hlog is not None:
                        put(f"{PROBES}{n}.hlog", probe.hlog)
                put(JOURNAL, _jsonl(session.journal))
                for n, v in enumerate(session.verifications, 1):
                    put(f"{VERIFY}{n}.json", json.dumps(v, indent=1, sort_keys=True).encode())
                for name, data in sorted(session.screenshots.items()):
                    put(SCREENSHOTS + name, data)
                put(NOTES, session.notes.encode())
                manifest = {"format": FORMAT, "coremap": session.coremap_version or app.__version__,
                            "created": created, "host": host, "contents": contents}
                # The manifest goes last so `contents` is complete; readers find it by name.
                zf.writestr(zipfile.ZipInfo(MANIFEST, date_time=_zip_time()),
                            json.dumps(manifest, indent=1).encode(), compress_type=zipfile.ZIP_DEFLATED)
    except OSError as e:
        raise SessionError(f"{path}: cannot save the session ({e}); choose another folder") from None


def _zip_time() -> tuple:
    t = _dt.datetime.now()
    return (max(t.year, 1980), t.month, t.day, t.hour, t.minute, t.second)


def _host_of(session: Session) -> str:
    if session.machine_dir is not None:
        # Through SysRoot: a capture's meta.json may be a link out of it, a FIFO or /dev/zero.
        with contextlib.suppress(CoremapError):
            h = (SysRoot(session.machine_dir, check=False).snapshot_meta() or {}).get("host")
            if h:
                return str(h)
        return Path(session.machine_dir).name
    return socket.gethostname()


def session_from_root(root: SysRoot, *, history: list[dict] | None = None,
                      probes: list[ProbeRecord] | None = None, journal: list[dict] | None = None,
                      screenshots: dict[str, bytes] | None = None, notes: str = "",
                      capture_interval: float = 0.5) -> Session:
    """A Session for `root`. A captured root is embedded as it is; the live machine is captured
    first with `coremap snapshot`'s capture (counters twice, `capture_interval` s apart, so the
    reopened session has rates), into a temporary folder the Session owns."""
    s = Session(history=list(history or []), probes=list(probes or []), journal=list(journal or []),
                screenshots=dict(screenshots or {}), notes=notes)
    if not root.is_live:
        s.machine_dir = root.root
        return s
    from app.store.capture import MAX_TARBALL, extract_tarball, take_snapshot
    tmp = Path(tempfile.mkdtemp(prefix="coremap-capture-"))
    s._cleanup = weakref.finalize(s, shutil.rmtree, str(tmp), True)
    # `coremap snapshot`'s own capture (a tarball with one top folder), read back the one way a
    # snapshot tarball is (checked, counted, tarfile's "data" filter) into the session's folder.
    res = take_snapshot(tmp / "capture.tar.gz", root, interval=capture_interval, second=capture_interval > 0)
    with open_input(res.path, what="", limit=MAX_TARBALL) as f:
        s.machine_dir = extract_tarball(f, tmp / "x", str(res.path))
    res.path.unlink()
    s.host = socket.gethostname()
    return s


# -- opening ------------------------------------------------------------------------------------

def _json_member(path: Path, name: str, data: bytes, clean, what: str, problems: list[str], *,
                 may_leave_out: bool = False) -> dict | None:
    """A JSON member as app.store.results' `clean` keeps it, what it left out added to `problems`;
    refused (the file is damaged) when it is not JSON or not `what` — or, `may_leave_out`, left out
    (None) with clean's note: one probe run out of shape does not take the session with it."""
    try:
        obj = load_json(data, what=name, limit=MAX_MEMBER_BYTES)
    except JsonInputError as e:
        raise _refuse(path, f"{e} (the file is damaged)") from None
    kept, notes = clean(obj, name)
    problems.extend(notes)
    if kept is None and not may_leave_out:
        raise _refuse(path, f"{name} is not {what} (the file is damaged)")
    return kept


def _refuse(path: Path, why: str, what: str = "ask for the file again, or open another session") -> SessionError:
    return SessionError(f"{path}: {why}; {what}")


def _check_name(path: Path, name: str) -> None:
    # Zip slip: an absolute name, a drive letter, a backslash (a separator on Windows writers) or a
    # ".." part could put a file outside the extraction folder. One such member refuses the file.
    if (not name or name.startswith("/") or "\\" in name or "\x00" in name
            or re.match(r"^[A-Za-z]:", name)):
        raise _refuse(path, f"member {name!r} has an absolute or unsafe path (refused: nothing was extracted)",
                      "it was not written by coremap; do not open it")
    parts = name.rstrip("/").split("/")
    if any(p in ("..", ".", "") for p in parts):
        raise _refuse(path, f"member {name!r} points outside the session folder (refused: nothing was extracted)",
                      "it was not written by coremap; do not open it")


def _is_symlink(zi: zipfile.ZipInfo) -> bool:
    return zi.create_system == 3 and stat.S_ISLNK(zi.external_attr >> 16)


def _check_link(path: Path, name: str, target: str) -> None:
    """A link inside machine/ may point anywhere inside machine/, never out of it."""
    if not target or target.startswith("/") or "\x00" in target or "\\" in target:
        raise _refuse(path, f"symlink {name!r} -> {target!r} escapes the session folder (refused)",
                      "it was not written by coremap; do not open it")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if not name.startswith(MACHINE) or not (resolved + "/").startswith(MACHINE) or resolved.startswith("../"):
        raise _refuse(path, f"symlink {name!r} -> {target!r} escapes the session folder (refused)",
                      "it was not written by coremap; do not open it")


class Manifest(msgspec.Struct, frozen=True):
    """manifest.json (the module docstring); keys a later format adds are passed over, so that its
    format number can say which coremap to upgrade to."""
    format: Annotated[int, Meta(ge=1)]
    contents: list[Annotated[str, Meta(max_length=4096)]]
    coremap: str = ""
    created: str = ""
    host: str = ""


def _read_manifest(path: Path, zf: zipfile.ZipFile) -> Manifest:
    try:
        raw = _read(path, zf, zf.getinfo(MANIFEST))
    except KeyError:
        raise _refuse(path, "is a zip but not a coremap session (it has no manifest.json)",
                      "open a .coremap file saved by coremap (File → Save Session)") from None
    try:
        manifest = decode_json(raw, Manifest, what=MANIFEST, limit=MAX_MEMBER_BYTES)
    except JsonInputError as e:
        raise _refuse(path, f"{e} (the file is damaged)") from None
    if manifest.format > FORMAT:
        raise SessionError(f"{path}: made by coremap {manifest.coremap or '?'} (format {manifest.format}); this coremap "
                           f"({app.__version__}) reads format {FORMAT}: upgrade coremap to open it")
    return manifest


def open_session(path: str | os.PathLike, check_result=None) -> Session:
    """Open a .coremap file: check all of it, then extract machine/ into a private temporary
    folder (removed by Session.close() or at exit) and read the rest into memory. Its probe runs are
    kept only with `check_result` (probes/results.py check_result: the model sits below probes/).
    Raises SessionError, naming the file and what to do, and leaves nothing behind."""
    path = Path(path)
    try:
        # The one reader (app/inputs.py): a regular file only, never a FIFO or a device, opened
        # without blocking; zipfile reads it from the descriptor, never the path again.
        f = open_input(path, what="", limit=MAX_SESSION_BYTES, hint="choose a .coremap session file")
    except CoremapError as e:
        raise SessionError(str(e)) from None
    with f:
        return _open_zip(path, f, check_result)


def _open_zip(path: Path, f, check_result) -> Session:
    head = f.read(4)
    f.seek(0)
    try:
        zf = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError):
        # NotImplementedError: a damaged "version needed" field; ValueError/EOFError: offsets or
        # names that do not decode. All mean the central directory is not what a zip writer wrote.
        if head.startswith(b"PK\x03\x04"):
            raise _refuse(path, "is a truncated or damaged zip (its central directory is missing)",
                          "the copy is incomplete: copy or download it again") from None
        raise _refuse(path, "is not a coremap session (not a zip file)",
                      "open a .coremap file saved by coremap (File → Save Session)") from None
    except OSError as e:
        raise SessionError(f"{path}: cannot read it ({e}); check its permissions") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _refuse(path, f"holds {len(infos)} members, more than the {MAX_MEMBERS} a session may hold (refused)")
        names = set()
        total = 0
        for zi in infos:
            _check_name(path, zi.filename)
            if zi.filename in names:
                raise _refuse(path, f"holds member {zi.filename!r} twice (refused)")
            names.add(zi.filename)
            if zi.file_size > MAX_MEMBER_BYTES:
                raise _refuse(path, f"member {zi.filename!r} unpacks to {zi.file_size} bytes, "
                                    f"more than {MAX_MEMBER_BYTES} (refused)")
            total += zi.file_size
        if total > MAX_TOTAL_BYTES:
            raise _refuse(path, f"unpacks to {total} bytes, more than the {MAX_TOTAL_BYTES} a session may (refused)")
        manifest = _read_manifest(path, zf)
        missing = [c for c in manifest.contents if c not in names]
        if missing:
            raise _refuse(path, f"manifest.json lists {missing[0]!r}, which the zip lacks (the file is damaged)",
                          "the copy is incomplete: copy or download it again")
        links = {}
        for zi in infos:
            if _is_symlink(zi):
                if zi.file_size > 4096:
                    raise _refuse(path, f"symlink {zi.filename!r} has a {zi.file_size}-byte target (refused)")
                target = _read(path, zf, zi).decode("utf-8", "replace")
                _check_link(path, zi.filename, target)
                links[zi.filename] = target
        try:
            return _load(path, zf, manifest, infos, links, check_result)
        except zipfile.BadZipFile as e:
            raise _refuse(path, f"is damaged ({e})", "the copy is incomplete: copy or download it again") from None


def _read(path: Path, zf: zipfile.ZipFile, zi: zipfile.ZipInfo) -> bytes:
    try:
        with zf.open(zi) as m:
            data = m.read(zi.file_size + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError,
            RuntimeError) as e:
        # zipfile reports a bad CRC as BadZipFile but lets a damaged deflate stream's zlib.error
        # through; NotImplementedError is an unknown compression method (a damaged header);
        # RuntimeError is zipfile's "File is encrypted" (a damaged flag bit: coremap never encrypts).
        raise _refuse(path, f"member {zi.filename!r} is damaged ({e})",
                      "the copy is incomplete: copy or download it again") from None
    if len(data) > zi.file_size:
        raise _refuse(path, f"member {zi.filename!r} unpacks to more than its declared size (refused)")
    return data


def _jsonl_rows(path: Path, name: str, data: bytes) -> list[dict]:
    rows = []
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = load_json(line, what=f"{name} line {n}", limit=MAX_MEMBER_BYTES)
        except JsonInputError as e:
            raise _refuse(path, f"{e} (the file is damaged)") from None
        if not isinstance(row, dict):
            raise _refuse(path, f"{name} line {n} is not a JSON object (the file is damaged)")
        rows.append(row)
    return rows


def _load(path: Path, zf: zipfile.ZipFile, manifest: Manifest, infos: list, links: dict, check_result) -> Session:
    s = Session(host=manifest.host, created=manifest.created, coremap_version=manifest.coremap, source=path)
    probe_json: dict[int, dict] = {}
    probe_hlog: dict[int, bytes] = {}
    left_out: set[int] = set()          # probe runs out of shape: their note is in s.problems
    verifications: dict[int, dict] = {}
    machine_members = []
    for zi in infos:
        name = zi.filename
        if name.startswith(MACHINE):
            machine_members.append(zi)
        elif name == HISTORY:
            s.history, notes = clean_history(_jsonl_rows(path, name, _read(path, zf, zi)), HISTORY)
            s.problems += notes
        elif name == JOURNAL:
            s.journal, notes = clean_journal_rows(_jsonl_rows(path, name, _read(path, zf, zi)), JOURNAL)
            s.problems += notes
        elif name == NOTES:
            s.notes = _read(path, zf, zi).decode("utf-8", "replace")
        elif name.startswith(SCREENSHOTS) and not zi.is_dir():
            short = name[len(SCREENSHOTS):]
            if not _SCREENSHOT_NAME.match(short):
                raise _refuse(path, f"screenshot {name!r} is not a .png or .svg with a plain name (refused)")
            s.screenshots[short] = _read(path, zf, zi)
        elif (m := _PROBE_MEMBER.match(name)):
            n, kind = int(m.group(1)), m.group(2)
            data = _read(path, zf, zi)
            if kind == "json":
                # without check_result, read (a damaged one refuses the file) but not kept
                kept = _json_member(path, name, data, check_result or (lambda obj, what: (None, [])),
                                    "a probe result object", s.problems, may_leave_out=True)
                if kept is None:
                    left_out.add(n)
                else:
                    probe_json[n] = kept
            else:
                probe_hlog[n] = data
        elif (m := _VERIFY_MEMBER.match(name)):
            verifications[int(m.group(1))] = _json_member(path, name, _read(path, zf, zi), clean_verification,
                                                          "a verification of quiet CPUs", s.problems)
        # Other members (written by a later format-1 coremap) are ignored, not extracted.
    orphans = sorted(set(probe_hlog) - set(probe_json) - left_out)
    if orphans:
        raise _refuse(path, f"probes/{orphans[0]}.hlog has no probes/{orphans[0]}.json (the file is damaged)")
    s.probes = [ProbeRecord(probe_json[n], probe_hlog.get(n)) for n in sorted(probe_json)]   # a left-out run's .hlog too
    s.verifications = [verifications[n] for n in sorted(verifications)]
    if machine_members:
        tmp, s.machine_dir = _extract_machine(path, zf, machine_members, links)
        # Removed by close(), or when the Session is collected, or at interpreter exit.
        s._cleanup = weakref.finalize(s, shutil.rmtree, str(tmp), True)
    return s


def _write_member(out: str, data: bytes, written: dict) -> None:
    """One file of the machine: a hard link to an earlier one with the same small content, else
    written. A capture repeats the same few values thousands of times ("0", "1", "Data"), and a link
    costs a fifth of a new file on disk: 400,000 members took 40 s of file creation alone. The folder
    is only ever read (SysRoot refuses writes to a capture)."""
    same = written.get(data) if len(data) <= _LINKED_MAX else None
    if same is not None:
        try:
            os.link(same, out)
            return
        except OSError as e:
            if e.errno != errno.EMLINK:     # the file system's most links to one file: start another
                raise
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    if len(data) <= _LINKED_MAX:
        written[data] = out


_LINKED_MAX = 4096


def _extract_machine(path: Path, zf: zipfile.ZipFile, members: list, links: dict):
    tmp = Path(tempfile.mkdtemp(prefix="coremap-session-"))   # mode 0700: private to this user
    dest = tmp / "machine"
    ok = False
    try:
        dest.mkdir()
        real_dest = dest.resolve()
        # Regular files first, links last: no file is ever written through a link we created.
        # Strings, not Paths, and each folder made once: a session may hold 500,000 members.
        base = str(dest) + "/"
        made, written = {base.rstrip("/")}, {}
        for zi in members:
            rel = zi.filename[len(MACHINE):]
            if not rel or zi.filename in links:
                continue
            out = base + rel.rstrip("/")
            folder = out if zi.is_dir() else out.rpartition("/")[0]
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            if not zi.is_dir():
                _write_member(out, b"" if zi.file_size == 0 else _read(path, zf, zi), written)
        for name, target in links.items():
            out = dest / name[len(MACHINE):]
            out.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, out)
        # The lexical check (_check_link) cannot see chains (a link whose target runs through
        # another link and then ".."); resolving every link for real does.
        for name in links:
            real = Path(os.path.realpath(dest / name[len(MACHINE):]))
            if real != real_dest and real_dest not in real.parents:
                raise _refuse(path, f"symlink {name!r} leads outside the session folder (refused: nothing kept)",
                              "it was not written by coremap; do not open it")
        try:
            SysRoot(dest)
        except CoremapError as e:
            raise _refuse(path, f"its machine/ folder is not a machine snapshot ({e})") from None
        ok = True
    except OSError as e:
        raise SessionError(f"{path}: cannot extract the machine snapshot into {tmp} ({e}); "
                           "check that the temporary folder ($TMPDIR) is writable and has space") from None
    finally:
        if not ok:
            shutil.rmtree(tmp, ignore_errors=True)
    return tmp, dest
