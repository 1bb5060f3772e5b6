"""One way to read a file (issue 24, class 1), enforced twice:

- the product code is parsed and every open(), os.open, io.open, tarfile.open, Path.open(mode),
  Path.read_text/read_bytes and write_text/write_bytes outside the readers fails the test, unless the
  function is in ALLOWED below with its reason (a writer, coremap's own package data, a lock);
- every `--root` command runs on a capture built to leave it (links out, absolute and climbing, a
  task/ folder linked into the live /proc) with an audit hook (sys.addaudithook, "open", "os.listdir",
  "os.scandir") in the child: whatever it opens or lists must resolve inside the capture, its own
  outputs and temporary folders, or Python's and coremap's own files.

The readers: SysRoot (app/sysroot/, captures and the live machine: openat2 RESOLVE_BENEATH |
RESOLVE_NO_MAGICLINKS or an O_NOFOLLOW walk, regular files only, each read bounded) and app/inputs.py
(user-named files, sessions, state files: O_NONBLOCK, fstat, a byte budget per kind). A call of
read_bytes/read_text on a receiver named `root` (or `*.root`) is SysRoot's by the code's convention.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.machine.threads import read_tasks
from app.sysroot import SysRoot, confined
from tests.hostile.conftest import REPO, SECRET, run_cli
from tests.hostile.sources import product_modules

# (module, function) -> why it may open a file itself.
ALLOWED = {
    ("app/sysroot/confined.py", "*"): "the reader of captures and the live machine",
    ("app/inputs.py", "open_input"): "the reader of user-named files, sessions and state files",
    ("app/store/capture.py", "_write_tar"): "writes the snapshot tarball (through atomic_writer)",
    ("app/store/capture.py", "check_tarball"): "tarfile on a file object the caller opened through a reader",
    ("app/store/capture.py", "extract_tarball"): "tarfile on a file object the caller opened through a reader",
    ("app/store/session.py", "_write_member"): "writes a member into its own new private folder (O_EXCL, "
                                               "O_NOFOLLOW)",
    ("app/atomic.py", "_fsync_dir"): "opens the output's folder to fsync it (a writer)",
    ("app/cli/desktop.py", "*"): "coremap's own package data (resource_path) and the desktop files it writes",
    ("app/remote/ship.py", "*"): "coremap's own source files, shipped to a server",
    ("app/remote/agent.py", "Agent._snapshot"): "the tarball it just wrote into its own temporary folder",
    ("app/remote/server.py", "_build"): "its own build lock file",
    ("app/machine/usage.py", "OwnUsage.read"): "coremap's own /proc/self/statm, never a capture",
    ("app/machine/frequency.py", "read_msrs"): "the live machine's /dev/cpu/N/msr (pread of 8 bytes; a capture "
                                               "is refused before)",
    ("app/machine/java.py", "_perf_data"): "a JVM's hsperfdata: O_NOFOLLOW | O_NONBLOCK beneath its folder's "
                                           "descriptor, owner and mode checked (issue 24, Java attach)",
    ("app/machine/jvm_attach.py", "_make_trigger"): "creates the attach trigger file (O_EXCL, O_NOFOLLOW)",
    ("app/pinning/helper_ops.py", "set_irq_affinity"): "the helper's write of an IRQ mask (O_NOFOLLOW)",
    ("app/pinning/journal.py", "Journal.__init__"): "the journal: O_NOFOLLOW | O_NONBLOCK, fstat regular, "
                                                    "size-capped, flocked, owner checked",
    ("app/store/autosave.py", "*"): "its lock files: O_NOFOLLOW, flocked",
    ("app/store/folders.py", "_user_dirs_value"): "the user's own desktop configuration (user-dirs.dirs)",
    ("app/syslibs.py", "elf_needed"): "ELF files of installed system libraries, not input",
    ("widgets/colors.py", "_colormap_stops"): "pyqtgraph's own colour map data",
    ("widgets/icons.py", "write_icons"): "coremap's own icon, and the icons it writes",
    ("widgets/session_controller.py", "*"): "the .hlog it just wrote to its own temporary folder, the "
                                            "screenshot it just saved",
    ("app/store/session.py", "save_session"): "zipfile on the file atomic_writer opened (a writer)",
    ("app/store/session.py", "_open_zip"): "zipfile on the file open_input opened",
    ("probes/wakeup/measure.py", "hold_dma_latency"): "holds /dev/cpu_dma_latency open (a writer)",
}
_OPENERS = {("os", "open"), ("io", "open"), ("tarfile", "open"), ("gzip", "open"), ("bz2", "open"),
            ("lzma", "open"), ("zipfile", "ZipFile")}


def _file_opens(tree: ast.Module):
    """(qualified function, what, line) of every file open in one module."""
    out, stack = [], []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node):
            stack.append(node.name)
            self.generic_visit(node)
            stack.pop()
        visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Call(self, node):
            what = _what(node)
            if what:
                out.append((".".join(stack) or "<module>", what, node.lineno))
            self.generic_visit(node)
    Visitor().visit(tree)
    return out


def _what(node: ast.Call) -> str | None:
    f = node.func
    if isinstance(f, ast.Name) and f.id == "open":
        return "open()"
    if not isinstance(f, ast.Attribute):
        return None
    base = f.value
    if isinstance(base, ast.Name) and (base.id, f.attr) in _OPENERS:
        if f.attr == "ZipFile" and node.args and not isinstance(node.args[0], ast.Name):
            return None             # ZipFile(io.BytesIO(...)): memory, not a file
        return f"{base.id}.{f.attr}"
    if f.attr in ("read_text", "read_bytes", "write_text", "write_bytes"):
        receiver = ast.unparse(base)
        if receiver == "root" or receiver.endswith(".root") or receiver == "self" and f.attr == "read_bytes":
            return None             # SysRoot's read_bytes (the reader itself), by the code's convention
        return f".{f.attr}"
    if f.attr == "open" and (any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
                             or any(k.arg == "mode" for k in node.keywords)):
        return ".open(mode)"        # Path.open("rb"); a dialog's open() takes no mode
    return None


def test_every_file_is_read_through_the_readers():
    bad = []
    for path, tree in product_modules():
        rel = str(path.relative_to(REPO))
        for func, what, line in _file_opens(tree):
            key = (rel, func) if (rel, func) in ALLOWED else (rel, "*")
            if key not in ALLOWED:
                bad.append(f"{rel}:{line} {func}: {what}")
    assert bad == [], "read these through SysRoot or app/inputs.py (or allow them here, with the reason):\n" \
                      + "\n".join(bad)


# -- the audit hook ----------------------------------------------------------------------------------------
AUDITED = r"""
import json, os, sys
seen = []
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args:
        p = args[0]
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        if isinstance(p, str):
            seen.append((event, p))
sys.addaudithook(hook)
import atexit
atexit.register(lambda: os.write(int(os.environ["AUDIT_FD"]), json.dumps(seen).encode()))
from app.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _audited(args, tmp_path, timeout=120):
    """Run `coremap ARGS` with the audit hook; (result, [(event, path)])."""
    r_fd, w_fd = os.pipe()
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen", AUDIT_FD=str(w_fd),
               COREMAP_STATE_DIR=str(tmp_path / "state"), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", AUDITED, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env, pass_fds=(w_fd,))
    os.close(w_fd)
    # The list is read while the child runs: written at its exit into a pipe nobody read yet, a list past
    # the pipe's 64 KiB blocked the child's exit until the timeout (the window's list grew past it).
    chunks: list[bytes] = []
    drain = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(r_fd, 1 << 16), b"")), daemon=True)
    drain.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    drain.join(10)
    os.close(r_fd)
    return subprocess.CompletedProcess(args, proc.returncode, out, err), json.loads(b"".join(chunks) or b"[]")


def _package_folders() -> list[str]:
    """Where coremap's own packages are imported from (an editable install may name another checkout)."""
    out = []
    for name in ("app", "probes", "widgets", "app.resources"):     # app.resources: the resources/ folder
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            out.append(os.path.realpath(os.path.dirname(spec.origin)))
    return out


def _outside(seen, root: Path, tmp_path: Path) -> list[str]:
    """What was opened or listed outside the capture, the command's own outputs and temporary folders,
    and Python's and coremap's own files. Names relative to a folder's descriptor (the O_NOFOLLOW walk
    opens one component at a time) cannot be placed; that walk is tested in test_captures.py."""
    mine = [os.path.realpath(p) for p in (root, tmp_path / "out", tmp_path / "tmp", tmp_path / "state")]
    own = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)] + \
          [str(REPO / d) for d in ("app", "probes", "widgets", "resources")] + _package_folders()
    bad = []
    for event, p in seen:
        if not os.path.isabs(p):
            continue
        real = os.path.realpath(p)
        if any(real == d or real.startswith(d + "/") for d in mine + own):
            continue
        bad.append(f"{event} {p} -> {real}")
    return sorted(set(bad))


ROOT_COMMANDS = [
    ("topology",), ("irqs",), ("threads",), ("threads", "--pid", "1", "--pid", "7"), ("plan", "--quiet", "1"),
    ("snapshot", "{out}/again.tar.gz"), ("report", "--out", "{out}/report.html"),
    ("screenshot", "--out", "{out}/grid.png", "--what", "grid"), ("export", "--textfile", "{out}/x.prom"),
    ("isolate", "--cpus", "1", "--dry-run"), ("pin", "--tid", "1", "--cpus", "0"), ("restore",),
    ("guard", "--ticks", "1"), ("verify", "--cpus", "1"),
]


@pytest.mark.parametrize("command", ROOT_COMMANDS, ids=[" ".join(c) for c in ROOT_COMMANDS])
def test_a_root_command_opens_nothing_outside_the_capture(hostile_tree, tmp_path, command):
    (tmp_path / "out").mkdir()
    args = [a.format(out=tmp_path / "out") for a in command]
    t0 = time.monotonic()
    r, seen = _audited([*args, "--root", hostile_tree], tmp_path)
    assert time.monotonic() - t0 < 90, "a FIFO, /dev/zero or a sparse file held the command up"
    assert SECRET not in r.stdout + r.stderr
    assert r.returncode in (0, 1, 2), r.stderr
    if r.returncode == 2:
        assert r.stderr.count("\n") >= 1 and "Traceback" not in r.stderr, r.stderr
    assert _outside(seen, hostile_tree, tmp_path) == []


def test_the_window_on_a_capture_opens_nothing_outside_it(hostile_tree, tmp_path):
    (tmp_path / "out").mkdir()
    r, seen = _audited(["--root", hostile_tree, "--screenshot", tmp_path / "out" / "w.png"], tmp_path, timeout=180)
    assert r.returncode == 0, r.stderr
    assert _outside(seen, hostile_tree, tmp_path) == []


# -- the thread reader's own fast path ---------------------------------------------------------------------
@pytest.fixture(params=["openat2", "walk"])
def resolver(request, monkeypatch):
    if request.param == "walk":
        monkeypatch.setattr(confined, "_openat2_works", False)
    return request.param


@pytest.mark.parametrize("detail", ["fast", "full"])
def test_threads_of_a_capture_stay_inside_and_bounded(hostile_tree, resolver, detail):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    root = SysRoot(hostile_tree)
    s = read_tasks(root, detail=detail)
    assert time.monotonic() - t0 < 20
    # ru_maxrss is in KiB: 2 GB of a sparse cmdline, /dev/zero or a FIFO would show (or hang) here.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024
    text = repr(s)
    assert SECRET not in text
    assert {3, 2}.isdisjoint(s.tasks) and 7 in s.tasks          # 3's task/ leads out; 2's stat does
    assert len(s.processes[6].cmdline) <= 64 * 1024 and s.processes[4].cmdline == ""
    assert s.processes[5].cmdline == "" and 8 not in s.processes or s.processes[8].comm != SECRET
    assert any("leads outside the capture" in n for n in root.notes)
    assert any("is not a regular file" in n for n in root.notes)


def test_an_interrupts_table_of_millions_of_rows_is_one_line(capture, tmp_path):
    """Heavy input inside the file's own bound (256 MiB): 3 million rows took 124 s and 5.3 GB."""
    # 30 copies of 100,000 rows: the line count is what is refused, before a row is read, and formatting
    # 3 million distinct rows was most of this test's time.
    rows = "".join(f"{i}: 1 2 IR-PCI-MSI {i}-edge dev{i}\n" for i in range(100_000))
    with open(capture / "proc" / "interrupts", "w") as f:
        f.write("CPU0 CPU1\n")
        for _ in range(30):
            f.write(rows)
    t0 = time.monotonic()
    r = run_cli("irqs", "--root", capture, timeout=120)
    assert time.monotonic() - t0 < 60
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "more than the 65,536 IRQs any machine has" in r.stderr
